"""The bronze job: one streaming query from a source into one Delta table per topic.

Each micro-batch runs its stages once each, in order: read (the rows with their ingestion
metadata, kept in memory) -> check (:func:`check`: records per topic and the bronze
expectations, one Spark job) -> plan (:func:`plan`: quarantined rows, each topic's rows) ->
write (:func:`write`: metrics, quarantine, the topics' appends side by side, exactly once)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from bronze.table import ensure_bronze_table, with_ingestion_metadata
from expectations.checks import load_layer_checks
from expectations.compile import Check
from expectations.enforce import Outcome, Seen, TableChecks
from expectations.metrics import record_outcomes
from lakehouse_core.columns import REASON
from lakehouse_core.config import QualitySpec
from lakehouse_core.delta_io import BATCH_MARK
from lakehouse_core.failures import guarded
from lakehouse_core.identifiers import bronze_tables_for_topics
from lakehouse_core.layout import QUARANTINE_TABLE, Warehouse
from lakehouse_core.parallel import run_side_by_side
from lakehouse_core.quarantine import ensure_quarantine, quarantine
from lakehouse_core.streaming import Trigger, query_app_id

BRONZE_QUERY = "bronze"
#: Where a bronze record came from: the columns its quarantine row and error messages name.
COORDINATES = ("topic", "partition", "offset")

#: Told the records of each topic in each micro-batch the bronze query appended.
TopicListener = Callable[[Mapping[str, int]], None]
#: Given, in the micro-batch, once its bronze appends committed: each topic's appended rows (as
#: the bronze table holds them, kept in memory), the query's id of its idempotent writes and
#: the batch id. A failure fails the batch, which a restart does again (the appends then add
#: nothing).
BatchFollower = Callable[[Mapping[str, DataFrame], str, int], None]


def start_bronze(
    source: DataFrame,
    warehouse: Warehouse,
    trigger: Trigger,
    listener: TopicListener | None = None,
    quality: QualitySpec | None = None,
    follower: BatchFollower | None = None,
) -> StreamingQuery:
    """Start streaming ``source`` (Kafka-shaped rows) into ``<warehouse>/bronze/<topic>``;
    ``listener`` is told each micro-batch's records per topic (in this Python process);
    ``quality``: the suites whose bronze expectations each micro-batch enforces;
    ``follower``: what else each micro-batch does with its appended rows (see
    :data:`BatchFollower`).

    Raises:
        ConfigError: a bronze suite is malformed or cannot run in a stream.
    """
    spark = source.sparkSession
    checkpoint = warehouse.checkpoint(BRONZE_QUERY)
    checks = load_layer_checks(spark, quality, warehouse, "bronze") if quality else {}
    if any(r.action == "drop" for c in checks.values() for r in c.suite.rules):
        ensure_quarantine(spark, warehouse.table("silver", QUARANTINE_TABLE))
    writer = (
        source.writeStream.queryName(BRONZE_QUERY)
        .option("checkpointLocation", checkpoint)
        .foreachBatch(
            guarded(
                append_batch_by_topic(
                    warehouse, query_app_id(spark, checkpoint), listener, checks, follower
                )
            )
        )
    )
    return trigger.apply(writer).start()


def append_batch_by_topic(
    warehouse: Warehouse,
    app_id: str,
    listener: TopicListener | None = None,
    checks: Mapping[str, TableChecks] | None = None,
    follower: BatchFollower | None = None,
) -> Callable[[DataFrame, int], None]:
    """A foreachBatch function appending each topic's rows to its bronze table exactly once
    (the tables' appends run side by side): :class:`BronzeBatches`.

    ``checks`` (by bronze table name) are enforced on the rows of their table's topic, counted
    in the job that counts the batch's records per topic: a ``fail`` expectation that breaks
    stops the batch before anything is written; rows a ``drop`` expectation catches go to the
    quarantine table instead of bronze; the counts go to the quality metrics table.

    Raises:
        ExpectationFailedError: a ``fail`` expectation broke (nothing of the batch is written).
    """
    return BronzeBatches(warehouse, app_id, listener, dict(checks or {}), follower)


@dataclass(frozen=True)
class BronzeBatch:
    """One micro-batch's surroundings, taken by each of its stages: the warehouse, the query's
    exactly-once id, the batch id, the bronze suites (by table name) and the batch's rows with
    their ingestion metadata (kept in memory while the batch runs)."""

    warehouse: Warehouse
    app_id: str
    batch_id: int
    suites: Mapping[str, TableChecks]
    rows: DataFrame


@dataclass(frozen=True)
class Checked:
    """A batch counted and checked: the records of each topic less those dropped, the bronze
    table of each topic, the checks' outcomes, and the compiled checks of each topic whose
    rows a ``drop`` expectation caught."""

    counts: dict[str, int]
    tables: Mapping[str, str]
    outcomes: list[Outcome]
    dropping: dict[str, list[Check]]


@dataclass(frozen=True)
class TopicWrites:
    """What a batch writes: its quarantined rows (None: none) and each topic's rows."""

    quarantined: DataFrame | None
    appended: dict[str, DataFrame]


class BronzeBatches:
    """The bronze query's foreachBatch function (see :func:`append_batch_by_topic`): each
    micro-batch runs read -> check -> plan -> write once; it remembers which topics' tables it
    created or checked."""

    def __init__(
        self,
        warehouse: Warehouse,
        app_id: str,
        listener: TopicListener | None,
        suites: Mapping[str, TableChecks],
        follower: BatchFollower | None,
    ) -> None:
        self.warehouse, self.app_id, self.suites = warehouse, app_id, suites
        self.listener, self.follower = listener, follower
        self.ensured: set[str] = set()  # topics whose table was created or checked

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        rows = with_ingestion_metadata(batch, batch_id).persist()
        try:
            ctx = BronzeBatch(self.warehouse, self.app_id, batch_id, self.suites, rows)
            checked = check(ctx)
            writes = plan(ctx, checked)
            write(ctx, checked, writes, self.ensured)
            if self.follower is not None:
                self.follower(writes.appended, self.app_id, batch_id)
        finally:
            rows.unpersist()
        if self.listener is not None:
            self.listener(checked.counts)


def check(ctx: BronzeBatch) -> Checked:
    """Count each topic's records and judge its table's checks, in one Spark job.

    Raises:
        ExpectationFailedError: a ``fail`` expectation broke.
    """
    rows, suites = ctx.rows, ctx.suites
    compiled = {table: c.compile(rows.schema) for table, c in suites.items()}
    per_topic = {
        r.topic: r
        for r in rows.groupBy("topic")
        .agg(
            F.count(F.lit(1)).alias("count"),
            *(F.struct(*TableChecks.totals(c)).alias(t) for t, c in compiled.items()),
        )
        .collect()
    }
    counts = {topic: int(r["count"]) for topic, r in per_topic.items()}
    tables = bronze_tables_for_topics(list(counts))
    outcomes: list[Outcome] = []
    dropping: dict[str, list[Check]] = {}
    for topic in sorted(counts):
        table = tables[topic]
        if table not in suites:
            continue
        found = suites[table].judge(
            compiled[table],
            per_topic[topic][table],
            rows.where(F.col("topic") == topic),
            (),
            ctx.batch_id,
            Seen(counts[topic], f"records of {topic}"),
            COORDINATES,
        )
        outcomes += found
        dropped = sum(o.dropped for o in found)
        if dropped:
            dropping[topic] = compiled[table]
            counts[topic] -= dropped
    return Checked(counts, tables, outcomes, dropping)


def plan(ctx: BronzeBatch, checked: Checked) -> TopicWrites:
    """Split the batch into its quarantined rows and each topic's rows to append (pure)."""
    dropping = checked.dropping
    kept, quarantined = ctx.rows, None
    if dropping:
        kept = ctx.rows.withColumn(REASON, _drop_reasons(dropping))
        quarantined = kept.where(F.col(REASON).isNotNull())
    appended = {}
    for topic in sorted(checked.counts):
        records = kept.where(F.col("topic") == topic)
        if topic in dropping:
            records = records.where(F.col(REASON).isNull()).drop(REASON)
        elif dropping:
            records = records.drop(REASON)
        appended[topic] = records
    return TopicWrites(quarantined, appended)


def write(ctx: BronzeBatch, checked: Checked, writes: TopicWrites, ensured: set[str]) -> None:
    """Write the batch, each write exactly once: the checks' metrics, the quarantined rows,
    then each topic's rows to its bronze table, side by side (``ensured``: the topics whose
    table this query created or checked; added to)."""
    spark, app_id, batch_id = ctx.rows.sparkSession, ctx.app_id, ctx.batch_id
    if checked.outcomes:
        metrics = next(iter(ctx.suites.values())).metrics
        record_outcomes(spark, metrics, checked.outcomes, app_id, batch_id)
    tables = checked.tables
    if writes.quarantined is not None:
        quarantine(
            writes.quarantined,
            _table_of(checked.dropping, tables),
            REASON,
            COORDINATES,
            ctx.warehouse.table("silver", QUARANTINE_TABLE),
            f"{app_id}:quarantine",
            batch_id,
        )

    def append_topic(topic: str, session: SparkSession) -> None:
        path = ctx.warehouse.table("bronze", tables[topic])
        if topic not in ensured:
            ensure_bronze_table(session, path, topic)
            ensured.add(topic)
        append_once(writes.appended[topic], path, app_id, batch_id)

    run_side_by_side(spark, [partial(append_topic, topic) for topic in writes.appended])


def append_once(frame: DataFrame, path: str, app_id: str, batch_id: int) -> None:
    """Append ``frame`` to the bronze table at ``path`` as micro-batch ``batch_id`` of the
    query ``app_id``, always under Delta's transaction id (``txnAppId``/``txnVersion``).

    A batch that landed before (a restart after a crash) adds nothing, and of two processes
    writing the same batch at once (two runs on one checkpoint) Delta commits one: the other's
    commit is rejected (``ConcurrentTransactionException``, which fails its batch) or skipped.
    So bronze never holds a record twice, even without the warehouse's lease
    (:mod:`lakehouse.run.lease`). The commit is marked as every exactly-once write is
    (:data:`lakehouse_core.delta_io.BATCH_MARK`).
    """
    (
        frame.write.format("delta")
        .mode("append")
        .option("mergeSchema", False)
        .option("txnAppId", app_id)
        .option("txnVersion", batch_id)
        .option("userMetadata", BATCH_MARK.format(app_id, batch_id))
        .save(path)
    )


def _drop_reasons(dropping: Mapping[str, list[Check]]) -> Column:
    """The drop reason of each record of the ``dropping`` topics (null: kept)."""
    reasons = []
    for topic, checks in dropping.items():
        reason = TableChecks.drop_reason(checks)
        assert reason is not None  # the topic dropped rows
        reasons.append(F.when(F.col("topic") == topic, reason))
    return F.coalesce(*reasons)


def _table_of(dropping: Mapping[str, list[Check]], tables: Mapping[str, str]) -> Column:
    """The bronze table name of each record's topic (the quarantine's ``entity`` of a record
    a bronze expectation dropped)."""
    return F.coalesce(*(F.when(F.col("topic") == t, F.lit(tables[t])) for t in dropping))
