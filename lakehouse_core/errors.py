"""Exceptions for user-facing problems; the command line prints them as one line."""

import re


class LakehouseError(Exception):
    """A problem the user can fix; the message says what is wrong and what to do."""


class ConfigError(LakehouseError):
    """A configuration value or command-line argument is invalid."""


class EnvironmentSetupError(LakehouseError):
    """Java, Spark or the Delta jars are missing or do not match."""


class TableNotFoundError(LakehouseError):
    """A table the job needs does not exist in the warehouse."""


class SchemaChangeError(LakehouseError):
    """The source changed a column in a way the target table cannot take."""


class PipelineError(LakehouseError):
    """A streaming job failed; the message carries the first line of Spark's error."""


class SourceUnavailableError(LakehouseError):
    """A source cannot be read: broker unreachable, unknown topic, or authentication refused."""


class StatementRefusedError(LakehouseError):
    """A SQL statement the command does not run: a write while read-only, any change to
    bronze, a read of files by path, code, or a statement that cannot be checked."""


class DataLossError(LakehouseError):
    """Records a query still needed are gone from the source (retention, deleted topic)."""


class ExpectationFailedError(LakehouseError):
    """A ``fail``-level data-quality expectation did not hold for a micro-batch (nothing of
    the batch was written)."""


_RAISED_HERE = re.compile(rf"^{re.escape(__name__)}\.(\w+): (.+)$", re.MULTILINE)


def raised_error(text: str) -> LakehouseError | None:
    """The last :class:`LakehouseError` named in ``text``, rebuilt, else None.

    Errors raised inside Python code that Spark runs (a ``foreachBatch`` function, a Python data
    source) reach the driver as a Spark exception whose text quotes the Python traceback; this
    recovers our error, class and one-line message, from it.
    """
    for name, message in reversed(_RAISED_HERE.findall(text)):
        error_class = globals().get(name)
        if isinstance(error_class, type) and issubclass(error_class, LakehouseError):
            return error_class(message.strip())
    return None
