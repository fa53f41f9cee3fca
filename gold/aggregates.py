"""Pure transforms of the gold engine: a declaration evaluated over silver rows, and the part
of a gold table that a batch of silver changes affects (its *scope*).

The scope of a change is the (group, window) keys its row images fall in for tumbling and
hopping windows, and its whole group for session, sliding and count windows (a change there
can move every window of the group). :func:`recompute` evaluates the declaration over only
the silver rows that can reach the scope, so the cost follows the change, not the table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from lakehouse_core.conditions.spark import condition_column, expression_column
from lakehouse_core.durations import duration_micros, parse_duration
from lakehouse_core.gold_tables import WINDOW_INDEX, GoldTable, Measure
from lakehouse_core.gold_tables import Window as GoldWindow

#: Change-feed row kinds: every image of a row, before and after a change.
ROW_IMAGES = ("insert", "update_preimage", "update_postimage", "delete")
#: Change-feed row kinds that carry a row's new value.
ADDS = ("insert", "update_postimage")
#: Count windows order a group's events by event time, then by these silver metadata columns
#: (where the row's current value was read in bronze), so equal event times have one order.
COUNT_TIEBREAK = ("_bronze_partition", "_bronze_offset")
#: Column of a MERGE source row: False marks a gold row to delete.
PRESENT = "_present"
_ANCHOR = "_anchor"
_WINDOW = "_window"


def measure_column(measure: Measure, event_time: str) -> Column:
    """The aggregate expression of one measure, named after it (``event_time``: the column
    that orders the rows for ``last``). A measure with a filter reads the rows' column
    :func:`kept_by` (added by :func:`with_measure_filters`)."""
    column = F.col(measure.column) if measure.column is not None else None
    keep = F.coalesce(F.col(kept_by(measure)), F.lit(False)) if measure.condition else None

    def kept(value: Column) -> Column:
        return value if keep is None else F.when(keep, value)

    if measure.fn == "count":
        return F.count(kept(F.lit(1) if column is None else column)).alias(measure.name)
    if column is None:
        raise AssertionError(f"measure {measure.name} has no column")  # checked at declaration
    if measure.fn == "last":
        # Greatest (time, value): the latest row's value; of equal times the greatest value
        # (a null value orders lowest). Rows without a time (a join's unmatched side) are out.
        return _picked(F.max, F.col(event_time), column, keep).alias(measure.name)
    if measure.fn in ("max_by", "min_by"):
        assert measure.by is not None
        pick = F.max if measure.fn == "max_by" else F.min
        return _picked(pick, F.col(measure.by), column, keep).alias(measure.name)
    value = kept(column)
    if measure.fn == "span_seconds":
        elapsed = F.unix_micros(F.max(value)) - F.unix_micros(F.min(value))
        return (elapsed / F.lit(1_000_000)).cast("double").alias(measure.name)
    aggregates: dict[str, Callable[[Column], Column]] = {
        "sum": F.sum,
        "avg": F.avg,
        "min": F.min,
        "max": F.max,
        "count_distinct": F.count_distinct,
        "approx_percentile": lambda v: F.percentile_approx(v, F.lit(measure.percentile)),
    }
    return aggregates[measure.fn](value).alias(measure.name)


def _picked(
    pick: Callable[[Column], Column], by: Column, value: Column, keep: Column | None
) -> Column:
    """``value`` of the row whose ``by`` is greatest (``pick`` = max) or least (min), of
    several the greatest (least) value, nulls lowest; rows with a null ``by`` (or not
    ``keep``) are left out."""
    counted = by.isNotNull() if keep is None else by.isNotNull() & keep
    return pick(F.when(counted, F.struct(by.alias("t"), value.alias("v")))).getField("v")


def kept_by(measure: Measure) -> str:
    """The helper column that holds whether a row passes ``measure``'s filter."""
    return f"_keep_{measure.name}"


def with_measure_filters(rows: DataFrame, measures: Sequence[Measure], where: str) -> DataFrame:
    """``rows`` with the :func:`kept_by` column of each measure that has a filter.

    Raises:
        ConfigError: a filter reads a column ``rows`` lack or compares it with a wrong type.
    """
    types: Mapping[str, DataType] = {f.name: f.dataType for f in rows.schema.fields}
    return rows.withColumns(
        {
            kept_by(m): condition_column(
                m.condition, types, f"{where}: filter of measure {m.name!r}"
            )
            for m in measures
            if m.condition is not None
        }
    )


