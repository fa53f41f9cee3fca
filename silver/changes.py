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

    A column of the winner that holds the TOAST placeholder (listed in ``_unavailable``)
    takes the value of the latest earlier event of the batch that carried a real value; the
    names still unresolved stay in ``_unavailable`` for the MERGE to fill from the table.
    """
    others = [c for c in changes.columns if c not in keys]
    aggregates: list[Column] = [F.max_by(F.struct(*others), order_of()).alias("_winner")]
    for name in toast_columns:
        real = ~F.array_contains("_unavailable", name)
        aggregates.append(F.max_by(F.col(name), F.when(real, order_of())).alias(f"_real_{name}"))
        aggregates.append(F.max(real).alias(f"_has_{name}"))
    grouped = changes.groupBy(*keys).agg(*aggregates)
    if not toast_columns:
        return grouped.select(*keys, "_winner.*")

    def resolved(name: str) -> Column:
        missing = F.array_contains("_winner._unavailable", name) & F.col(f"_has_{name}")
        return F.when(missing, F.col(f"_real_{name}")).otherwise(F.col(f"_winner.{name}"))

    resolved_names = F.filter(
        F.array(*[F.when(F.col(f"_has_{n}"), F.lit(n)) for n in toast_columns]),
        lambda n: n.isNotNull(),
    )
    return grouped.select(
        *keys,
        *[
            resolved(c).alias(c)
            if c in toast_columns
            else (
                F.array_except("_winner._unavailable", resolved_names).alias(c)
                if c == "_unavailable"
                else F.col(f"_winner.{c}").alias(c)
            )
            for c in others
        ],
    )


def newer_than(winners: DataFrame, current: DataFrame | None, keys: Sequence[str]) -> DataFrame:
    """Keep the winners whose order is above the key's current order (live row or tombstone).

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
