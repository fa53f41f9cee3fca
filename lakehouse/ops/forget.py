"""Privacy deletion: remove every trace of one key of one entity from the warehouse.

The tables searched are those the layout says can hold the entity's rows
(:meth:`lakehouse_core.layout.Warehouse.entity_tables`): its bronze table, silver table, tombstones,
the quarantine, its SCD type 2 history table and history log, and the rows of ``gold.late_events``
about its records. Steps, each through the pipeline's own code or the DeltaTable API:

1. find the key's records (:func:`silver.keys.records_of_key`) in bronze and among those a
   bronze expectation dropped to the quarantine and, if there are none, whether any other of
   those tables holds the key: if nothing does, stop; nothing is changed;
2. bring the entity's silver table and its gold tables up to date with bronze (so no stream
   still needs the files the deletion rewrites);
3. delete the key's bronze records: ``delta.appendOnly`` is lifted for that one commit and
   restored; every commit records the reason as ``userMetadata`` in the table history;
4. delete the key's rows from every other table of the entity (its records, in the quarantine);
5. run the gold jobs that read the entity: they retract the deleted rows from the silver change
   feed, as for any delete; then delete the rows of ``gold.late_events`` about the key's records
   (a retraction landing in a final window adds one);
6. VACUUM every touched table with retention 0, so no file of an older version holds the key
   (first, in a table with deletion vectors, rewrite the files whose rows they mark deleted:
   earlier versions of the key's row, and the row itself, are still in those files);
7. check every version still in each touched table's log: a version whose files all exist
   must not contain the key (its change feed neither, where the table has one).

What stays: the records in the source (Kafka topic, files) are outside the warehouse; rows of
other entities that refer to the key (orders of a customer) need their own ``forget``; records
nothing could read at all (``bronze.unreadable_lines``) cannot be attributed to a key; the
Delta log's JSON files keep column statistics (minimum/maximum values) of removed files until
Delta's log retention (``delta.logRetentionDuration``, 30 days by default) expires them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from expectations.enforce import DROPPED_PREFIX
from lakehouse.ops.replay import recover
from lakehouse.run.entities import chosen_entities, declared_entities, dependent_gold
from lakehouse.run.pipeline import run_from_bronze
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.delta_io import (
    change_feed_readable,
    commit_message,
    has_deletion_vectors,
    purge_deletion_vectors,
    readable_version,
    rewritable,
    table_exists,
    table_flag,
    vacuum,
    versions,
)
from lakehouse_core.errors import PipelineError
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import QUARANTINE_TABLE, KeyRows, Warehouse
from silver.keys import EntityKey, KeyValue, coordinates_condition, entity_key, records_of_key

log = logging.getLogger(__name__)

DEFAULT_REASON = "privacy request"
CHANGE_FEED = "delta.enableChangeDataFeed"


@dataclass
class ForgetReport:
    """What ``forget`` removed (rows per table), recomputed, vacuumed and checked.

    ``held`` is False when no table held the key: then nothing was changed.
    """

    table: str
    key: str
    reason: str
    held: bool = True
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
    match: KeyRows
    rows: Column  # condition on the table's rows
    columns: tuple[str, ...]  # the columns ``rows`` reads

    def of(self, frame: DataFrame) -> DataFrame:
        """The key's rows of ``frame`` (a version of the table); none if it lacks a column
        the condition reads (a history log that has seen only truncates has no key columns)."""
        return frame.where(self.rows) if set(self.columns) <= set(frame.columns) else frame.limit(0)


def forget(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    table: str,
    values: Mapping[str, KeyValue],
    reason: str = DEFAULT_REASON,
) -> ForgetReport:
    """Remove the key ``values`` of entity ``table`` from every layer, then VACUUM and check.

    If no table holds the key, nothing is changed and the report says so (``held`` False).

    Raises:
        TableNotFoundError: ``table`` is not an entity of the warehouse.
        ConfigError: a silver or gold table the warehouse holds lacks its declaration in
            ``config`` (:func:`lakehouse.run.entities.declared_entities`: the key would be
            looked for under the wrong settings, or left in a table nothing recomputes), or
            ``values`` do not name the entity's key columns or do not fit their types.
        PipelineError: a job failed, or a readable table version still holds the key.
    """
    recover(spark, warehouse.root)
    specs = declared_entities(spark, warehouse, config, "forget")
    spec = chosen_entities(specs, warehouse, table)[0]
    bronze_path = warehouse.table("bronze", table_name_for_topic(spec.topic))
    key = entity_key(spark, _load(spark, bronze_path), spec, values)
    shown = json.dumps(dict(key.values))
    report = ForgetReport(table=table, key=shown, reason=reason)
    message = f"forget key {shown} of table {table}: {reason}"

    log.info(f"forget: looking for key {shown} in the tables of {table}")
    # Only the bronze job writes bronze, so the key's records are the same after the catch-up.
    bronze_records = _coordinates(records_of_key(_load(spark, bronze_path), spec, key))
    dropped = _dropped_at_bronze(spark, warehouse, spec, bronze_path)
    coordinates = bronze_records + _coordinates(records_of_key(dropped, spec, key))
    targets = _targets(warehouse, spec, key, coordinates)
    if not coordinates and not any(_holds(spark, t) for t in targets if t.match == "key"):
        report.held = False
        return report

    log.info(f"forget: bringing silver.{table} and its gold tables up to date with bronze")
    run_from_bronze(spark, warehouse, config, [table])
    log.info(f"forget: {len(coordinates)} records hold key {shown}")
    bronze = next(target for target in targets if target.path == bronze_path)
    # Rows about the key's records go once gold is recomputed: retracting a row can add one.
    about = [target for target in targets if target.match == "record_refs"]
    others = [target for target in targets if target is not bronze and target not in about]
    if bronze_records:
        with rewritable(spark, bronze.path, message):
            DeltaTable.forPath(spark, bronze.path).delete(bronze.rows)
    report.removed.append((bronze.name, len(bronze_records)))
    _delete_all(spark, others, message, report)

    touched = [(target.name, target.path) for target in targets]
    jobs = dependent_gold(config, [table])
    if jobs:
        log.info("forget: recomputing gold from the silver change feed")
        run_from_bronze(spark, warehouse, config, [table])
        report.recomputed = [f"gold.{job.table}" for job in jobs]
        touched += [(f"gold.{job.table}", warehouse.table("gold", job.table)) for job in jobs]
    _delete_all(spark, about, message, report)
    for name, path in touched:
        if table_exists(spark, path):
            if has_deletion_vectors(spark, path):
                log.info(f"forget: purge deleted rows from the files of {name}")
                purge_deletion_vectors(spark, path)
            log.info(f"forget: vacuum {name} (retention 0)")
            vacuum(spark, path, 0)
            report.vacuumed.append(name)

    log.info("forget: checking every version still in the logs")
    found = _check(spark, targets, report)
    if found:
        raise PipelineError(f"Key {shown} is still readable in {', '.join(found)}.")
    return report


def _coordinates(records: DataFrame) -> list[tuple[int, int]]:
    return [(int(r.partition), int(r.offset)) for r in records.collect()]


def _dropped_at_bronze(
    spark: SparkSession, warehouse: Warehouse, spec: TableSpec, bronze_path: str
) -> DataFrame:
    """The entity's records that a bronze expectation sent to the quarantine instead of bronze,
    shaped as bronze rows (what the quarantine does not keep is null), so that the key's can be
    found as in bronze."""
    bronze = _load(spark, bronze_path)
    path = warehouse.table("silver", QUARANTINE_TABLE)
    if not table_exists(spark, path):
        return bronze.limit(0)
    quarantined = _load(spark, path).where(
        (F.col("topic") == spec.topic) & F.col("reason").startswith(f"{DROPPED_PREFIX}bronze.")
    )
    return quarantined.select(
        *(
            (F.col(f.name) if f.name in quarantined.columns else F.lit(None))
            .cast(f.dataType)
            .alias(f.name)
            for f in bronze.schema.fields
        )
    )


def _targets(
    warehouse: Warehouse, spec: TableSpec, key: EntityKey, coordinates: list[tuple[int, int]]
) -> list[_Target]:
    """Every table of the layout that can hold the entity's rows, with the condition on its
    rows that finds the key's (its bronze records at ``coordinates``).

    A bronze version still readable after VACUUM (retention 0) only has files of the current
    one, so its records are among those searched: matching their coordinates suffices.
    """
    conditions: dict[KeyRows, tuple[Column, tuple[str, ...]]] = {
        "key": (key.matches(), tuple(key.values)),
        "records": (
            (F.col("topic") == spec.topic) & coordinates_condition(coordinates),
            ("topic", "partition", "offset"),
        ),
        "record_refs": (
            (F.col("bronze_topic") == spec.topic)
            & coordinates_condition(coordinates, "bronze_partition", "bronze_offset"),
            ("bronze_topic", "bronze_partition", "bronze_offset"),
        ),
    }
    return [
        _Target(table.name, table.path, table.rows, *conditions[table.rows])
        for table in warehouse.entity_tables(spec.name, spec.topic)
    ]


def _holds(spark: SparkSession, target: _Target) -> bool:
    """Whether the target's table exists and has a row of the key."""
    return table_exists(spark, target.path) and not target.of(_load(spark, target.path)).isEmpty()


