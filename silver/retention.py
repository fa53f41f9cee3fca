"""Which silver rows a rebuild would change if some bronze records were dropped (pure).

Input: the parsed events of one entity (:func:`silver.parse.parse_changes`) with a boolean
``_dropped`` column. Only readable events and Kafka tombstones may be marked dropped; records
silver quarantines stay in bronze (the quarantine table refers to them).

A rebuild from the remaining records gives the same silver table when, for every key:

* its latest event is kept; or it is dropped but was a delete (or lies below the latest
  truncate), and no other event of the key is kept, since a kept older event would win then;
* if its latest event is kept and carries TOAST placeholders, no event of the key is dropped
  (the value it keeps could come from one of them);
* no kept event lies between the newest kept truncate and the newest truncate (the rebuild
  would not truncate it).

These rules are conservative: a key they flag might still come out the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_core.columns import OP, REASON
from lakehouse_core.config import TableSpec
from silver.parse import DELETE_OP, TRUNCATE_OP, as_text, discover_layout, order_of, parse_changes

#: Why a key's row could change: its reason column in :func:`retention_conflicts`.
REASONS = {
    "_latest_dropped": "their latest event is among them",
    "_toast_dropped": "their row keeps a TOAST value that may come from them",
    "_untruncated": "they would come back from before a truncate that is dropped",
}


def retention_conflicts(events: DataFrame, keys: Sequence[str]) -> DataFrame:
    """One row per key whose silver row could change, with a boolean column per reason."""
    valid = events.where(F.col(REASON).isNull() & ~F.col("_tombstone"))
    truncates = valid.where(F.col(OP) == TRUNCATE_OP).select(order_of().alias("_order"), "_dropped")
    floors = truncates.agg(
        F.max("_order").alias("_floor"),
        F.max(F.when(~F.col("_dropped"), F.col("_order"))).alias("_kept_floor"),
    )
    changes = valid.where(F.col(OP) != TRUNCATE_OP).select(
        *keys, order_of().alias("_order"), OP, "_unavailable", "_dropped"
    )
    latest = F.max_by(F.struct("_dropped", OP, "_unavailable"), "_order")
    per_key = (
        changes.crossJoin(floors)
        .groupBy(*keys)
        .agg(
            latest.alias("_latest"),
            F.max("_order").alias("_latest_order"),
            F.count_if(~F.col("_dropped")).alias("_kept"),
            F.count_if("_dropped").alias("_dropped_events"),
            F.count_if(~F.col("_dropped") & _between_floors()).alias("_between"),
            F.first("_floor").alias("_floor"),
        )
    )
    live = (F.col(f"_latest.{OP}") != DELETE_OP) & (
        F.col("_floor").isNull() | (F.col("_latest_order") > F.col("_floor"))
    )
    return per_key.select(
        *keys,
        (F.col("_latest._dropped") & (live | (F.col("_kept") > 0))).alias("_latest_dropped"),
        (
            ~F.col("_latest._dropped")
            & (F.size("_latest._unavailable") > 0)
            & (F.col("_dropped_events") > 0)
        ).alias("_toast_dropped"),
        (F.col("_between") > 0).alias("_untruncated"),
    ).where(F.col("_latest_dropped") | F.col("_toast_dropped") | F.col("_untruncated"))


def _between_floors() -> Column:
    """The event lies below the newest truncate but not below the newest kept truncate."""
    above_kept = F.col("_kept_floor").isNull() | (F.col("_order") > F.col("_kept_floor"))
    return F.col("_floor").isNotNull() & (F.col("_order") < F.col("_floor")) & above_kept


def marked_events(
    bronze: DataFrame, spec: TableSpec, old: Column
) -> tuple[DataFrame, tuple[str, ...]]:
    """Parsed events with ``_old`` (ingested before the cutoff) and ``_dropped`` (old and not
    quarantined), and the key columns."""
    texts = as_text(bronze)
    layout = discover_layout(texts, spec)
    ages = bronze.select(
        F.col("partition").alias("_bronze_partition"),
        F.col("offset").alias("_bronze_offset"),
        old.alias("_old"),
    )
    events = (
        parse_changes(texts, spec, layout)
        .join(ages, ["_bronze_partition", "_bronze_offset"])
        .withColumn("_dropped", F.col("_old") & F.col(REASON).isNull())
    )
    return events, layout.key_names
