"""The pattern engine's streaming job: one query per declared pattern over its silver table's
change feed, keeping ``gold.<name>`` equal to the pattern's matches over the current silver
rows after every micro-batch (docs/patterns.md).

Each micro-batch finds the partitions its changed rows belong to and, per partition, the
earliest changed event time. A match that starts more than the pattern's reach
(:attr:`~lakehouse_core.patterns.Pattern.reach_micros`) before it cannot hold the change, so each
such partition is matched again from there (with ``skip_past_last``, from the start of the last
match before there, which the change cannot touch either), in Python, grouped by partition
(:func:`_rematch`); the result replaces the partition's matches from there in one MERGE under
the batch's Delta transaction id. A final match the batch removes or changes is written to
``gold.late_events``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial, reduce
from operator import and_, itemgetter
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from gold.aggregates import ADDS, PRESENT, ROW_IMAGES
from gold.feed import GOLD_WIDENING, GoldJob, start_on_changes
from gold.finality import FINAL, FINALIZED_AT, LATE_EVENTS_SCHEMA, at_micros
from gold.patterns import Matcher, match_row, ordered
from gold.watermarks import RecordedSeen, watermark_of
from lakehouse_core.conditions import typed_condition
from lakehouse_core.config import PipelineConfig
from lakehouse_core.delta_io import (
    EnsuredTables,
    HeldRows,
    Replacement,
    append_few,
    ensure_table,
    insert_missing_held,
    merge_held,
    merge_materialized,
    read_table,
    replace_once,
)
from lakehouse_core.errors import ConfigError
from lakehouse_core.layout import LATE_EVENTS, Warehouse
from lakehouse_core.models import ALERTS_TABLE
from lakehouse_core.patterns import MATCH_END, MATCH_ID, MATCH_START, Pattern, match_id
from lakehouse_core.streaming import Trigger

#: Per changed partition, the earliest event time (epoch µs) a batch changed in it.
CHANGED_FROM = "_changed_from"
#: The grouping column of a pattern without partition columns.
_ALL = "_all"


def query_name(pattern: Pattern) -> str:
    """The streaming query (and checkpoint) name of a pattern's job."""
    return f"pattern_{pattern.name}"


def identity_columns(
    pattern: Pattern, keys: Sequence[str] | None, columns: Sequence[str]
) -> tuple[str, ...]:
    """The columns that tell a source row's events apart (ties in event time, match ids): the
    source's declared ``keys``, else its own columns (``columns`` less silver's ``_`` ones)."""
    if keys:
        return tuple(keys)
    return tuple(c for c in columns if not c.startswith("_"))


def type_names(schema: StructType) -> dict[str, str]:
    """Each column's Spark type name (``bigint``, ``decimal(12,2)``, ...)."""
    return {f.name: f.dataType.simpleString() for f in schema.fields}


def check_pattern(pattern: Pattern, schema: StructType) -> None:
    """Raise ConfigError if ``pattern`` reads a column ``schema`` lacks, its event time is
    not a timestamp, or a condition does not fit the column types."""
    pattern.check_columns(schema.fieldNames())
    if not isinstance(schema[pattern.event_time].dataType, TimestampType):
        raise ConfigError(
            f"event_time of pattern {pattern.name!r} is column {pattern.event_time!r} of type "
            f"{schema[pattern.event_time].dataType.simpleString()}: name a TIMESTAMP column."
        )
    types = Matcher(pattern, type_names(schema)).types
    for step in pattern.steps:
        assert step.parsed is not None
        typed_condition(step.parsed, types, f"Pattern {pattern.name!r}, step {step.name!r}:")
    if pattern.absent is not None:
        assert pattern.absent.parsed is not None
        typed_condition(pattern.absent.parsed, types, f"Pattern {pattern.name!r}, absent:")


def match_schema(pattern: Pattern, source: StructType) -> StructType:
    """The schema of ``gold.<name>`` without :data:`FINAL` and :data:`FINALIZED_AT`."""
    fields = [source[c] for c in pattern.partition_by]
    fields += [
        StructField(MATCH_ID, StringType()),
        StructField(MATCH_START, TimestampType()),
        StructField(MATCH_END, TimestampType()),
    ]
    for measure in pattern.measures:
        kind: DataType = LongType()
        if measure.column is not None and measure.fn != "count":
            kind = source[measure.column].dataType
            if measure.fn == "sum":
                kind = _sum_type(kind)
        fields.append(StructField(measure.name, kind))
    return StructType([StructField(f.name, f.dataType, True) for f in fields])


