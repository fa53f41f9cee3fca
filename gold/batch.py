"""One micro-batch of a gold table's job, as stages run once each, in order:

scope (:func:`scope`: the batch's change rows, the current source rows and the (group,
window) keys the batch affects, with its newest event time, commit time and watermark) ->
recompute (:func:`recompute_scope`: the declaration over the scope's silver rows) -> plan
(:func:`plan`: the rows that make the gold table's scope equal the result, finality and the
late events) -> check (:func:`check`: the suite's expectations on the rows to write) ->
write (:func:`write`: late events, the MERGE, the watermark, each exactly once).

:class:`GoldMaintainer` is the foreachBatch function that runs them (:mod:`gold.jobs` starts
the queries); :class:`GoldBatch` is what every stage takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from typing import NamedTuple

import pyarrow as pa
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructField, StructType, TimestampType

from expectations.enforce import Seen, TableChecks
from expectations.metrics import record_outcomes
from gold.aggregates import (
    ADDS,
    PRESENT,
    ROW_IMAGES,
    affected,
    in_scope,
    out_of_scope,
    recompute,
    replacement,
    same_key,
    scope_columns,
)
from gold.enrichment import (
    ENTITY,
    SIDE,
    enrich,
    entity_rows,
    entity_versions,
    history_columns,
    scope_rows,
)
from gold.feed import GOLD_WIDENING
from gold.finality import FINAL, FINALIZED_AT, earliest_end, late_events, newly_final, with_finality
from gold.stream_join import (
    OTHER,
    late_matches,
    other_changes,
    recompute_rows,
    time_range,
)
from gold.stream_join import touched as touched_rows
from gold.watermarks import RecordedSeen, watermark_of
from lakehouse_core.delta_io import (
    EnsuredTables,
    HeldRows,
    Replacement,
    append_few,
    merge_held,
    merge_materialized,
    read_table,
    replace_once,
)
from lakehouse_core.frames import kept_with_totals
from lakehouse_core.gold_tables import GoldTable, Join
from lakehouse_core.layout import HISTORY_SUFFIX, Warehouse


class JoinInputs(NamedTuple):
    """Where a join's entity is read: its silver table, and for a join as of event time its
    history table and history log (None otherwise)."""

    entity: str
    history: str | None = None
    log: str | None = None


def join_inputs(warehouse: Warehouse, join: Join) -> JoinInputs:
    """The tables the ``join`` reads in ``warehouse``."""
    entity = warehouse.table("silver", join.entity)
    if not join.at_event_time:
        return JoinInputs(entity)
    history = warehouse.table("silver", f"{join.entity}{HISTORY_SUFFIX}")
    return JoinInputs(entity, history, warehouse.history_log(join.entity))


def joined_entity(spark: SparkSession, join: Join, inputs: JoinInputs) -> DataFrame:
    """What the join takes its columns from: the entity's current rows
    (:func:`~gold.enrichment.entity_rows`), or as of event time its history's versions
    (:func:`~gold.enrichment.entity_versions`)."""
    if inputs.history is None or inputs.log is None:
        return entity_rows(spark.read.format("delta").load(inputs.entity), join)
    history = spark.read.format("delta").load(inputs.history).select(*history_columns(join))
    return entity_versions(history, spark.read.format("delta").load(inputs.log), join)


class GoldPaths(NamedTuple):
    """Where a gold job reads and writes: its silver source, gold table, watermark state,
    the shared ``gold.late_events`` and the joined entity's tables (if any)."""

    source: str
    gold: str
    watermark: str
    late_events: str
    joined: JoinInputs | None = None
    #: The stream-joined silver table (if any).
    other: str | None = None


class GoldState:
    """What a gold table's job keeps between its micro-batches: the schemas its table took,
    and the newest event time it recorded (the watermark's input)."""

    def __init__(self, paths: GoldPaths) -> None:
        self.ensured = EnsuredTables()
        self.recorded = RecordedSeen(paths.watermark)


