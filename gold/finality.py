"""Pure transforms of event-time finality: which gold rows are final under a watermark, and
which silver changes are late (they land where the watermark had already passed).

A gold table's watermark is the latest event time its job has seen in the new values of its
silver table's change feed, minus the declaration's ``watermark_delay``. A gold row is final
when its window ends at or before the watermark (``window_end <= watermark``; for sessions
that end is already the last event plus the gap, for sliding windows the row's event time,
for count windows the last event time). A change is late when the earliest window its event
time can fall in (:func:`earliest_window`) ended at or before the watermark in force before
the micro-batch that brought it.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from gold.aggregates import ROW_IMAGES, counted_rows
from lakehouse_core.durations import duration_micros
from lakehouse_core.gold_tables import GoldTable

#: Finality columns of every gold table: whether the window ended at or before the table's
#: watermark, and when it took its final values (see docs/gold.md).
FINAL = "_final"
FINALIZED_AT = "_finalized_at"

#: Silver's record of where a row's current value was read in bronze.
BRONZE_COORDINATES = ("_bronze_topic", "_bronze_partition", "_bronze_offset")
_TYPES: tuple[tuple[str, DataType], ...] = (
    ("gold_table", StringType()),
    ("window_start", TimestampType()),
    ("window_end", TimestampType()),
    ("group_values", MapType(StringType(), StringType())),
    ("change_type", StringType()),
    ("event_time", TimestampType()),
    ("bronze_topic", StringType()),
    ("bronze_partition", IntegerType()),
    ("bronze_offset", LongType()),
    ("silver_version", LongType()),
    ("watermark", TimestampType()),
    ("late_by_seconds", DoubleType()),
    ("changed_at", TimestampType()),
)
#: The schema of ``gold.late_events``.
LATE_EVENTS_SCHEMA = StructType([StructField(name, kind) for name, kind in _TYPES])


def at_micros(micros: int) -> Column:
    """A timestamp literal from epoch microseconds (no time-zone conversion)."""
    return F.timestamp_micros(F.lit(micros))


def earliest_window(micros: Column, table: GoldTable) -> tuple[Column, Column]:
    """Start and end (epoch µs) of the earliest-ending window an event at ``micros`` can fall
    in: tumbling and hopping, the earliest-ending window holding it; session, the session of
    the event alone (``[t, t + gap)``); sliding, the event's own row (``[t - lookback, t]``);
    row (a stream join's source row), its own row (``[t - within, t]``); count, the event
    time itself."""
    window = table.window
    if window.kind in ("tumbling", "hopping"):
        assert window.size is not None
        size = duration_micros(window.size)
        slide = duration_micros(window.slide or window.size)
        latest = micros - F.pmod(micros, F.lit(slide))  # start of the latest window holding t
        behind = F.lit(size - 1) - (micros - latest)
        start = latest - (behind - F.pmod(behind, F.lit(slide)))
        return start, start + F.lit(size)
    if window.kind == "session":
        assert window.gap is not None
        return micros, micros + F.lit(duration_micros(window.gap))
    if window.kind == "sliding":
        assert window.lookback is not None
        return micros - F.lit(duration_micros(window.lookback)), micros
    if window.kind == "row":
        assert table.stream_join is not None
        return micros - F.lit(table.stream_join.within_micros), micros
    return micros, micros


def earliest_end(table: GoldTable) -> Column:
    """An aggregate over change-feed rows: the lowest end (epoch µs) of the
    :func:`earliest_window` of a row image with an event time (null: none). A batch whose
    value is after the watermark has no late events; the filter can only drop rows."""
    micros = F.unix_micros(F.col(table.event_time))
    image = F.col("_change_type").isin(*ROW_IMAGES)
    return F.min(F.when(image, earliest_window(micros, table)[1]))


def late_events(changes: DataFrame, table: GoldTable, watermark: int) -> DataFrame:
    """The rows of ``gold.late_events`` for a batch of silver change-feed rows: one per row
    image (insert, delete, an update's old and new value) that the declaration counts and
    whose :func:`earliest_window` ended at or before ``watermark`` (epoch µs, in force before
    the batch)."""
    images = counted_rows(changes.where(F.col("_change_type").isin(*ROW_IMAGES)), table)
    micros = F.unix_micros(F.col(table.event_time))
    start, end = earliest_window(micros, table)
    late = images.where(end <= F.lit(watermark))
    window = (F.timestamp_micros(start), F.timestamp_micros(end))
    groups = {g: F.col(g) for g in table.group_by}
    return late_rows(late, table, watermark, window, groups, table.event_time)


def late_rows(
    late: DataFrame,
    table: GoldTable,
    watermark: int,
    window: tuple[Column, Column],
    groups: dict[str, Column],
    event_time: str,
    prefix: str = "",
) -> DataFrame:
    """``gold.late_events`` rows of ``late`` (late change-feed row images, their columns named
    ``prefix`` + name): the gold row's ``window`` (start, end) and ``groups`` (group-by column
    to value), the image's change type, ``event_time`` column, bronze coordinates (null where
    it has none), silver version and commit time, and ``watermark`` (epoch µs, in force)."""
    present = set(late.columns)

    def change(column: str) -> Column:
        return F.col(f"{prefix}{column}")

    def bronze(column: str, kind: str) -> Column:
        return (change(column) if column in present else F.lit(None)).cast(kind)

    micros = F.unix_micros(change(event_time))
    values = [part for g, value in groups.items() for part in (F.lit(g), value.cast("string"))]
    rows = late.select(
        F.lit(table.name).alias("gold_table"),
        window[0].alias("window_start"),
        window[1].alias("window_end"),
        F.create_map(*values).cast("map<string,string>").alias("group_values"),
        change("_change_type").alias("change_type"),
        change(event_time).cast("timestamp").alias("event_time"),
        bronze("_bronze_topic", "string").alias("bronze_topic"),
        bronze("_bronze_partition", "int").alias("bronze_partition"),
        bronze("_bronze_offset", "bigint").alias("bronze_offset"),
        change("_commit_version").alias("silver_version"),
        at_micros(watermark).alias("watermark"),
        ((F.lit(watermark) - micros) / F.lit(1_000_000)).alias("late_by_seconds"),
        change("_commit_timestamp").alias("changed_at"),
    )
    return rows.select(*(F.col(f.name).cast(f.dataType) for f in LATE_EVENTS_SCHEMA.fields))


def with_finality(
    recomputed: DataFrame,
    existing: DataFrame,
    table: GoldTable,
    watermark: int | None,
    batch_time: int,
) -> DataFrame:
    """``recomputed`` gold rows with :data:`FINAL` (window end at or before ``watermark``) and
    :data:`FINALIZED_AT`: kept from the ``existing`` row of the key if that was final with the
    same values, else ``batch_time`` (epoch µs) for a final row, null for the others."""
    end = F.col(table.window.end_as)
    final = F.lit(False) if watermark is None else end <= at_micros(watermark)
    old = existing.select(
        *(F.col(c).alias(f"_old_{c}") for c in table.columns),
        F.coalesce(F.col(FINAL), F.lit(False)).alias("_old_final"),
        F.col(FINALIZED_AT).alias("_old_at"),
    )
    same_key = [F.col(k).eqNullSafe(F.col(f"_old_{k}")) for k in table.key]
    unchanged = F.col("_old_final")
    for column in table.columns:
        unchanged = unchanged & F.col(column).eqNullSafe(F.col(f"_old_{column}"))
    at = F.when(F.coalesce(unchanged, F.lit(False)), F.col("_old_at")).otherwise(
        at_micros(batch_time)
    )
    joined = recomputed.join(old, same_key, "left")
    return joined.select(
        *table.columns,
        final.alias(FINAL),
        F.when(final, at).cast("timestamp").alias(FINALIZED_AT),
    )


def newly_final(gold: DataFrame, table: GoldTable, watermark: int, batch_time: int) -> DataFrame:
    """The ``gold`` rows not yet final whose window ended at or before ``watermark``, marked
    final as of ``batch_time`` (epoch µs).

    A row is final exactly when it has a :data:`FINALIZED_AT` (see :func:`with_finality`), and
    that column, unlike the boolean, has statistics in Delta's log (null counts, min/max): the
    files whose rows are all final, or whose windows all end after the watermark, are not
    read. The scan follows the rows that can still become final, not the table."""
    due = F.col(FINALIZED_AT).isNull() & (F.col(table.window.end_as) <= at_micros(watermark))
    return gold.where(due).select(
        *table.columns,
        F.lit(True).alias(FINAL),
        at_micros(batch_time).alias(FINALIZED_AT),
    )
