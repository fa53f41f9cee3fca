"""Shared helpers for streaming jobs: triggers and the idempotent-write identity of a query."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter

from lakehouse_core import failures, storage
from lakehouse_core.delta_io import note_query_start
from lakehouse_core.durations import Duration, parse_duration
from lakehouse_core.errors import LakehouseError
from lakehouse_core.failures import Failure

APP_ID_FILE = "_lakehouse_app_id"


@dataclass(frozen=True)
class Trigger:
    """``once`` processes what is available and stops; otherwise a processing-time interval."""

    processing_time: str | None = None

    @property
    def once(self) -> bool:
        return self.processing_time is None

    @property
    def interval_seconds(self) -> float:
        """Seconds between two triggers (0 for ``once``)."""
        if self.processing_time is None:
            return 0.0
        return parse_duration(self.processing_time, minimum=0).seconds

    def apply(self, writer: DataStreamWriter) -> DataStreamWriter:
        if self.processing_time is None:
            return writer.trigger(availableNow=True)
        return writer.trigger(processingTime=self.processing_time)

    @staticmethod
    def parse(text: str | None) -> Trigger:
        """``None`` for availableNow, or a duration of
        :func:`lakehouse_core.durations.parse_duration` (``10s``, ``500ms``, ``1 minute``,
        ``1 day``; any case; 0 or more) as its canonical text (days become hours, Spark's
        largest unit).

        Raises:
            ConfigError: ``text`` is not such a duration.
        """
        if text is None:
            return Trigger()
        duration = parse_duration(text, "processing time", minimum=0)
        if duration.unit == "day":
            duration = Duration(duration.amount * 24, "hour")
        return Trigger(processing_time=duration.text)


#: A query whose next processing-time trigger is due within this many seconds (or a quarter
#: of its interval, if that is shorter) is about to start a micro-batch.
TRIGGER_MARGIN_SECONDS = 0.5


def between_batches(query: StreamingQuery, interval_seconds: float) -> bool:
    """Whether ``query`` can be stopped now without interrupting a micro-batch: it has ended,
    or no trigger is active and the next is not about to start. (Spark starts the triggers of
    a processing-time query at the multiples of its interval since the epoch.)"""
    if not query.isActive:
        return True
    if query.status["isTriggerActive"]:
        return False
    if interval_seconds <= 0:
        return True
    due_in = interval_seconds - time.time() % interval_seconds
    return due_in > min(TRIGGER_MARGIN_SECONDS, interval_seconds / 4)


def last_batch_id(query: StreamingQuery) -> int:
    """The id of the newest micro-batch ``query`` has finished (-1: none yet)."""
    progress = query.lastProgress
    return -1 if progress is None else int(progress.batchId)


def query_app_id(spark: SparkSession, checkpoint: str) -> str:
    """A stable id for a query's idempotent Delta writes (``txnAppId``, and the batch marks of
    :func:`lakehouse_core.delta_io.append`), called when the query starts.

    It lives beside the checkpoint, on the same file system (read and written through Hadoop's
    FileSystem of ``spark``, so any URI works), and dies with it: a restarted query reuses it,
    so a replayed micro-batch is skipped, while a fresh checkpoint (batch ids from 0 again)
    gets a new id and is not mistaken for a replay. The newest batch the checkpoint has
    planned is noted: the batches after it are new.
    """
    marker = f"{checkpoint}.{APP_ID_FILE}"
    known = storage.read_text(spark, marker)
    if known is not None and known.strip() and storage.exists(spark, checkpoint):
        app_id = known.strip()
    else:
        app_id = str(uuid.uuid4())
        storage.write_text(spark, marker, app_id)  # one create: a whole id or none
    planned = [int(n) for n in storage.names(spark, f"{checkpoint}/offsets") if n.isdigit()]
    note_query_start(app_id, max(planned, default=None))
    return app_id


def await_query(query: StreamingQuery) -> None:
    """Wait for a query to end and turn its failure into a LakehouseError (see
    :func:`failure`)."""
    try:
        query.awaitTermination()
    except StreamingQueryException as error:
        raise failure(query, error) from error


#: Delta's error class when the schema of a streaming query's Delta source changed and the
#: query's schema tracking log took the change: Delta's documented remedy is to start the
#: query again from its checkpoint, which then reads on with the new schema.
SOURCE_SCHEMA_CHANGED = "DELTA_STREAMING_METADATA_EVOLUTION"

#: Restarts :func:`run_to_end` allows one query (each takes one schema change of its source).
MAX_SCHEMA_RESTARTS = 100


def stopped_by_schema_change(error: BaseException | None) -> bool:
    """Whether a query failure is its Delta source's schema change (restart to continue)."""
    return error is not None and f"[{SOURCE_SCHEMA_CHANGED}]" in str(error)


