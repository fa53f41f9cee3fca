"""Gold streaming jobs (revenue per window, exact under silver updates; user sessions) and
the registry of the pipeline's gold jobs (:func:`gold_jobs`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from core import checkpoints
from core.config import GoldSpec, PipelineConfig
from core.delta_io import ensure_table, idempotent_dml
from core.layout import Warehouse
from core.streaming import Trigger, query_app_id
from core.widening import TypeWidening
from gold.aggregates import revenue_deltas, sessions
from gold.schema_log import rebase_schema_log, schema_log_location

REVENUE_TABLE = "revenue_per_minute"
SESSIONS_TABLE = "user_sessions"
REVENUE_QUERY = f"gold_{REVENUE_TABLE}"
SESSIONS_QUERY = f"gold_{SESSIONS_TABLE}"
#: Gold tables are small and read by BI tools: a wider type rewrites them, so every Delta
#: reader keeps opening them.
GOLD_WIDENING: TypeWidening = "rewrite"


def silver_changes(
    spark: SparkSession, path: str, checkpoint: str | None = None, starting_version: int = 0
) -> DataFrame:
    """The change feed of a silver table as a stream, from ``starting_version`` (its first
    version, unless a replay installed a gold table that already holds the earlier ones).

    With the query's ``checkpoint``, the stream follows silver's schema changes: Delta keeps a
    schema log under the checkpoint and reads each version with the schema it was written
    with. A new column or a widened type stops the query once with Delta's
    ``DELTA_STREAMING_METADATA_EVOLUTION``; started again from its checkpoint (the pipeline
    does that), it reads on with the new schema. Without the log, a widened type would stop
    the stream for good. Silver only widens types, so every type change is accepted. The log
    is first pointed at the checkpoint's current place, in case it was moved (replay, copy).
    """
    reader = (
        spark.readStream.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", starting_version)
    )
    if checkpoint is not None:
        rebase_schema_log(checkpoint)
        reader = reader.option("schemaTrackingLocation", schema_log_location(checkpoint)).option(
            "allowSourceColumnTypeChange", "always"
        )
    return reader.load(path)


def start_revenue(
    spark: SparkSession, warehouse: Warehouse, spec: GoldSpec, trigger: Trigger
) -> StreamingQuery:
    """Revenue and order count per tumbling window of order event time."""
    place = checkpoints.current(spark, warehouse.checkpoint(REVENUE_QUERY))
    checkpoint = place.location
    changes = silver_changes(
        spark, warehouse.table("silver", spec.orders_table), checkpoint, place.starting_version
    )
    writer = (
        changes.writeStream.queryName(REVENUE_QUERY)
        .option("checkpointLocation", checkpoint)
        .foreachBatch(
            _revenue_merger(
                warehouse.table("gold", REVENUE_TABLE), spec, query_app_id(spark, checkpoint)
            )
        )
    )
    return trigger.apply(writer).start()


def _revenue_merger(path: str, spec: GoldSpec, app_id: str) -> Callable[[DataFrame, int], None]:
    def merge(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        deltas = revenue_deltas(batch, spec.order_time, spec.order_amount, spec.revenue_window)
        ensure_table(spark, path, deltas.schema, change_feed=False, widening=GOLD_WIDENING)
        total_orders = F.col("t.orders") + F.col("s.orders")
        with idempotent_dml(spark, app_id, batch_id):
            (
                DeltaTable.forPath(spark, path)
                .alias("t")
                .merge(deltas.alias("s"), F.col("t.window_start") == F.col("s.window_start"))
                .whenMatchedDelete(condition=total_orders == 0)
                .whenMatchedUpdate(
                    set={
                        "revenue": F.col("t.revenue") + F.col("s.revenue"),
                        "orders": total_orders,
                    }
                )
                .whenNotMatchedInsertAll(condition=F.col("s.orders") != 0)
                .execute()
            )

    return merge


def start_sessions(
    spark: SparkSession, warehouse: Warehouse, spec: GoldSpec, trigger: Trigger
) -> StreamingQuery:
    """User sessions, rebuilt for the users whose click events arrived in each micro-batch.

    A late event can merge or split a user's sessions, so the user's sessions are recomputed
    from silver (all of that user's events) and replace the old ones; the table therefore does
    not depend on how the events were split into micro-batches.
    """
    place = checkpoints.current(spark, warehouse.checkpoint(SESSIONS_QUERY))
    checkpoint = place.location
    clicks = warehouse.table("silver", spec.clicks_table)
    writer = (
        silver_changes(spark, clicks, checkpoint, place.starting_version)
        .writeStream.queryName(SESSIONS_QUERY)
        .option("checkpointLocation", checkpoint)
        .foreachBatch(
            _session_rebuilder(
                clicks,
                warehouse.table("gold", SESSIONS_TABLE),
                spec,
                query_app_id(spark, checkpoint),
            )
        )
    )
    return trigger.apply(writer).start()


def _session_rebuilder(
    clicks_path: str, path: str, spec: GoldSpec, app_id: str
) -> Callable[[DataFrame, int], None]:
    def rebuild(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        users = [r[0] for r in batch.select(spec.click_user).distinct().collect()]
        if not users:
            return
        touched = F.col(spec.click_user).isin(users)
        events = spark.read.format("delta").load(clicks_path).where(touched)
        rebuilt = sessions(events, spec.click_user, spec.click_time, spec.session_gap)
        rebuilt = rebuilt.localCheckpoint()
        ensure_table(spark, path, rebuilt.schema, change_feed=False, widening=GOLD_WIDENING)
        with idempotent_dml(spark, app_id, batch_id):
            replace_sessions(spark, path, rebuilt, users)

    return rebuild


def replace_sessions(spark: SparkSession, path: str, rebuilt: DataFrame, users: list[Any]) -> None:
    """Make the sessions of ``users`` in the table exactly ``rebuilt``, in one commit.

    One MERGE, not a delete and an append: a replayed micro-batch must not delete what the
    first attempt appended (a delete that matched nothing commits nothing, so its transaction
    id would not be recorded). Applying the same sessions again changes nothing.
    """
    same_session = (F.col("t.user_id") == F.col("s.user_id")) & (
        F.col("t.session_start") == F.col("s.session_start")
    )
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(rebuilt.alias("s"), same_session)
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .whenNotMatchedBySourceDelete(condition=F.col("t.user_id").isin(users))
        .execute()
    )


class GoldJob(NamedTuple):
    """A gold streaming job: its query (and checkpoint) name, gold table and silver input."""

    query: str
    table: str
    input: str
    what: str
    start: Callable[[SparkSession, Warehouse, GoldSpec, Trigger], StreamingQuery]


def gold_jobs(config: PipelineConfig) -> list[GoldJob]:
    """Every gold job of the pipeline with the silver table it reads."""
    gold = config.gold
    return [
        GoldJob(
            REVENUE_QUERY, REVENUE_TABLE, gold.orders_table, "revenue per window", start_revenue
        ),
        GoldJob(SESSIONS_QUERY, SESSIONS_TABLE, gold.clicks_table, "user sessions", start_sessions),
    ]
