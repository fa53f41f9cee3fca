"""What a Kafka source holds against what bronze holds, per partition (for ``verify``).

For each subscribed partition the broker's earliest and end offsets (``[low, high)``, through
confluent-kafka) are compared with the distinct offsets of that partition in bronze: every
offset from ``low`` up to ``high`` should be there. A gap is named with its partition, how many
records bronze lacks and the newest offset it holds. Offsets below ``low`` (gone by retention)
are not asked for. A compacted or transactional topic has offsets without records (removed
keys, commit markers): there a gap is not necessarily a loss.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.kafka_client import BrokerClient
from cdc.kafka_options import parse_options
from cdc.sources import SourceSpec, kafka_stream_options
from lakehouse_core.layout import Warehouse


@dataclass(frozen=True)
class PartitionGap:
    """Records of ``topic[partition]`` the broker holds (offsets ``low`` to ``high - 1``) that
    bronze lacks: ``missing`` of them; bronze's newest offset there is ``newest`` (-1: none)."""

    topic: str
    partition: int
    low: int
    high: int
    missing: int
    newest: int

    def line(self) -> str:
        held = "none of them" if self.newest < 0 else f"up to offset {self.newest}"
        return (
            f"{self.topic}[{self.partition}]: bronze lacks {self.missing} of the "
            f"{self.high - self.low} records the broker holds (offsets {self.low} to "
            f"{self.high - 1}; bronze has {held}); run the pipeline to read them"
        )


def broker_marks(source: SourceSpec) -> dict[tuple[str, int], tuple[int, int]]:
    """The earliest and end offset of every partition the pipeline subscribes to."""
    options = parse_options(kafka_stream_options(source))
    client = BrokerClient(options)
    try:
        partitions = [
            (topic, partition)
            for topic, ids in sorted(client.topics().items())
            if options.subscribes_to(topic)
            for partition in ids
        ]
        return dict(client.watermarks(partitions))
    finally:
        client.close()


def bronze_offsets(spark: SparkSession, warehouse: Warehouse) -> DataFrame | None:
    """``topic, partition, offset`` of every bronze record (None: no bronze table)."""
    frames = [
        spark.read.format("delta")
        .load(warehouse.table("bronze", name))
        .select("topic", "partition", "offset")
        for name in warehouse.table_names("bronze", spark)
    ]
    if not frames:
        return None
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union


def partition_gaps(
    spark: SparkSession, warehouse: Warehouse, source: SourceSpec
) -> list[PartitionGap]:
    """The partitions of the Kafka ``source`` whose records bronze does not all hold."""
    marks = {tp: mark for tp, mark in broker_marks(source).items() if mark[1] > mark[0]}
    if not marks:
        return []
    ranges = spark.createDataFrame(
        [(t, p, low, high) for (t, p), (low, high) in marks.items()],
        "topic string, partition int, low long, high long",
    )
    held: dict[tuple[str, int], tuple[int, int]] = {}
    offsets = bronze_offsets(spark, warehouse)
    if offsets is not None:
        inside = offsets.join(ranges, ["topic", "partition"]).where(
            (F.col("offset") >= F.col("low")) & (F.col("offset") < F.col("high"))
        )
        for row in (
            inside.groupBy("topic", "partition")
            .agg(F.countDistinct("offset").alias("held"), F.max("offset").alias("newest"))
            .collect()
        ):
            held[(row.topic, row.partition)] = (row.held, row.newest)
    gaps = []
    for (topic, partition), (low, high) in sorted(marks.items()):
        count, newest = held.get((topic, partition), (0, -1))
        if count < high - low:
            gaps.append(PartitionGap(topic, partition, low, high, high - low - count, newest))
    return gaps