def _sum_type(kind: DataType) -> DataType:
    """The type of a sum, as Spark's ``sum``: bigint, double or a decimal 10 digits wider."""
    if isinstance(kind, DecimalType):
        return DecimalType(min(38, kind.precision + 10), kind.scale)
    if isinstance(kind, DoubleType | FloatType):
        return DoubleType()
    return LongType()


def final_from(pattern: Pattern) -> Column:
    """The watermark (a timestamp) from which a match row is final: its start plus
    ``within`` (no event on time can join it or an earlier attempt that could skip past it),
    and, with ``absent``, no earlier than its end plus the absence window."""
    start = F.col(MATCH_START) + F.expr(f"INTERVAL {pattern.within_micros} MICROSECONDS")
    if pattern.absent is None:
        return start
    end = F.col(MATCH_END) + F.expr(f"INTERVAL {pattern.absent.within_micros} MICROSECONDS")
    return F.greatest(start, end)


def start_pattern(
    spark: SparkSession,
    warehouse: Warehouse,
    trigger: Trigger,
    pattern: Pattern,
    keys: Sequence[str] | None = None,
) -> StreamingQuery:
    """Start the job that keeps ``gold.<pattern.name>`` equal to the pattern's matches over
    its silver table (``keys``: that table's declared keys, if any).

    Raises:
        ConfigError: the pattern reads a column the silver table lacks, or its conditions do
            not fit the column types (see :func:`check_pattern`).
    """
    source = warehouse.table("silver", pattern.source)
    if pattern.source not in warehouse.table_names("silver", spark):
        raise ConfigError(
            f"Pattern {pattern.name!r} reads silver.{pattern.source}, which does not exist: "
            "name a silver table in source (its entity must have had events)."
        )
    schema = spark.read.format("delta").load(source).schema
    check_pattern(pattern, schema)
    late_events = warehouse.table("gold", LATE_EVENTS)
    ensure_table(spark, late_events, LATE_EVENTS_SCHEMA, change_feed=False)
    paths = _Paths(
        source,
        warehouse.table("gold", pattern.name),
        warehouse.watermark(pattern.name),
        late_events,
        warehouse.table("gold", ALERTS_TABLE),
    )
    identity = identity_columns(pattern, keys, schema.fieldNames())
    return start_on_changes(
        spark,
        warehouse,
        query_name(pattern),
        source,
        trigger,
        lambda app_id: _maintainer(paths, pattern, identity, app_id),
    )


class _Paths(NamedTuple):
    """Where a pattern job reads and writes."""

    source: str
    gold: str
    watermark: str
    late_events: str
    alerts: str


