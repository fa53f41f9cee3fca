"""The event log: one row per micro-batch of every streaming query of a pipeline run, in the
Delta table ``<warehouse>/_system/event_log`` (``system.event_log`` in SQL), and the heartbeat
that says a pipeline is running.

A listener of the session's streaming queries only buffers rows in memory (Spark calls it on
its listener thread, which must not wait for a Delta write); :func:`recording` appends them every
:data:`FLUSH_SECONDS` of a continuous run from a thread of its own, and at the end of every run
after Spark has delivered every event, so a clean stop loses no row.

A failed query's row holds its error's class and message (``error``) and its whole trace
(``trace``), as the Python code that raised it saw them (:mod:`lakehouse_core.failures`), not as
Py4J wrapped them; a table's failure that ended no query (its part of a hop, a query that could not
start) is taken from the run's summary.

The listener reads each progress as its JSON, in two calls to the JVM. PySpark's own
``StreamingQueryListener`` converts every event field by field first: about 420 calls and 140 ms
per progress (a 100-event demo: 7,665 of its 58,230 calls), and each map it reads ends in a Java
exception.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any, ClassVar

from py4j.java_gateway import JavaObject
from py4j.protocol import Py4JError
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from bronze.job import BRONZE_QUERY
from lakehouse.run.state_check import record_versions
from lakehouse.run.summary import RunSummary
from lakehouse_core import failures
from lakehouse_core.delta_io import append_held
from lakehouse_core.failures import Failure, TableFailure
from lakehouse_core.layout import Warehouse
from lakehouse_core.parallel import active_session_kept, session_copy
from lakehouse_core.storage import delete, write_text
from silver.job import BatchReport

#: Seconds between two heartbeats of a run.
HEARTBEAT_SECONDS = 10.0
#: Seconds between two appends to the event log while a continuous run goes on (a ``--once``
#: run appends once, at its end: a Delta commit every few seconds would slow its streams).
FLUSH_SECONDS = 60.0
#: How long the end of a run waits for Spark to deliver the last events to the listener.
DELIVERY_TIMEOUT_MS = 60_000

EVENT_LOG_SCHEMA = StructType(
    [
        StructField("query", StringType()),
        StructField("event", StringType()),  # "progress", or "failed" with the error
        StructField("batch_id", LongType()),
        StructField("timestamp", TimestampType()),  # when the micro-batch started
        # Rows read from the source (silver: exactly the bronze records; otherwise Spark's
        # numInputRows, which counts a row again for each pass a foreachBatch makes over it).
        StructField("input_rows", LongType()),
        StructField("duration_ms", LongType()),
        StructField("watermark", TimestampType()),
        StructField("records", LongType()),  # silver: bronze records read
        StructField("applied", LongType()),  # silver: changes applied
        StructField("quarantined", LongType()),  # silver: records quarantined
        StructField("error", StringType()),
        StructField("end_offset", StringType()),  # the sources' end offsets, JSON
        StructField("query_id", StringType()),
        StructField("run_id", StringType()),
        # A failure's whole trace (added later: older tables take it on their next append).
        StructField("trace", StringType()),
    ]
)


class EventLogListener:
    """Buffers one row per query progress (and per failed query); never writes itself.

    ``summary``: the run's summary, whose silver batch reports give the rows of the silver
    queries their read, applied and quarantined counts, and whose failures that ended no
    query get rows of their own.

    Spark calls the ``on…`` methods through Py4J with its own event objects
    (:data:`JAVA_LISTENER`); :func:`recording` adds and removes the listener.
    """

    def __init__(self, summary: RunSummary | None = None) -> None:
        self.summary = summary
        self._rows: list[dict[str, Any]] = []
        self._names: dict[str, str] = {}
        self._lock = threading.Lock()

    def take(self) -> list[dict[str, Any]]:
        """The buffered rows, and those of the failures the summary holds for the event log
        (:meth:`~lakehouse.run.summary.RunSummary.take_unlogged`), which neither holds any more."""
        unlogged = [] if self.summary is None else self.summary.take_unlogged()
        with self._lock:
            rows, self._rows = self._rows + [failed_row(f) for f in unlogged], []
            return rows

    def give_back(self, rows: list[dict[str, Any]]) -> None:
        """Put rows a failed append could not write back in front of the buffer."""
        with self._lock:
            self._rows = rows + self._rows

    def onQueryStarted(self, event: JavaObject) -> None:
        query_id = event.id().toString()
        with self._lock:
            self._names[query_id] = event.name() or query_id

    def onQueryProgress(self, event: JavaObject) -> None:
        progress = json.loads(event.progress().json())
        name = progress["name"] or progress["id"]
        row = progress_row(name, progress)
        rows = [row]
        if self.summary is not None and name.startswith("silver_"):
            report = self.summary.take_report(name.removeprefix("silver_"))
            if report is not None:
                row |= _counts(report)
        elif self.summary is not None and name == BRONZE_QUERY:
            # What the batch applied to silver in one hop: a row per entity, as a query's.
            for entity, report in self.summary.take_hop_reports(progress["batchId"]):
                rows.append(row | {"query": f"silver_{entity}", **_counts(report)})
        with self._lock:
            self._rows.extend(rows)

    def onQueryIdle(self, event: JavaObject) -> None:
        pass

    def onQueryTerminated(self, event: JavaObject) -> None:
        exception = event.exception()
        if exception.isEmpty():
            return
        query_id, run_id = event.id().toString(), event.runId().toString()
        failure = failures.noted(run_id) or Failure.of_spark(exception.get())
        with self._lock:
            name = self._names.get(query_id, query_id)
            row = _failure_columns(failure) | {"query_id": query_id, "run_id": run_id}
            self._rows.append(row | {"query": name, "timestamp": datetime.now(UTC)})

    class Java:
        implements: ClassVar = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


#: The JVM class that hands a session's query events to a Python listener.
JAVA_LISTENER = "org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper"


def _listening(spark: SparkSession, listener: EventLogListener) -> JavaObject:
    """Add ``listener`` to the session's streaming queries; the handle that removes it."""
    jvm, gateway = spark.sparkContext._jvm, spark.sparkContext._gateway
    assert jvm is not None and gateway is not None
    # The JVM calls the listener through Py4J's callback server.
    ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
    handle = getattr(jvm, JAVA_LISTENER)(listener)
    spark._jsparkSession.streams().addListener(handle)
    return handle


