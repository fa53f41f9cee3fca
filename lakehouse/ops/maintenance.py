"""``lakehouse maintain``: bronze retention, tombstone garbage collection, OPTIMIZE, VACUUM.

* Bronze retention (``[maintenance] bronze_retention_days``): the records of an entity's bronze
  table ingested (``_ingested_at``) before ``now - days`` are dropped only if a rebuild of
  silver from the remaining records gives the same silver table
  (:func:`silver.retention.retention_conflicts`); otherwise that table keeps all its records
  and the report says why. Records silver quarantined are always kept, and so are bronze tables
  no entity reads (unreadable input). The entity's silver and gold jobs first catch up with
  bronze, so no stream still needs the dropped records.
* Tombstone GC: a delete tombstone is dropped when its delete event was ingested into bronze
  (``_ingested_at``; if bronze no longer has it, its source time ``_source_ts``) more than the
  table's ``tombstone_retention_days`` before ``now``. Arrival time, not source time, because
  lateness is about arrival: a backfill of old deletes keeps its tombstones for the full
  retention. Risk: an event older than the delete that arrives after its tombstone is gone
  brings the deleted row back (a replay from bronze would not).
* OPTIMIZE compacts the small files streaming MERGEs leave, in every table of every layer and in
  the tombstone and truncation tables; then VACUUM removes the files no version of the last
  ``vacuum_retention_hours`` needs. Streams that lag further behind than that, and time travel
  further back, fail afterwards.

Run it between pipeline runs, not while a pipeline writes to the warehouse.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import reduce

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.ops.replay import recover
from lakehouse.run.entities import (
    entity_specs,
    held_event_topics,
    missing_declarations,
    refusal,
)
from lakehouse.run.pipeline import run_from_bronze
from lakehouse_core import storage
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.delta_io import (
    DELTA_SAFE_RETENTION_HOURS,
    FileStats,
    commit_message,
    file_stats,
    optimize,
    rewritable,
    table_exists,
    vacuum,
)
from lakehouse_core.errors import ConfigError
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import LAYERS, Warehouse
from silver.retention import REASONS, marked_events, retention_conflicts

log = logging.getLogger(__name__)

#: ``_system`` tables that streaming MERGEs write and maintenance compacts.
SYSTEM_TABLES = ("tombstones", "truncations")


@dataclass
class TableMaintenance:
    """One table: its files before and after maintenance, and the rows it dropped."""

    table: str
    path: str
    before: FileStats
    after: FileStats | None = None
    rows_removed: int = 0


@dataclass
class MaintenanceReport:
    tables: list[TableMaintenance] = field(default_factory=list)
    #: Bronze tables whose old records were kept, with the reason.
    refused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def maintain(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    now: datetime,
) -> MaintenanceReport:
    """Run every maintenance step on every table of ``warehouse``; ``now`` is the reference
    time for the retention settings (timezone-aware).

    Raises:
        ConfigError: an entity whose rows a step deletes by its settings (bronze retention,
            tombstone GC) is held as an ``events`` table that ``config`` does not declare
            (:func:`check_trimmed_declared`); nothing is changed.
    """
    recover(spark, warehouse.root)
    settings = config.maintenance
    specs = entity_specs(spark, warehouse, config)
    check_trimmed_declared(spark, warehouse, config, specs)
    report = MaintenanceReport()
    report.tables = [
        TableMaintenance(name, path, file_stats(spark, path))
        for name, path in maintained_tables(spark, warehouse)
    ]
    by_name = {t.table: t for t in report.tables}
    if settings.bronze_retention_days is not None:
        cutoff = now - timedelta(days=settings.bronze_retention_days)
        for spec in specs:
            trimmed = trim_bronze(spark, warehouse, config, spec, cutoff)
            by_name[trimmed.table].rows_removed += trimmed.dropped
            report.refused += [trimmed.refusal] if trimmed.refusal else []
            report.notes += [trimmed.note] if trimmed.note else []
    for spec in specs:
        path = warehouse.tombstones(spec.name)
        if table_exists(spark, path):
            bronze = warehouse.table("bronze", table_name_for_topic(spec.topic))
            removed = collect_tombstones(spark, path, bronze, spec.tombstone_retention_days, now)
            by_name[f"_system.tombstones.{spec.name}"].rows_removed += removed
    hours = settings.vacuum_retention_hours
    if hours < DELTA_SAFE_RETENTION_HOURS:
        report.notes.append(
            f"VACUUM retention {hours} h is below Delta's {DELTA_SAFE_RETENTION_HOURS} h: "
            "streams and time travel further back than that cannot read their files any more."
        )
    for table in report.tables:
        log.info(f"maintain: OPTIMIZE and VACUUM ({hours} h) {table.table}")
        optimize(spark, table.path)
        vacuum(spark, table.path, hours)
        table.after = file_stats(spark, table.path)
    return report


def check_trimmed_declared(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig, specs: list[TableSpec]
) -> None:
    """Refuse to delete an entity's rows by settings it is not held under: of ``specs``, those
    whose bronze retention applies or whose tombstones exist must not be held as ``events``
    tables that ``config`` does not declare (their Debezium defaults are not what made them).

    Raises:
        ConfigError: naming each such table and the declaration it lacks.
    """
    trims = config.maintenance.bronze_retention_days is not None
    touched = [s for s in specs if trims or table_exists(spark, warehouse.tombstones(s.name))]
    events = held_event_topics(spark, warehouse, config, touched)
    if events:
        held = [f"silver.{spec.name}" for spec in touched]
        raise ConfigError(refusal("maintain", missing_declarations(config, touched, held, events)))


def maintained_tables(spark: SparkSession, warehouse: Warehouse) -> Iterator[tuple[str, str]]:
    """``(name, path)`` of every Delta table of the warehouse, including ``_system`` tables
    (listed through Hadoop's FileSystem, so at any URI)."""
    for layer in LAYERS:
        for name in warehouse.table_names(layer, spark):
            yield f"{layer}.{name}", warehouse.table(layer, name)
    for kind in SYSTEM_TABLES:
        directory = f"{warehouse.root}/_system/{kind}"
        for child in storage.subdirectories(spark, directory):
            if storage.is_dir(spark, f"{directory}/{child}/_delta_log"):
                yield f"_system.{kind}.{child}", f"{directory}/{child}"
    if storage.is_dir(spark, f"{warehouse.event_log}/_delta_log"):
        yield "system.event_log", warehouse.event_log  # many small appends: compacted here


def collect_tombstones(
    spark: SparkSession, path: str, bronze_path: str, retention_days: int, now: datetime
) -> int:
    """Delete the tombstones (table at ``path``) whose delete event was ingested into the bronze
    table at ``bronze_path`` (else happened at the source) more than ``retention_days`` before
    ``now``; return how many. Tombstones with neither time are kept."""
    cutoff = now - timedelta(days=retention_days)
    coordinates = ["_bronze_partition", "_bronze_offset"]
    ingested = (
        spark.read.format("delta")
        .load(bronze_path)
        .select(
            F.col("partition").alias("_bronze_partition"),
            F.col("offset").alias("_bronze_offset"),
            "_ingested_at",
        )
    )
    expired = (
        spark.read.format("delta")
        .load(path)
        .join(ingested, coordinates, "left")
        .where(F.coalesce("_ingested_at", "_source_ts") < F.lit(cutoff))
        .select(*coordinates)
        .distinct()
        .localCheckpoint()
    )
    count = expired.count()
    if count:
        message = f"tombstone GC: deletes ingested before {cutoff.isoformat()}"
        with commit_message(spark, message):
            (
                DeltaTable.forPath(spark, path)
                .alias("t")
                .merge(
                    expired.alias("s"),
                    reduce(
                        lambda a, b: a & b,
                        [F.col(f"t.{c}") == F.col(f"s.{c}") for c in coordinates],
                    ),
                )
                .whenMatchedDelete()
                .execute()
            )
    return count


@dataclass(frozen=True)
class Trimmed:
    """Outcome of bronze retention for one bronze table."""

    table: str
    dropped: int = 0
    refusal: str | None = None
    note: str | None = None


def trim_bronze(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    spec: TableSpec,
    cutoff: datetime,
) -> Trimmed:
    """Drop the entity's bronze records ingested before ``cutoff`` if silver does not need
    them to be rebuilt; otherwise drop nothing and say why (``refusal``)."""
    path = warehouse.table("bronze", table_name_for_topic(spec.topic))
    name = f"bronze.{table_name_for_topic(spec.topic)}"
    old = F.col("_ingested_at") < F.lit(cutoff)
    if spark.read.format("delta").load(path).where(old).isEmpty():
        return Trimmed(name)
    log.info(f"maintain: bringing silver.{spec.name} up to date before trimming {name}")
    run_from_bronze(spark, warehouse, config, [spec.name])
    events, keys = marked_events(spark.read.format("delta").load(path), spec, old)
    events = events.localCheckpoint()
    counts = events.agg(
        F.count_if("_dropped").alias("dropped"),
        F.count_if(F.col("_old") & ~F.col("_dropped")).alias("kept"),
    ).first()
    assert counts is not None
    conflicts = (
        retention_conflicts(events, keys)
        .agg(
            F.count(F.lit(1)).alias("keys"),
            *[F.count_if(reason).alias(reason) for reason in REASONS],
        )
        .first()
    )
    assert conflicts is not None
    if conflicts["keys"]:
        why = "; ".join(
            f"{conflicts[reason]} {text}" for reason, text in REASONS.items() if conflicts[reason]
        )
        return Trimmed(
            name,
            refusal=(
                f"{name} keeps its {counts.dropped} readable records ingested before "
                f"{cutoff.isoformat()}: without them a rebuild would change "
                f"{conflicts['keys']} key(s) of silver.{spec.name} ({why}). Keep bronze longer "
                "(raise bronze_retention_days) or remove the setting."
            ),
        )
    dropped = events.where("_dropped").select(
        F.col("_bronze_partition").alias("partition"), F.col("_bronze_offset").alias("offset")
    )
    reason = f"bronze retention: drop records ingested before {cutoff.isoformat()}"
    log.info(f"maintain: dropping {counts.dropped} records from {name}")
    with rewritable(spark, path, reason):
        (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(
                dropped.alias("s"),
                (F.col("t.partition") == F.col("s.partition"))
                & (F.col("t.offset") == F.col("s.offset")),
            )
            .whenMatchedDelete()
            .execute()
        )
    note = (
        f"{name}: kept {counts.kept} old records that silver quarantined." if counts.kept else None
    )
    return Trimmed(name, dropped=int(counts.dropped), note=note)
