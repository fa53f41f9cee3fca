"""Pure transforms on parsed change events: the latest event per key, TOAST resolution."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from silver.parse import order_of


def latest_per_key(
    changes: DataFrame, keys: Sequence[str], toast_columns: Sequence[str] = ()
) -> DataFrame:
    """One row per key: the event with the highest order.

    For each column in ``toast_columns`` (partial columns: TOAST placeholders, or nulls under
    ``ignore_null_updates``) the result also has ``_fill_<column>`` and
    ``_fill_order_<column>``: the value and order of the latest event of the batch that
    carried a real value for it (not listed in ``_unavailable``, not a delete), and
    ``_last_delete``: the order of the key's latest delete in the batch. The MERGE fills a
    column the winner lists in ``_unavailable`` from them; ``changes`` must hold only events
    newer than the table's row or tombstone of their key.
    """
    others = [c for c in changes.columns if c not in keys]
    aggregates: list[Column] = [F.max_by(F.struct(*others), order_of()).alias("_winner")]
    if toast_columns:
        deletes = F.when(F.col("_op") == "d", order_of())
        aggregates.append(F.max(deletes).alias(LAST_DELETE))
    for name in toast_columns:
        real = ~F.array_contains("_unavailable", name) & (F.col("_op") != "d")
        real_order = F.when(real, order_of())
        aggregates.append(F.max_by(F.col(name), real_order).alias(fill_value(name)))
        aggregates.append(F.max(real_order).alias(fill_order(name)))
    fills = [c for name in toast_columns for c in (fill_value(name), fill_order(name))]
    if toast_columns:
        fills.append(LAST_DELETE)
    return changes.groupBy(*keys).agg(*aggregates).select(*keys, "_winner.*", *fills)


#: Column of ``latest_per_key``'s result: order of the key's latest delete in the batch.
LAST_DELETE = "_last_delete"


def fill_value(column: str) -> str:
    return f"_fill_{column}"


def fill_order(column: str) -> str:
    return f"_fill_order_{column}"


def newer_than(winners: DataFrame, current: DataFrame | None, keys: Sequence[str]) -> DataFrame:
    """Keep the events whose order is above their key's current order (live row or tombstone).

    ``current`` has the key columns and ``_current`` (an order struct), possibly several rows
    per key.
    """
    if current is None:
        return winners
    latest = current.groupBy(*keys).agg(F.max("_current").alias("_current"))
    return (
        winners.join(latest, list(keys), "left")
        .where(F.col("_current").isNull() | (order_of() > F.col("_current")))
        .drop("_current")
    )
