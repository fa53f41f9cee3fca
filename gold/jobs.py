"""Gold streaming jobs: revenue per window (exact under silver updates) and user sessions."""

from __future__ import annotations

from collections.abc import Callable

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from gold.aggregates import revenue_deltas, sessions
from lakehouse.config import GoldSpec
from lakehouse.layout import Warehouse
from lakehouse.streaming import Trigger, query_app_id
from silver.tables import ensure_table, idempotent_dml

REVENUE_TABLE = "revenue_per_minute"
SESSIONS_TABLE = "user_sessions"
REVENUE_QUERY = f"gold_{REVENUE_TABLE}"
SESSIONS_QUERY = f"gold_{SESSIONS_TABLE}"


def silver_changes(spark: SparkSession, path: str) -> DataFrame:
    """The change feed of a silver table as a stream, from its first version."""
    return (
        spark.readStream.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(path)
    )


def start_revenue(
    spark: SparkSession, warehouse: Warehouse, spec: GoldSpec, trigger: Trigger
) -> StreamingQuery:
    """Revenue and order count per tumbling window of order event time."""
    checkpoint = warehouse.checkpoint(REVENUE_QUERY)
    changes = silver_changes(spark, warehouse.table("silver", spec.orders_table))
    writer = (
        changes.writeStream.queryName(REVENUE_QUERY)
        .option("checkpointLocation", checkpoint)
        .foreachBatch(
            _revenue_merger(warehouse.table("gold", REVENUE_TABLE), spec, query_app_id(checkpoint))
        )
    )
    return trigger.apply(writer).start()


def _revenue_merger(path: str, spec: GoldSpec, app_id: str) -> Callable[[DataFrame, int], None]:
    def merge(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        deltas = revenue_deltas(batch, spec.order_time, spec.order_amount, spec.revenue_window)
        ensure_table(spark, path, deltas.schema, change_feed=False)
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
    """Finalised user sessions from the inserted click events, appended exactly once."""
    inserted = silver_changes(spark, warehouse.table("silver", spec.clicks_table)).where(
        F.col("_change_type") == "insert"
    )
    result = sessions(inserted, spec.click_user, spec.click_time, spec.session_gap, spec.watermark)
    writer = (
        result.writeStream.queryName(SESSIONS_QUERY)
        .format("delta")
        .outputMode("append")
        .option("checkpointLocation", warehouse.checkpoint(SESSIONS_QUERY))
    )
    return trigger.apply(writer).start(warehouse.table("gold", SESSIONS_TABLE))