def with_computed(rows: DataFrame, table: GoldTable) -> DataFrame:
    """``rows`` with the declaration's computed columns, each from the columns before it.

    Raises:
        ConfigError: an expression reads a column ``rows`` lack or mixes types it cannot.
    """
    for name, expression in table.expressions:
        types = {f.name: f.dataType for f in rows.schema.fields}
        where = f"Gold table {table.name!r}: computed column {name!r}"
        rows = rows.withColumn(name, expression_column(expression, types, where))
    return rows


def counted_rows(rows: DataFrame, table: GoldTable) -> DataFrame:
    """The rows the declaration aggregates, with its computed columns: those with an event
    time that match its filter.

    Raises:
        ConfigError: the filter or a computed column reads a column ``rows`` lack or compares
            it with a wrong type.
    """
    kept = with_computed(rows, table).where(F.col(table.event_time).isNotNull())
    if table.condition is None:
        return kept
    types: Mapping[str, DataType] = {f.name: f.dataType for f in kept.schema.fields}
    where = f"Gold table {table.name!r}: filter"
    return kept.where(F.coalesce(condition_column(table.condition, types, where), F.lit(False)))


def evaluate(rows: DataFrame, table: GoldTable) -> DataFrame:
    """The gold table the declaration defines over ``rows`` (silver rows), evaluated in batch.

    Columns: the group-by columns, the window's columns, the measures (``table.columns``).
    Only windows holding at least one counted row exist; count windows only once full.
    """
    where = f"Gold table {table.name!r}"
    counted = with_measure_filters(counted_rows(rows, table), aggregates_of(table), where)
    kind = table.window.kind
    if kind in ("tumbling", "hopping", "session"):
        frame = _time_windows(counted, table)
    elif kind == "sliding":
        frame = _sliding_windows(counted, table)
    else:
        frame = _count_windows(counted, table)
    frame = with_measure_expressions(frame, table)
    if table.top_n is not None:
        frame = _first_rows(frame, table)
    return frame.select(*table.columns)


def aggregates_of(table: GoldTable) -> tuple[Measure, ...]:
    """The plain measures a window aggregates: each measure, an ``expr`` measure's parts."""
    return tuple(part for m in table.measures for part in m.aggregates)


def with_measure_expressions(frame: DataFrame, table: GoldTable) -> DataFrame:
    """``frame`` (aggregated) with each ``expr`` measure computed from its parts' columns.

    Raises:
        ConfigError: an expression does not fit its aggregates' types.
    """
    for measure in table.measures:
        if measure.expression is not None:
            types = {f.name: f.dataType for f in frame.schema.fields}
            where = f"Gold table {table.name!r}: measure {measure.name!r}"
            column = expression_column(measure.expression, types, where)
            frame = frame.withColumn(measure.name, column)
    return frame


def _first_rows(frame: DataFrame, table: GoldTable) -> DataFrame:
    """The rows of ``frame`` (a gold table's) that its ``top_n`` keeps: per window and
    partition, the first n in its order (nulls last), ties broken by the group-by columns."""
    top = table.top_n
    assert top is not None
    order = [
        F.col(c).desc_nulls_last() if desc else F.col(c).asc_nulls_last()
        for c, desc in top.order_by
    ]
    order += [F.col(g).asc_nulls_first() for g in table.group_by]
    ranking = Window.partitionBy(table.window.key_column, *top.partition_by).orderBy(*order)
    return frame.withColumn("_rank", F.row_number().over(ranking)).where(F.col("_rank") <= top.n)


def _spark_intervals(window: GoldWindow) -> tuple[str, str]:
    """The size and slide of a tumbling or hopping window as Spark's interval texts (the
    canonical spelling of :func:`lakehouse_core.durations.parse_duration`: ``"1h"`` is
    ``"1 hour"``)."""
    assert window.size is not None
    size = parse_duration(window.size).text
    return size, parse_duration(window.slide).text if window.slide else size


