"""Exceptions for user-facing problems; the command line prints them as one line."""


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
    """A source (Kafka broker, topic) cannot be reached, read or authenticated against."""