def _maintainer(
    paths: _Paths, pattern: Pattern, identity: Sequence[str], app_id: str
) -> Callable[..., None]:
    """The foreachBatch function of ``pattern``'s job."""
    ensured = EnsuredTables()
    recorded = RecordedSeen(paths.watermark)

    def maintain(batch: DataFrame, batch_id: int, app_id: str = app_id) -> None:
        spark = batch.sparkSession
        silver = spark.read.format("delta").load(paths.source)
        micros = F.unix_micros(F.col(pattern.event_time))
        image = F.col("_change_type").isin(*ROW_IMAGES)
        stats = Observation(f"{app_id}:{batch_id}")
        batch = batch.observe(
            stats,
            F.max(F.when(image & F.col("_change_type").isin(*ADDS), micros)).alias("seen"),
            F.max(F.when(image, F.unix_micros("_commit_timestamp"))).alias("at"),
            F.max(F.when(image, F.col("_commit_version"))).alias("version"),
        )
        groups = _groups(pattern)
        changed = (
            _keyed(batch.where(image & micros.isNotNull()), pattern)
            .groupBy(*groups)
            .agg(F.min(micros).alias(CHANGED_FROM))
        )
        keys = changed.toArrow()
        newest, batch_time, version = itemgetter("seen", "at", "version")(stats.get)
        schema = match_schema(pattern, silver.schema)
        full = StructType(
            [
                *schema.fields,
                StructField(FINAL, BooleanType()),
                StructField(FINALIZED_AT, TimestampType()),
            ]
        )
        ensured.ensure(spark, paths.gold, full, change_feed=False, widening=GOLD_WIDENING)
        if batch_time is None:
            return  # no row images: nothing changed
        before = recorded.read(spark, app_id, batch_id)
        seen = max((s for s in (before, newest) if s is not None), default=None)
        watermark, previous = watermark_of(seen, pattern), watermark_of(before, pattern)
        gold = read_table(spark, paths.gold)
        changes = None
        if keys.num_rows:
            scope = spark.createDataFrame(keys, changed.schema)
            lowest = pc.min(keys[CHANGED_FROM]).as_py()
            recomputed, existing = _rematched(
                silver, gold, scope, pattern, identity, schema, lowest
            )
            changes = _with_finality(recomputed, existing, pattern, watermark, batch_time)
            if previous is not None:
                late = _late_matches(changes, existing, pattern, previous, version, batch_time)
                append_few(late, paths.late_events, app_id, batch_id)
        if watermark is not None and watermark != previous:
            due = gold.where(
                F.col(FINALIZED_AT).isNull() & (final_from(pattern) <= at_micros(watermark))
            )
            if changes is not None:
                due = due.join(changes.select(MATCH_ID), MATCH_ID, "left_anti")
            finals = due.select(
                *pattern.columns,
                F.lit(True).alias(FINAL),
                at_micros(batch_time).alias(FINALIZED_AT),
                F.lit(True).alias(PRESENT),
            )
            changes = finals if changes is None else changes.unionByName(finals)
        if changes is not None:
            # Kept where its alerts read it too; replace_once collects or keeps it otherwise.
            kept = changes.localCheckpoint() if pattern.alert else changes
            replace = partial(_replace, spark, paths.gold, pattern=pattern)
            replace_once(spark, paths.gold, kept, (app_id, batch_id), replace)
            if pattern.alert:
                alerts = alert_rows(kept, pattern, version)
                ensured.ensure(
                    spark, paths.alerts, alerts.schema, change_feed=False, widening=GOLD_WIDENING
                )
                raise_alerts(spark, paths.alerts, alerts, app_id, batch_id)
        if seen is not None and seen != before:
            recorded.record(spark, pattern, seen, app_id, batch_id)

    return maintain


def alert_rows(changes: DataFrame, pattern: Pattern, version: int | None) -> DataFrame:
    """``gold.alerts`` rows (method ``pattern``) for the decided matches among ``changes``:
    every match present, or with ``absent`` every final one."""
    decided = F.col(PRESENT) & (F.lit(pattern.absent is None) | F.col(FINAL))
    key = F.concat_ws(", ", *(F.col(c).cast("string") for c in pattern.partition_by))
    reason = F.format_string(
        f"pattern {pattern.name} matched from %s to %s",
        F.col(MATCH_START).cast("string"),
        F.col(MATCH_END).cast("string"),
    )
    return changes.where(decided).select(
        F.lit(pattern.name).alias("alert"),
        (key if pattern.partition_by else F.lit("")).alias("key"),
        F.col(MATCH_ID).alias("row_key"),
        F.col(MATCH_END).alias("event_time"),
        F.lit(None).cast("double").alias("value"),
        F.lit(None).cast("double").alias("score"),
        F.lit(None).cast("double").alias("threshold"),
        F.lit("pattern").alias("method"),
        F.lit(None).cast("bigint").alias("baseline_version"),
        F.lit(version).cast("bigint").alias("silver_version"),
        reason.alias("reason"),
    )


def raise_alerts(
    spark: SparkSession, path: str, alerts: DataFrame, app_id: str, batch_id: int
) -> None:
    """Add ``alerts`` to ``gold.alerts`` at ``path`` (which takes their schema) exactly once:
    a match raises its alert once, whatever later changes it. Few rows are inserted from the
    driver, none make no commit (:func:`~lakehouse_core.delta_io.replace_once`)."""
    replace = partial(_insert_alerts, spark, path)
    replace_once(spark, path, alerts, (app_id, batch_id), replace)


#: The key of a ``gold.alerts`` row: an alert is raised once per row it names.
_ALERT_KEY = ("alert", "row_key")


