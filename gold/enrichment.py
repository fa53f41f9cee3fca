"""Pure transforms of the enrichment join (a declaration's
:class:`~lakehouse_core.gold_tables.Join`): source rows with the joined entity's columns, and the
rows whose scope an entity change moves.

A gold table with a join is its declaration evaluated over the source's rows left-joined with
the entity's current rows, or, as of event time, with the entity's version in force at each
row's event time (:func:`entity_versions`: a version of the SCD type 2 history is in force
from the source commit time of its first change to that of the change that ended it). So
when an entity row (or version) changes, every gold row that a source row with that key (and
an event time in the version's validity) counts in can change: the scope of the change is
the scope of those source rows, taken with every value the entity row had before or after
the micro-batch (:func:`scope_rows`), so that both the group they leave and the group they
join are recomputed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, NumericType, StructType

from gold.aggregates import ROW_IMAGES
from lakehouse_core.columns import OP
from lakehouse_core.errors import ConfigError
from lakehouse_core.gold_tables import GoldTable, Join
from silver.history import END_AT, START_AT
from silver.parse import TRUNCATE_OP, order_of

#: Column of the gold job's stream telling a source change row from an entity change row.
SIDE = "_side"
#: Column of an entity change row in the gold job's stream: :func:`entity_columns` as a struct.
ENTITY = "_entity"
#: Entity change kinds after which the key may have had no row, before or after the batch.
_ARRIVALS_AND_REMOVALS = ("insert", "delete")
#: Columns of an entity version (:func:`entity_versions`): when it came into force and when it
#: stopped (source commit times; null: still in force), and its place in the key's history.
VALID_FROM, VALID_TO, VERSION = "_valid_from", "_valid_to", "_version"
_ROW = "_row"


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


def history_columns(join: Join) -> list[Column]:
    """A history table's columns as an as-of join reads them: :func:`entity_columns`, then the
    version's first and ending places in the key's history (``__start_at``, ``__end_at``)."""
    return [*entity_columns(join), F.col(START_AT), F.col(END_AT)]


def entity_versions(
    history: DataFrame, log: DataFrame, join: Join, keep: Sequence[str] = ()
) -> DataFrame:
    """The versions of ``history`` (history rows in :func:`history_columns` form) with their
    validity: :data:`VALID_FROM`, the source commit time (``_source_ts``) of the version's first
    change, :data:`VALID_TO`, that of the change that ended it (the next version, a delete or a
    truncate; null while current), and :data:`VERSION`, its place in the key's history.

    ``log``: the entity's history log (every change event, with its ``_source_ts``). A version
    whose first or ending change has no source time is left out (it is never in force).
    ``keep``: other columns of ``history`` to keep (a change feed's ``_change_type``).
    """
    keys = [key_alias(s) for s, _ in join.on]
    events = log.select(
        *(F.col(e).alias(f"_log{key_alias(s)}") for s, e in join.on),
        order_of().alias("_at"),
        F.col("_source_ts").alias("_ts"),
        (F.col(OP) == TRUNCATE_OP).alias("_truncate"),
    )
    same = [F.col(k) == F.col(f"_log{k}") for k in keys]
    starts = events.where(~F.col("_truncate")).select(
        *(F.col(f"_log{k}") for k in keys), F.col("_at"), F.col("_ts").alias(VALID_FROM)
    )
    ends = events.select(
        *(F.col(f"_log{k}").alias(f"_end{k}") for k in keys),
        F.col("_at").alias("_end_at"),
        F.col("_truncate").alias("_end_truncate"),
        F.col("_ts").alias(VALID_TO),
    )
    ending = reduce(Column.__and__, [F.col(k) == F.col(f"_end{k}") for k in keys])
    started = history.join(starts, [*same, F.col(START_AT) == F.col("_at")], "inner").drop(
        *(f"_log{k}" for k in keys), "_at"
    )
    versions = started.join(
        ends, (F.col(END_AT) == F.col("_end_at")) & (ending | F.col("_end_truncate")), "left"
    )
    in_force = F.col(VALID_FROM).isNotNull() & (
        F.col(END_AT).isNull() | F.col(VALID_TO).isNotNull()
    )
    return versions.where(in_force).select(
        *keep, *keys, *join.outputs, VALID_FROM, VALID_TO, F.col(START_AT).alias(VERSION)
    )


def _matches(join: Join, event_time: str | None) -> Column:
    """A row matches an entity row (or version) when its ``on`` columns equal the entity's key
    and, as of ``event_time``, the version is in force at that time (a version without bounds,
    the nulls of a key that had no row, holds at any time)."""
    same = reduce(Column.__and__, [F.col(s) == F.col(key_alias(s)) for s, _ in join.on])
    if event_time is None:
        return same
    moment = F.col(event_time)
    return (
        same
        & (F.col(VALID_FROM).isNull() | (F.col(VALID_FROM) <= moment))
        & (F.col(VALID_TO).isNull() | (moment < F.col(VALID_TO)))
    )


def enrich(
    rows: DataFrame, entity: DataFrame, join: Join, event_time: str | None = None
) -> DataFrame:
    """``rows`` (source rows or change rows) with the joined columns of the ``entity`` row
    (:func:`entity_rows` form) their ``on`` columns equal; nulls where none does (left outer
    join; a null key matches nothing).

    With ``event_time`` (an as-of join), ``entity`` holds :func:`entity_versions` and each row
    takes the version in force at its ``event_time``: the one whose validity holds it (of
    several, the latest in the key's history); nulls where none does (before the key's first
    version, after a delete, or a null event time)."""
    if event_time is None:
        return _enrich_all(rows, entity, join, None)
    extra = [key_alias(s) for s, _ in join.on]
    numbered = rows.withColumn(_ROW, F.monotonically_increasing_id())
    latest = Window.partitionBy(_ROW).orderBy(F.col(VERSION).desc_nulls_last())
    return (
        numbered.join(entity, _matches(join, event_time), "left")
        .withColumn("_rank", F.row_number().over(latest))
        .where(F.col("_rank") == 1)
        .drop(*extra, VALID_FROM, VALID_TO, VERSION, _ROW, "_rank")
    )


def scope_rows(
    images: DataFrame,
    source: DataFrame,
    changes: DataFrame,
    entity: DataFrame,
    join: Join,
    event_time: str | None = None,
) -> DataFrame:
    """The enriched row images whose scope (:func:`gold.aggregates.affected`) a micro-batch
    changes.

    ``images``: the batch's source change-feed rows; ``source``: the current source rows;
    ``changes``: the batch's entity change rows (``_change_type`` and the
    :func:`entity_columns`); ``entity``: the current entity rows (:func:`entity_rows`). As of
    ``event_time``, ``changes`` and ``entity`` are history rows as :func:`entity_versions`.

    The rows are the source images and the current source rows whose key an entity change
    has (as of event time: with an event time in a changed version's validity), each joined
    with every value its entity row had in or after the batch: the current one, every image
    of the changes, and nulls for a key inserted or deleted in the batch (before or after, it
    had no row; as of event time, any change of a version can leave times without one).
    Taking all of them can only widen the scope, which recomputation keeps exact.
    """
    keys = [key_alias(s) for s, _ in join.on]
    changed = changes.where(F.col("_change_type").isin(*ROW_IMAGES))
    bounds = [VALID_FROM, VALID_TO] if event_time is not None else []
    touched = source.join(
        changed.select(*keys, *bounds), _matches(join, event_time), "left_semi"
    ).withColumn("_change_type", F.lit("insert"))
    shared = [c for c in images.columns if c in source.columns]
    rows = images.select(*shared, "_change_type").unionByName(
        touched.select(*shared, "_change_type")
    )
    types = {f.name: f.dataType for f in entity.schema.fields}
    emptied = ROW_IMAGES if event_time is not None else _ARRIVALS_AND_REMOVALS
    gone = changed.where(F.col("_change_type").isin(*emptied)).select(
        *keys, *(F.lit(None).cast(types[c]).alias(c) for c in entity.columns if c not in keys)
    )
    values = [c for c in entity.columns if c != VERSION]
    versions = (
        entity.select(*values)
        .unionByName(changed.select(*values))
        .unionByName(gone.select(*values))
        .distinct()
    )
    return _enrich_all(rows, versions, join, event_time)


def _enrich_all(
    rows: DataFrame, versions: DataFrame, join: Join, event_time: str | None
) -> DataFrame:
    """``rows`` joined with every one of ``versions`` they match (left outer)."""
    extra = [key_alias(s) for s, _ in join.on]
    bounds = [VALID_FROM, VALID_TO] if event_time is not None else []
    return rows.join(versions, _matches(join, event_time), "left").drop(*extra, *bounds)


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


def check_unique(entity: DataFrame | pa.Table, table: GoldTable, key: Collection[str]) -> None:
    """Raise ConfigError if two rows of the joined ``entity`` (its rows in Spark, or held on
    the driver) share the ``key`` columns (the join's ``on`` entity columns), as each source
    row must match at most one; null equals null here, as in a grouping."""
    join = table.join
    assert join is not None
    if isinstance(entity, pa.Table):
        counts = entity.select(list(key)).group_by(list(key)).aggregate([([], "count_all")])
        repeated = counts.filter(pc.field("count_all") > 1).slice(0, 1).to_pylist()
    else:
        rows = entity.groupBy(*key).count().where(F.col("count") > 1).limit(1).collect()
        repeated = [row.asDict() for row in rows]
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
