"""After an interrupted run, one ``availableNow`` run reads everything the broker holds
(issue 47, defect 2a).

A processing-time run with ``maxOffsetsPerTrigger`` and ``capFirstBatch`` is stopped with its
newest batch planned but not committed (the state a kill or a broker outage leaves: the
offsets file written, its commit not). Before the fix an ``availableNow`` run fell back to
Spark's ``once`` (a Python source has no ``SupportsTriggerAvailableNow``): it re-ran only that
planned batch and stopped, with most records unread.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import DataFrame, SparkSession

from cdc.kafka_source import read_kafka_stream

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

RECORDS = 600
CAP = 40


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0


def test_available_now_after_an_interrupted_run_reads_everything(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topic = f"outage-{uuid.uuid4().hex[:10]}"
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(timeout=30)
    produce(kafka_bootstrap, topic, RECORDS, partitions=3)
    checkpoint = tmp_path / "ck"
    seen: list[tuple[int, int, int]] = []  # (batch, partition, offset)

    def collect(frame: DataFrame, batch_id: int) -> None:
        seen.extend((batch_id, r.partition, r.offset) for r in frame.collect())

    def start(trigger: dict[str, object], **extra: str) -> object:
        source = {
            "kafka.bootstrap.servers": kafka_bootstrap,
            "subscribe": topic,
            "maxOffsetsPerTrigger": str(CAP),
            **extra,
        }
        return (
            read_kafka_stream(spark, source)
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(checkpoint))
            .trigger(**trigger)
            .start()
        )

    continuous = start({"processingTime": "200 milliseconds"}, capFirstBatch="true")
    try:
        while len(list((checkpoint / "commits").glob("[0-9]*"))) < 3:
            assert continuous.exception() is None  # type: ignore[attr-defined]
            time.sleep(0.2)
    finally:
        continuous.stop()  # type: ignore[attr-defined]
    newest = max(int(f.name) for f in (checkpoint / "commits").glob("[0-9]*"))
    (checkpoint / "commits" / str(newest)).unlink()  # planned, not committed
    (checkpoint / "commits" / f".{newest}.crc").unlink(missing_ok=True)
    committed = {(p, o) for b, p, o in seen if b < newest}
    assert len(committed) < RECORDS // 2
    planned = {(p, o) for b, p, o in seen if b == newest}
    assert 0 < len(planned) <= CAP

    seen.clear()
    once = start({"availableNow": True})
    try:
        once.awaitTermination()  # type: ignore[attr-defined]
        assert once.exception() is None  # type: ignore[attr-defined]
    finally:
        once.stop()  # type: ignore[attr-defined]

    read = [(p, o) for _, p, o in seen]
    assert len(read) == len(set(read))
    assert set(read) | committed == {(i % 3, i // 3) for i in range(RECORDS)}
    assert not set(read) & committed
    rerun = {(p, o) for b, p, o in seen if b == newest}
    assert rerun == planned  # the planned batch ran again exactly as planned, then the rest
    assert max(b for b, _, _ in seen) == newest + 1