@dataclass(frozen=True)
class GoldBatch:
    """One micro-batch's surroundings, taken by each of its stages: the session, the
    declaration, its tables, the batch's exactly-once writer id and id, the job's state, and
    the suite's checks (None: none)."""

    spark: SparkSession
    table: GoldTable
    paths: GoldPaths
    app_id: str
    batch_id: int
    state: GoldState
    checks: TableChecks | None = None


@dataclass(frozen=True)
class Scoped:
    """A micro-batch scoped: its source change rows (``facts``) and the current source rows
    (``silver``), both enriched for a join; its other-side change rows (a stream join, else
    None); the distinct (group, window) keys it affects (``keys``, as Arrow; ``scope``, the
    same as a DataFrame) and their first and last window key (time windows; else None); its
    newest event time (``seen``, with what was recorded ``before``), newest commit time
    (``batch_time``; None: no row images) and the earliest window end of its changes (epoch
    µs); and the watermark."""

    facts: DataFrame
    silver: DataFrame
    others: DataFrame | None
    keys: pa.Table
    scope: DataFrame
    first: object
    last: object
    before: int | None
    seen: int | None
    batch_time: int | None
    earliest: int | None
    watermark: int | None


@dataclass(frozen=True)
class GoldWrites:
    """What a batch writes: the rows that replace the gold table's scope (None: no MERGE,
    the scope and watermark did not change), and its late events (None: none can be)."""

    changes: DataFrame | None
    late: DataFrame | None


class GoldMaintainer:
    """The foreachBatch function of a gold table's job; ``checks``: its suite's row-level
    expectations, enforced on the rows each batch writes. Its optional third argument is the
    exactly-once writer id of the batch (default ``app_id``, the query's)."""

    def __init__(
        self, paths: GoldPaths, table: GoldTable, app_id: str, checks: TableChecks | None = None
    ) -> None:
        self.paths, self.table, self.app_id, self.checks = paths, table, app_id, checks
        self.state = GoldState(paths)

    def __call__(self, batch: DataFrame, batch_id: int, app_id: str | None = None) -> None:
        writer = self.app_id if app_id is None else app_id
        ctx = GoldBatch(
            batch.sparkSession, self.table, self.paths, writer, batch_id, self.state, self.checks
        )
        scoped = scope(ctx, batch)
        recomputed = recompute_scope(ctx, scoped)
        if scoped.batch_time is None:
            return  # no row images: nothing changed
        write(ctx, check(ctx, plan(ctx, scoped, recomputed)), scoped)


def scope(ctx: GoldBatch, batch: DataFrame) -> Scoped:
    """The scope stage: what the batch changed and the (group, window) keys it affects (one
    Spark job, which also observes its newest event and commit times)."""
    table, spark = ctx.table, ctx.spark
    silver = spark.read.format("delta").load(ctx.paths.source)
    # The batch's newest event time and commit time, and the earliest end of a window its
    # changes can fall in, taken in the job that finds its scope.
    stats = Observation(f"{ctx.app_id}:{ctx.batch_id}")
    image = F.col("_change_type").isin(*ROW_IMAGES)
    added = image & F.col("_change_type").isin(*ADDS)
    batch = batch.observe(
        stats,
        F.max(F.when(added, F.unix_micros(F.col(table.event_time)))).alias("seen"),
        F.max(F.when(image, F.unix_micros("_commit_timestamp"))).alias("at"),
        earliest_end(table).alias("earliest_end"),
    )
    facts, silver, touched, others = _scoped_batch(batch, silver, table, ctx.paths)
    # Distinct (group, window) keys, as small as the change, kept as Arrow: the scope then
    # reaches Spark again without a Python worker (timestamps stay instants, in UTC).
    keys = touched.toArrow()
    newest, batch_time, earliest = itemgetter("seen", "at", "earliest_end")(stats.get)
    before = ctx.state.recorded.read(spark, ctx.app_id, ctx.batch_id)
    seen = max((s for s in (before, newest) if s is not None), default=None)
    starts = [] if table.window.per_group else keys[table.window.key_column].to_pylist()
    first, last = (min(starts), max(starts)) if starts else (None, None)
    return Scoped(
        facts,
        silver,
        others,
        keys,
        spark.createDataFrame(keys, touched.schema),
        first,
        last,
        before,
        seen,
        batch_time,
        earliest,
        watermark_of(seen, table),
    )


