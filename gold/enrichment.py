"""Pure transforms of the enrichment join (a declaration's :class:`~core.gold_tables.Join`):
source rows with the joined entity's columns, and the rows whose scope an entity change moves.

A gold table with a join is its declaration evaluated over the source's rows left-joined with
the entity's current rows. So when an entity row changes, every gold row that a source row
with that key counts in can change: the scope of the change is the scope of those source
rows, taken with every value the entity row had before or after the micro-batch
(:func:`scope_rows`), so that both the group they leave and the group they join are
recomputed.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, NumericType, StructType

from core.errors import ConfigError
from core.gold_tables import GoldTable, Join
from gold.aggregates import ROW_IMAGES

#: Column of the gold job's stream telling a source change row from an entity change row.
SIDE = "_side"
#: Column of an entity change row in the gold job's stream: :func:`entity_columns` as a struct.
ENTITY = "_entity"
#: Entity change kinds after which the key may have had no row, before or after the batch.
_ARRIVALS_AND_REMOVALS = ("insert", "delete")


def key_alias(source_column: str) -> str:
    """The name the entity's key column matched with ``source_column`` takes in the join."""
    return f"_join_{source_column}"


def entity_columns(join: Join) -> list[Column]:
    """The entity's columns as the join reads them: the ``on`` key columns under
    :func:`key_alias` of their source column, then the joined columns under their output
    names."""
    return [
        *(F.col(e).alias(key_alias(s)) for s, e in join.on),
        *(F.col(c).alias(o) for c, o in join.renamed),
    ]


def entity_rows(entity: DataFrame, join: Join) -> DataFrame:
    """The entity table's rows in :func:`entity_columns` form."""
    return entity.select(*entity_columns(join))


def enrich(rows: DataFrame, entity: DataFrame, join: Join) -> DataFrame:
    """``rows`` (source rows or change rows) with the joined columns of the ``entity`` row
    (:func:`entity_rows` form) their ``on`` columns equal; nulls where none does (left outer
    join; a null key matches nothing)."""
    keys = [key_alias(s) for s, _ in join.on]
    same = reduce(Column.__and__, [F.col(s) == F.col(key_alias(s)) for s, _ in join.on])
    return rows.join(entity, same, "left").drop(*keys)


def scope_rows(
    images: DataFrame, source: DataFrame, changes: DataFrame, entity: DataFrame, join: Join
) -> DataFrame:
    """The enriched row images whose scope (:func:`gold.aggregates.affected`) a micro-batch
    changes.

    ``images``: the batch's source change-feed rows; ``source``: the current source rows;
    ``changes``: the batch's entity change rows (``_change_type`` and the
    :func:`entity_columns`); ``entity``: the current entity rows (:func:`entity_rows`).

    The rows are the source images and the current source rows whose key an entity change
    has, each joined with every value its entity row had in or after the batch: the current
    one, every image of the changes, and nulls for a key inserted or deleted in the batch
    (before or after, it had no row). Taking all of them can only widen the scope, which
    recomputation keeps exact.
    """
    keys = [key_alias(s) for s, _ in join.on]
    changed = changes.where(F.col("_change_type").isin(*ROW_IMAGES))
    changed_keys = changed.select(*keys).distinct()
    same = reduce(Column.__and__, [F.col(s) == F.col(key_alias(s)) for s, _ in join.on])
    touched = source.join(changed_keys, same, "left_semi").withColumn(
        "_change_type", F.lit("insert")
    )
    shared = [c for c in images.columns if c in source.columns]
    rows = images.select(*shared, "_change_type").unionByName(
        touched.select(*shared, "_change_type")
    )
    types = {f.name: f.dataType for f in entity.schema.fields}
    gone = changed.where(F.col("_change_type").isin(*_ARRIVALS_AND_REMOVALS)).select(
        *keys, *(F.lit(None).cast(types[o]).alias(o) for o in join.outputs)
    )
    versions = entity.unionByName(changed.select(*keys, *join.outputs)).unionByName(gone)
    return enrich(rows, versions.distinct(), join)


def check_join(table: GoldTable, source: StructType, entity: StructType) -> None:
    """Raise ConfigError if an ``on`` pair of ``table``'s join compares columns of different
    kinds (``source``, ``entity``: the two silver tables' schemas; numbers match numbers of
    any width, other types only themselves)."""
    join = table.join
    assert join is not None
    left = {f.name: f.dataType for f in source.fields}
    right = {f.name: f.dataType for f in entity.fields}
    for source_column, entity_column in join.on:
        a, b = left[source_column], right[entity_column]
        if not _comparable(a, b):
            raise ConfigError(
                f"Gold table {table.name!r} joins silver.{table.source}.{source_column} "
                f"({a.simpleString()}) with silver.{join.entity}.{entity_column} "
                f"({b.simpleString()}): the types differ; join on columns of one type."
            )


def check_unique(entity: DataFrame, table: GoldTable, key: Collection[str]) -> None:
    """Raise ConfigError if two rows of the joined ``entity`` share the ``key`` columns (the
    join's ``on`` entity columns), as each source row must match at most one."""
    join = table.join
    assert join is not None
    repeated = entity.groupBy(*key).count().where(F.col("count") > 1).limit(1).collect()
    if repeated:
        values = ", ".join(f"{c}={repeated[0][c]!r}" for c in key)
        raise ConfigError(
            f"Gold table {table.name!r} joins silver.{join.entity} on {', '.join(key)}, "
            f"but several of its rows have {values}: join on the entity's key."
        )


def _comparable(a: DataType, b: DataType) -> bool:
    if isinstance(a, NumericType) and isinstance(b, NumericType):
        return True
    return a == b
