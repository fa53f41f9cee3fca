"""A continuous pipeline run you can hold, like Spark's ``StreamingQuery``: it runs in a
thread of its own (:func:`lakehouse.run.pipeline.run_continuously`, no signal handlers), so a
notebook's other cells can look at it, wait for it to catch up, and stop it.

The run holds the warehouse's lease (:mod:`lakehouse.run.lease`) from :meth:`Pipeline.launch`
until it ends. Within one process a second run on the same warehouse would share that lease,
so this module also keeps the running handles by warehouse and refuses a second one.
"""

from __future__ import annotations

import json
import threading
from contextlib import ExitStack
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from bronze.job import BRONZE_QUERY
from cdc.sources import SourceSpec
from lakehouse.ops.status import PipelineStatus, pipeline_status
from lakehouse.run.event_log import EVENT_LOG_SCHEMA, progress_row
from lakehouse.run.lease import PipelineRunningError, holding
from lakehouse.run.pipeline import LoopPasses, check_config, run_continuously
from lakehouse.run.queries import RETRY_BACKOFF, Backoff, RunningQueries
from lakehouse.run.summary import RunSummary
from lakehouse_core.config import PipelineConfig
from lakehouse_core.delta_io import table_exists
from lakehouse_core.errors import LakehouseError
from lakehouse_core.failures import raise_failures
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import MAX_SCHEMA_RESTARTS, Trigger, failure, stopped_by_schema_change

#: The handles running in this process, by warehouse root.
_running: dict[str, Pipeline] = {}
_running_lock = threading.Lock()


def refuse_if_running(warehouse: Warehouse, what: str) -> None:
    """Raise if a pipeline handle of this process runs on ``warehouse`` (``what``: the
    operation refused, e.g. ``"lh.run"``).

    Raises:
        PipelineRunningError: one runs (the message says how to stop it).
    """
    with _running_lock:
        _refuse(warehouse, what)


def _refuse(warehouse: Warehouse, what: str) -> None:
    held = _running.get(warehouse.root)
    if held is not None and held.is_active:
        raise PipelineRunningError(
            f"A pipeline started by this process with Lakehouse.start is running on "
            f"{warehouse.root}: stop it first (p.stop()) before {what}."
        )


