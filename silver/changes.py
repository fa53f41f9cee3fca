"""Pure transforms on parsed change events: the latest event per key, TOAST resolution."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehouse_core.columns import OP
from silver.parse import DELETE_OP, order_of


def latest_per_key(
    changes: DataFrame, keys: Sequence[str], toast_columns: Sequence[str] = ()
) -> DataFrame:
    """One row per key: the event with the highest order.

    ``changes`` must hold only events newer than the table's row or tombstone of their key.
    For the columns in ``toast_columns`` (partial columns: TOAST placeholders, or nulls under
    ``ignore_null_updates``) the result also has ``_last_delete``, the order of the key's
    latest delete in the batch, and per column, among the key's events after that delete:
    ``_fill_<column>`` and ``_fill_order_<column>``, the value and order of the latest one that
    carried a real value for it (the column not in its ``_unavailable``), and
    ``_first_<column>``, the value the earliest one received. The MERGE resolves a column the
    winner lists in ``_unavailable`` from them (see ``merge_silver``).
    """
    if toast_columns:
        latest_delete = F.max(F.when(F.col(OP) == DELETE_OP, order_of()))
        changes = changes.withColumn(LAST_DELETE, latest_delete.over(Window.partitionBy(*keys)))
    others = [c for c in changes.columns if c not in keys]
    aggregates: list[Column] = [F.max_by(F.struct(*others), order_of()).alias("_winner")]
    live_order = F.when(F.col(LAST_DELETE).isNull() | (order_of() > F.col(LAST_DELETE)), order_of())
    for name in toast_columns:
        real_order = F.when(~F.array_contains("_unavailable", name), live_order)
        aggregates.append(F.max_by(F.col(name), real_order).alias(fill_value(name)))
        aggregates.append(F.max(real_order).alias(fill_order(name)))
        aggregates.append(F.min_by(F.col(name), live_order).alias(first_value(name)))
    fills = [
        c for name in toast_columns for c in (fill_value(name), fill_order(name), first_value(name))
    ]
    return changes.groupBy(*keys).agg(*aggregates).select(*keys, "_winner.*", *fills)


#: Column of ``latest_per_key``'s result: order of the key's latest delete in the batch.
LAST_DELETE = "_last_delete"


def first_value(column: str) -> str:
    return f"_first_{column}"


def fill_value(column: str) -> str:
    return f"_fill_{column}"


def fill_order(column: str) -> str:
    return f"_fill_order_{column}"


def newer_than(events: DataFrame, current: DataFrame | None, keys: Sequence[str]) -> DataFrame:
    """Keep the events whose order is above their key's current order (live row or tombstone).

    ``current`` has the key columns and ``_current`` (an order struct), possibly several rows
    per key.
    """
    if current is None:
        return events
    ours = current.join(events.select(*keys).distinct(), list(keys), "left_semi")
    latest = ours.groupBy(*keys).agg(F.max("_current").alias("_current"))
    return (
        events.join(latest, list(keys), "left")
        .where(F.col("_current").isNull() | (order_of() > F.col("_current")))
        .drop("_current")
    )