def recompute_scope(ctx: GoldBatch, scoped: Scoped) -> DataFrame:
    """The recompute stage: the declaration over the current silver rows of the scope; the
    gold table is made to take its schema (also for a batch that changed nothing)."""
    table = ctx.table
    if ctx.paths.other is not None:
        other = ctx.spark.read.format("delta").load(ctx.paths.other)
        recomputed = recompute_rows(
            scoped.silver, other, scoped.scope, table, scoped.first, scoped.last
        )
    else:
        recomputed = recompute(scoped.silver, scoped.scope, table, scoped.first, scoped.last)
    schema = StructType(
        [
            *recomputed.schema.fields,
            StructField(FINAL, BooleanType()),
            StructField(FINALIZED_AT, TimestampType()),
        ]
    )
    ctx.state.ensured.ensure(
        ctx.spark, ctx.paths.gold, schema, change_feed=False, widening=GOLD_WIDENING
    )
    return recomputed


def plan(ctx: GoldBatch, scoped: Scoped, recomputed: DataFrame) -> GoldWrites:
    """The plan stage: the rows that make the gold table's scope equal ``recomputed`` (with
    their finality, and the rows outside the scope the watermark makes final), and the batch's
    late events (lazy: nothing runs)."""
    table, watermark, batch_time = ctx.table, scoped.watermark, scoped.batch_time
    assert batch_time is not None  # a batch without row images plans nothing
    previous = watermark_of(scoped.before, table)
    gold = read_table(ctx.spark, ctx.paths.gold)
    columns = scope_columns(table)
    existing = in_scope(_between(gold, table, scoped.first, scoped.last), scoped.scope, columns)
    changes = replacement(
        with_finality(recomputed, existing, table, watermark, batch_time), existing, table
    )
    any_key = scoped.keys.num_rows > 0
    if watermark is not None:
        outside = out_of_scope(gold, scoped.scope, columns, any_key)
        finals = newly_final(outside, table, watermark, batch_time)
        changes = changes.unionByName(finals.withColumn(PRESENT, F.lit(True)))
    merged = changes if any_key or watermark != previous else None
    # A stream join's late matches are found in the gold rows; otherwise a batch whose
    # changes all end after the watermark has no late events, and no job looks for them.
    late = None
    others = scoped.others
    if previous is not None and (others is not None or _may_be_late(scoped.earliest, previous)):
        late = late_events(scoped.facts, table, previous)
        if others is not None:
            late = late.unionByName(late_matches(others, existing, table, previous))
    return GoldWrites(merged, late)


def check(ctx: GoldBatch, writes: GoldWrites) -> GoldWrites:
    """The check stage: the rows to write kept (a local checkpoint); with the suite's checks,
    each is counted on the rows the MERGE writes (inserted or updated) in the job that keeps
    them, judged, and its metrics recorded.

    Raises:
        ExpectationFailedError: a ``fail`` expectation broke on a written row (nothing of the
            batch is written).
    """
    if writes.changes is None:
        return writes
    return GoldWrites(_checked(ctx, writes.changes), writes.late)


def write(ctx: GoldBatch, writes: GoldWrites, scoped: Scoped) -> None:
    """The write stage, in this order, the watermark last (the others under the batch's
    transaction id): a retried batch reads the watermark its first attempt read, so decides
    the same."""
    spark, paths = ctx.spark, ctx.paths
    if writes.late is not None:
        append_few(writes.late, paths.late_events, ctx.app_id, ctx.batch_id)
    if writes.changes is not None:
        replace = partial(replace_windows, spark, paths.gold, table=ctx.table)
        replace_once(spark, paths.gold, writes.changes, (ctx.app_id, ctx.batch_id), replace)
    if scoped.seen is not None and scoped.seen != scoped.before:
        ctx.state.recorded.record(spark, ctx.table, scoped.seen, ctx.app_id, ctx.batch_id)


def _may_be_late(earliest_end: int | None, watermark: int) -> bool:
    """Whether a batch whose row images' earliest window end is ``earliest_end`` (epoch µs,
    None: no row image with an event time) can hold a change late under ``watermark``."""
    return earliest_end is not None and earliest_end <= watermark


