"""Conformance of the test broker with the Kafka behaviour the source and producer rely on.

The local broker (noida-db, see ``lakehouse_local/broker.py``) was chosen because it passes this
file; Tansu's ListOffsets high watermark lags the log end, which would make the source stop
early.
Run it against any Kafka with ``KAFKA_BOOTSTRAP_SERVERS=host:port``.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions, NewTopic

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

TIMEOUT_S = 10.0
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@pytest.fixture
def admin(kafka_bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


def new_topic(admin: AdminClient, partitions: int) -> str:
    name = f"conformance-{uuid.uuid4().hex[:10]}"
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futures[name].result(timeout=TIMEOUT_S)
    return name


@pytest.fixture
def consumer(kafka_bootstrap: str) -> Iterator[Consumer]:
    client = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"conformance-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    yield client
    client.close()


def produce(kafka_bootstrap: str, topic: str, count: int, **extra: object) -> list[Message]:
    """Send ``count`` keyed records (timestamps START_MS + i, one header) and return the acks."""
    acks: list[Message] = []
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True, **extra})
    for i in range(count):
        producer.produce(
            topic,
            key=f"key-{i % 7}".encode(),
            value=f"value-{i}".encode(),
            timestamp=START_MS + i,
            headers=[("trace", f"t{i}".encode())],
            on_delivery=lambda error, message: acks.append(message) if error is None else None,
        )
    assert producer.flush(TIMEOUT_S) == 0
    return acks


def read_partition(consumer: Consumer, topic: str, partition: int, start: int) -> list[Message]:
    consumer.assign([TopicPartition(topic, partition, start)])
    _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_S)
    messages: list[Message] = []
    while len(messages) < high - start:
        batch = consumer.consume(500, timeout=TIMEOUT_S)
        assert batch, f"no records before offset {high} of {topic}[{partition}]"
        messages.extend(m for m in batch if m.error() is None)
    return messages


def test_topic_creation_with_partitions(admin: AdminClient) -> None:
    topic = new_topic(admin, partitions=4)
    metadata = admin.list_topics(topic, timeout=TIMEOUT_S)
    assert sorted(metadata.topics[topic].partitions) == [0, 1, 2, 3]


def test_watermarks_are_exact(admin: AdminClient, consumer: Consumer, kafka_bootstrap: str) -> None:
    topic = new_topic(admin, partitions=3)
    acks = produce(kafka_bootstrap, topic, 300)
    per_partition = {p: sum(1 for m in acks if m.partition() == p) for p in range(3)}
    for partition, count in per_partition.items():
        tp = TopicPartition(topic, partition)
        assert consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S) == (0, count)


def test_keyed_partitioning_is_crc32_with_consistent_partitioner(
    admin: AdminClient, kafka_bootstrap: str
) -> None:
    topic = new_topic(admin, partitions=3)
    acks = produce(kafka_bootstrap, topic, 70, partitioner="consistent")
    for message in acks:
        assert message.partition() == zlib.crc32(message.key()) % 3
    assert len({m.partition() for m in acks}) > 1


def test_fetch_from_offset_returns_records_headers_and_timestamps(
    admin: AdminClient, consumer: Consumer, kafka_bootstrap: str
) -> None:
    topic = new_topic(admin, partitions=1)
    produce(kafka_bootstrap, topic, 50)
    messages = read_partition(consumer, topic, 0, start=17)
    assert [m.offset() for m in messages] == list(range(17, 50))
    first = messages[0]
    assert first.value() == b"value-17"
    assert first.key() == b"key-3"
    assert first.headers() == [("trace", b"t17")]
    assert first.timestamp() == (1, START_MS + 17)  # TIMESTAMP_CREATE_TIME


def test_offsets_for_times(admin: AdminClient, consumer: Consumer, kafka_bootstrap: str) -> None:
    topic = new_topic(admin, partitions=1)
    produce(kafka_bootstrap, topic, 40)
    found = consumer.offsets_for_times([TopicPartition(topic, 0, START_MS + 25)], TIMEOUT_S)
    assert found[0].offset == 25


def test_partitions_can_be_added(
    admin: AdminClient, consumer: Consumer, kafka_bootstrap: str
) -> None:
    topic = new_topic(admin, partitions=1)
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=TIMEOUT_S)
    assert len(admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions) == 3
    acks = produce(kafka_bootstrap, topic, 30, partitioner="consistent")
    assert {m.partition() for m in acks} == {0, 1, 2}
