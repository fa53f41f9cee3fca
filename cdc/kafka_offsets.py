"""Offset arithmetic of the Kafka source: the checkpoint form, per-trigger caps, read ranges.

Pure functions, no broker. An offset is the next offset to read in a partition.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition

from cdc.kafka_options import PartitionOffsets

#: The checkpoint form of offsets: ``{"topic": {"0": 42, "1": 7}}``.
OffsetJson = dict[str, dict[str, int]]


def to_json(offsets: Mapping[tuple[str, int], int]) -> OffsetJson:
    """The JSON-serialisable checkpoint form of ``offsets`` (sorted, so equal offsets compare)."""
    document: OffsetJson = {}
    for (topic, partition), offset in sorted(offsets.items()):
        document.setdefault(topic, {})[str(partition)] = offset
    return document


def from_json(document: Mapping[str, Any]) -> PartitionOffsets:
    """Offsets from their checkpoint form (the inverse of :func:`to_json`)."""
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in document.items()
        for partition, offset in partitions.items()
    }


def cap_ends(start: PartitionOffsets, latest: PartitionOffsets, cap: int) -> PartitionOffsets:
    """End offsets that read at most ``cap`` offsets in total from ``start`` towards ``latest``.

    Like Spark's ``maxOffsetsPerTrigger``, the cap is split across partitions in proportion to
    their backlog; the largest remainders get the leftover offsets, so exactly ``cap`` offsets
    are planned when the backlog is larger. ``start`` must hold every partition of ``latest``,
    at an offset not above it.
    """
    backlog = {tp: end - start[tp] for tp, end in latest.items()}
    total = sum(backlog.values())
    if total <= cap:
        return dict(latest)
    shares = {tp: size * cap / total for tp, size in backlog.items()}
    taken = {tp: math.floor(share) for tp, share in shares.items()}
    leftover = cap - sum(taken.values())
    for tp in sorted(shares, key=lambda tp: (taken[tp] - shares[tp], tp))[:leftover]:
        taken[tp] += 1
    return {tp: start[tp] + taken[tp] for tp in latest}


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark input partition: offsets ``[start, end)`` of one Kafka partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split the largest ranges so that there are about ``min_partitions`` of them (Spark's
    ``minPartitions``): each range gets a share of the parts proportional to its size."""
    total = sum(r.size for r in ranges)
    if not min_partitions or len(ranges) >= min_partitions or total == 0:
        return ranges
    pieces: list[OffsetRange] = []
    for whole in ranges:
        parts = max(1, min(whole.size, round(whole.size * min_partitions / total)))
        bounds = [whole.start + whole.size * i // parts for i in range(parts + 1)]
        pieces += [
            OffsetRange(whole.topic, whole.partition, low, high)
            for low, high in itertools.pairwise(bounds)
        ]
    return pieces
