"""The Delta tables of one silver entity and the writes to them (I/O only)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import reduce
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from lakehouse.identifiers import quote_identifier
from silver.changes import LAST_DELETE, fill_order, fill_value, first_value
from silver.parse import METADATA_COLUMNS, order_of
from silver.widening import table_changes

Assignments = dict[str, str | Column]

TOMBSTONE_METADATA = ("_sequence", "_bronze_partition", "_bronze_offset", "_source_ts")
QUARANTINE_COLUMNS = (
    "entity",
    "reason",
    "topic",
    "partition",
    "offset",
    "key",
    "value",
    "_quarantined_at",
    "_batch_id",
)


@dataclass(frozen=True)
class HistoryTables:
    """Paths of an SCD type 2 entity's history table and of the log it is rebuilt from."""

    history: str
    log: str


@dataclass(frozen=True)
class EntityTables:
    """Paths of the tables one silver job writes (``history`` only for SCD type 2)."""

    silver: str
    tombstones: str
    truncations: str
    quarantine: str
    history: HistoryTables | None = None


def table_exists(spark: SparkSession, path: str) -> bool:
    return DeltaTable.isDeltaTable(spark, path)


@contextmanager
def idempotent_dml(spark: SparkSession, app_id: str, batch_id: int) -> Iterator[None]:
    """Make the Delta DML inside the block a no-op when this (app, batch) already committed."""
    spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
    try:
        yield
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")


def append(frame: DataFrame, path: str, app_id: str, batch_id: int) -> None:
    """Idempotent append (schema may gain columns)."""
    (
        frame.write.format("delta")
        .mode("append")
        .option("mergeSchema", "true")
        .option("txnAppId", app_id)
        .option("txnVersion", batch_id)
        .save(path)
    )


#: Table property that lets Delta widen column types (see :mod:`silver.widening`).
TYPE_WIDENING_PROPERTY = "delta.enableTypeWidening"


def ensure_table(spark: SparkSession, path: str, schema: StructType, change_feed: bool) -> None:
    """Make the table at ``path`` able to take rows of ``schema``: create it (with type
    widening enabled) if missing; add the columns it lacks; widen the columns whose type in
    ``schema`` is a Delta type widening of the table's (enabling type widening on a table
    created without it). Narrower or incompatible types are left as they are.
    """
    if not table_exists(spark, path):
        builder = (
            DeltaTable.createIfNotExists(spark)
            .location(path)
            .addColumns(schema)
            .property(TYPE_WIDENING_PROPERTY, "true")
        )
        if change_feed:
            builder = builder.property("delta.enableChangeDataFeed", "true")
        builder.execute()
        return
    changes = table_changes(spark.read.format("delta").load(path).schema, schema)
    if changes.widened or changes.altered:
        _enable_type_widening(spark, path)
    if changes.added or changes.widened:
        # One commit adds the columns and applies the widenings Delta's schema evolution takes.
        empty = spark.createDataFrame([], StructType([*changes.added, *changes.widened]))
        empty.write.format("delta").mode("append").option("mergeSchema", "true").save(path)
    for field in changes.altered:
        spark.sql(
            f"ALTER TABLE {_delta_path(path)} ALTER COLUMN "
            f"{quote_identifier(field.name, 'column name')} TYPE {field.dataType.simpleString()}"
        )


def data_columns(spark: SparkSession, path: str) -> StructType | None:
    """The key and row columns of a silver table (not the metadata columns); None if there is
    no table."""
    if not table_exists(spark, path):
        return None
    schema = spark.read.format("delta").load(path).schema
    return StructType([f for f in schema.fields if f.name not in METADATA_COLUMNS])


def _enable_type_widening(spark: SparkSession, path: str) -> None:
    detail = DeltaTable.forPath(spark, path).detail().select("properties").first()
    properties = detail.properties if detail is not None else {}
    if str(properties.get(TYPE_WIDENING_PROPERTY, "")).lower() != "true":
        spark.sql(
            f"ALTER TABLE {_delta_path(path)} "
            f"SET TBLPROPERTIES ('{TYPE_WIDENING_PROPERTY}' = 'true')"
        )


def _delta_path(path: str) -> str:
    """A path-based table reference for SQL (the path quoted, backquotes doubled)."""
    return "delta.`" + path.replace("`", "``") + "`"


