"""Wires the layers into one pipeline run: source -> bronze -> silver -> gold, saying what starts
and what fails in INFO lines of its logger (``lakehouse.run.pipeline``)."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from bronze.job import BRONZE_QUERY, start_bronze
from cdc.sources import SourceSpec, read_source
from expectations.checks import load_checks
from expectations.suites import check_overrides
from expectations.validate import PeriodicValidation
from gold.alerts import ALERTS_TABLE, alert_jobs
from gold.jobs import GoldIsolation
from gold.models import ModelRetries, model_query, ordered_models, refresh_models
from gold.registry import gold_jobs
from lakehouse.run.declarations import record_declarations
from lakehouse.run.entities import bronze_topics, entity_specs, undeclared_line
from lakehouse.run.event_log import recording
from lakehouse.run.lease import LeaseLostError, leased, lost_lease, lost_line
from lakehouse.run.queries import RETRY_BACKOFF, Backoff, Job, RunningQueries
from lakehouse.run.recovery import recover_and_say
from lakehouse.run.state_check import check_damage
from lakehouse.run.summary import RunSummary
from lakehouse_core.catalog import register_tables
from lakehouse_core.checkpoints import last_committed_batch, unfinished_batch
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.errors import ConfigError
from lakehouse_core.failures import TableFailure, raise_failures
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import Trigger, finish_all, query_name
from silver.job import ensure_shared_tables, has_unread_bronze, start_silver
from silver.one_hop import Isolation, SilverHop, keep_redo_for_silver
from silver.parse import check_declared_schemas

log = logging.getLogger(__name__)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: How long a stopping run waits for its running micro-batches to finish.
DRAIN_SECONDS = 600.0


@dataclass
class RunReport:
    """What a run started and finished, what its micro-batches did per table, and which
    tables failed (each of the others finished its work)."""

    queries: list[str] = field(default_factory=list)
    seconds: float = 0.0
    summary: RunSummary = field(default_factory=RunSummary)
    failures: list[TableFailure] = field(default_factory=list)
    #: Event topics without a declaration, whose records stay in bronze only.
    undeclared_topics: list[str] = field(default_factory=list)


def check_config(config: PipelineConfig) -> None:
    """Raise ConfigError for a declared schema or a quality override that cannot work, before
    a run writes anything."""
    check_declared_schemas(config.tables)
    check_overrides(config.quality)


@leased("run --once", check_config)  # one pipeline per warehouse
def run_once(
    spark: SparkSession,
    source: SourceSpec,
    warehouse: Warehouse,
    config: PipelineConfig,
    raise_on_failure: bool = True,
    register_names: bool = True,
) -> RunReport:
    """Process everything available now through every layer, then return; each micro-batch
    goes into the event log (:mod:`lakehouse.run.event_log`), and ``config`` into the
    warehouse's recorded declarations (:mod:`lakehouse.run.declarations`).

    Then the tables get their SQL names in the session's catalog (:func:`name_tables`), unless
    not ``register_names`` (a process that ends after the run, with a catalog that ends with
    it: :func:`lakehouse_core.catalog.catalog_outlives_session`).

    A query stopped by a schema change of its Delta input (a gold job, when silver gained a
    column or widened a type) continues from its checkpoint. A table that fails does not stop
    the others: bronze's failure leaves silver and gold to apply what bronze holds, a silver
    table's leaves the other silver tables and every gold table to their work.

    Raises:
        LakehouseError: unless not ``raise_on_failure`` (then the report lists them), the
            failure of the one table that failed, or
            :class:`~lakehouse_core.failures.FailedTablesError` naming several (see
            :func:`lakehouse_core.failures.raise_failures`).
    """
    started = time.monotonic()
    recover_and_say(spark, warehouse.root)
    check_damage(spark, warehouse.root)
    record_declarations(spark, warehouse, config, "run --once")
    report = RunReport()
    with recording(spark, warehouse, report.summary, "once"):
        log.info(f"bronze: ingesting {source.describe()}")
        bronze = partial(
            start_bronze,
            read_source(spark, source),
            warehouse,
            Trigger(),
            report.summary.bronze_batch,
            config.quality,
        )
        _finish_all([Job(BRONZE_QUERY, "bronze", bronze)], report)
        _silver_and_gold(spark, warehouse, config, report)
    if register_names:
        name_tables(spark, warehouse, config)
    report.seconds = time.monotonic() - started
    if raise_on_failure:
        raise_failures(report.failures)
    return report


def name_tables(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    said: set[str] | None = None,
) -> None:
    """Give the warehouse's tables (new ones too) their SQL names in the session's catalog
    (:func:`lakehouse_core.catalog.register_tables`). A name held by someone else's table is
    reported in a log line (once per message in ``said``) and does not stop the pipeline."""
    try:
        register_tables(spark, warehouse, config.catalog)
    except ConfigError as error:
        if said is None or str(error) not in said:
            log.info(f"catalog: {error}")
        if said is not None:
            said.add(str(error))


def run_from_bronze(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    entities: Collection[str] | None = None,
    summary: RunSummary | None = None,
) -> RunReport:
    """Bring silver and gold up to date with what bronze holds now (no source is read).

    ``entities`` limits the run to those silver entities and the gold jobs that read them
    (None: every entity). Replay runs this on a staging warehouse with fresh checkpoints.
    What the silver micro-batches did goes into ``summary`` (the report's own if None).

    Raises:
        LakehouseError: a table failed (after the others did their work; see
            :func:`run_once`).
    """
    started = time.monotonic()
    report = RunReport() if summary is None else RunReport(summary=summary)
    _silver_and_gold(spark, warehouse, config, report, entities)
    report.seconds = time.monotonic() - started
    raise_failures(report.failures)
    return report


def _silver_and_gold(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    report: RunReport,
    entities: Collection[str] | None = None,
) -> None:
    """Apply bronze to silver, then silver to gold (of ``entities``), each table to its end
    whatever the others do, then refresh the SQL models (:mod:`gold.models`); the failures go
    into ``report``."""
    check_overrides(config.quality)
    ordered_models(config)
    _apply_bronze(spark, warehouse, config, report, entities)
    isolation = GoldIsolation()  # a declaration that fails is tried again by the next run
    gold = _gold_jobs(spark, warehouse, config, Trigger(), set(), entities, isolation)
    _finish_all(gold, report)
    for failed in _gold_failures(isolation, report.summary):
        report.failures.append(failed)
    for failed in refresh_models(spark, warehouse, config):
        report.failures.append(failed)
        report.summary.failing(failed, logged=False)
        log.info(f"{failed.table}: failed ({failed.failure.line})")


def _apply_bronze(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    report: RunReport,
    entities: Collection[str] | None = None,
    through_batch: int | None = None,
    leave_out: Collection[str] = (),
) -> None:
    """Run the silver query of each entity (of ``entities``; None: all; but not of
    ``leave_out``) with bronze it has not read, all at once, until each has read all of it (of
    bronze batches up to ``through_batch``); the failures go into ``report``."""
    jobs: list[Job] = []
    topics = bronze_topics(spark, warehouse, config)
    for topic in topics.undeclared:
        log.info(f"silver: {undeclared_line(topic)}")
    report.undeclared_topics = topics.undeclared
    for spec in topics.specs:
        wanted = (entities is None or spec.name in entities) and spec.name not in leave_out
        if wanted and has_unread_bronze(spark, warehouse, spec):
            log.info(f"silver: applying {spec.topic} to silver.{spec.name}")
            report.summary.add_table(spec.name)
            jobs.append(
                silver_job(spark, warehouse, config, spec, Trigger(), report.summary, through_batch)
            )
    if len(jobs) > 1:
        ensure_shared_tables(spark, warehouse)
    _finish_all(jobs, report)


def silver_job(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    spec: TableSpec,
    trigger: Trigger,
    summary: RunSummary | None = None,
    through_batch: int | None = None,
) -> Job:
    """The silver query of ``spec``'s entity (see :func:`silver.job.start_silver`), reporting
    its micro-batches to ``summary``, if given."""
    listener = None if summary is None else partial(summary.silver_batch, spec.name)
    checks = load_checks(spark, config.quality, warehouse, "silver", spec.name)
    start = partial(start_silver, spark, warehouse, spec, trigger, listener, checks, through_batch)
    return Job(f"silver_{spec.name}", f"silver.{spec.name}", start)


@leased("run --processing-time", check_config)
def run_continuously(
    spark: SparkSession,
    source: SourceSpec,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    poll_seconds: float = 5.0,
    drain_seconds: float = DRAIN_SECONDS,
    summary: RunSummary | None = None,
    one_hop: bool = True,
    backoff: Backoff = RETRY_BACKOFF,
    stop: threading.Event | None = None,
    passes: LoopPasses | None = None,
    register_names: bool = True,
) -> None:
    """Run every layer on a processing-time trigger until ``stop`` is set or, without
    ``stop``, until SIGINT or SIGTERM (handlers installed only on the main thread; a second
    signal stops the queries at once).

    With ``one_hop`` each bronze micro-batch also applies its records to silver
    (:mod:`silver.one_hop`), after silver has caught up with what bronze held; otherwise each
    silver table has its own query on the trigger. Gold queries (and silver ones in two hops)
    start as soon as their input tables appear, and a query stopped by
    a schema change of its input continues from its checkpoint (:class:`RunningQueries`).
    A table that fails is started again after ``backoff`` while the others go on; in one hop,
    an entity that fails gets a silver query of its own (:class:`silver.one_hop.Isolation`).
    On a signal each query stops after its running micro-batch (at most ``drain_seconds`` in
    all; a second signal stops them at once); their checkpoints make the next run continue.
    What the micro-batches did, and the tables failing, go into ``summary``, if given, and
    each micro-batch into the event log (:mod:`lakehouse.run.event_log`), which also shows the run
    as running while it goes on. ``passes``, if given, is told each pass of the loop that
    starts and checks the queries (see :class:`LoopPasses`). ``register_names`` as in
    :func:`run_once`.
    """
    summary = RunSummary() if summary is None else summary
    with recording(spark, warehouse, summary, "continuous"):
        _run_continuously(
            spark,
            source,
            warehouse,
            config,
            trigger,
            poll_seconds,
            drain_seconds,
            summary,
            one_hop,
            backoff,
            stop,
            passes,
            register_names,
        )


class LoopPasses:
    """The passes of a continuous run's loop (each starts the queries whose input appeared,
    restarts failed ones and names new tables), for another thread to wait on: a pipeline
    handle waits for a pass that began after the data it waits for reached bronze. While a
    thread waits for a pass, the loop does not pause between passes."""

    def __init__(self) -> None:
        self._done = 0
        self._wanted = 0  # the loop runs without pausing until it has done this many
        self._running: RunningQueries | None = None
        self._changed = threading.Condition()

    def finished(self, running: RunningQueries) -> None:
        """Note that the loop finished a pass over ``running`` (the loop calls it)."""
        with self._changed:
            self._done += 1
            self._running = running
            self._changed.notify_all()

    def current(self) -> RunningQueries | None:
        """The queries of the last pass (None: none finished yet)."""
        with self._changed:
            return self._running

    def pause(self, stop: threading.Event, seconds: float) -> None:
        """Wait ``seconds`` before the next pass, less if a pass is wanted or ``stop`` is set
        and :meth:`wake` called (the loop calls it)."""
        with self._changed:
            self._changed.wait_for(lambda: self._done < self._wanted or stop.is_set(), seconds)

    def wake(self) -> None:
        """End the loop's pause now (after setting its stop event, to stop it at once)."""
        with self._changed:
            self._wanted = max(self._wanted, self._done + 1)
            self._changed.notify_all()

    def next(self, alive: Callable[[], bool], whole: bool = True) -> RunningQueries | None:
        """Wait until the loop has done a pass that began after this call (``whole``) or any
        pass at all (not ``whole``) and return its queries; None if ``alive()`` turns False
        first (the run ended)."""
        with self._changed:
            target = self._done + 2 if whole else max(self._done, 1)
            self._wanted = max(self._wanted, target)
            self._changed.notify_all()
            while self._done < target:
                if not alive():
                    return None
                self._changed.wait(0.2)
            return self._running


