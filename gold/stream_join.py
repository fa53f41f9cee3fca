"""Pure transforms of the time-bounded stream-stream join (a declaration's
:class:`~lakehouse_core.gold_tables.StreamJoin`, with a ``row`` window).

Such a gold table has one row per *anchor*: distinct group-by values and event time t of the
source's counted rows (:func:`anchors`), measuring the other table's rows whose ``on``
columns equal the anchor's and whose event time lies in ``[t - within, t]``
(:func:`attributed`). A row depends on nothing but its anchor and those rows, so a
micro-batch affects exactly these anchors (:func:`touched`): those of the source's changed
row images (before and after each change), and those of the current source rows with the key
of a changed other-side image (before or after) and an event time in ``[c, c + within]`` of
its time c. Recomputing them from the current silver tables, reading only the source rows of
the anchors' times and the other rows of their keys and times, keeps the table exact
whatever the order, lateness or split of the changes on either side.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import NumericType, StructType

from gold.aggregates import ROW_IMAGES, counted_rows, in_scope, measure_column, scope_columns
from gold.finality import BRONZE_COORDINATES, at_micros, late_rows
from lakehouse_core.errors import ConfigError
from lakehouse_core.gold_tables import GoldTable, StreamJoin

#: Column of a stream-join job's stream: the other table's change row (:func:`other_columns`
#: as a struct); null on a source change row.
OTHER = "_other"
#: The other side's columns inside the join take this prefix (no clash with the source's).
_PREFIX = "_o_"
_TIME = f"{_PREFIX}_time"


def _stream_join(table: GoldTable) -> StreamJoin:
    joined = table.stream_join
    assert joined is not None, f"gold table {table.name} has no stream join"
    return joined


def other_columns(table: GoldTable, available: Collection[str]) -> list[str]:
    """The other table's columns a stream-join job reads (of ``available``, its columns):
    the ``on`` and event-time columns, the measured columns and silver's bronze coordinates
    (for ``gold.late_events``)."""
    read = [*table.other_columns, *(c for c in BRONZE_COORDINATES if c in available)]
    return list(dict.fromkeys(read))


def _renamed(rows: DataFrame, table: GoldTable) -> DataFrame:
    """``rows`` of the other table as the join reads them: each column it reads prefixed,
    and the event time also as :data:`_TIME`; rows without an event time are left out."""
    time = _stream_join(table).event_time
    return rows.where(F.col(time).isNotNull()).select(
        *(F.col(c).alias(f"{_PREFIX}{c}") for c in table.other_columns),
        F.col(time).alias(_TIME),
    )


def _same_key(table: GoldTable) -> Column:
    """An anchor's ``on`` columns equal the prefixed columns of an other row (a null matches
    nothing)."""
    pairs = _stream_join(table).on
    return reduce(Column.__and__, [F.col(s) == F.col(f"{_PREFIX}{o}") for s, o in pairs])


def _in_bound(anchor: Column, other: Column, table: GoldTable) -> Column:
    """The other row's time lies in ``[anchor - within, anchor]``."""
    within = F.lit(_stream_join(table).within_micros)
    a, o = F.unix_micros(anchor), F.unix_micros(other)
    return (o <= a) & (o >= a - within)


def anchors(rows: DataFrame, table: GoldTable) -> DataFrame:
    """The anchors of source ``rows``: distinct group-by values and event time (named as the
    window's end) of the rows the declaration counts (event time set, filter holding)."""
    end = table.window.end_as
    counted = counted_rows(rows, table)
    return counted.select(*table.group_by, F.col(table.event_time).alias(end)).distinct()


def attributed(points: DataFrame, other: DataFrame, table: GoldTable) -> DataFrame:
    """The gold rows of ``points`` (:func:`anchors`): each with the measures over the
    ``other`` table's rows of its key within its lookback (count 0 and nulls where none),
    and the window's start ``end - within``. Columns: ``table.columns``."""
    window = table.window
    matches = _renamed(other, table)
    measures = [
        # Counting rows: those matched (an unmatched anchor's time is null).
        replace(m, column=_TIME)
        if m.column is None
        else replace(m, column=f"{_PREFIX}{m.column}", by=m.by and f"{_PREFIX}{m.by}")
        for m in table.measures
    ]
    joined = points.join(
        matches, _same_key(table) & _in_bound(F.col(window.end_as), F.col(_TIME), table), "left"
    )
    within = F.lit(_stream_join(table).within_micros)
    start = F.timestamp_micros(F.unix_micros(F.col(window.end_as)) - within)
    return (
        joined.groupBy(*table.group_by, window.end_as)
        .agg(*(measure_column(m, _TIME) for m in measures))
        .withColumn(window.start_as, start)
        .select(*table.columns)
    )


def evaluate_joined(rows: DataFrame, other: DataFrame, table: GoldTable) -> DataFrame:
    """The gold table a stream-join declaration defines over the source's ``rows`` and the
    ``other`` table's rows, evaluated in batch."""
    return attributed(anchors(rows, table), other, table)


def other_changes(batch: DataFrame) -> DataFrame:
    """The other side's change rows of a stream-join job's micro-batch: ``_change_type``,
    ``_commit_version``, ``_commit_timestamp`` and the :data:`OTHER` columns."""
    return batch.where(F.col(OTHER).isNotNull()).select(
        "_change_type", "_commit_version", "_commit_timestamp", f"{OTHER}.*"
    )