def _checked(ctx: GoldBatch, changes: DataFrame) -> DataFrame:
    """See :func:`check`."""
    checks = ctx.checks
    if checks is None:
        return changes  # kept by the write stage (:func:`~lakehouse_core.delta_io.replace_once`)
    compiled = checks.compile(changes.schema, F.col(PRESENT))
    kept, counts = kept_with_totals(changes, *TableChecks.totals(compiled))
    written = Seen(None, "rows the batch inserts or updates")
    outcomes = checks.judge(compiled, counts, kept, scope_columns(ctx.table), ctx.batch_id, written)
    record_outcomes(kept.sparkSession, checks.metrics, outcomes, ctx.app_id, ctx.batch_id)
    return kept


def _scoped_batch(
    batch: DataFrame, silver: DataFrame, table: GoldTable, paths: GoldPaths
) -> tuple[DataFrame, DataFrame, DataFrame, DataFrame | None]:
    """A micro-batch's source change rows, the current source rows (both enriched for a
    join), the scope the batch affects and, for a stream join, its other-side change rows."""
    if paths.joined is not None:
        facts, silver, touched = _joined_batch(batch, silver, table, paths.joined)
        return facts, silver, touched, None
    if paths.other is not None:
        facts = batch.where(F.col(OTHER).isNull()).drop(OTHER)
        others = other_changes(batch)
        span = time_range(others, table)
        return facts, silver, touched_rows(facts, silver, others, table, *span), others
    return batch, silver, affected(batch, table), None


def _joined_batch(
    batch: DataFrame, silver: DataFrame, table: GoldTable, inputs: JoinInputs
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """A joined gold table's micro-batch (:func:`joined_changes`) as the source's change rows
    and the current source rows, both enriched, and the scope the batch affects."""
    join = table.join
    assert join is not None
    spark = batch.sparkSession
    at = table.event_time if join.at_event_time else None
    # Read three times below: as of event time, its versions are computed once.
    entity = joined_entity(spark, join, inputs)
    if at is not None:
        entity = entity.localCheckpoint()
    changes = batch.where(F.col(SIDE) == "entity").select("_change_type", f"{ENTITY}.*")
    if inputs.log is not None:
        log = spark.read.format("delta").load(inputs.log)
        changes = entity_versions(changes, log, join, keep=("_change_type",))
    facts = batch.where(F.col(SIDE) == "source").drop(SIDE, ENTITY)
    touched = affected(scope_rows(facts, silver, changes, entity, join, at), table)
    return enrich(facts, entity, join, at), enrich(silver, entity, join, at), touched


def _between(gold: DataFrame, table: GoldTable, first: object, last: object) -> DataFrame:
    """The gold rows whose window key lies from ``first`` to ``last`` (the scope's, for time
    windows; None: no bound): Delta skips the files whose statistics lie outside."""
    if first is None:
        return gold
    return gold.where(F.col(table.window.key_column).between(F.lit(first), F.lit(last)))


def replace_windows(
    spark: SparkSession, path: str, changes: DataFrame | HeldRows, table: GoldTable
) -> None:
    """Apply a :func:`gold.aggregates.replacement` to the gold table in one commit: rows
    marked absent are deleted, the others replace the row of their key or are inserted; rows
    the driver holds are merged from it (:func:`~lakehouse_core.delta_io.merge_held`), a
    (kept) frame by Spark's MERGE.

    One MERGE, not a delete and an append: a replayed micro-batch must not delete what the
    first attempt wrote, and applying the same rows again changes nothing.
    """
    written = (*table.columns, FINAL, FINALIZED_AT)
    if isinstance(changes, HeldRows):
        merge_held(path, changes, Replacement(table.key, written, PRESENT))
        return
    values: dict[str, str | Column] = {c: F.col(f"s.{c}") for c in written}
    merge = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(changes.alias("s"), same_key(table))
        .whenMatchedDelete(condition=~F.col(f"s.{PRESENT}"))
        .whenMatchedUpdate(set=values)
        .whenNotMatchedInsert(condition=F.col(f"s.{PRESENT}"), values=values)
    )
    merge_materialized(merge, changes)