def _run_continuously(
    spark: SparkSession,
    source: SourceSpec,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    poll_seconds: float,
    drain_seconds: float,
    summary: RunSummary,
    one_hop: bool,
    backoff: Backoff,
    stop: threading.Event | None,
    passes: LoopPasses | None,
    register_names: bool,
) -> None:
    ordered_models(config)
    recover_and_say(spark, warehouse.root)
    check_damage(spark, warehouse.root)
    record_declarations(spark, warehouse, config, "run --processing-time")
    signals = stop is None and threading.current_thread() is threading.main_thread()
    stop = threading.Event() if stop is None else stop
    at_once = threading.Event()

    def on_signal(*_: object) -> None:
        (at_once if stop.is_set() else stop).set()

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS} if signals else {}
    running = RunningQueries(summary, backoff)
    isolation = Isolation()
    gold_isolation = GoldIsolation(backoff.delay)
    said: set[str] = set()
    model_retries = ModelRetries(backoff.delay)
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
                summary,
                isolation,
            )
            running.start(BRONZE_QUERY, bronze, "bronze")
            into = " and on into silver" if one_hop else ""
            stops = " (Ctrl-C stops)" if signals else ""
            log.info(f"bronze: streaming from {source.describe()}{into}{stops}")
            validations = PeriodicValidation(config.quality)
            lost = lost_lease(warehouse)
            while not stop.is_set() and not lost.is_set():
                for entity, failure, logged in isolation.take_left():
                    spec = _spec_of(spark, warehouse, config, entity)
                    job = silver_job(spark, warehouse, config, spec, trigger, summary)
                    running.failed(job, failure, logged)
                start_ready(
                    spark,
                    warehouse,
                    config,
                    trigger,
                    running,
                    summary,
                    silver=not one_hop,
                    gold_isolation=gold_isolation,
                )
                _gold_failures(gold_isolation, summary)
                running.check()
                _refresh_due_models(spark, warehouse, config, summary, model_retries, said)
                if register_names:
                    name_tables(spark, warehouse, config, said)
                validations.run_if_due(spark, warehouse)
                if passes is None:
                    stop.wait(poll_seconds)
                else:
                    passes.finished(running)
                    passes.pause(stop, poll_seconds)
        except BaseException:
            running.stop()
            raise
        _drain(spark, running, trigger, drain_seconds, at_once, signals)
        if lost.is_set():
            raise LeaseLostError(lost_line(spark, warehouse))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _drain(
    spark: SparkSession,
    running: RunningQueries,
    trigger: Trigger,
    drain_seconds: float,
    at_once: threading.Event,
    signals: bool,
) -> None:
    """Stop the run's queries after their running micro-batches, saying so (``signals``: a
    second signal stops them at once, through ``at_once``)."""
    again = " (signal again to stop at once)" if signals else ""
    log.info(f"stopping after the running micro-batches{again}")
    interrupted = running.stop_between_batches(
        spark, trigger.interval_seconds, drain_seconds, at_once
    )
    if interrupted:
        log.info(
            f"stopped {', '.join(interrupted)} during a micro-batch: the next run does "
            "that batch again"
        )


