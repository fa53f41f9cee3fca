"""What failed in a streaming query, as the code that failed saw it: the error's class, message
and whole trace, and whether the user can fix it (a :class:`~lakehouse_core.errors.LakehouseError`)
or it is an internal error (a bug).

A ``foreachBatch`` function runs in this Python process, called by the JVM through Py4J. Its
error reaches the driver as a Spark exception whose text may quote the Python traceback or only
``Py4JException: An exception was raised by the Python Proxy``. :func:`guarded` wraps such a
function so that its error is noted here, under the run id of its query, before it crosses into
the JVM; :func:`noted` gives it back to whoever sees the query fail (the pipeline, the event log).
"""

from __future__ import annotations

import re
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pyspark.sql import DataFrame

from lakehouse_core.errors import LakehouseError, PipelineError, raised_error

#: The failures :func:`noted` keeps (the newest; a run has a few queries).
KEPT_FAILURES = 256
#: Where a Spark error's description of its query (plan, offsets) starts: not part of the
#: error, and long.
_QUERY_DESCRIPTION = "\n=== Streaming Query ==="
#: An error named at the start of a line: ``org.apache.spark.SparkException: ...`` or a
#: Python ``module.SomeError: ...``.
_NAMED = re.compile(r"^((?:[\w$]+\.)*[\w$]*(?:Error|Exception)): (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Failure:
    """An error that stopped a query (or a table's part of one): ``error_class`` (qualified,
    e.g. ``lakehouse_core.errors.SchemaChangeError``), ``message`` and the whole ``trace``;
    ``error``: the exception itself, where this process raised or rebuilt it."""

    error_class: str
    message: str
    trace: str
    error: BaseException | None = field(default=None, compare=False, repr=False)

    @property
    def user(self) -> bool:
        """Whether the user can fix it (a :class:`LakehouseError`); otherwise a bug."""
        return isinstance(self.error, LakehouseError)

    @property
    def name(self) -> str:
        """The error's class without its module: ``SchemaChangeError``."""
        return self.error_class.rpartition(".")[2]

    @property
    def first_line(self) -> str:
        """The message's first line (Spark's messages go on for pages)."""
        return self.message.strip().splitlines()[0] if self.message.strip() else ""

    @property
    def line(self) -> str:
        """``SomeError: its message's first line``."""
        return f"{self.name}: {self.first_line}" if self.name else self.first_line

    def exception(self, query: str) -> LakehouseError:
        """What to raise for it: the user's error itself, else a :class:`QueryFailedError`."""
        if isinstance(self.error, LakehouseError):
            return self.error
        return QueryFailedError(f"Streaming query {query} failed: {self.line}", self)

    @staticmethod
    def of(error: BaseException) -> Failure:
        """The failure of an exception raised in this process, with its traceback (a full
        disk's, seen in a Java error, as a :class:`DiskFullError`)."""
        if isinstance(error, QueryFailedError):
            return error.failure
        trace = "".join(traceback.format_exception(error))
        if not isinstance(error, LakehouseError):
            full = disk_full(trace)
            if full is not None:
                return Failure(_qualified(full), str(full), trace, full)
        return Failure(_qualified(error), str(error), trace, error)

    @staticmethod
    def of_spark(text: str) -> Failure:
        """The failure a Spark error's ``text`` describes, when no Python error was noted: a
        :class:`LakehouseError` it quotes (one raised in a Python worker, e.g. the Kafka
        source's), else the last error it names (the Python one, at the end of a quoted
        traceback), else its first line."""
        trace = text.split(_QUERY_DESCRIPTION, 1)[0].strip()
        raised = raised_error(trace) or disk_full(trace)
        if raised is not None:
            kind = type(raised)
            return Failure(f"{kind.__module__}.{kind.__qualname__}", str(raised), trace, raised)
        named = _NAMED.findall(trace)
        if named:
            error_class, message = named[-1]
            return Failure(error_class, message, trace)
        return Failure("", trace.splitlines()[0] if trace else "", trace)


def _qualified(error: BaseException) -> str:
    kind = type(error)
    module = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
    return f"{module}{kind.__qualname__}"


class DiskFullError(PipelineError):
    """The file system of the warehouse (or of a location it names) is full. A commit is
    whole or absent, so nothing committed was lost, and the next run continues from the
    checkpoints."""


#: How a full file system shows in Java's and Python's errors (``ENOSPC``; a quota too).
_DISK_FULL = re.compile(r"No space left on device|Disk quota exceeded|ENOSPC")
#: A warehouse in a trace: the part of a ``file:`` or other URI before a layer or ``_system``.
_LOCATION = re.compile(
    r"((?:file:|[a-z][a-z0-9+.-]*://)/?[^\s'\"`\],;]*?)/(?:bronze|silver|gold|_system)/"
)


#: How :func:`disk_full` names the full location when the trace names none (Java's error does
#: not): the command, which knows the warehouse, names it instead (:func:`name_location`).
UNNAMED_LOCATION = "the warehouse's file system"


def name_location(message: str, warehouse: str) -> str:
    """``message`` with :data:`UNNAMED_LOCATION` replaced by the file system of ``warehouse``."""
    return message.replace(UNNAMED_LOCATION, f"the file system of {warehouse}", 1)


def disk_full(trace: str) -> DiskFullError | None:
    """A :class:`DiskFullError` for a ``trace`` that says a file system is full, naming the
    first warehouse location the trace names (if any), else None."""
    if not _DISK_FULL.search(trace):
        return None
    found = _LOCATION.search(trace)
    where = (
        f"the file system of {found.group(1).removeprefix('file:')}" if found else UNNAMED_LOCATION
    )
    return DiskFullError(
        f"{where} is full (No space left on device); nothing committed was lost: free space "
        "and run again, the next run continues where this one stopped"
    )


class QueryFailedError(PipelineError):
    """A streaming query failed with an internal error (not one the user can fix); the
    failure holds its class, message and trace."""

    def __init__(self, message: str, failure: Failure) -> None:
        super().__init__(message)
        self.failure = failure


@dataclass(frozen=True)
class TableFailure:
    """A table whose query (or its part of one) failed in a run: the query's name
    (``silver_orders``), the table as the run names it (``silver.orders``), the failure,
    when, and how many times in a row; ``retry_at``: when a continuous run starts it again."""

    query: str
    table: str
    failure: Failure
    at: datetime
    attempts: int = 1
    retry_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        """The failure as JSON values (what ``lakehouse status`` reads from a heartbeat)."""
        return {
            "query": self.query,
            "table": self.table,
            "error": self.failure.line,
            "user_error": self.failure.user,
            "at": self.at.isoformat(),
            "attempts": self.attempts,
            "retry_at": None if self.retry_at is None else self.retry_at.isoformat(),
        }


class FailedTablesError(PipelineError):
    """Several tables of a run failed (each of the others finished its work)."""

    def __init__(self, failures: list[TableFailure]) -> None:
        causes = "; ".join(f"{f.table}: {f.failure.line}" for f in failures)
        super().__init__(f"{len(failures)} tables failed: {causes}")
        self.failures = failures


def raise_failures(failures: list[TableFailure]) -> None:
    """Raise for the failed tables of a run, if any: one table's own error (see
    :meth:`Failure.exception`), or a :class:`FailedTablesError` naming several."""
    if len(failures) == 1:
        raise failures[0].failure.exception(failures[0].query)
    if failures:
        raise FailedTablesError(failures)


_noted: OrderedDict[str, Failure] = OrderedDict()
_lock = threading.Lock()


def note(run_id: str, failure: Failure) -> None:
    """Keep ``failure`` as that of the query run ``run_id``."""
    with _lock:
        _noted[run_id] = failure
        _noted.move_to_end(run_id)
        while len(_noted) > KEPT_FAILURES:
            _noted.popitem(last=False)


def noted(run_id: str) -> Failure | None:
    """The failure a :func:`guarded` function of the query run ``run_id`` noted, if any."""
    with _lock:
        return _noted.get(run_id)


#: Spark runs a query's micro-batches in a job group named by the query's run id.
_JOB_GROUP = "spark.jobGroup.id"

BatchFunction = Callable[[DataFrame, int], None]


def guarded(function: BatchFunction) -> BatchFunction:
    """``function`` as a ``foreachBatch`` function that notes what it raises (:func:`note`,
    under its query's run id) before raising it on into Spark."""

    def call(batch: DataFrame, batch_id: int) -> None:
        try:
            function(batch, batch_id)
        except Exception as error:
            run_id = _run_id(batch)
            if run_id is not None:
                note(run_id, Failure.of(error))
            raise

    return call


def _run_id(batch: DataFrame) -> str | None:
    """The run id of the query a micro-batch belongs to (None where it cannot be read: a
    Spark Connect client has no SparkContext)."""
    try:
        return batch.sparkSession.sparkContext.getLocalProperty(_JOB_GROUP)
    except Exception:
        return None