def failed_row(failure: TableFailure) -> dict[str, Any]:
    """The event-log row of a table's failure that ended no query of its own."""
    return _failure_columns(failure.failure) | {"query": failure.query, "timestamp": failure.at}


def _failure_columns(failure: Failure) -> dict[str, Any]:
    """The columns of a ``failed`` row that tell the error."""
    error = f"{failure.error_class}: {failure.first_line}" if failure.error_class else None
    return {"event": "failed", "error": error or failure.first_line, "trace": failure.trace}


def _counts(report: BatchReport) -> dict[str, Any]:
    """The event-log columns of a silver micro-batch's report."""
    return {
        "input_rows": report.records,  # Spark counts each pass over the batch
        "records": report.records,
        "applied": report.applied,
        "quarantined": report.quarantined,
    }


def progress_row(name: str, progress: dict[str, Any]) -> dict[str, Any]:
    """The event-log row of one query progress (Spark's ``StreamingQueryProgress`` JSON)."""
    watermark = (progress.get("eventTime") or {}).get("watermark")
    return {
        "query": name,
        "event": "progress",
        "batch_id": progress["batchId"],
        "timestamp": _instant(progress["timestamp"]),
        "input_rows": progress.get("numInputRows"),
        "duration_ms": progress["batchDuration"],
        "watermark": _instant(watermark) if watermark else None,
        # A source's offset is JSON in the progress (or a string where it is not JSON).
        "end_offset": json.dumps([source.get("endOffset") for source in progress["sources"]]),
        "query_id": progress["id"],
        "run_id": progress["runId"],
    }


