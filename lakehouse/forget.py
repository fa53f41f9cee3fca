"""Privacy deletion: remove every trace of one key of one entity from the warehouse.

Steps, each through the pipeline's own code or the DeltaTable API:

1. bring the entity's silver table and its gold tables up to date with bronze (so no stream
   still needs the files the deletion rewrites);
2. delete the key's bronze records (:func:`silver.keys.records_of_key`): ``delta.appendOnly``
   is lifted for that one commit and restored; every commit records the reason as
   ``userMetadata`` in the table history;
3. delete the key from silver, its history table (if any), its tombstones, and the key's
   records from the quarantine;
4. run the gold jobs that read the entity: they retract the deleted rows from the silver change
   feed, as for any delete;
5. VACUUM every touched table with retention 0, so no file of an older version holds the key;
6. check every version still in each touched table's log: a version whose files all exist
   must not contain the key (its change feed neither).

What stays: the records in the source (Kafka topic, files) are outside the warehouse; rows of
other entities that refer to the key (orders of a customer) need their own ``forget``; records
nothing could read at all (bronze ``_unreadable_lines``) cannot be attributed to a key; the
Delta log's JSON files keep column statistics (minimum/maximum values) of removed files until
Delta's log retention (``delta.logRetentionDuration``, 30 days by default) expires them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from core.config import PipelineConfig, TableSpec
from core.delta_io import (
    change_feed_readable,
    commit_message,
    readable_version,
    rewritable,
    table_exists,
    vacuum,
    versions,
)
from core.errors import PipelineError
from core.identifiers import table_name_for_topic
from core.layout import QUARANTINE_TABLE, Warehouse
from lakehouse import swap
from lakehouse.entities import dependent_gold, history_table, resolve_entities
from lakehouse.pipeline import Progress, run_from_bronze
from silver.keys import EntityKey, KeyValue, coordinates_condition, entity_key, records_of_key

DEFAULT_REASON = "privacy request"


@dataclass
class ForgetReport:
    """What ``forget`` removed (rows per table), recomputed, vacuumed and checked."""

    table: str
    key: str
    reason: str
    removed: list[tuple[str, int]] = field(default_factory=list)
    recomputed: list[str] = field(default_factory=list)
    vacuumed: list[str] = field(default_factory=list)
    versions_checked: int = 0
    versions_readable: int = 0


@dataclass(frozen=True)
class _Target:
    """A table that may hold the key, and how to find the key's rows in it."""

    name: str
    path: str
    rows: Column  # condition on the table's rows
    change_feed: bool = False


def forget(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    table: str,
    values: Mapping[str, KeyValue],
    reason: str = DEFAULT_REASON,
    progress: Progress = lambda _: None,
) -> ForgetReport:
    """Remove the key ``values`` of entity ``table`` from every layer, then VACUUM and check.

    Raises:
        TableNotFoundError: ``table`` is not an entity of the warehouse.
        ConfigError: ``values`` do not name the entity's key columns or do not fit their types.
        PipelineError: a job failed, or a readable table version still holds the key.
    """
    swap.recover(warehouse.root)
    spec = resolve_entities(spark, warehouse, config, table)[0]
    bronze_path = warehouse.table("bronze", table_name_for_topic(spec.topic))
    key = entity_key(spark, _load(spark, bronze_path), spec, values)
    shown = json.dumps(dict(key.values))
    report = ForgetReport(table=table, key=shown, reason=reason)
    message = f"forget key {shown} of table {table}: {reason}"

    progress(f"forget: bringing silver.{table} and its gold tables up to date with bronze")
    run_from_bronze(spark, warehouse, config, progress, [table])
    records = records_of_key(_load(spark, bronze_path), spec, key).collect()
    coordinates = [(int(r.partition), int(r.offset)) for r in records]
    at_records = coordinates_condition(coordinates)
    progress(f"forget: {len(coordinates)} bronze records hold key {shown}")
    targets = _targets(warehouse, spec, key, at_records)
    if coordinates:
        with rewritable(spark, bronze_path, message):
            DeltaTable.forPath(spark, bronze_path).delete(at_records)
    report.removed.append((f"bronze.{table_name_for_topic(spec.topic)}", len(coordinates)))
    with commit_message(spark, message):
        for target in targets[1:]:
            if table_exists(spark, target.path):
                report.removed.append((target.name, _delete(spark, target.path, target.rows)))

    touched = [(target.name, target.path) for target in targets]
    jobs = dependent_gold(config, [table])
    if jobs:
        progress("forget: recomputing gold from the silver change feed")
        run_from_bronze(spark, warehouse, config, progress, [table])
        report.recomputed = [f"gold.{job.table}" for job in jobs]
        touched += [(f"gold.{job.table}", warehouse.table("gold", job.table)) for job in jobs]
    for name, path in touched:
        if table_exists(spark, path):
            progress(f"forget: vacuum {name} (retention 0)")
            vacuum(spark, path, 0)
            report.vacuumed.append(name)

    progress("forget: checking every version still in the logs")
    found = _check(spark, targets, report)
    if found:
        raise PipelineError(f"Key {shown} is still readable in {', '.join(found)}.")
    return report