def time_range(changes: DataFrame, table: GoldTable) -> tuple[int | None, int | None]:
    """The earliest and latest event time (epoch µs) of the other side's row images in
    ``changes`` (:func:`other_changes`); None where there is none."""
    time = F.unix_micros(F.col(_stream_join(table).event_time))
    images = changes.where(F.col("_change_type").isin(*ROW_IMAGES))
    row = images.agg(F.min(time).alias("first"), F.max(time).alias("last")).first()
    assert row is not None
    return row["first"], row["last"]


def touched(
    images: DataFrame,
    source: DataFrame,
    changes: DataFrame,
    table: GoldTable,
    first: int | None,
    last: int | None,
) -> DataFrame:
    """The anchors (group-by values and window end) a micro-batch affects.

    ``images``: the batch's source change-feed rows; ``source``: the current source rows;
    ``changes``: the batch's other-side change rows (:func:`other_changes`), whose images'
    event times lie from ``first`` to ``last`` (epoch µs; None: no such image). The anchors
    are those of every source image (the filter is not applied: an image it drops may have
    been counted before) and those of the current source rows matching an other-side image
    (its key, and an event time in ``[c, c + within]`` of its time c). Only source rows from
    ``first`` to ``last + within`` are read for the latter.
    """
    end = table.window.end_as
    shown = images.where(
        F.col("_change_type").isin(*ROW_IMAGES) & F.col(table.event_time).isNotNull()
    ).select(*table.group_by, F.col(table.event_time).alias(end))
    if first is None or last is None:
        return shown.distinct()
    within = _stream_join(table).within_micros
    time = F.unix_micros(F.col(table.event_time))
    nearby = source.where((time >= F.lit(first)) & (time <= F.lit(last + within)))
    changed = _renamed(changes.where(F.col("_change_type").isin(*ROW_IMAGES)), table)
    matched = (
        nearby.join(
            changed, _same_key(table) & _in_bound(F.col(table.event_time), F.col(_TIME), table)
        )
        .select(*table.group_by, F.col(table.event_time).alias(end))
        .distinct()
    )
    return shown.unionByName(matched).distinct()


def recompute_rows(
    source: DataFrame,
    other: DataFrame,
    scope: DataFrame,
    table: GoldTable,
    first: object,
    last: object,
) -> DataFrame:
    """The declaration's rows for the ``scope`` anchors (:func:`touched`, window ends from
    ``first`` to ``last``), from the current ``source`` and ``other`` rows: only source rows
    of those times and other rows of the scope's keys from ``first - within`` to ``last``
    are read."""
    joined = _stream_join(table)
    time = F.col(table.event_time)
    nearby = source.where((time >= F.lit(first)) & (time <= F.lit(last)))
    points = in_scope(anchors(nearby, table), scope, scope_columns(table))
    other_time = F.unix_micros(F.col(joined.event_time))
    low = F.unix_micros(F.lit(first)) - F.lit(joined.within_micros)
    keys = scope.select(*(F.col(s).alias(o) for s, o in joined.on)).distinct()
    candidates = other.where((other_time >= low) & (other_time <= F.unix_micros(F.lit(last))))
    candidates = candidates.join(keys, [o for _, o in joined.on], "left_semi")
    return attributed(points, candidates, table)


def late_matches(
    changes: DataFrame, existing: DataFrame, table: GoldTable, watermark: int
) -> DataFrame:
    """The rows of ``gold.late_events`` for the other side's ``changes`` of a micro-batch
    (:func:`other_changes`): one per row image and gold row it lands in that was final, of
    the ``existing`` gold rows (before the batch's write), those whose window ended at or
    before ``watermark`` (epoch µs, in force before the batch)."""
    window = table.window
    images = changes.where(F.col("_change_type").isin(*ROW_IMAGES))
    final = existing.where(F.col(window.end_as) <= at_micros(watermark))
    joined = _stream_join(table)
    same = reduce(
        Column.__and__, [F.col(f"g.{s}") == F.col(f"c.{o}") for s, o in joined.on]
    ) & _in_bound(F.col(f"g.{window.end_as}"), F.col(f"c.{joined.event_time}"), table)
    late = final.alias("g").join(images.alias("c"), same)
    bounds = (F.col(f"g.{window.start_as}"), F.col(f"g.{window.end_as}"))
    groups = {g: F.col(f"g.{g}") for g in table.group_by}
    return late_rows(late, table, watermark, bounds, groups, joined.event_time, prefix="c.")


def check_stream_join(table: GoldTable, source: StructType, other: StructType) -> None:
    """Raise ConfigError if an ``on`` pair of ``table``'s stream join compares columns of
    different kinds, or its event time is not a timestamp (``source``, ``other``: the two
    silver tables' schemas; numbers match numbers of any width)."""
    joined = _stream_join(table)
    left = {f.name: f.dataType for f in source.fields}
    right = {f.name: f.dataType for f in other.fields}
    for source_column, other_column in joined.on:
        a, b = left[source_column], right[other_column]
        numbers = isinstance(a, NumericType) and isinstance(b, NumericType)
        if not numbers and a != b:
            raise ConfigError(
                f"Gold table {table.name!r} stream-joins silver.{table.source}.{source_column} "
                f"({a.simpleString()}) with silver.{joined.source}.{other_column} "
                f"({b.simpleString()}): the types differ; join on columns of one type."
            )
    kind = right[joined.event_time].simpleString()
    if kind not in ("timestamp", "timestamp_ntz"):
        raise ConfigError(
            f"Gold table {table.name!r}: the stream join's event_time "
            f"silver.{joined.source}.{joined.event_time} is {kind}, not a timestamp: name "
            "the other table's event-time column."
        )