def _insert_alerts(spark: SparkSession, path: str, alerts: DataFrame | HeldRows) -> None:
    """Insert the ``alerts`` whose key ``gold.alerts`` lacks, in one commit."""
    if isinstance(alerts, HeldRows):
        insert_missing_held(path, alerts, _ALERT_KEY)
        return
    same = reduce(and_, (F.col(f"t.{k}") == F.col(f"s.{k}") for k in _ALERT_KEY))
    merge = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(alerts.alias("s"), same)
        .whenNotMatchedInsertAll()
    )
    merge_materialized(merge, alerts)


def _groups(pattern: Pattern) -> list[str]:
    """The grouping columns of ``pattern``'s partitions."""
    return list(pattern.partition_by) or [_ALL]


def _keyed(frame: DataFrame, pattern: Pattern) -> DataFrame:
    """``frame`` with the constant grouping column of a pattern without partition columns."""
    return frame if pattern.partition_by else frame.withColumn(_ALL, F.lit(0))


def _in_scope(
    frame: DataFrame, scope: DataFrame, pattern: Pattern, time: str, back: int, lowest: int
) -> DataFrame:
    """The rows of ``frame`` in a changed partition of ``scope`` whose ``time`` is at most
    ``back`` µs before that partition's :data:`CHANGED_FROM`; Delta skips the files whose
    times all lie before the earliest such bound (``lowest``: the least CHANGED_FROM)."""
    frame = _keyed(frame, pattern).where(F.col(time) >= at_micros(lowest - back))
    groups = _groups(pattern)
    same = [frame[g].eqNullSafe(scope[g]) for g in groups]
    # A new column each time: the two sides of a cogroup must not share one (Spark would
    # drop it from one side).
    joined = frame.join(scope, same).select(
        *(frame[c] for c in frame.columns), (scope[CHANGED_FROM] + F.lit(0)).alias(CHANGED_FROM)
    )
    return joined.where(F.unix_micros(F.col(time)) >= F.col(CHANGED_FROM) - F.lit(back))


def _rematched(
    silver: DataFrame,
    gold: DataFrame,
    scope: DataFrame,
    pattern: Pattern,
    identity: Sequence[str],
    schema: StructType,
    lowest: int,
) -> tuple[DataFrame, DataFrame]:
    """The changed partitions' matches from where a change can reach them (with
    :data:`PRESENT` true; the stored matches there the new ones do not repeat with it false),
    and the stored matches of that range."""
    back = pattern.reach_micros + pattern.within_micros
    events = _in_scope(silver, scope, pattern, pattern.event_time, back, lowest)
    stored = _in_scope(
        gold.select(*pattern.columns), scope, pattern, MATCH_START, back, lowest
    ).localCheckpoint()
    out = StructType([*schema.fields, StructField(PRESENT, BooleanType())])
    rematch = partial(
        _rematch,
        pattern=pattern,
        types=type_names(silver.schema),
        identity=tuple(identity),
        out=to_arrow_schema(out),
    )
    groups = _groups(pattern)
    recomputed = events.groupBy(*groups).cogroup(stored.groupBy(*groups)).applyInArrow(rematch, out)
    existing = stored.drop(CHANGED_FROM, *([] if pattern.partition_by else [_ALL]))
    existing = existing.join(gold.select(MATCH_ID, FINAL, FINALIZED_AT), MATCH_ID)
    return recomputed, existing


def _plain(table: pa.Table) -> list[dict[str, Any]]:
    """Arrow rows as dicts of plain values: instants as epoch µs, dates as epoch days."""
    columns = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        plain = column
        if pa.types.is_timestamp(column.type):
            plain = pc.cast(column, pa.int64())
        elif pa.types.is_date32(column.type):
            plain = pc.cast(column, pa.int32())
        columns[name] = plain
    return pa.table(columns).to_pylist() if columns else []


def _rematch(
    events: pa.Table,
    stored: pa.Table,
    pattern: Pattern,
    types: dict[str, str],
    identity: tuple[str, ...],
    out: pa.Schema,
) -> pa.Table:
    """One changed partition's new matches and the stored ones they replace (see
    :func:`_rematched`)."""
    rows = _plain(events)
    kept = _plain(stored)
    if not rows and not kept:
        return out.empty_table()
    changed_from = (rows or kept)[0][CHANGED_FROM]
    reach_from = changed_from - pattern.reach_micros
    ordered_events = ordered(rows, pattern.event_time, identity)
    first, replace_from, excluded = _resume(ordered_events, kept, pattern, identity, reach_from)
    matcher = Matcher(pattern, types)
    found = [
        match_row(pattern, ordered_events, match, identity)
        for match in matcher.matches(ordered_events, first)
    ]
    new_ids = {row[MATCH_ID] for row in found}
    gone = [
        {**row, PRESENT: False}
        for row in kept
        if row[MATCH_START] >= replace_from
        and row[MATCH_ID] not in excluded
        and row[MATCH_ID] not in new_ids
    ]
    result = [{**row, PRESENT: True} for row in found] + gone
    names = out.names
    return pa.Table.from_pylist([{n: r.get(n) for n in names} for r in result], schema=out)