def _instant(text: str) -> datetime:
    """Spark's ``2026-11-24T06:05:18.123Z`` as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def append_rows(spark: SparkSession, warehouse: Warehouse, rows: list[dict[str, Any]]) -> None:
    """Append event-log rows (creating the table on the first append; a table written before
    a column was added takes it, its rows null)."""
    with active_session_kept():  # ``spark`` may be a copy: the thread keeps its own active
        append_held(spark, rows, EVENT_LOG_SCHEMA, warehouse.event_log)


class _Recorder:
    """Listens to the session's streaming queries from :meth:`start` to :meth:`close`, and
    appends what the listener buffered, and refreshes the heartbeat, every ``interval``."""

    def __init__(
        self, spark: SparkSession, warehouse: Warehouse, listener: EventLogListener, mode: str
    ) -> None:
        self.spark = spark
        # Its appends go through a session of their own: the run's session carries the commit
        # settings of whatever writes meanwhile (a SQL model's mark and transaction id).
        self._writer = session_copy(spark)
        self.warehouse = warehouse
        self.listener = listener
        self._handle: JavaObject | None = None
        self.started = datetime.now(UTC)
        self.mode = mode
        self._stop = threading.Event()
        self._write_lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="event-log", daemon=True)

    def start(self) -> None:
        self._handle = _listening(self.spark, self.listener)
        try:
            self.beat()
        except BaseException:
            self._stop_listening()
            raise
        self._thread.start()

    def _stop_listening(self) -> None:
        self.spark._jsparkSession.streams().removeListener(self._handle)

    def beat(self) -> None:
        """Write the heartbeat: who runs, since when, last seen now, and the tables failing
        (see :meth:`~lakehouse.run.summary.RunSummary.failing_now`)."""
        summary = self.listener.summary
        failing = [] if summary is None else summary.failing_now()
        heartbeat = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "mode": self.mode,
            "started": self.started.isoformat(),
            "heartbeat": datetime.now(UTC).isoformat(),
            "interval_seconds": HEARTBEAT_SECONDS,
            "failing": [failure.to_json() for failure in failing],
        }
        write_text(self.spark, self.warehouse.heartbeat, json.dumps(heartbeat))

    def flush(self) -> None:
        """Append the buffered rows; on failure they go back to the buffer and it raises."""
        with self._write_lock:
            rows = self.listener.take()
            try:
                append_rows(self._writer, self.warehouse, rows)
            except BaseException:
                self.listener.give_back(rows)
                raise

    def _loop(self) -> None:
        flushed = time.monotonic()
        while not self._stop.wait(HEARTBEAT_SECONDS):
            if self.mode == "continuous" and time.monotonic() - flushed >= FLUSH_SECONDS:
                flushed = time.monotonic()
                # A failed append keeps its rows for the next one; the streams go on regardless.
                with suppress(Exception):
                    self.flush()
                with suppress(Exception):
                    record_versions(self._writer, self.warehouse.root)
            with suppress(Exception):
                self.beat()

    def close(self) -> None:
        """Stop the thread, wait until Spark has delivered every event, append the rest,
        record the newest version of every table (:func:`lakehouse.run.state_check.record_versions`:
        the next run finds a table that lost commits since) and remove the heartbeat."""
        self._stop.set()
        self._thread.join()
        _wait_for_delivery(self.spark)
        self._stop_listening()
        try:
            self.flush()
        finally:
            try:
                with suppress(Exception):  # without the record, the next run checks less
                    record_versions(self.spark, self.warehouse.root)
            finally:
                delete(self.spark, self.warehouse.heartbeat)


def _wait_for_delivery(spark: SparkSession) -> None:
    """Block until Spark's listener bus has delivered the events posted so far (the last
    progress of a query arrives after the query has ended)."""
    with suppress(Py4JError):
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(DELIVERY_TIMEOUT_MS)


@contextmanager
def recording(
    spark: SparkSession, warehouse: Warehouse, summary: RunSummary | None, mode: str
) -> Iterator[None]:
    """Record every streaming query progress of the session into the event log while the
    block runs, and keep the heartbeat of ``mode`` (``once`` or ``continuous``) fresh.

    The rows are appended when the block ends, also when it raises (then a failure to append
    does not hide the block's error).
    """
    recorder = _Recorder(spark, warehouse, EventLogListener(summary), mode)
    recorder.start()
    try:
        yield
    except BaseException:
        with suppress(Exception):
            recorder.close()
        raise
    recorder.close()


@contextmanager
def collecting(spark: SparkSession, summary: RunSummary | None) -> Iterator[EventLogListener]:
    """Buffer a row per streaming query progress of the session while the block runs, as
    :func:`recording` does, but write nothing (no heartbeat either): the caller appends the
    rows (:meth:`EventLogListener.take`, :func:`append_rows`) where and when they belong; a
    replay, to the live event log once its rebuilt tables are in."""
    listener = EventLogListener(summary)
    handle = _listening(spark, listener)
    try:
        yield listener
    finally:
        _wait_for_delivery(spark)
        spark._jsparkSession.streams().removeListener(handle)