def _time_windows(rows: DataFrame, table: GoldTable) -> DataFrame:
    window, time = table.window, F.col(table.event_time)
    if window.kind == "session":
        return _session_windows(rows, table)
    assert window.size is not None
    bucket = F.window(time, *_spark_intervals(window))
    return (
        rows.groupBy(*table.group_by, bucket.alias(_WINDOW))
        .agg(*(measure_column(m, table.event_time) for m in aggregates_of(table)))
        .withColumn(window.start_as, F.col(f"{_WINDOW}.start"))
        .withColumn(window.end_as, F.col(f"{_WINDOW}.end"))
    )


def _session_windows(rows: DataFrame, table: GoldTable) -> DataFrame:
    """Per group, its rows in event-time order cut into sessions: a row ``gap`` or more after
    the previous one starts a new session (equal times share one). A session spans
    ``[first event, last event + gap)``.

    Not Spark's ``session_window``, which also merges a row exactly ``gap`` after the
    previous one (it joins sessions whose bounds touch)."""
    window = table.window
    assert window.gap is not None
    gap = duration_micros(window.gap)
    micros = F.unix_micros(F.col(table.event_time))
    order = Window.partitionBy(*table.group_by).orderBy(micros)
    # Peers (equal times) share the running sum's frame, so they get one session number.
    starts = F.coalesce(micros - F.lag(micros).over(order) >= F.lit(gap), F.lit(True))
    numbered = rows.withColumn(_WINDOW, F.sum(starts.cast("bigint")).over(order))
    return (
        numbered.groupBy(*table.group_by, _WINDOW)
        .agg(
            *(measure_column(m, table.event_time) for m in aggregates_of(table)),
            F.min(micros).alias(_ANCHOR),
            F.max(micros).alias(f"{_ANCHOR}_last"),
        )
        .withColumn(window.start_as, F.timestamp_micros(F.col(_ANCHOR)))
        .withColumn(window.end_as, F.timestamp_micros(F.col(f"{_ANCHOR}_last") + F.lit(gap)))
    )


def _sliding_windows(rows: DataFrame, table: GoldTable) -> DataFrame:
    """Per group and distinct event time t: the measures over the group's rows with event time
    in (t - lookback, t]."""
    window = table.window
    assert window.lookback is not None
    lookback = duration_micros(window.lookback)
    anchors = rows.select(
        *(F.col(g).alias(f"_a_{g}") for g in table.group_by),
        F.col(table.event_time).alias(_ANCHOR),
    ).distinct()
    event, anchor = F.unix_micros(F.col(table.event_time)), F.unix_micros(F.col(_ANCHOR))
    joined = anchors.join(
        rows,
        [
            *(F.col(f"_a_{g}").eqNullSafe(F.col(g)) for g in table.group_by),
            event <= anchor,
            event > anchor - F.lit(lookback),
        ],
    )
    return (
        joined.groupBy(*(F.col(f"_a_{g}").alias(g) for g in table.group_by), F.col(_ANCHOR))
        .agg(*(measure_column(m, table.event_time) for m in aggregates_of(table)))
        .withColumn(window.start_as, F.timestamp_micros(anchor - F.lit(lookback)))
        .withColumn(window.end_as, F.col(_ANCHOR))
    )


def _count_windows(rows: DataFrame, table: GoldTable) -> DataFrame:
    """Per group, its rows in event-time order cut into full windows of ``count`` rows."""
    window = table.window
    assert window.count is not None
    tiebreak = [F.col(c) for c in COUNT_TIEBREAK if c in rows.columns]
    order = Window.partitionBy(*table.group_by).orderBy(F.col(table.event_time), *tiebreak)
    numbered = rows.withColumn(
        WINDOW_INDEX, F.floor((F.row_number().over(order) - 1) / window.count).cast("bigint")
    )
    return (
        numbered.groupBy(*table.group_by, WINDOW_INDEX)
        .agg(
            *(measure_column(m, table.event_time) for m in aggregates_of(table)),
            F.min(table.event_time).alias(window.start_as),
            F.max(table.event_time).alias(window.end_as),
            F.count(F.lit(1)).alias("_rows"),
        )
        .where(F.col("_rows") == window.count)
    )


def scope_groups(table: GoldTable) -> tuple[str, ...]:
    """The group columns of a scope: the group-by columns, or with ``top_n`` (whose rows of a
    window depend on each other) its partition columns."""
    return table.top_n.partition_by if table.top_n is not None else table.group_by


