"""The SCD type 2 step of the silver job: a micro-batch's events into the history table."""

from __future__ import annotations

import logging
from functools import partial, reduce

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from lakehouse_core.columns import OP
from lakehouse_core.config import TableSpec
from lakehouse_core.delta_io import (
    append,
    dml_once,
    ensure_table,
    merge_materialized,
    quoted_path,
    table_exists,
    table_flag,
)
from lakehouse_core.layout import Warehouse
from silver.evolution import default_fills
from silver.history import (
    ACTION,
    LOG_METADATA,
    START_AT,
    VALID_FROM,
    VALID_TO,
    history_changes,
    history_versions,
    key_columns,
    log_events,
    snapshot_end_truncates,
    touched_keys,
    tracked_columns,
)
from silver.parse import TRUNCATE_OP, RowLayout, order_of
from silver.tables import Assignments, HistoryTables, key_match

logger = logging.getLogger(__name__)


def history_tables(warehouse: Warehouse, spec: TableSpec) -> HistoryTables | None:
    """Where an entity's history lives: ``silver/<name>_history`` and its log; None for type 1."""
    if spec.history_name is None:
        return None
    return HistoryTables(
        history=warehouse.table("silver", spec.history_name), log=warehouse.history_log(spec.name)
    )


def apply_history(
    valid: DataFrame,
    layout: RowLayout,
    spec: TableSpec,
    tables: HistoryTables,
    app_id: str,
    batch_id: int,
) -> None:
    """Bring the history table up to date with a micro-batch; safe to run again for a batch id.

    ``valid``: the batch's parsed events that are neither quarantined nor Kafka tombstones
    (changes and truncates, including those older than a truncate). They are added to the log;
    then the history of every key they can change is rebuilt from the log and only the rows
    that differ are written (one MERGE, none if nothing differs). A history table written
    before the validity columns (``__valid_from``, ``__valid_to``) existed gets them with the
    first batch that has events: that batch rebuilds every key's history from the log, once,
    so every version has them.

    Raises:
        ConfigError: a ``track_history_*`` setting names a column the table does not have
            (before the history log or table is written).
    """
    spark = valid.sparkSession
    logged = _read(spark, tables.log)
    # A batch with only truncates has no key columns (it may see them as row columns); with no
    # key known yet it can only hold truncates, which need no row columns.
    keys = (key_columns(logged.schema) if logged is not None else []) or list(layout.key_names)
    row_columns = [c.name for c in layout.value_columns if c.name not in keys] if keys else []
    present = [k for k in keys if k in valid.columns]
    events = log_events(valid, present, row_columns)
    ends = snapshot_end_truncates(valid, present, row_columns)  # resnapshot = "full"
    if ends is not None:
        events = events.unionByName(ends)
    totals = events.select(
        F.count(F.lit(1)).alias("events"),
        F.count_if(F.col(OP) == TRUNCATE_OP).alias("truncates"),
    ).first()
    assert totals is not None
    if not totals.events:
        return
    batch_schema = _nullable(events.schema)
    known = logged.schema.fieldNames() if logged is not None else []
    columns = [*known, *[c for c in batch_schema.fieldNames() if c not in known]]
    tracked = tracked_columns(spec, [c for c in columns if c not in LOG_METADATA])

    # A column added with a Connect default: the events the log holds get it, as silver's
    # rows do (docs/silver-semantics.md, "Schema changes"), so the history rebuilt has it.
    fills = default_fills(batch_schema, layout.defaults)
    ensure_table(spark, tables.log, batch_schema, False, spec.type_widening, defaults=fills)
    _append_new(events, keys, tables.log, f"{app_id}:history-log", batch_id)
    has_changes = totals.events > totals.truncates
    if not keys or not (has_changes or table_exists(spark, tables.history)):
        return  # only truncates so far, or truncates with no history to close
    history = _read(spark, tables.history)
    log = spark.read.format("delta").load(tables.log)
    filling = history is not None and _fills_validity(spark, tables.history, history)
    if filling:
        logger.info(
            f"silver.{spec.history_name}: adding {VALID_FROM} and {VALID_TO} to every version "
            "(once: the table is from before them)"
        )
        touched = log.where(F.col(OP) != TRUNCATE_OP).select(*keys).distinct()
    else:
        touched = touched_keys(events, keys, history if totals.truncates else None)
    relevant = log.join(touched, keys, "left_semi").unionByName(log.where(F.col(OP) == TRUNCATE_OP))
    desired = history_versions(relevant, keys, tracked, spec.order_columns)
    history_schema = _nullable(desired.schema)
    ensure_table(
        spark,
        tables.history,
        history_schema,
        True,
        spec.type_widening,
        defaults=default_fills(history_schema, layout.defaults),
    )
    existing = spark.read.format("delta").load(tables.history).join(touched, keys, "left_semi")
    writes = history_changes(desired, existing, keys).localCheckpoint()
    if not writes.isEmpty():
        merge = partial(_merge, writes, tables.history, keys, desired.columns)
        dml_once(spark, tables.history, f"{app_id}:history", batch_id, merge)
    if filling:
        _set_filling(spark, tables.history, False)