def _delete_all(
    spark: SparkSession, targets: list[_Target], message: str, report: ForgetReport
) -> None:
    """Delete the key's rows from each existing target table, each commit saying why."""
    with commit_message(spark, message):
        for target in targets:
            if table_exists(spark, target.path):
                report.removed.append((target.name, _delete(spark, target)))


def _delete(spark: SparkSession, target: _Target) -> int:
    """Delete the key's rows from the target's table; return how many there were."""
    count = target.of(_load(spark, target.path)).count()
    if count:
        DeltaTable.forPath(spark, target.path).delete(target.rows)
    return count


def _check(spark: SparkSession, targets: list[_Target], report: ForgetReport) -> list[str]:
    """``table@vN`` for every readable version (or change feed) that still holds the key."""
    found = []
    for target in targets:
        if not table_exists(spark, target.path):
            continue
        change_feed = _has_change_feed(spark, target.path)
        for version in versions(spark, target.path):
            report.versions_checked += 1
            frame = readable_version(spark, target.path, version)
            if frame is not None:
                report.versions_readable += 1
                if not target.of(frame).isEmpty():
                    found.append(f"{target.name}@v{version}")
            if change_feed and _change_feed_holds_key(spark, target, version):
                found.append(f"{target.name}@v{version} (change feed)")
    return found


def _has_change_feed(spark: SparkSession, path: str) -> bool:
    return table_flag(spark, path, CHANGE_FEED)


def _change_feed_holds_key(spark: SparkSession, target: _Target, version: int) -> bool:
    """Whether the change feed of ``version`` can be read and has a row of the key."""
    if not change_feed_readable(spark, target.path, version):
        return False  # VACUUM removed its files: that version's changes are unreadable
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", version)
        .option("endingVersion", version)
        .load(target.path)
    )
    return not target.of(changes).isEmpty()


def _load(spark: SparkSession, path: str) -> DataFrame:
    return spark.read.format("delta").load(path)
