"""The quarantine table: records a layer could not or would not keep, each with the reason and
its bronze coordinates (silver: malformed events and ``drop`` expectations; bronze: ``drop``
expectations of its suites)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse_core.delta_io import append, ensure_table, table_exists

#: The quarantine table every job appends to: the record, why, and where it was.
QUARANTINE_SCHEMA = T.StructType(
    [
        T.StructField(name, kind)
        for name, kind in (
            ("entity", T.StringType()),
            ("reason", T.StringType()),
            ("topic", T.StringType()),
            ("partition", T.IntegerType()),
            ("offset", T.LongType()),
            ("key", T.BinaryType()),
            ("value", T.BinaryType()),
            ("_quarantined_at", T.TimestampType()),
            ("_batch_id", T.LongType()),
        )
    ]
)


def ensure_quarantine(spark: SparkSession, path: str) -> None:
    """Create the quarantine table at ``path`` unless it exists.

    Every silver query (and the bronze query, when a suite drops rows) appends to this one
    table; queries that start together must find it made, or their first appends race to
    create it and all but one fail.
    """
    if not table_exists(spark, path):
        ensure_table(spark, path, QUARANTINE_SCHEMA, change_feed=False)


def quarantine(
    rows: DataFrame,
    entity: Column,
    reason: str,
    coordinates: tuple[str, str, str],
    path: str,
    app_id: str,
    batch_id: int,
    raw: tuple[str, str] = ("key", "value"),
) -> None:
    """Append ``rows`` (with their ``reason`` column, their bronze ``coordinates``: topic,
    partition and offset columns, and their ``raw`` key and value bytes columns) to the
    quarantine table at ``path``, idempotent per ``app_id`` and ``batch_id``."""
    topic, partition, offset = coordinates
    key, value = raw
    quarantined = rows.select(
        entity.alias("entity"),
        F.col(reason).alias("reason"),
        F.col(topic).alias("topic"),
        F.col(partition).alias("partition"),
        F.col(offset).alias("offset"),
        F.col(key).alias("key"),
        F.col(value).alias("value"),
        F.current_timestamp().alias("_quarantined_at"),
        F.lit(batch_id).cast("bigint").alias("_batch_id"),
    )
    append(quarantined, path, app_id, batch_id)