def scope_columns(table: GoldTable) -> tuple[str, ...]:
    """The columns of a scope: :func:`scope_groups`, and the window key for time windows."""
    if table.window.per_group:
        return table.group_by
    return (*scope_groups(table), table.window.key_column)


def affected(changes: DataFrame, table: GoldTable) -> DataFrame:
    """The scope of a batch of silver change-feed rows: distinct :func:`scope_columns` values
    of every row image (before and after each change; the filter is not applied, as an image
    that the filter drops may have been counted before)."""
    images = with_computed(changes.where(F.col("_change_type").isin(*ROW_IMAGES)), table)
    if table.window.per_group:
        # Without group-by columns the one group is the whole table: one marker row.
        return images.select(*table.group_by or (F.lit(True).alias("_all"),)).distinct()
    window = table.window
    assert window.size is not None
    bucket = F.window(F.col(table.event_time), *_spark_intervals(window))
    return (
        images.where(F.col(table.event_time).isNotNull())
        .select(*scope_groups(table), bucket.getField("start").alias(window.key_column))
        .distinct()
    )


def in_scope(frame: DataFrame, scope: DataFrame, columns: Sequence[str]) -> DataFrame:
    """The rows of ``frame`` whose ``columns`` equal a row of ``scope`` (nulls equal)."""
    if not columns:
        return frame
    keys = scope.select(*(F.col(c).alias(f"_scope_{c}") for c in columns))
    same = [F.col(c).eqNullSafe(F.col(f"_scope_{c}")) for c in columns]
    return frame.join(keys, same, "left_semi")


def out_of_scope(
    frame: DataFrame, scope: DataFrame, columns: Sequence[str], any_scope: bool
) -> DataFrame:
    """The rows of ``frame`` that :func:`in_scope` leaves out (``any_scope``: whether the
    scope has rows; without ``columns`` a scope row covers the whole frame)."""
    if not columns:
        return frame.limit(0) if any_scope else frame
    keys = scope.select(*(F.col(c).alias(f"_scope_{c}") for c in columns))
    same = [F.col(c).eqNullSafe(F.col(f"_scope_{c}")) for c in columns]
    return frame.join(keys, same, "left_anti")


def recompute(
    silver: DataFrame, scope: DataFrame, table: GoldTable, first: object, last: object
) -> DataFrame:
    """The declaration's rows for the scope, from the current ``silver`` rows.

    For time windows ``first``/``last`` are the earliest and latest window start in the scope
    (only silver rows from ``first`` to the end of ``last``'s window are read); for the other
    kinds they are ignored and the scope's groups are evaluated whole.
    """
    groups = in_scope(with_computed(silver, table), scope, scope_groups(table))
    if table.window.per_group:
        return evaluate(groups, table)
    size = table.window.size
    assert size is not None
    time = F.unix_micros(F.col(table.event_time))
    start, end = F.unix_micros(F.lit(first)), F.unix_micros(F.lit(last)) + duration_micros(size)
    nearby = groups.where((time >= start) & (time < end))
    return in_scope(evaluate(nearby, table), scope, scope_columns(table))


def replacement(recomputed: DataFrame, existing: DataFrame, table: GoldTable) -> DataFrame:
    """MERGE source that makes the scope of the gold table equal ``recomputed``: its rows with
    ``_present`` true, and the keys of ``existing`` gold rows (already limited to the scope)
    that it no longer has, with ``_present`` false."""
    keys = table.key
    fresh = recomputed.select(*(F.col(k).alias(f"_new_{k}") for k in keys))
    same = [F.col(k).eqNullSafe(F.col(f"_new_{k}")) for k in keys]
    gone = existing.join(fresh, same, "left_anti").select(*keys).withColumn(PRESENT, F.lit(False))
    return recomputed.withColumn(PRESENT, F.lit(True)).unionByName(gone, allowMissingColumns=True)


def same_key(table: GoldTable, left: str = "t", right: str = "s") -> Column:
    """Null-safe equality of the gold key columns of two aliased frames."""
    equal = [F.col(f"{left}.{k}").eqNullSafe(F.col(f"{right}.{k}")) for k in table.key]
    return reduce(lambda a, b: a & b, equal)
