"""The public Python API, for notebooks and your own jobs: one :class:`Lakehouse` per warehouse.

>>> from lakehouse import Lakehouse, generate_workload
>>> generate_workload("/tmp/shop", events=2000)
>>> lh = Lakehouse("/tmp/wh")                       # the active session, else a local one
>>> lh.run("files:/tmp/shop")                        # everything available, then return
>>> lh.table("gold.revenue_per_minute").show()
>>> lh.sql("SELECT count(*) FROM silver.orders").show()
>>> assert lh.verify().ok

Each method calls the operation the command line runs (``lakehouse run``, ``verify``,
``replay``, ``forget``, ``maintain``, ``fit``, ``sql``, ``status``) and returns its report, a small
dataclass. User mistakes raise :class:`core.errors.LakehouseError` subclasses
with one clear message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from cdc.generator import WorkloadConfig
from cdc.sources import SourceSpec
from core.alerting import AlertSpec
from core.catalog import register_tables
from core.config import (
    CatalogSpec,
    MaintenanceSpec,
    PipelineConfig,
    QualitySpec,
    TableSpec,
    load_config,
)
from core.delta_io import table_exists
from core.errors import ConfigError, TableNotFoundError
from core.gold_tables import GoldTable
from core.layout import LAYERS, Layer, Warehouse
from core.models import SqlModel
from core.patterns import Pattern
from core.spark import SparkMode, get_spark
from core.sql_guard import check
from core.streaming import Trigger
from gold.alerts import Fit
from gold.alerts import fit as fit_alert
from lakehouse.declare import pipeline_config
from lakehouse.demo import DEMO_CONFIG, write_workload
from lakehouse.ops.audit import verify_warehouse
from lakehouse.ops.forget import DEFAULT_REASON, ForgetReport
from lakehouse.ops.forget import forget as forget_key
from lakehouse.ops.maintenance import MaintenanceReport
from lakehouse.ops.maintenance import maintain as run_maintenance
from lakehouse.ops.replay import ReplayReport
from lakehouse.ops.replay import replay as replay_tables
from lakehouse.ops.status import PipelineStatus, pipeline_status
from lakehouse.run.pipeline import Progress, RunReport, run_continuously, run_once
from lakehouse.run.summary import RunSummary
from lakehouse.sql.session import run_checked
from silver.keys import KeyValue
from silver.verify import TableCheck

__all__ = [
    "Fit",
    "ForgetReport",
    "Lakehouse",
    "MaintenanceReport",
    "PipelineStatus",
    "ReplayReport",
    "RunReport",
    "TableCheck",
    "Verification",
    "generate_workload",
]


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


def generate_workload(
    out: str | Path,
    events: int = 20_000,
    seed: int = 42,
    malformed_rate: float = 0.01,
    late_rate: float = 0.0,
    parts: int | None = None,
) -> int:
    """Write the demo's shop workload (customers and orders CDC, clickstream) as JSON-lines
    files into ``out`` (what ``lakehouse generate`` writes); return the number of records.
    Read it with ``Lakehouse.run(f"files:{out}")``.

    ``late_rate``: the share of clicks sent late on purpose (they land in windows a gold
    table already marked final: see ``gold.late_events``). ``parts``: split the records, in
    delivery order, into this many files (``part-00000.jsonl``, ...) that can arrive one at a
    time; by default one file per 20,000 records.

    Raises:
        ConfigError: a rate outside its range, ``parts`` below 1, or ``out`` already holds a
            workload.
    """
    if parts is not None and (isinstance(parts, bool) or not isinstance(parts, int) or parts < 1):
        raise ConfigError(f"parts must be a whole number of files of at least 1, got {parts!r}.")
    config = WorkloadConfig(
        events=events, seed=seed, malformed_rate=malformed_rate, late_rate=late_rate
    )
    return write_workload(Path(out), config, parts)[1]


class Lakehouse:
    """One warehouse and the Spark session that works on it.

    Args:
        warehouse: the warehouse root (a directory, or a Hadoop URI); created by the first run.
        config: a pipeline TOML file, a :class:`~core.config.PipelineConfig`, or None: no
            declarations (Debezium topics still become silver tables; the demo shop's
            settings are :meth:`Lakehouse.demo`'s).
        spark: the session to use; None takes the active one (Databricks, a notebook that
            built its own) or starts a local one with Delta (``spark_mode``, ``master``: see
            :func:`core.spark.get_spark`), when first needed.
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
        self._registered = False
        self._spark_mode: SparkMode = spark_mode
        self._master = master

    def __repr__(self) -> str:
        return f"Lakehouse({self.warehouse.root!r})"

    @property
    def spark(self) -> SparkSession:
        """The session this lakehouse works in (started on first use); its catalog names the
        warehouse's tables (``spark.sql("SELECT * FROM gold.revenue_per_minute")``), and runs
        of the pipeline register the tables they create."""
        if self._spark is None:
            self._spark = get_spark(
                mode=self._spark_mode,
                master=self._master,
                warehouse=self.warehouse,
                catalog=self.config.catalog,
            )
        elif not self._registered:
            register_tables(self._spark, self.warehouse, self.config.catalog)
        self._registered = True
        return self._spark

    def run(
        self,
        source: str | SourceSpec,
        once: bool | None = None,
        processing_time: str | None = None,
        kafka_options: Mapping[str, str] | None = None,
        progress: Progress = lambda _: None,
        one_hop: bool = True,
    ) -> RunReport:
        """Run the pipeline source -> bronze -> silver -> gold, like ``lakehouse run``.

        ``source``: ``"files:DIR"``, ``"kafka:HOST:PORT[,...]"`` or a
        :class:`~cdc.sources.SourceSpec`; ``kafka_options``: Kafka source options
        (``subscribe``, ``maxOffsetsPerTrigger``, ``kafka.<librdkafka setting>``).
        By default (or ``once=True``) processes what is available and returns. With
        ``processing_time`` (e.g. ``"10s"``) it runs until interrupted (Ctrl-C, a notebook's
        interrupt, SIGTERM), stopping each query after its running micro-batch; call it from
        the main thread; each bronze micro-batch then also applies its records to silver,
        unless ``one_hop=False`` (a silver query per table, on the trigger). ``progress`` is
        told what starts (``print`` shows it).

        Raises:
            ConfigError: a bad source or processing time, ``once=True`` with a processing time,
                or ``once=False`` without one.
            LakehouseError: a table failed, after the others did their work (its own error,
                or :class:`~core.failures.FailedTablesError` naming each failed table); a
                continuous run instead starts a failed table again with backoff.
        """
        spec = source if isinstance(source, SourceSpec) else SourceSpec.parse(source)
        if kafka_options:
            spec = replace(spec, kafka_options={**spec.kafka_options, **kafka_options})
        if once and processing_time is not None:
            raise ConfigError("Use either once=True or processing_time, not both.")
        if once is False and processing_time is None:
            raise ConfigError("once=False needs a processing_time, e.g. processing_time='10s'.")
        if not one_hop and processing_time is None:
            raise ConfigError(
                "one_hop=False is for continuous runs: add a processing_time (a run that stops "
                "when done always applies bronze to silver after it)."
            )
        trigger = Trigger.parse(processing_time)
        if trigger.once:
            return run_once(self.spark, spec, self.warehouse, self.config, progress)
        report = RunReport(summary=RunSummary())
        run_continuously(
            self.spark,
            spec,
            self.warehouse,
            self.config,
            trigger,
            progress,
            summary=report.summary,
            one_hop=one_hop,
        )
        return report

    def table(self, name: str) -> DataFrame:
        """The table named ``<layer>.<table>`` (e.g. ``"silver.orders"``) as a DataFrame.

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
        return self.spark.read.format("delta").load(path)

    def sql(self, statement: str, allow_writes: bool = False) -> DataFrame:
        """Run one SQL statement over the tables named ``<layer>.<table>``, under the rules of
        ``lakehouse sql``: read-only unless ``allow_writes``, and never a change to bronze.

        Raises:
            StatementRefusedError: the statement may not run (nothing ran).
            LakehouseError: Spark refused it (its first line).
        """
        check(statement, allow_writes=allow_writes)  # before Spark starts: a refusal is quick
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

    def replay(self, table: str | None = None, progress: Progress = lambda _: None) -> ReplayReport:
        """Rebuild silver and gold (or only silver ``table`` and the gold tables that read it)
        from bronze, then swap the rebuilt tables in (``lakehouse replay``). Stop the pipeline
        first.

        Raises:
            TableNotFoundError: no bronze tables, or ``table`` is not a silver entity.
        """
        return replay_tables(self.spark, self.warehouse, self.config, table, progress)

    def forget(
        self,
        table: str,
        key: Mapping[str, KeyValue],
        reason: str = DEFAULT_REASON,
        progress: Progress = lambda _: None,
    ) -> ForgetReport:
        """Remove every trace of one key (``{"id": 42}``) of silver ``table`` from bronze,
        silver and gold, then VACUUM and check (``lakehouse forget``). ``held`` in the report
        is False, and nothing changed, if no table held the key.

        Raises:
            TableNotFoundError: ``table`` is not a silver entity.
            ConfigError: ``key`` does not name the entity's key columns or fit their types.
        """
        return forget_key(
            self.spark, self.warehouse, self.config, table, dict(key), reason, progress
        )

    def maintain(self, progress: Progress = lambda _: None) -> MaintenanceReport:
        """OPTIMIZE and VACUUM every table, drop expired tombstones and apply bronze retention
        under the config's ``[maintenance]`` settings (``lakehouse maintain``). Bronze
        retention that had to keep records silver still needs is listed in ``refused``."""
        return run_maintenance(self.spark, self.warehouse, self.config, datetime.now(UTC), progress)

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
        failed and dropped (``quality``), and whether a pipeline runs now
        (``lakehouse status``); ``to_json()`` gives it as JSON values."""
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

    @classmethod
    def demo(
        cls,
        warehouse: str | Path,
        spark: SparkSession | None = None,
        *,
        spark_mode: SparkMode = "auto",
        master: str | None = None,
    ) -> Lakehouse:
        """A lakehouse at ``warehouse`` with the demo shop's settings, those of ``lakehouse
        demo``: its clickstream, its gold tables (``revenue_per_minute``, ``user_sessions`` and
        one of each other window kind and join), alert, patterns and the packaged suites; feed
        it :func:`generate_workload`'s files. ``spark``, ``spark_mode``, ``master``: as for
        :class:`Lakehouse`."""
        return cls(warehouse, DEMO_CONFIG, spark, spark_mode=spark_mode, master=master)


def _layer(name: str) -> Layer:
    for layer in LAYERS:
        if layer == name:
            return layer
    raise ConfigError(f"Unknown layer {name!r}: use one of {', '.join(LAYERS)}.")