def run_to_end(
    start: Callable[[], StreamingQuery],
    restarted: Callable[[StreamingQuery], None] = lambda _: None,
) -> StreamingQuery:
    """Start a query and wait for it to end; while it stops because its Delta source changed
    schema, start it again from its checkpoint (``restarted`` is told each time).

    Raises:
        LakehouseError: any other failure (see :func:`failure`), or a schema change after
            :data:`MAX_SCHEMA_RESTARTS` restarts (running again continues).
    """
    ended = finish_all([start], restarted)[0]
    if ended.failure is not None:
        if ended.query is None and ended.failure.error is not None:
            raise ended.failure.error  # it did not start: as ``start`` raised it
        assert ended.query is not None
        raise ended.failure.exception(query_name(ended.query))
    assert ended.query is not None
    return ended.query


@dataclass(frozen=True)
class Ended:
    """A query of :func:`finish_all` that has ended: the last query it started (None: it did
    not start) and its failure (None: it did its work)."""

    query: StreamingQuery | None
    failure: Failure | None


def finish_all(
    starts: Sequence[Callable[[], StreamingQuery]],
    restarted: Callable[[StreamingQuery], None] = lambda _: None,
) -> list[Ended]:
    """Start independent queries together and wait for each to end, as :func:`run_to_end`
    does for one: they share the machine's cores. A query that fails (or does not start)
    leaves the others running to their end; its failure is in its place of the result.
    An interrupt (``KeyboardInterrupt``) stops every query and is raised."""
    queries: list[StreamingQuery | None] = []
    failures: list[Failure | None] = []
    try:
        for start in starts:
            query, failed = _started(start)
            queries.append(query)
            failures.append(failed)
        for number, start in enumerate(starts):
            restarts = 0
            while failures[number] is None:
                query = queries[number]
                assert query is not None
                try:
                    query.awaitTermination()
                    break
                except StreamingQueryException as error:
                    if restarts == MAX_SCHEMA_RESTARTS or not stopped_by_schema_change(error):
                        failures[number] = failure_of(query, error)
                        break
                restarts += 1
                restarted(query)
                again, failures[number] = _started(start)
                queries[number] = again or query
    except BaseException:
        for query in queries:
            if query is not None and query.isActive:
                query.stop()
        raise
    return [Ended(query, failed) for query, failed in zip(queries, failures, strict=True)]


def _started(start: Callable[[], StreamingQuery]) -> tuple[StreamingQuery | None, Failure | None]:
    """The query ``start`` started, or why it could not start."""
    try:
        return start(), None
    except Exception as error:
        return None, Failure.of(error)


def query_name(query: StreamingQuery) -> str:
    """The query's name (its id if it has none)."""
    return query.name or str(query.id)


def failure_of(query: StreamingQuery, error: BaseException) -> Failure:
    """Why ``query`` failed with ``error``: the error its ``foreachBatch`` function raised, as
    noted before it crossed into the JVM (:func:`lakehouse_core.failures.guarded`), else what
    Spark's error says (:meth:`~lakehouse_core.failures.Failure.of_spark`)."""
    noted_failure = failures.noted(str(query.runId))
    return noted_failure if noted_failure is not None else Failure.of_spark(str(error))


def failure(query: StreamingQuery, error: BaseException) -> LakehouseError:
    """The LakehouseError for a failed query: the one raised in this project's Python code that
    Spark ran (a ``foreachBatch`` function, the Kafka source), else a
    :class:`~lakehouse_core.failures.QueryFailedError` naming the query and its error's first
    line."""
    return failure_of(query, error).exception(query_name(query))


def failure_cause(text: str) -> str:
    """The line of a Spark error that names its cause: the Python error a batch function
    raised (the last line of the traceback Spark quotes), else the error's first line."""
    cause = Failure.of_spark(text)
    return f"{cause.error_class}: {cause.first_line}" if cause.error_class else cause.first_line
