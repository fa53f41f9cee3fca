"""Wires the layers into one pipeline run: source -> bronze -> silver -> gold."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import partial

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from bronze.job import BRONZE_QUERY, start_bronze
from cdc.sources import SourceSpec, read_source
from core.catalog import register_tables
from core.checkpoints import last_committed_batch, unfinished_batch
from core.config import PipelineConfig
from core.errors import ConfigError
from core.layout import Warehouse
from core.streaming import (
    MAX_SCHEMA_RESTARTS,
    Trigger,
    between_batches,
    failure,
    run_all_to_end,
    stopped_by_schema_change,
)
from expectations.checks import load_checks
from expectations.suites import check_overrides
from expectations.validate import PeriodicValidation
from gold.alerts import alert_jobs
from gold.jobs import gold_jobs
from lakehouse.entities import entity_specs
from lakehouse.event_log import recording
from lakehouse.recovery import recover_and_say
from lakehouse.summary import RunSummary
from silver.job import ensure_shared_tables, has_unread_bronze, start_silver
from silver.one_hop import SilverHop, keep_redo_for_silver
from silver.parse import check_declared_schemas

Progress = Callable[[str], None]
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: How long a stopping run waits for its running micro-batches to finish.
DRAIN_SECONDS = 600.0
#: How often a stopping run looks whether a query is between micro-batches.
PAUSE_POLL_SECONDS = 0.1


@dataclass
class RunReport:
    """What a run started and finished, and what its micro-batches did per table."""

    queries: list[str] = field(default_factory=list)
    seconds: float = 0.0
    summary: RunSummary = field(default_factory=RunSummary)


def run_once(
    spark: SparkSession,
    source: SourceSpec,
    warehouse: Warehouse,
    config: PipelineConfig,
    progress: Progress = lambda _: None,
) -> RunReport:
    """Process everything available now through every layer, then return; each micro-batch
    goes into the event log (:mod:`lakehouse.event_log`).

    A query stopped by a schema change of its Delta input (a gold job, when silver gained a
    column or widened a type) continues from its checkpoint.
    """
    started = time.monotonic()
    check_declared_schemas(config.tables)
    check_overrides(config.quality)
    recover_and_say(spark, warehouse.root, progress)
    report = RunReport()
    with recording(spark, warehouse, report.summary, "once"):
        progress(f"bronze: ingesting {source.describe()}")
        bronze = partial(
            start_bronze,
            read_source(spark, source),
            warehouse,
            Trigger(),
            report.summary.bronze_batch,
            config.quality,
        )
        _finish(bronze, report, progress)
        silver_and_gold = run_from_bronze(
            spark, warehouse, config, progress, summary=report.summary
        )
        report.queries += silver_and_gold.queries
    name_tables(spark, warehouse, config, progress)
    report.seconds = time.monotonic() - started
    return report


def name_tables(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    progress: Progress,
    said: set[str] | None = None,
) -> None:
    """Give the warehouse's tables (new ones too) their SQL names in the session's catalog
    (:func:`core.catalog.register_tables`). A name held by someone else's table is reported
    through ``progress`` (once per message in ``said``) and does not stop the pipeline."""
    try:
        register_tables(spark, warehouse, config.catalog)
    except ConfigError as error:
        if said is None or str(error) not in said:
            progress(f"catalog: {error}")
        if said is not None:
            said.add(str(error))


def run_from_bronze(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    progress: Progress = lambda _: None,
    entities: Collection[str] | None = None,
    summary: RunSummary | None = None,
) -> RunReport:
    """Bring silver and gold up to date with what bronze holds now (no source is read).

    ``entities`` limits the run to those silver entities and the gold jobs that read them
    (None: every entity). Replay runs this on a staging warehouse with fresh checkpoints.
    What the silver micro-batches did goes into ``summary`` (the report's own if None).
    """
    started = time.monotonic()
    check_overrides(config.quality)
    report = RunReport() if summary is None else RunReport(summary=summary)
    trigger = Trigger()
    _apply_bronze(spark, warehouse, config, progress, report, entities)
    gold = _gold_jobs(spark, warehouse, config, trigger, progress, set(), entities)
    _finish_all([start for _, start in gold], report, progress)
    report.seconds = time.monotonic() - started
    return report


def _apply_bronze(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    progress: Progress,
    report: RunReport,
    entities: Collection[str] | None = None,
    through_batch: int | None = None,
) -> None:
    """Run the silver query of each entity (of ``entities``; None: all) with bronze it has
    not read, all at once, until each has read all of it (of bronze batches up to
    ``through_batch``)."""
    jobs: list[Callable[[], StreamingQuery]] = []
    for spec in entity_specs(spark, warehouse, config):
        if (entities is None or spec.name in entities) and has_unread_bronze(
            spark, warehouse, spec
        ):
            progress(f"silver: applying {spec.topic} to silver.{spec.name}")
            report.summary.add_table(spec.name)
            listener = partial(report.summary.silver_batch, spec.name)
            checks = load_checks(spark, config.quality, warehouse, "silver", spec.name)
            jobs.append(
                partial(
                    start_silver, spark, warehouse, spec, Trigger(), listener, checks, through_batch
                )
            )
    if len(jobs) > 1:
        ensure_shared_tables(spark, warehouse)
    _finish_all(jobs, report, progress)


class RunningQueries:
    """The streaming queries of a continuous run, by name, each with the function that starts it.

    A query that stops because the schema of its Delta input changed (the gold jobs read
    silver's change feed, and silver gains columns and widens types while they run) is started
    again from its checkpoint: Delta's documented remedy, after which it reads on with the new
    schema. Any other failure is raised.
    """

    def __init__(self, progress: Progress = lambda _: None) -> None:
        self._starters: dict[str, Callable[[], StreamingQuery]] = {}
        self._queries: dict[str, StreamingQuery] = {}
        self._progress = progress

    def __contains__(self, name: object) -> bool:
        return name in self._queries

    def names(self) -> set[str]:
        return set(self._queries)

    def query(self, name: str) -> StreamingQuery:
        """The current query of ``name`` (a new one after each restart)."""
        return self._queries[name]

    def start(self, name: str, starter: Callable[[], StreamingQuery]) -> StreamingQuery:
        self._starters[name] = starter
        self._queries[name] = starter()
        return self._queries[name]

    def check(self) -> None:
        """Restart the queries a schema change of their input stopped.

        Raises:
            LakehouseError: a query failed for another reason (see ``await_query``).
        """
        for name, query in list(self._queries.items()):
            error = None if query.isActive else query.exception()
            if stopped_by_schema_change(error):
                self._restart(name)
            elif error is not None:
                raise failure(query, error)

    def catch_up(self) -> None:
        """Block until every query has processed what is available now, in the order they
        were started (upstream first); the queries keep running. For notebooks and tests.

        Raises:
            LakehouseError: a query failed for another reason than a schema change.
        """
        for name in list(self._queries):
            restarts = 0
            while True:
                query = self._queries[name]
                try:
                    query.processAllAvailable()
                    break
                except StreamingQueryException as error:
                    if restarts == MAX_SCHEMA_RESTARTS or not stopped_by_schema_change(error):
                        raise failure(query, error) from error
                restarts += 1
                self._restart(name)

    def stop(self) -> None:
        """Stop every query at once (a running micro-batch is interrupted)."""
        for query in self._queries.values():
            if query.isActive:
                query.stop()

    def stop_between_batches(
        self,
        spark: SparkSession,
        interval_seconds: float,
        timeout_seconds: float,
        at_once: threading.Event,
    ) -> list[str]:
        """Stop every query between two of its micro-batches: each as soon as its running
        batch has committed and before its next trigger (see
        :func:`core.streaming.between_batches`), upstream first when several are.

        After ``timeout_seconds``, or once ``at_once`` is set, the queries still in a batch are
        interrupted (their checkpoints make the next run do that batch again), with Spark's
        logging silenced first. Returns the names of the interrupted queries.
        """
        deadline = time.monotonic() + timeout_seconds
        left = dict(self._queries)
        while True:
            for name, query in list(left.items()):
                if between_batches(query, interval_seconds):
                    if query.isActive:
                        query.stop()
                    del left[name]
            if not left or at_once.wait(PAUSE_POLL_SECONDS) or time.monotonic() > deadline:
                break
        if left:
            _silence(spark)
            for query in left.values():
                query.stop()
        return list(left)

    def _restart(self, name: str) -> None:
        self._progress(f"{name}: its input changed schema; continuing from its checkpoint")
        self._queries[name] = self._starters[name]()


def run_continuously(
    spark: SparkSession,
    source: SourceSpec,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    progress: Progress = lambda _: None,
    poll_seconds: float = 5.0,
    drain_seconds: float = DRAIN_SECONDS,
    summary: RunSummary | None = None,
    one_hop: bool = True,
) -> None:
    """Run every layer on a processing-time trigger until a query fails, SIGINT or SIGTERM.

    With ``one_hop`` each bronze micro-batch also applies its records to silver
    (:mod:`silver.one_hop`), after silver has caught up with what bronze held; otherwise each
    silver table has its own query on the trigger. Gold queries (and silver ones in two hops)
    start as soon as their input tables appear, and a query stopped by
    a schema change of its input continues from its checkpoint (:class:`RunningQueries`). On a
    signal each query stops after its running micro-batch (at most ``drain_seconds`` in all; a
    second signal stops them at once); their checkpoints make the next run continue. What the
    micro-batches did goes into ``summary``, if given, and each micro-batch into the event log
    (:mod:`lakehouse.event_log`), which also shows the run as running while it goes on.
    """
    summary = RunSummary() if summary is None else summary
    with recording(spark, warehouse, summary, "continuous"):
        _run_continuously(
            spark,
            source,
            warehouse,
            config,
            trigger,
            progress,
            poll_seconds,
            drain_seconds,
            summary,
            one_hop,
        )


def _run_continuously(
    spark: SparkSession,
    source: SourceSpec,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    progress: Progress,
    poll_seconds: float,
    drain_seconds: float,
    summary: RunSummary,
    one_hop: bool,
) -> None:
    check_declared_schemas(config.tables)
    check_overrides(config.quality)
    recover_and_say(spark, warehouse.root, progress)
    stop, at_once = threading.Event(), threading.Event()

    def on_signal(*_: object) -> None:
        (at_once if stop.is_set() else stop).set()

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    running = RunningQueries(progress)
    said: set[str] = set()
    try:
        try:
            source_frame = read_source(spark, source, continuous=True)
            bronze = partial(
                start_one_hop if one_hop else _start_bronze,
                spark,
                source_frame,
                warehouse,
                config,
                trigger,
                progress,
                summary,
            )
            running.start(BRONZE_QUERY, bronze)
            into = " and on into silver" if one_hop else ""
            progress(f"bronze: streaming from {source.describe()}{into} (Ctrl-C stops)")
            validations = PeriodicValidation(config.quality)
            while not stop.is_set():
                start_ready(
                    spark,
                    warehouse,
                    config,
                    trigger,
                    running,
                    progress,
                    summary,
                    silver=not one_hop,
                )
                running.check()
                name_tables(spark, warehouse, config, progress, said)
                validations.run_if_due(spark, warehouse, progress)
                stop.wait(poll_seconds)
        except BaseException:
            running.stop()
            raise
        progress("stopping after the running micro-batches (signal again to stop at once)")
        interrupted = running.stop_between_batches(
            spark, trigger.interval_seconds, drain_seconds, at_once
        )
        if interrupted:
            progress(
                f"stopped {', '.join(interrupted)} during a micro-batch: the next run does "
                "that batch again"
            )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def start_one_hop(
    spark: SparkSession,
    source: DataFrame,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    progress: Progress = lambda _: None,
    summary: RunSummary | None = None,
) -> StreamingQuery:
    """Bring silver up to date with bronze (a run in two hops may have left bronze it has not
    read), then start the bronze query on ``trigger`` with each micro-batch applied to silver
    in the same micro-batch (:class:`silver.one_hop.SilverHop`), telling ``summary``.

    Silver catches up only with the bronze micro-batches the bronze query committed: the one it
    does again after a crash is the hop's to apply (the crashed hop may have applied part of
    it, which its transaction ids make the hop skip, not a silver query's)."""
    summary = RunSummary() if summary is None else summary
    bronze_checkpoint = warehouse.checkpoint(BRONZE_QUERY)
    committed = last_committed_batch(spark, bronze_checkpoint)
    redo = unfinished_batch(spark, bronze_checkpoint)
    report = RunReport(summary=summary)
    through = -1 if committed is None else committed
    _apply_bronze(spark, warehouse, config, progress, report, through_batch=through)
    if redo is not None:
        keep_redo_for_silver(spark, warehouse, entity_specs(spark, warehouse, config), redo)
    hop = SilverHop(spark, warehouse, config, summary.hop_batch, redo)
    return start_bronze(source, warehouse, trigger, summary.bronze_batch, config.quality, hop)


def _start_bronze(
    spark: SparkSession,
    source: DataFrame,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    progress: Progress,
    summary: RunSummary,
) -> StreamingQuery:
    """Start the bronze query alone (two hops: silver has queries of its own)."""
    return start_bronze(source, warehouse, trigger, summary.bronze_batch, config.quality)


def _silence(spark: SparkSession) -> None:
    """Silence Spark's and Py4J's logging for the rest of the session, before queries are
    interrupted mid-batch: each interrupted write logs pages of stack traces, for a stop the
    user asked for."""
    spark.sparkContext.setLogLevel("OFF")
    logging.getLogger("py4j").setLevel(logging.CRITICAL)


def start_ready(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    running: RunningQueries,
    progress: Progress = lambda _: None,
    summary: RunSummary | None = None,
    silver: bool = True,
) -> None:
    """Start the silver (unless not ``silver``: one hop applies it) and gold queries whose
    input tables exist, that have something to read and that are not running (the silver ones
    reporting their micro-batches to ``summary``, if given).

    The tables silver queries share are created first, so that queries starting together do
    not race to create them.
    """
    new = [
        spec
        for spec in (entity_specs(spark, warehouse, config) if silver else [])
        if f"silver_{spec.name}" not in running and has_unread_bronze(spark, warehouse, spec)
    ]
    if new:
        ensure_shared_tables(spark, warehouse)
    for spec in new:
        listener = None
        if summary is not None:
            summary.add_table(spec.name)
            listener = partial(summary.silver_batch, spec.name)
        checks = load_checks(spark, config.quality, warehouse, "silver", spec.name)
        job = partial(start_silver, spark, warehouse, spec, trigger, listener, checks)
        running.start(f"silver_{spec.name}", job)
        progress(f"silver: streaming {spec.topic} into silver.{spec.name}")
    for name, start in _gold_jobs(spark, warehouse, config, trigger, progress, running.names()):
        running.start(name, start)


def _gold_jobs(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    progress: Progress,
    running: set[str],
    inputs: Collection[str] | None = None,
) -> list[tuple[str, Callable[[], StreamingQuery]]]:
    """The gold jobs whose silver input (and joined entity) exists (and that read one of
    ``inputs``, if given) and that are not running yet: (name, starter)."""
    silver = set(warehouse.table_names("silver", spark))
    ready: list[tuple[str, Callable[[], StreamingQuery]]] = []
    for job in gold_jobs(config):
        wanted = inputs is None or job.reads_any(inputs)
        joined = all(entity in silver for entity in job.joins)
        if wanted and job.input in silver and joined and job.query not in running:
            progress(f"gold: {job.what} from silver.{job.input}")
            ready.append((job.query, partial(job.start, spark, warehouse, trigger)))
    return ready + _alert_jobs(spark, warehouse, config, trigger, progress, running, inputs)


def _alert_jobs(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    progress: Progress,
    running: set[str],
    inputs: Collection[str] | None = None,
) -> list[tuple[str, Callable[[], StreamingQuery]]]:
    """The alert jobs whose silver input and baseline (``lakehouse fit``) exist and that are
    not running yet. Until its baseline exists, an alert's rows wait in silver's change feed."""
    silver = set(warehouse.table_names("silver", spark))
    gold = set(warehouse.table_names("gold", spark))
    ready: list[tuple[str, Callable[[], StreamingQuery]]] = []
    for job in alert_jobs(config):
        if (inputs is None or job.input in inputs) and job.query not in running:
            if job.input in silver and job.baseline in gold:
                progress(f"gold: {job.what} from silver.{job.input}")
                ready.append((job.query, partial(job.start, spark, warehouse, trigger)))
            elif job.input in silver and trigger.once:
                progress(f"gold: {job.what} waits for a baseline: run 'lakehouse fit'")
    return ready


def _finish(start: Callable[[], StreamingQuery], report: RunReport, progress: Progress) -> None:
    _finish_all([start], report, progress)


def _finish_all(
    starts: Sequence[Callable[[], StreamingQuery]], report: RunReport, progress: Progress
) -> None:
    """Run independent queries together to their end (:func:`core.streaming.run_all_to_end`)."""

    def restarted(query: StreamingQuery) -> None:
        progress(f"{query.name}: its input changed schema; continuing from its checkpoint")

    for query in run_all_to_end(starts, restarted):
        report.queries.append(query.name or str(query.id))