def _refresh_due_models(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    summary: RunSummary,
    retries: ModelRetries,
    said: set[str],
) -> None:
    """Refresh the SQL models whose inputs moved (a refresh with nothing new commits
    nothing); a model that failed is tried again after the run's backoff, the others go on."""
    now = time.monotonic()
    due = retries.due((model.name for model in config.models), now)
    if not due:
        return
    failures = refresh_models(spark, warehouse, config, said, only=due)
    for failure in failures:
        noted = retries.failed(failure, now)
        summary.failing(noted, logged=False)
        wait = (noted.retry_at - noted.at).total_seconds() if noted.retry_at else 0.0
        log.info(
            f"{noted.table}: failed ({noted.failure.line}); the other tables go on; "
            f"attempt {noted.attempts + 1} in {wait:g} s"
        )
    failed = {failure.query for failure in failures}
    for name in due:
        if model_query(name) not in failed and retries.succeeded(name) is not None:
            summary.recovered(model_query(name))
            log.info(f"gold.{name}: refreshing again")


def start_one_hop(
    spark: SparkSession,
    source: DataFrame,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    summary: RunSummary | None = None,
    isolation: Isolation | None = None,
) -> StreamingQuery:
    """Bring silver up to date with bronze (a run in two hops may have left bronze it has not
    read), then start the bronze query on ``trigger`` with each micro-batch applied to silver
    in the same micro-batch (:class:`silver.one_hop.SilverHop`), telling ``summary``.

    Silver catches up only with the bronze micro-batches the bronze query committed: the one it
    does again after a crash is the hop's to apply (the crashed hop may have applied part of
    it, which its transaction ids make the hop skip, not a silver query's).

    With ``isolation``, an entity whose catch-up or part of a hop fails is left to a silver
    query of its own (the entities it holds already are neither caught up nor hopped);
    without it, such a failure is raised (the catch-up's after the other entities caught up),
    or fails the bronze query."""
    summary = RunSummary() if summary is None else summary
    bronze_checkpoint = warehouse.checkpoint(BRONZE_QUERY)
    committed = last_committed_batch(spark, bronze_checkpoint)
    redo = unfinished_batch(spark, bronze_checkpoint)
    report = RunReport(summary=summary)
    through = -1 if committed is None else committed
    left = set() if isolation is None else isolation.entities()
    _apply_bronze(spark, warehouse, config, report, None, through, left)
    if isolation is None:
        raise_failures(report.failures)
    else:
        for failed in report.failures:
            entity = failed.query.removeprefix("silver_")
            isolation.leave(entity, failed.failure, logged=True)
            left.add(entity)
    if redo is not None:
        specs = [s for s in entity_specs(spark, warehouse, config) if s.name not in left]
        keep_redo_for_silver(spark, warehouse, specs, redo)
    hop = SilverHop(spark, warehouse, config, summary.hop_batch, redo, isolation)
    return start_bronze(source, warehouse, trigger, summary.bronze_batch, config.quality, hop)