class Pipeline:
    """A continuous run of the pipeline on one warehouse, returned by
    :meth:`lakehouse.Lakehouse.start` (which calls :meth:`launch`).

    Its methods can be called from any thread while it runs.
    """

    def __init__(
        self,
        spark: SparkSession,
        source: SourceSpec,
        warehouse: Warehouse,
        config: PipelineConfig,
        trigger: Trigger,
        one_hop: bool = True,
        backoff: Backoff = RETRY_BACKOFF,
        poll_seconds: float = 5.0,
    ) -> None:
        self._spark = spark
        self.source = source
        self.warehouse = warehouse
        self.config = config
        self.trigger = trigger
        self.summary = RunSummary()
        self._one_hop = one_hop
        self._backoff = backoff
        self._poll_seconds = poll_seconds
        self._stop = threading.Event()
        self._passes = LoopPasses()
        self._ended = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="lakehouse-pipeline", daemon=True)
        self._lease = ExitStack()

    def __repr__(self) -> str:
        state = "active" if self.is_active else "stopped"
        return f"<Pipeline {self.source.describe()} -> {self.warehouse.root} ({state})>"

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def launch(self) -> Pipeline:
        """Check the config, claim the warehouse's lease and start the run's thread; returns
        at once (the queries start in the thread).

        Raises:
            ConfigError: the config cannot work (nothing was written).
            PipelineRunningError: a pipeline runs on the warehouse (this process's handle, or
                another process's run: the lease's message names its pid and host).
        """
        check_config(self.config)
        with _running_lock:
            _refuse(self.warehouse, "lh.start")
            self._lease.enter_context(holding(self._spark, self.warehouse, "start"))
            _running[self.warehouse.root] = self
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            run_continuously(
                self._spark,
                self.source,
                self.warehouse,
                self.config,
                self.trigger,
                poll_seconds=self._poll_seconds,
                summary=self.summary,
                one_hop=self._one_hop,
                backoff=self._backoff,
                stop=self._stop,
                passes=self._passes,
            )
        except BaseException as error:
            self._error = error
        finally:
            try:
                self._lease.close()  # releases the lease
            finally:
                with _running_lock:
                    if _running.get(self.warehouse.root) is self:
                        del _running[self.warehouse.root]
                self._ended.set()

    @property
    def is_active(self) -> bool:
        """Whether the run goes on (started and not ended)."""
        return self._thread.is_alive() and not self._ended.is_set()

    def exception(self) -> BaseException | None:
        """The error that ended the run (None: it runs, or it was stopped)."""
        return self._error

    def stop(self) -> None:
        """Stop the run after the running micro-batches and wait for it to end (their
        checkpoints make the next run continue); the lease is released. Its error, if one
        ended it, is kept for :meth:`exception`, not raised."""
        self._stop.set()
        self._passes.wake()
        if self._thread.is_alive():
            self._thread.join()

    def await_termination(self, timeout: float | None = None) -> bool | None:
        """Wait for the run to end (another cell's :meth:`stop`, or an error), at most
        ``timeout`` seconds if given: then returns whether it ended (None without timeout).

        Raises:
            BaseException: the error that ended the run.
        """
        ended = self._ended.wait(timeout)
        if ended and self._error is not None:
            raise self._error
        return ended if timeout is not None else None

    def status(self) -> PipelineStatus:
        """What ``lakehouse status`` reports: per table how far it has applied its input,
        the last micro-batches, freshness, quarantine, failing tables, SQL models, orphaned
        tables, and this run as running (read without Spark); in a notebook it shows as
        tables, ``print`` gives the text ``lakehouse status`` prints."""
        return pipeline_status(self._spark, self.warehouse, self.config, datetime.now(UTC))

    def last_batches(self, limit: int = 20) -> DataFrame:
        """The ``limit`` newest micro-batches of the warehouse's queries, newest first, as
        event-log rows (:data:`lakehouse.run.event_log.EVENT_LOG_SCHEMA`): those the event log
        holds, and those this run's queries did since its last append (the log takes them
        about once a minute)."""
        spark = self._spark
        logged = (
            spark.read.format("delta")
            .load(self.warehouse.event_log)
            .select(*EVENT_LOG_SCHEMA.fieldNames())
            if table_exists(spark, self.warehouse.event_log)
            else spark.createDataFrame([], EVENT_LOG_SCHEMA)
        ).where(F.col("event") == "progress")
        live = spark.createDataFrame(
            [
                tuple(row.get(field) for field in EVENT_LOG_SCHEMA.fieldNames())
                for row in self._live_rows()
            ],
            EVENT_LOG_SCHEMA,
        )
        unlogged = live.join(logged, ["query", "run_id", "batch_id"], "left_anti")
        return (
            logged.unionByName(unlogged)
            .orderBy(F.col("timestamp").desc(), F.col("query"))
            .limit(limit)
        )

    def _live_rows(self) -> list[dict[str, Any]]:
        """Event-log rows of the recent progress of this run's current queries."""
        running = self._passes.current()
        if running is None:
            return []
        rows = []
        for name in sorted(running.names()):
            query = _current(running, name)
            if query is not None:
                for progress in query.recentProgress:
                    rows.append(progress_row(name, json.loads(progress.json)))
        return rows

    def process_all_available(self) -> None:
        """Block until everything that had arrived in the source when it was called is in
        bronze, silver and gold: the bronze query's ``processAllAvailable``, then (after a
        pass of the run has started the queries of tables that appeared) each silver query's,
        then each gold query's. Like Spark's, it waits longer while data keeps arriving.

        Raises:
            LakehouseError: a table is failing (its error; the run retries it with backoff),
                or the run ended: its error, or a :class:`~lakehouse_core.errors.LakehouseError`
                saying it was stopped.
        """
        if not self.is_active:
            self._raise_ended()
        running = self._next_pass(whole=False)
        self._catch_up(running, [BRONZE_QUERY])
        for layer in ("silver_", "gold_"):
            running = self._next_pass()
            raise_failures(running.failing())
            self._catch_up(running, sorted(n for n in running.names() if n.startswith(layer)))
        raise_failures(self._next_pass().failing())

    def _next_pass(self, whole: bool = True) -> RunningQueries:
        """The queries of a pass of the loop begun after this call (``whole``), or of any."""
        running = self._passes.next(lambda: self.is_active, whole)
        if running is None:
            self._raise_ended()
        assert running is not None
        return running

    def _raise_ended(self) -> None:
        if self._error is not None:
            raise self._error
        raise LakehouseError(
            f"The pipeline on {self.warehouse.root} was stopped: start it again "
            "(Lakehouse.start) to process what arrived."
        )

    def _catch_up(self, running: RunningQueries, names: list[str]) -> None:
        """Each query of ``names`` in turn processes all it has available; a query a schema
        change of its input stopped is waited for until the loop has started it again."""
        for name in names:
            for _ in range(MAX_SCHEMA_RESTARTS):
                query = _current(running, name)
                if query is None:  # failed: the loop starts it again after its backoff
                    raise_failures(running.failing())
                    break
                if self._caught_up(query):
                    break
                running = self._next_pass()

    def _caught_up(self, query: StreamingQuery) -> bool:
        """Whether ``query`` processed all it had available (False: a schema change of its
        input stopped it).

        Raises:
            LakehouseError: it failed for another reason.
        """
        try:
            query.processAllAvailable()
        except StreamingQueryException as error:
            if stopped_by_schema_change(error):
                return False
            raise failure(query, error) from error
        return True


def _current(running: RunningQueries, name: str) -> StreamingQuery | None:
    """The current query of ``name`` (None: it failed and waits to start again)."""
    try:
        return running.query(name)
    except KeyError:
        return None
