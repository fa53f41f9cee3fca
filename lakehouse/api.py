"""The public Python API, for notebooks and your own jobs: one :class:`Lakehouse` per warehouse.

>>> from lakehouse_demo import generate_workload          # the demo's shop (not in the wheel)
>>> generate_workload("/tmp/shop", events=2000)
>>> from lakehouse import Lakehouse
>>> lh = Lakehouse("/tmp/wh")                       # the active session, else a local one
>>> lh.run("files:/tmp/shop")                        # everything available, then return
>>> p = lh.start("files:/tmp/shop", trigger="10 seconds")  # runs on in the background
>>> p.process_all_available(); p.stop()
>>> lh.table("gold.revenue_per_minute").show()
>>> lh.sql("SELECT count(*) FROM silver.orders").show()
>>> assert lh.verify().ok

Each method calls the operation the command line runs (``lakehouse run``, ``verify``,
``replay``, ``forget``, ``maintain``, ``fit``, ``sql``, ``status``) and returns its report, a small
dataclass; :meth:`Lakehouse.start` returns a :class:`~lakehouse.handle.Pipeline` handle. User
mistakes raise :class:`lakehouse_core.errors.LakehouseError` subclasses with one clear message.

What the operations do (a query starting, a table failing, a replay's steps) is logged at INFO
through :mod:`logging`, each module under its own name (``lakehouse.run.pipeline``,
``gold.models``, ...): lines such as ``silver: applying shop.public.orders to silver.orders``.
Nothing here configures a handler; in a notebook or script
``logging.basicConfig(level=logging.INFO, format="- %(message)s")`` shows them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from cdc.sources import SourceSpec
from gold.alerts import Fit
from gold.alerts import fit as fit_alert
from lakehouse.declare import pipeline_config
from lakehouse.handle import Pipeline, refuse_if_running
from lakehouse.ops.audit import verify_warehouse
from lakehouse.ops.forget import DEFAULT_REASON, ForgetReport
from lakehouse.ops.forget import forget as forget_key
from lakehouse.ops.fresh import fresh_read, with_fresh_views
from lakehouse.ops.maintenance import MaintenanceReport
from lakehouse.ops.maintenance import maintain as run_maintenance
from lakehouse.ops.replay import ReplayReport
from lakehouse.ops.replay import replay as replay_tables
from lakehouse.ops.status import PipelineStatus, pipeline_status
from lakehouse.ops.table_list import TableInfo, warehouse_tables
from lakehouse.run.pipeline import RunReport, run_continuously, run_once
from lakehouse.run.queries import RETRY_BACKOFF, Backoff
from lakehouse.run.summary import RunSummary
from lakehouse.sql.session import run_checked, spark_errors
from lakehouse_core.alerting import AlertSpec
from lakehouse_core.catalog import register_tables
from lakehouse_core.config import (
    CatalogSpec,
    MaintenanceSpec,
    PipelineConfig,
    QualitySpec,
    TableSpec,
    load_config,
)
from lakehouse_core.delta_io import table_exists
from lakehouse_core.errors import ConfigError, TableNotFoundError
from lakehouse_core.gold_tables import GoldTable
from lakehouse_core.layout import LAYERS, Layer, Warehouse
from lakehouse_core.models import SqlModel
from lakehouse_core.parallel import active_session
from lakehouse_core.patterns import Pattern
from lakehouse_core.spark import SparkMode, get_spark
from lakehouse_core.sql_guard import check
from lakehouse_core.streaming import Trigger
from silver.fresh import FreshLimits, FreshReadError
from silver.keys import KeyValue
from silver.verify import TableCheck

log = logging.getLogger(__name__)

#: What is said as a lakehouse starts the process's Spark session (its JVM) on first use.
SPARK_STARTING = (
    "spark: starting the session; the first call of a process waits for Spark's JVM to start "
    "(about a minute on a laptop), later calls do not"
)

__all__ = [
    "AVAILABLE_NOW",
    "Fit",
    "ForgetReport",
    "Lakehouse",
    "MaintenanceReport",
    "Pipeline",
    "PipelineStatus",
    "ReplayReport",
    "RunReport",
    "TableCheck",
    "TableInfo",
    "Verification",
    "parse_trigger",
]

#: The trigger of a run that processes what has arrived, then returns (Spark's availableNow).
AVAILABLE_NOW = "available_now"


@dataclass(frozen=True)
class Verification:
    """The result of :meth:`Lakehouse.verify`: one check per silver table (and SCD type 2
    history); ``ok`` when every table equals the reference fold of its bronze log."""

    checks: tuple[TableCheck, ...]

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(check.ok for check in self.checks)

    def __str__(self) -> str:
        return "\n".join(
            f"{c.layer}.{c.table}: {c.actual_rows} rows, expected {c.expected_rows}: "
            + ("ok" if c.ok else f"{len(c.differences)} differences")
            for c in self.checks
        )


class Lakehouse:
    """One warehouse and the Spark session that works on it.

    Args:
        warehouse: the warehouse root (a directory, or a Hadoop URI); created by the first run.
        config: a pipeline TOML file, a :class:`~lakehouse_core.config.PipelineConfig`, or None: no
            declarations (Debezium topics still become silver tables; the demo shop's
            settings are :func:`lakehouse_demo.demo_lakehouse`'s).
        spark: the session to use; None takes the active one (Databricks, a notebook that
            built its own) or starts a local one with Delta (``spark_mode``, ``master``: see
            :func:`lakehouse_core.spark.get_spark`), when first needed.
        tables, gold, patterns, alerts, models, quality, catalog, maintenance: the pipeline
            declared in Python instead of ``config`` (:mod:`lakehouse.declare`:
            ``tables=[cdc_table(...), events_table(...)]``, ``gold=[gold_table(...)]``, ...);
            the pipeline then has exactly what is declared (no gold table unless ``gold``
            names one). ``self.config`` holds it; ``self.config.to_toml()`` shows it as TOML.

    Raises:
        ConfigError: the config file is missing or invalid, a declaration is invalid, or both
            ``config`` and declarations are given (give one or the other).
    """

    def __init__(
        self,
        warehouse: str | Path,
        config: str | Path | PipelineConfig | None = None,
        spark: SparkSession | None = None,
        *,
        spark_mode: SparkMode = "auto",
        master: str | None = None,
        tables: Sequence[TableSpec] | None = None,
        gold: Sequence[GoldTable] | None = None,
        patterns: Sequence[Pattern] | None = None,
        alerts: Sequence[AlertSpec] | None = None,
        models: Sequence[SqlModel] | None = None,
        quality: QualitySpec | None = None,
        catalog: CatalogSpec | None = None,
        maintenance: MaintenanceSpec | None = None,
    ) -> None:
        self.warehouse = Warehouse.from_path(warehouse)
        declared = {
            "tables": tables,
            "gold": gold,
            "patterns": patterns,
            "alerts": alerts,
            "models": models,
            "quality": quality,
            "catalog": catalog,
            "maintenance": maintenance,
        }
        given = [name for name, value in declared.items() if value is not None]
        if given and config is not None:
            raise ConfigError(
                "Lakehouse got both config= and declarations "
                f"({', '.join(f'{name}=' for name in given)}): give one or the other."
            )
        if given:
            self.config = pipeline_config(
                tables=tables or (),
                gold=gold or (),
                patterns=patterns or (),
                alerts=alerts or (),
                models=models or (),
                quality=quality,
                catalog=catalog,
                maintenance=maintenance,
            )
        else:
            self.config = config if isinstance(config, PipelineConfig) else load_config(config)
        self._spark = spark
        self._spark_mode: SparkMode = spark_mode
        self._master = master

    def __repr__(self) -> str:
        return f"Lakehouse({self.warehouse.root!r})"

    @property
    def spark(self) -> SparkSession:
        """The session this lakehouse works in: the one given, else started on first use. Its
        catalog names the warehouse's tables once :meth:`register_tables` has run (``run``,
        ``start`` and ``sql`` call it)."""
        if self._spark is None:
            starting = active_session() is None
            if starting:
                log.info(SPARK_STARTING)
            began = time.monotonic()
            self._spark = get_spark(mode=self._spark_mode, master=self._master)
            if starting:
                log.info(f"spark: ready after {time.monotonic() - began:.0f} s")
        return self._spark

    def register_tables(self) -> list[str]:
        """Give every table of the warehouse its SQL name in the session's catalog
        (``gold.revenue_per_minute``, or as the config's ``[catalog]`` says), so that
        ``lh.spark.sql(...)`` finds them; returns the names. Cheap to repeat.

        Raises:
            ConfigError: a catalog entry of a table's name holds someone else's table.
        """
        return register_tables(self.spark, self.warehouse, self.config.catalog)

    def run(
        self,
        source: str | SourceSpec,
        trigger: str = AVAILABLE_NOW,
        kafka_options: Mapping[str, str] | None = None,
        one_hop: bool = True,
    ) -> RunReport:
        """Run the pipeline source -> bronze -> silver -> gold to its end, like
        ``lakehouse run``; :meth:`start` runs it in the background instead.

        ``source``: ``"files:DIR"``, ``"kafka:HOST:PORT[,...]"`` or a
        :class:`~cdc.sources.SourceSpec`; ``kafka_options``: Kafka source options
        (``subscribe``, ``maxOffsetsPerTrigger``, ``kafka.<librdkafka setting>``).
        ``trigger``: ``"available_now"`` (default) processes what has arrived and returns; a
        processing time (``"10 seconds"``, ``"10s"``) runs until interrupted (Ctrl-C, a
        notebook's interrupt, SIGTERM: call it from the main thread), stopping each query
        after its running micro-batch; each bronze micro-batch then also applies its records
        to silver, unless ``one_hop=False`` (a silver query per table, on the trigger).
        What starts is logged (see the module's note on logging). The tables get their SQL
        names (:meth:`register_tables`).

        Raises:
            ConfigError: a bad source or trigger, ``one_hop=False`` with ``available_now``, or
                a processing time off the main thread (use :meth:`start`).
            PipelineRunningError: a pipeline runs on the warehouse.
            LakehouseError: a table failed, after the others did their work (its own error,
                or :class:`~lakehouse_core.failures.FailedTablesError` naming each failed table); a
                continuous run instead starts a failed table again with backoff.
        """
        spec = self._source(source, kafka_options)
        parsed = parse_trigger(trigger)
        if not one_hop and parsed.once:
            raise ConfigError(
                "one_hop=False is for continuous runs: give a processing time, e.g. "
                "trigger='10 seconds' (a run that stops when done always applies bronze to "
                "silver after it)."
            )
        if not parsed.once and threading.current_thread() is not threading.main_thread():
            raise ConfigError(
                f"lh.run with trigger={trigger!r} stops on Ctrl-C or SIGTERM, which only the "
                "main thread gets: call it there, or use p = lh.start(...) and p.stop()."
            )
        refuse_if_running(self.warehouse, "lh.run")
        self.register_tables()
        if parsed.once:
            return run_once(self.spark, spec, self.warehouse, self.config)
        report = RunReport(summary=RunSummary())
        run_continuously(
            self.spark,
            spec,
            self.warehouse,
            self.config,
            parsed,
            summary=report.summary,
            one_hop=one_hop,
        )
        return report

    def start(
        self,
        source: str | SourceSpec,
        trigger: str = "10 seconds",
        kafka_options: Mapping[str, str] | None = None,
        one_hop: bool = True,
        *,
        backoff: Backoff = RETRY_BACKOFF,
        poll_seconds: float = 5.0,
    ) -> Pipeline:
        """Start the pipeline on a processing-time ``trigger`` in the background and return
        its handle as soon as its queries start, like Spark's ``writeStream.start()``; in a
        process without a running Spark session that includes starting Spark's JVM (about a
        minute on a laptop; the ``lakehouse.api`` logger says ``spark: starting ...`` and
        ``spark: ready after N s``, and touching ``lh.spark`` in an earlier cell starts it
        ahead)::

            p = lh.start("files:/tmp/shop", trigger="10 seconds")
            p.process_all_available()   # what has arrived is in gold now
            p.status(); p.last_batches().show()
            p.stop()                    # after the running micro-batches

        ``source``, ``kafka_options`` and ``one_hop`` as for :meth:`run`;
        ``backoff``: the delays before a failed table starts again; ``poll_seconds``: how
        often the run looks for new tables to start queries on. The tables get their SQL
        names (:meth:`register_tables`), new ones as they appear.

        Raises:
            ConfigError: a bad source or trigger (``available_now`` is :meth:`run`'s), or a
                config that cannot work (nothing written).
            PipelineRunningError: a pipeline runs on the warehouse (this process's handle, or
                another process's run).
        """
        spec = self._source(source, kafka_options)
        parsed = parse_trigger(trigger)
        if parsed.once:
            raise ConfigError(
                f"start runs until stopped: give it a processing time, e.g. "
                f"trigger='10 seconds'; for {trigger!r} use lh.run(source), which processes "
                "what has arrived and returns."
            )
        refuse_if_running(self.warehouse, "lh.start")
        self.register_tables()
        pipeline = Pipeline(
            self.spark,
            spec,
            self.warehouse,
            self.config,
            parsed,
            one_hop=one_hop,
            backoff=backoff,
            poll_seconds=poll_seconds,
        )
        return pipeline.launch()

    @staticmethod
    def _source(source: str | SourceSpec, kafka_options: Mapping[str, str] | None) -> SourceSpec:
        spec = source if isinstance(source, SourceSpec) else SourceSpec.parse(source)
        if kafka_options:
            spec = replace(spec, kafka_options={**spec.kafka_options, **kafka_options})
        return spec

    def table(
        self,
        name: str,
        version: int | None = None,
        timestamp: str | datetime | None = None,
        *,
        fresh: bool = False,
        limits: FreshLimits | None = None,
    ) -> DataFrame:
        """The table named ``<layer>.<table>`` (e.g. ``"silver.orders"``) as a DataFrame: as
        it is now, or as it was at Delta ``version`` or at ``timestamp`` (time travel: a
        ``datetime``, or text such as ``"2026-11-28 09:00:00"`` in the session's time zone).

        ``fresh=True`` (a silver table): as current as its bronze, not as its last MERGE: the
        bronze records silver has not applied yet folded over it under silver's rules
        (docs/fresh-reads.md), at most ``limits`` of them (default
        :class:`~silver.fresh.FreshLimits`: 100,000 records, 30 minutes).

        Raises:
            ConfigError: ``name`` is not ``<layer>.<table>``, both ``version`` and
                ``timestamp`` are given, or ``version`` is not a whole number of at least 0.
            TableNotFoundError: the warehouse has no such table (the message lists those it has).
            LakehouseError: the table has no such version, or none that old (Delta's line).
            FreshReadError: ``fresh`` for a table without a fresh read (not silver, SCD type 2
                history), with time travel, or over ``limits``.
        """
        if fresh:
            return self._fresh_table(name, version, timestamp, limits)
        if version is not None and timestamp is not None:
            raise ConfigError(
                f"table({name!r}) takes either version= or timestamp=, not both: drop one."
            )
        if version is not None and (
            isinstance(version, bool) or not isinstance(version, int) or version < 0
        ):
            raise ConfigError(
                f"Invalid version {version!r}: give a Delta version, a whole number of at least "
                f"0 (lh.history({name!r}) lists them)."
            )
        path = self._table_path(name)
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        if timestamp is not None:
            at = timestamp.isoformat() if isinstance(timestamp, datetime) else str(timestamp)
            reader = reader.option("timestampAsOf", at)
        with spark_errors():
            return reader.load(path)

    def _fresh_table(
        self,
        name: str,
        version: int | None,
        timestamp: str | datetime | None,
        limits: FreshLimits | None,
    ) -> DataFrame:
        layer, _, table = name.partition(".")
        if version is not None or timestamp is not None:
            raise FreshReadError(
                f"table({name!r}, fresh=True) reads the table as current as bronze: drop "
                "version= or timestamp=, or fresh=True to travel in time."
            )
        if layer != "silver":
            self._table_path(name)  # an unknown name is told as such
            raise FreshReadError(
                f"{name} has no fresh read (only silver tables have one): read {name} as it "
                "is, or a silver table fresh."
            )
        with spark_errors():
            return fresh_read(self.spark, self.warehouse, self.config, table, limits).rows

    def delta_table(self, name: str) -> DeltaTable:
        """The table named ``<layer>.<table>`` as a :class:`delta.tables.DeltaTable` (its
        history, details, ``optimize()``; writes to it bypass the pipeline: bronze is
        append-only).

        Raises:
            ConfigError: ``name`` is not ``<layer>.<table>``.
            TableNotFoundError: the warehouse has no such table.
        """
        path = self._table_path(name)  # a bad name is refused before Spark starts
        return DeltaTable.forPath(self.spark, path)

    def history(self, name: str) -> DataFrame:
        """The Delta history of the table named ``<layer>.<table>``, newest version first:
        one row per commit (``version``, ``timestamp``, ``operation``, its metrics, ...).

        Raises:
            ConfigError: ``name`` is not ``<layer>.<table>``.
            TableNotFoundError: the warehouse has no such table.
        """
        return self.delta_table(name).history()

    def tables(self) -> list[TableInfo]:
        """Every table of the warehouse's layers with its rows, version, last commit and
        freshness, read from the Delta logs (no Spark job runs; empty before the first run)."""
        return warehouse_tables(self.warehouse, datetime.now(UTC))

    def _table_path(self, name: str) -> str:
        """The location of the table named ``<layer>.<table>``.

        Raises:
            ConfigError: ``name`` is not ``<layer>.<table>``.
            TableNotFoundError: the warehouse has no such table (the message lists those it has).
        """
        layer, _, table = name.partition(".")
        if layer not in LAYERS or not table:
            raise ConfigError(
                f"Invalid table name {name!r}: write <layer>.<table> with layer one of "
                f"{', '.join(LAYERS)}, e.g. 'gold.revenue_per_minute'."
            )
        path = self.warehouse.table(_layer(layer), table)
        if not table_exists(self.spark, path):
            names = [
                f"{la}.{t}" for la in LAYERS for t in self.warehouse.table_names(la, self.spark)
            ]
            have = ", ".join(names) if names else "none yet (run the pipeline first)"
            raise TableNotFoundError(
                f"No table {name} in {self.warehouse.root}; its tables are: {have}."
            )
        return path

    def sql(self, statement: str, allow_writes: bool = False) -> DataFrame:
        """Run one SQL statement over the tables named ``<layer>.<table>``, under the rules of
        ``lakehouse sql``: read-only unless ``allow_writes``, and never a change to bronze.

        Raises:
            StatementRefusedError: the statement may not run (nothing ran).
            LakehouseError: Spark refused it (its first line).
        """
        check(statement, allow_writes=allow_writes)  # before Spark starts: a refusal is quick
        statement = with_fresh_views(self.spark, self.warehouse, self.config, statement)
        return run_checked(self.spark, self.warehouse, statement, allow_writes, self.config.catalog)

    def verify(self) -> Verification:
        """Recompute every silver table from bronze with an independent fold and compare
        (``lakehouse verify``).

        Raises:
            TableNotFoundError: the warehouse has no bronze tables yet.
        """
        checks = verify_warehouse(self.spark, self.warehouse, self.config)
        if not checks:
            raise TableNotFoundError(
                f"No bronze tables in {self.warehouse.root}: run the pipeline first "
                "(Lakehouse.run)."
            )
        return Verification(tuple(checks))

    def replay(self, table: str | None = None) -> ReplayReport:
        """Rebuild silver and gold (or only silver ``table`` and the gold tables that read it)
        from bronze, then swap the rebuilt tables in (``lakehouse replay``). Stop the pipeline
        first.

        Raises:
            TableNotFoundError: no bronze tables, or ``table`` is not a silver entity.
        """
        refuse_if_running(self.warehouse, "lh.replay")
        return replay_tables(self.spark, self.warehouse, self.config, table)

    def forget(
        self,
        table: str,
        key: Mapping[str, KeyValue],
        reason: str = DEFAULT_REASON,
    ) -> ForgetReport:
        """Remove every trace of one key (``{"id": 42}``) of silver ``table`` from bronze,
        silver and gold, then VACUUM and check (``lakehouse forget``). ``held`` in the report
        is False, and nothing changed, if no table held the key.

        Raises:
            TableNotFoundError: ``table`` is not a silver entity.
            ConfigError: ``key`` does not name the entity's key columns or fit their types.
        """
        refuse_if_running(self.warehouse, "lh.forget")
        return forget_key(self.spark, self.warehouse, self.config, table, dict(key), reason)

    def maintain(self) -> MaintenanceReport:
        """OPTIMIZE and VACUUM every table, drop expired tombstones and apply bronze retention
        under the config's ``[maintenance]`` settings (``lakehouse maintain``). Bronze
        retention that had to keep records silver still needs is listed in ``refused``."""
        refuse_if_running(self.warehouse, "lh.maintain")
        return run_maintenance(self.spark, self.warehouse, self.config, datetime.now(UTC))

    def fit(self) -> list[Fit]:
        """Fit the per-key baseline of every ``[[alerts]]`` entry from its silver table's
        current rows (``lakehouse fit``); the next run scores silver's changes against it
        into ``gold.alerts``.

        Raises:
            ConfigError: the config declares no alert.
        """
        if not self.config.alerts:
            raise ConfigError("No alert to fit: declare one in an [[alerts]] entry of the config.")
        return [fit_alert(self.spark, self.warehouse, spec) for spec in self.config.alerts]

    def status(self) -> PipelineStatus:
        """Per table how far silver and gold have applied their input, the last micro-batches
        (from the event log), freshness and quarantine, per expectation the rows checked,
        failed and dropped (``quality``), SQL models, the tables no declaration makes
        (``orphaned``), and whether a pipeline runs now (``lakehouse status``); in a notebook
        it shows as tables, ``print`` gives the text ``lakehouse status`` prints, and
        ``to_json()`` gives it as JSON values."""
        return pipeline_status(self.spark, self.warehouse, self.config, datetime.now(UTC))

    def event_log(self) -> DataFrame:
        """The event log: one row per micro-batch of each streaming query of the runs.

        Raises:
            TableNotFoundError: no run has written it yet.
        """
        if not table_exists(self.spark, self.warehouse.event_log):
            raise TableNotFoundError(
                f"No event log in {self.warehouse.root} yet: run the pipeline first "
                "(Lakehouse.run)."
            )
        return self.spark.read.format("delta").load(self.warehouse.event_log)


def parse_trigger(trigger: str) -> Trigger:
    """The trigger ``trigger`` names: ``"available_now"`` (process what has arrived, then
    stop), or a processing time: ``"10 seconds"``, ``"10s"``, ``"500ms"``, ``"2m"``,
    ``"1 hour"``, ``"1 day"`` (any case).

    Raises:
        ConfigError: anything else, with the forms allowed.
    """
    text = trigger.strip().lower() if isinstance(trigger, str) else None
    if text == AVAILABLE_NOW:
        return Trigger()
    if text:
        with suppress(ConfigError):
            return Trigger.parse(text)
    raise ConfigError(
        f"Invalid trigger {trigger!r}: write 'available_now' (process what has arrived, then "
        "stop) or a processing time such as '10 seconds', '10s' or '1 minute'."
    )


def _layer(name: str) -> Layer:
    for layer in LAYERS:
        if layer == name:
            return layer
    raise ConfigError(f"Unknown layer {name!r}: use one of {', '.join(LAYERS)}.")
