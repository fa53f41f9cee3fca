"""The bronze job: one streaming query from a source into one Delta table per topic."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from bronze.table import ensure_bronze_table, with_ingestion_metadata
from core.columns import REASON
from core.config import QualitySpec
from core.delta_io import BATCH_MARK
from core.failures import guarded
from core.identifiers import bronze_tables_for_topics
from core.layout import QUARANTINE_TABLE, Warehouse
from core.parallel import run_side_by_side
from core.quarantine import ensure_quarantine, quarantine
from core.streaming import Trigger, query_app_id
from expectations.checks import load_layer_checks
from expectations.compile import Check
from expectations.enforce import Outcome, TableChecks
from expectations.metrics import record_outcomes

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
    (the tables' appends run side by side).

    ``checks`` (by bronze table name) are enforced on the rows of their table's topic, counted
    in the job that counts the batch's records per topic: a ``fail`` expectation that breaks
    stops the batch before anything is written; rows a ``drop`` expectation catches go to the
    quarantine table instead of bronze; the counts go to the quality metrics table.

    Raises:
        ExpectationFailedError: a ``fail`` expectation broke (nothing of the batch is written).
    """
    checked: set[str] = set()  # topics whose table was created or checked by this query
    suites = dict(checks or {})

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        rows = with_ingestion_metadata(batch, batch_id).persist()
        try:
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
                    batch_id,
                    COORDINATES,
                )
                outcomes += found
                dropped = sum(o.dropped for o in found)
                if dropped:
                    dropping[topic] = compiled[table]
                    counts[topic] -= dropped
            spark = rows.sparkSession
            if outcomes:
                metrics = next(iter(suites.values())).metrics
                record_outcomes(spark, metrics, outcomes, app_id, batch_id)
            kept = rows
            if dropping:
                kept = rows.withColumn(REASON, _drop_reasons(dropping))
                quarantine(
                    kept.where(F.col(REASON).isNotNull()),
                    _table_of(dropping, tables),
                    REASON,
                    COORDINATES,
                    warehouse.table("silver", QUARANTINE_TABLE),
                    f"{app_id}:quarantine",
                    batch_id,
                )
            appended = {}
            for topic in sorted(counts):
                records = kept.where(F.col("topic") == topic)
                if topic in dropping:
                    records = records.where(F.col(REASON).isNull()).drop(REASON)
                elif dropping:
                    records = records.drop(REASON)
                appended[topic] = records

            def append_topic(topic: str) -> None:
                path = warehouse.table("bronze", tables[topic])
                if topic not in checked:
                    ensure_bronze_table(spark, path, topic)
                    checked.add(topic)
                append_once(appended[topic], path, app_id, batch_id)

            run_side_by_side(spark, [partial(append_topic, topic) for topic in appended])
            if follower is not None:
                follower(appended, app_id, batch_id)
        finally:
            rows.unpersist()
        if listener is not None:
            listener(counts)

    return write_batch


def append_once(frame: DataFrame, path: str, app_id: str, batch_id: int) -> None:
    """Append ``frame`` to the bronze table at ``path`` as micro-batch ``batch_id`` of the
    query ``app_id``, always under Delta's transaction id (``txnAppId``/``txnVersion``).

    A batch that landed before (a restart after a crash) adds nothing, and of two processes
    writing the same batch at once (two runs on one checkpoint) Delta commits one: the other's
    commit is rejected (``ConcurrentTransactionException``, which fails its batch) or skipped.
    So bronze never holds a record twice, even without the warehouse's lease
    (:mod:`lakehouse.run.lease`). The commit is marked as every exactly-once write is
    (:data:`core.delta_io.BATCH_MARK`).
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