#: Property of a history table whose validity columns are being filled in: set before the
#: columns are added and unset once every version has them, so a run stopped in between
#: fills them again.
FILLING_VALIDITY = "lakehouse.fillingValidity"


def _fills_validity(spark: SparkSession, path: str, history: DataFrame) -> bool:
    """Whether the history table at ``path`` (its rows: ``history``) still needs its validity
    columns filled in for every version; marks it so if it has none yet."""
    if VALID_FROM not in history.columns:
        _set_filling(spark, path, True)
        return True
    return table_flag(spark, path, FILLING_VALIDITY)


def _set_filling(spark: SparkSession, path: str, on: bool) -> None:
    if on:
        change = f"SET TBLPROPERTIES ('{FILLING_VALIDITY}' = 'true')"
    else:
        change = f"UNSET TBLPROPERTIES IF EXISTS ('{FILLING_VALIDITY}')"
    spark.sql(f"ALTER TABLE {quoted_path(path)} {change}")


def _append_new(events: DataFrame, keys: list[str], path: str, app_id: str, batch_id: int) -> None:
    """Append the events the log does not hold yet (same keys, null-safe, and same order).

    ``events`` lacks the key columns when its batch had only truncates."""
    log = events.sparkSession.read.format("delta").load(path)
    same = reduce(
        Column.__and__,
        [
            F.col(f"e.{key}").eqNullSafe(F.col(f"l.{key}"))
            if key in events.columns
            else F.col(f"l.{key}").isNull()
            for key in keys
        ],
        order_of("e.") == order_of("l."),
    )
    new = events.alias("e").join(log.alias("l"), same, "left_anti").localCheckpoint()
    if not new.isEmpty():
        append(new, path, app_id, batch_id)


def _merge(writes: DataFrame, path: str, keys: list[str], columns: list[str]) -> None:
    same_row = key_match(keys) & (F.col(f"t.{START_AT}") == F.col(f"s.{START_AT}"))
    action = F.col(f"s.{ACTION}")
    values: Assignments = {name: F.col(f"s.{name}") for name in columns}
    merge = (
        DeltaTable.forPath(writes.sparkSession, path)
        .alias("t")
        .merge(writes.alias("s"), same_row)
        .whenMatchedDelete(condition=action == "delete")
        .whenMatchedUpdate(condition=action == "update", set=values)
        .whenNotMatchedInsert(condition=action == "insert", values=values)
    )
    merge_materialized(merge, writes)  # a local checkpoint


def _read(spark: SparkSession, path: str) -> DataFrame | None:
    return spark.read.format("delta").load(path) if table_exists(spark, path) else None


def _nullable(schema: StructType) -> StructType:
    return StructType([StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])