def current_orders(
    spark: SparkSession, tables: EntityTables, keys: Sequence[str]
) -> DataFrame | None:
    """Key and order of every live row and tombstone (only those columns are read)."""
    parts = [
        spark.read.format("delta").load(path).select(*keys, order_of().alias("_current"))
        for path in (tables.silver, tables.tombstones)
        if table_exists(spark, path)
    ]
    return reduce(DataFrame.unionByName, parts) if parts else None


def latest_truncation(spark: SparkSession, path: str) -> Row | None:
    if not table_exists(spark, path):
        return None
    rows = spark.read.format("delta").load(path).select(F.max(order_of()).alias("o")).collect()
    value: Row | None = rows[0].o
    return value


def order_literal(order: Row, order_type: DataType) -> Column:
    """An order struct value as a typed literal column."""
    return _literal(order, order_type)


def _literal(value: Any, data_type: DataType) -> Column:
    if isinstance(data_type, StructType):
        fields = [
            _literal(value[i] if value is not None else None, f.dataType).alias(f.name)
            for i, f in enumerate(data_type.fields)
        ]
        return F.struct(*fields)
    return F.lit(value).cast(data_type)


def key_match(keys: Sequence[str]) -> Column:
    return reduce(lambda a, b: a & b, [F.col(f"t.{k}") == F.col(f"s.{k}") for k in keys])


def merge_silver(
    effective: DataFrame,
    path: str,
    keys: Sequence[str],
    columns: Sequence[str],
    toast_columns: Sequence[str] = (),
) -> None:
    """Apply the newest events: deletes remove, upserts replace.

    A partial column (listed in ``s._unavailable``: a TOAST placeholder, or a null under
    ``ignore_null_updates``) takes its previous version's value, from the batch's latest real
    value after the key's last delete (``_fill_*``, see ``latest_per_key``), else from the
    table's row if the batch has no delete of the key, else (no previous version) the value the
    key's first event after the delete received (``_first_*``). ``effective`` holds only events
    newer than the table's row of their key.
    """
    newer = order_of("s.") > order_of("t.")
    is_delete = F.col("s._op") == "d"
    updates: Assignments = _copy_from_source((*keys, *columns, *METADATA_COLUMNS))
    inserts: Assignments = dict(updates)
    for column in toast_columns:
        partial = F.array_contains("s._unavailable", column)
        filled = partial & F.col(f"s.{fill_order(column)}").isNotNull()
        fill = F.col(f"s.{fill_value(column)}")
        first = F.col(f"s.{first_value(column)}")
        table_row = partial & F.col(f"s.{LAST_DELETE}").isNull()
        updates[column] = (
            F.when(filled, fill)
            .when(table_row, F.col(f"t.{column}"))
            .when(partial, first)
            .otherwise(F.col(f"s.{column}"))
        )
        inserts[column] = F.when(filled, fill).when(partial, first).otherwise(F.col(f"s.{column}"))
    (
        DeltaTable.forPath(effective.sparkSession, path)
        .alias("t")
        .merge(effective.alias("s"), key_match(keys))
        .whenMatchedDelete(condition=newer & is_delete)
        .whenMatchedUpdate(condition=newer & ~is_delete, set=updates)
        .whenNotMatchedInsert(condition=~is_delete, values=inserts)
        .execute()
    )


def merge_tombstones(effective: DataFrame, path: str, keys: Sequence[str]) -> None:
    """Remember the newest delete per key (a newer upsert of the same batch drops it)."""
    is_delete = F.col("s._op") == "d"
    columns = _copy_from_source((*keys, *TOMBSTONE_METADATA))
    (
        DeltaTable.forPath(effective.sparkSession, path)
        .alias("t")
        .merge(effective.alias("s"), key_match(keys))
        .whenMatchedUpdate(condition=is_delete & (order_of("s.") > order_of("t.")), set=columns)
        .whenMatchedDelete(condition=~is_delete & (order_of("s.") > order_of("t.")))
        .whenNotMatchedInsert(condition=is_delete, values=columns)
        .execute()
    )


def delete_older_than(spark: SparkSession, path: str, floor: Column) -> None:
    if table_exists(spark, path):
        DeltaTable.forPath(spark, path).delete(order_of() < floor)


def _copy_from_source(names: Sequence[str]) -> Assignments:
    return {name: F.col(f"s.{name}") for name in names}