def _resume(
    events: Sequence[Mapping[str, Any]],
    stored: list[dict[str, Any]],
    pattern: Pattern,
    identity: Sequence[str],
    reach_from: int,
) -> tuple[int, int, set[str]]:
    """Where matching starts again in a changed partition: the index of the first event, the
    start time from which stored matches are replaced, and the ids of stored matches starting
    at that time that come before that event (kept).

    The matches starting before ``reach_from`` cannot hold a change. With ``skip_past_last``
    the latest of them decides where the next one may start: matching starts again at its
    first event (it comes out the same); otherwise at the first event from ``reach_from``.
    """
    time = pattern.event_time
    first = next((i for i, e in enumerate(events) if e[time] >= reach_from), len(events))
    earlier = [row for row in stored if row[MATCH_START] < reach_from]
    if pattern.after_match != "skip_past_last" or not earlier:
        return first, reach_from, set()
    start = max(row[MATCH_START] for row in earlier)
    at_start = [i for i, e in enumerate(events) if e[time] == start]
    ids = {row[MATCH_ID] for row in earlier if row[MATCH_START] == start}
    partition = [events[at_start[0]][c] for c in pattern.partition_by] if at_start else []
    firsts = [i for i in at_start if match_id(partition, [events[i][c] for c in identity]) in ids]
    if not firsts:
        return first, reach_from, set()
    resume = max(firsts)
    excluded = {
        match_id(partition, [events[i][c] for c in identity]) for i in at_start if i < resume
    }
    return resume, start, excluded


def _with_finality(
    recomputed: DataFrame,
    existing: DataFrame,
    pattern: Pattern,
    watermark: int | None,
    batch_time: int,
) -> DataFrame:
    """``recomputed`` rows with :data:`FINAL` and :data:`FINALIZED_AT`: kept from the stored
    row of the same id if it was final with the same values, else ``batch_time`` for a final
    row, null for the others."""
    final = F.lit(False) if watermark is None else final_from(pattern) <= at_micros(watermark)
    old = existing.select(
        *(F.col(c).alias(f"_old_{c}") for c in pattern.columns),
        F.coalesce(F.col(FINAL), F.lit(False)).alias("_old_final"),
        F.col(FINALIZED_AT).alias("_old_at"),
    )
    unchanged = F.col("_old_final")
    for column in pattern.columns:
        unchanged = unchanged & F.col(column).eqNullSafe(F.col(f"_old_{column}"))
    at = F.when(F.coalesce(unchanged, F.lit(False)), F.col("_old_at")).otherwise(
        at_micros(batch_time)
    )
    joined = recomputed.join(old, F.col(MATCH_ID) == F.col(f"_old_{MATCH_ID}"), "left")
    return joined.select(
        *pattern.columns,
        (final & F.col(PRESENT)).alias(FINAL),
        F.when(final & F.col(PRESENT), at).cast("timestamp").alias(FINALIZED_AT),
        PRESENT,
    )