def _targets(
    warehouse: Warehouse, spec: TableSpec, key: EntityKey, at_records: Column
) -> list[_Target]:
    """Bronze first, then the silver-side tables that can hold the key."""
    bronze_name = table_name_for_topic(spec.topic)
    targets = [
        # A version still readable after VACUUM (retention 0) only has files of the current
        # one, so its records are among those searched: matching their coordinates suffices.
        _Target(f"bronze.{bronze_name}", warehouse.table("bronze", bronze_name), at_records),
        _Target(
            f"silver.{spec.name}",
            warehouse.table("silver", spec.name),
            key.matches(),
            change_feed=True,
        ),
        _Target(f"_system.tombstones.{spec.name}", warehouse.tombstones(spec.name), key.matches()),
        _Target(
            f"silver.{QUARANTINE_TABLE}",
            warehouse.table("silver", QUARANTINE_TABLE),
            (F.col("topic") == spec.topic) & at_records,
        ),
    ]
    history = history_table(warehouse, spec.name)
    if history is not None:
        targets.append(_Target(f"silver.{spec.name}_history", history, key.matches()))
    return targets


def _delete(spark: SparkSession, path: str, rows: Column) -> int:
    """Delete ``rows`` from the table at ``path``; return how many there were."""
    count = _load(spark, path).where(rows).count()
    if count:
        DeltaTable.forPath(spark, path).delete(rows)
    return count


def _check(spark: SparkSession, targets: list[_Target], report: ForgetReport) -> list[str]:
    """``table@vN`` for every readable version (or change feed) that still holds the key."""
    found = []
    for target in targets:
        if not table_exists(spark, target.path):
            continue
        for version in versions(spark, target.path):
            report.versions_checked += 1
            frame = readable_version(spark, target.path, version)
            if frame is not None:
                report.versions_readable += 1
                if not frame.where(target.rows).isEmpty():
                    found.append(f"{target.name}@v{version}")
            if target.change_feed and _change_feed_holds_key(spark, target, version):
                found.append(f"{target.name}@v{version} (change feed)")
    return found


def _change_feed_holds_key(spark: SparkSession, target: _Target, version: int) -> bool:
    """Whether the change feed of ``version`` can be read and has a row of the key."""
    if not change_feed_readable(target.path, version):
        return False  # VACUUM removed its files: that version's changes are unreadable
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", version)
        .option("endingVersion", version)
        .load(target.path)
    )
    return not changes.where(target.rows).isEmpty()


def _load(spark: SparkSession, path: str) -> DataFrame:
    return spark.read.format("delta").load(path)
