"""Pure transforms for the gold jobs."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

#: Change-feed row kinds and the sign with which they count in an aggregate.
ADDS = ("insert", "update_postimage")
RETRACTS = ("delete", "update_preimage")


def change_sign() -> Column:
    """+1 for a row image that enters the table, -1 for one that leaves it, else 0."""
    kind = F.col("_change_type")
    return F.when(kind.isin(*ADDS), 1).when(kind.isin(*RETRACTS), -1).otherwise(0)


def revenue_deltas(
    changes: DataFrame, time_column: str, amount_column: str, window: str
) -> DataFrame:
    """Signed per-window contributions of a batch of order changes.

    Each row image of the silver change feed adds (insert, post-image) or removes (delete,
    pre-image) its order from the window of its event time, so updates and deletes of
    already-counted orders correct the aggregate instead of double counting.
    """
    sign = change_sign()
    return (
        changes.where(F.col(time_column).isNotNull())
        .groupBy(F.window(time_column, window).alias("window"))
        .agg(
            F.sum(sign * F.coalesce(F.col(amount_column), F.lit(0))).alias("revenue"),
            F.sum(sign).cast("bigint").alias("orders"),
        )
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "revenue",
            "orders",
        )
    )


def sessions(events: DataFrame, user_column: str, time_column: str, gap: str) -> DataFrame:
    """User sessions (a new one starts after ``gap`` without events) of a set of click events."""
    return (
        events.groupBy(
            F.col(user_column).alias("user_id"), F.session_window(time_column, gap).alias("s")
        )
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.min(time_column).alias("first_event_at"),
            F.max(time_column).alias("last_event_at"),
        )
        .select(
            "user_id",
            F.col("s.start").alias("session_start"),
            F.col("s.end").alias("session_end"),
            "events",
            (F.unix_timestamp("last_event_at") - F.unix_timestamp("first_event_at")).alias(
                "duration_seconds"
            ),
        )
    )