def _late_matches(
    changes: DataFrame,
    existing: DataFrame,
    pattern: Pattern,
    watermark: int,
    version: int | None,
    batch_time: int,
) -> DataFrame:
    """``gold.late_events`` rows for the stored final matches that ``changes`` remove
    (``match_removed``) or change (``match_changed``) under ``watermark`` (in force before the
    batch)."""
    final_before = existing.where(F.coalesce(F.col(FINAL), F.lit(False)))
    new = changes.select(*(F.col(c).alias(f"_new_{c}") for c in pattern.columns), PRESENT)
    joined = final_before.join(new, F.col(MATCH_ID) == F.col(f"_new_{MATCH_ID}"), "left")
    same = F.lit(True)
    for column in pattern.columns:
        same = same & F.col(column).eqNullSafe(F.col(f"_new_{column}"))
    removed = F.col(PRESENT).isNull() | ~F.col(PRESENT)
    late = joined.where(removed | ~same)
    values = [p for c in pattern.partition_by for p in (F.lit(c), F.col(c).cast("string"))]
    rows = late.select(
        F.lit(pattern.name).alias("gold_table"),
        F.col(MATCH_START).alias("window_start"),
        F.col(MATCH_END).alias("window_end"),
        F.create_map(*values).cast("map<string,string>").alias("group_values"),
        F.when(removed, "match_removed").otherwise("match_changed").alias("change_type"),
        F.col(MATCH_START).alias("event_time"),
        F.lit(None).cast("string").alias("bronze_topic"),
        F.lit(None).cast("int").alias("bronze_partition"),
        F.lit(None).cast("bigint").alias("bronze_offset"),
        F.lit(version).cast("bigint").alias("silver_version"),
        at_micros(watermark).alias("watermark"),
        ((F.lit(watermark) - F.unix_micros(F.col(MATCH_END))) / F.lit(1_000_000)).alias(
            "late_by_seconds"
        ),
        at_micros(batch_time).alias("changed_at"),
    )
    return rows.select(*(F.col(f.name).cast(f.dataType) for f in LATE_EVENTS_SCHEMA.fields))


def _replace(
    spark: SparkSession, path: str, changes: DataFrame | HeldRows, pattern: Pattern
) -> None:
    """Apply ``changes`` to the pattern table in one MERGE on the match id: rows with
    :data:`PRESENT` false are deleted, the others replace their row or are inserted; rows the
    driver holds are merged from it (:func:`~lakehouse_core.delta_io.merge_held`)."""
    written = (*pattern.columns, FINAL, FINALIZED_AT)
    if isinstance(changes, HeldRows):
        merge_held(path, changes, Replacement((MATCH_ID,), written, PRESENT))
        return
    values: dict[str, str | Column] = {c: F.col(f"s.{c}") for c in written}
    merge = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(changes.alias("s"), F.col(f"t.{MATCH_ID}") == F.col(f"s.{MATCH_ID}"))
        .whenMatchedDelete(condition=~F.col(f"s.{PRESENT}"))
        .whenMatchedUpdate(set=values)
        .whenNotMatchedInsert(condition=F.col(f"s.{PRESENT}"), values=values)
    )
    merge_materialized(merge, changes)


def evaluate_matches(silver: DataFrame, pattern: Pattern, identity: Sequence[str]) -> DataFrame:
    """The pattern's matches over all of ``silver`` (its current rows), as ``gold.<name>``
    holds them without :data:`FINAL` and :data:`FINALIZED_AT`: what ``lakehouse verify``
    compares the table with."""
    schema = match_schema(pattern, silver.schema)
    out = to_arrow_schema(schema)
    find = partial(
        _all_matches,
        pattern=pattern,
        types=type_names(silver.schema),
        identity=tuple(identity),
        out=out,
    )
    return _keyed(silver, pattern).groupBy(*_groups(pattern)).applyInArrow(find, schema)


def _all_matches(
    events: pa.Table,
    pattern: Pattern,
    types: dict[str, str],
    identity: tuple[str, ...],
    out: pa.Schema,
) -> pa.Table:
    """Every match of one partition's events."""
    rows = ordered(_plain(events), pattern.event_time, identity)
    found = [match_row(pattern, rows, m, identity) for m in Matcher(pattern, types).matches(rows)]
    return pa.Table.from_pylist([{n: r.get(n) for n in out.names} for r in found], schema=out)


def source_keys(config: PipelineConfig, pattern: Pattern) -> tuple[str, ...] | None:
    """The declared keys of ``pattern``'s source table, if any."""
    spec = next((t for t in config.tables if t.name == pattern.source), None)
    return None if spec is None or not spec.keys else tuple(spec.keys)


def pattern_jobs(config: PipelineConfig) -> list[GoldJob]:
    """The job of each declared pattern."""
    return [
        GoldJob(
            query_name(pattern),
            pattern.name,
            pattern.source,
            f"pattern matches into gold.{pattern.name}",
            partial(start_pattern, pattern=pattern, keys=source_keys(config, pattern)),
            entities=frozenset({pattern.source}),
        )
        for pattern in config.patterns
    ]