def _start_bronze(
    spark: SparkSession,
    source: DataFrame,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    summary: RunSummary,
    isolation: Isolation,
) -> StreamingQuery:
    """Start the bronze query alone (two hops: silver has queries of its own)."""
    return start_bronze(source, warehouse, trigger, summary.bronze_batch, config.quality)


def _spec_of(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig, entity: str
) -> TableSpec:
    """The settings of ``entity`` (one of :func:`lakehouse.run.entities.entity_specs`)."""
    return next(spec for spec in entity_specs(spark, warehouse, config) if spec.name == entity)


def start_ready(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    running: RunningQueries,
    summary: RunSummary | None = None,
    silver: bool = True,
    gold_isolation: GoldIsolation | None = None,
) -> None:
    """Start the silver (unless not ``silver``: one hop applies it) and gold queries whose
    input tables exist, that have something to read and that are not running (the silver ones
    reporting their micro-batches to ``summary``, if given). ``gold_isolation``: where a
    declaration of a shared gold query that fails is left (without it, it fails the query).

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
        if summary is not None:
            summary.add_table(spec.name)
        job = silver_job(spark, warehouse, config, spec, trigger, summary)
        log.info(f"silver: streaming {spec.topic} into silver.{spec.name}")
        running.start(job.name, job.start, job.table)
    names = running.names()
    for job in _gold_jobs(spark, warehouse, config, trigger, names, None, gold_isolation):
        running.start(job.name, job.start, job.table)


def _gold_jobs(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    running: set[str],
    inputs: Collection[str] | None = None,
    isolation: GoldIsolation | None = None,
) -> list[Job]:
    """The gold jobs whose silver input (and joined entity) exists (and that read one of
    ``inputs``, if given) and that are not running yet: one per query (the declarations over
    one source without a join share one, whose failing declarations ``isolation`` keeps)."""
    silver = set(warehouse.table_names("silver", spark))
    ready: list[Job] = []
    tables: dict[str, list[str]] = {}
    for job in gold_jobs(config):
        wanted = inputs is None or job.reads_any(inputs)
        joined = all(entity in silver for entity in job.joins)
        if wanted and job.input in silver and joined and job.query not in running:
            log.info(f"gold: {job.what} from silver.{job.input}")
            if job.query in tables:
                tables[job.query].append(f"gold.{job.table}")
                continue
            tables[job.query] = [f"gold.{job.table}"]
            start = partial(job.start, spark, warehouse, trigger)
            if job.shared:
                start = partial(start, isolation=isolation)
            ready.append(Job(job.query, f"gold.{job.table}", start))
    ready = [job._replace(table=", ".join(tables[job.name])) for job in ready]
    return ready + _alert_jobs(spark, warehouse, config, trigger, running, inputs)


def _alert_jobs(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    running: set[str],
    inputs: Collection[str] | None = None,
) -> list[Job]:
    """The alert jobs whose silver input and baseline (``lakehouse fit``) exist and that are
    not running yet. Until its baseline exists, an alert's rows wait in silver's change feed."""
    silver = set(warehouse.table_names("silver", spark))
    gold = set(warehouse.table_names("gold", spark))
    ready: list[Job] = []
    for job in alert_jobs(config):
        if (inputs is None or job.input in inputs) and job.query not in running:
            if job.input in silver and job.baseline in gold:
                log.info(f"gold: {job.what} from silver.{job.input}")
                start = partial(job.start, spark, warehouse, trigger)
                ready.append(Job(job.query, f"gold.{ALERTS_TABLE} ({job.what})", start))
            elif job.input in silver and trigger.once:
                log.info(f"gold: {job.what} waits for a baseline: run 'lakehouse fit'")
    return ready


def _gold_failures(isolation: GoldIsolation, summary: RunSummary) -> list[TableFailure]:
    """Tell ``summary`` (and so the event log and ``lakehouse status``) the declarations of
    shared gold queries that failed or recovered since the last call; returns the failures."""
    failed_now = []
    new, recovered = isolation.take()
    now = datetime.now(UTC)
    for name, failure, attempts, delay in new:
        retry_at = None if delay is None else now + timedelta(seconds=delay)
        failed = TableFailure(f"gold_{name}", f"gold.{name}", failure, now, attempts, retry_at)
        summary.failing(failed, logged=False)
        failed_now.append(failed)
        again = "" if delay is None else f"; attempt {attempts + 1} in {delay:g} s"
        log.info(f"gold.{name}: failed ({failure.line}); the other tables go on{again}")
    for name in recovered:
        summary.recovered(f"gold_{name}")
        log.info(f"gold.{name}: running again")
    return failed_now


def _finish_all(jobs: Sequence[Job], report: RunReport) -> None:
    """Run independent queries together to their end (:func:`lakehouse_core.streaming.finish_all`):
    one that fails leaves the others to their work; its failure goes into ``report``."""

    def restarted(query: StreamingQuery) -> None:
        log.info(f"{query.name}: its input changed schema; continuing from its checkpoint")

    for job, ended in zip(jobs, finish_all([job.start for job in jobs], restarted), strict=True):
        if ended.query is not None:
            report.queries.append(query_name(ended.query))
        if ended.failure is not None:
            failed = TableFailure(job.name, job.table, ended.failure, datetime.now(UTC))
            report.failures.append(failed)
            # A query that did not start has no end for the event log to record.
            report.summary.failing(failed, logged=ended.query is not None)
            log.info(f"{job.table}: failed ({ended.failure.line})")
