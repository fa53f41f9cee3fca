"""The quality metrics table: per micro-batch, table and expectation, rows counted, failed and
dropped (``_system/quality``, SQL name ``system.quality``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from expectations.enforce import Outcome
from lakehouse_core.delta_io import append_held, ensure_table, table_exists

QUALITY_SCHEMA = StructType(
    [
        StructField("table", StringType()),  # <layer>.<table>
        StructField("expectation", StringType()),
        StructField("type", StringType()),
        StructField("action", StringType()),
        StructField("mostly", DoubleType()),
        StructField("batch_id", LongType()),
        StructField("checked_at", TimestampType()),
        StructField("rows_counted", LongType()),  # non-null values (all rows for not-null)
        StructField("rows_failed", LongType()),
        StructField("rows_dropped", LongType()),
        StructField("held", BooleanType()),
    ]
)


def ensure_quality_table(spark: SparkSession, path: str) -> None:
    """Create the metrics table unless it exists (before queries that append to it start
    together, so that they do not race to create it)."""
    if not table_exists(spark, path):
        ensure_table(spark, path, QUALITY_SCHEMA, change_feed=False)


def record_outcomes(
    spark: SparkSession,
    path: str,
    outcomes: Sequence[Outcome],
    app_id: str,
    batch_id: int,
) -> None:
    """Append one row per outcome, checked now, for micro-batch ``batch_id`` of the query
    whose idempotency id is ``app_id`` (idempotent per query and batch)."""
    if not outcomes:
        return
    at = datetime.now(UTC)
    rows = [
        {
            "table": o.rule.suite,
            "expectation": o.rule.name,
            "type": o.rule.type,
            "action": o.rule.action,
            "mostly": o.rule.mostly,
            "batch_id": batch_id,
            "checked_at": at,
            "rows_counted": o.counted,
            "rows_failed": o.failed,
            "rows_dropped": o.dropped,
            "held": o.held,
        }
        for o in outcomes
    ]
    append_held(spark, rows, QUALITY_SCHEMA, path, (f"{app_id}:quality", batch_id))


def quality_summary(spark: SparkSession, path: str) -> DataFrame | None:
    """Per expectation (``<layer>.<table>.<name>``): action, rows counted, failed and dropped,
    and the micro-batches it broke in; None if no metrics were recorded."""
    if not table_exists(spark, path):
        return None
    return (
        spark.read.format("delta")
        .load(path)
        .groupBy(F.concat_ws(".", "table", "expectation").alias("expectation"), "action")
        .agg(
            F.sum("rows_counted").alias("counted"),
            F.sum("rows_failed").alias("failed"),
            F.sum("rows_dropped").alias("dropped"),
            F.count_if(~F.col("held")).alias("broke_in"),
        )
        .orderBy("expectation")
    )
