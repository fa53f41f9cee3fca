"""Send a generated workload to Kafka: topics with the workload's partitions, keyed records,
tombstones as null values, an idempotent producer (no duplicates from its own retries).

Each record goes to the partition the generator gave it (CRC-32 of the key bytes, the same
choice as librdkafka's ``consistent`` partitioner), in the generator's order, so an empty topic
gets the same partitions and offsets as the JSON-lines files of the same workload and both
sources produce identical bronze tables.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from cdc.records import Record
from lakehouse_core.errors import ConfigError, SourceUnavailableError
from lakehouse_demo.generator import WorkloadConfig, generate

#: librdkafka's own log lines go here (the command line keeps them quiet unless debugging).
KAFKA_LOG = logging.getLogger("cdc.kafka")

#: Producer settings that make delivery exactly-once per partition and in order.
IDEMPOTENT_SETTINGS = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 20,
    "batch.num.messages": 10_000,
    "compression.type": "lz4",
}


DeliveryCallback = Callable[[KafkaError | None, Message], None]


def client_settings(bootstrap: str, settings: Mapping[str, str] | None) -> dict[str, Any]:
    """librdkafka settings for a client of ``bootstrap``, logging through :data:`KAFKA_LOG`."""
    return {**(settings or {}), "bootstrap.servers": bootstrap, "logger": KAFKA_LOG}


#: Topic settings for new workload topics: the generator's record timestamps lie in the past
#: (a simulated clock), so time-based retention would delete them at once.
KEEP_FOREVER = {"retention.ms": "-1"}


@dataclass
class ProduceReport:
    """What was sent: records per topic and the wall time."""

    per_topic: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    #: Per topic and partition, the offset where this run's records start.
    start_offsets: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return sum(self.per_topic.values())


def send_workload(
    config: WorkloadConfig,
    bootstrap: str,
    settings: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> ProduceReport:
    """Generate the workload of ``config`` and send it; the report says where it starts."""
    records = generate(config)
    topics = sorted({record.topic for record in records})
    ensure_topics(bootstrap, dict.fromkeys(topics, config.partitions), settings, timeout_s)
    start = end_offsets(bootstrap, topics, settings, timeout_s)
    report = produce(records, bootstrap, settings, timeout_s)
    report.start_offsets = start
    return report


def end_offsets(
    bootstrap: str,
    topics: Iterable[str],
    settings: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> dict[str, dict[str, int]]:
    """The next offset of every partition of ``topics``, in the JSON shape of
    ``startingOffsets`` (``{"topic": {"0": 42}}``)."""
    consumer = Consumer({**client_settings(bootstrap, settings), "group.id": "lakehouse-offsets"})
    try:
        metadata = consumer.list_topics(timeout=timeout_s)
        offsets: dict[str, dict[str, int]] = {}
        for topic in topics:
            partitions = sorted(metadata.topics[topic].partitions)
            offsets[topic] = {
                str(partition): consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=timeout_s
                )[1]
                for partition in partitions
            }
        return offsets
    except KafkaException as error:
        raise SourceUnavailableError(
            f"Could not read the end offsets from {bootstrap}: {error.args[0].str()}"
        ) from None
    finally:
        consumer.close()


def ensure_topics(
    bootstrap: str,
    partitions: Mapping[str, int],
    settings: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> None:
    """Create the topics that do not exist yet with the given partition counts and unlimited
    retention (:data:`KEEP_FOREVER`).

    Raises:
        SourceUnavailableError: the broker did not answer within ``timeout_s``.
        ConfigError: an existing topic has fewer partitions than the workload uses.
    """
    admin = AdminClient(client_settings(bootstrap, settings))
    existing = _list_topics(admin, bootstrap, timeout_s)
    missing = [
        NewTopic(topic, num_partitions=count, replication_factor=1, config=KEEP_FOREVER)
        for topic, count in sorted(partitions.items())
        if topic not in existing
    ]
    for topic, count in partitions.items():
        if topic in existing and existing[topic] < count:
            raise ConfigError(
                f"Topic {topic!r} has {existing[topic]} partitions but the workload uses "
                f"{count}: add partitions to the topic or produce with --partitions "
                f"{existing[topic]}."
            )
    if not missing:
        return
    for topic, future in admin.create_topics(missing, request_timeout=timeout_s).items():
        try:
            future.result(timeout=timeout_s)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise SourceUnavailableError(
                    f"Could not create topic {topic!r} on {bootstrap}: {error.args[0].str()}"
                ) from None


def produce(
    records: Iterable[Record],
    bootstrap: str,
    settings: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> ProduceReport:
    """Send ``records`` (partition and order as given) and wait until all are acknowledged.

    Raises:
        SourceUnavailableError: a record could not be delivered (the message says why).
    """
    report = ProduceReport()
    failures: list[str] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(f"{message.topic()}[{message.partition()}]: {error.str()}")

    producer = Producer({**client_settings(bootstrap, settings), **IDEMPOTENT_SETTINGS})
    started = time.monotonic()
    for sent, record in enumerate(records, start=1):
        _send(producer, record, delivered)
        report.per_topic[record.topic] = report.per_topic.get(record.topic, 0) + 1
        if sent % 10_000 == 0:
            producer.poll(0)
            if failures:
                break
    remaining = producer.flush(timeout_s)
    report.seconds = time.monotonic() - started
    if failures or remaining:
        problem = failures[0] if failures else f"{remaining} records unacknowledged"
        raise SourceUnavailableError(
            f"Producing to {bootstrap} failed ({problem}); check that the broker is up "
            "and the topics accept writes."
        )
    return report


def _send(producer: Producer, record: Record, on_delivery: DeliveryCallback) -> None:
    headers: list[tuple[str, str | bytes | None]] | None = list(record.headers.items()) or None
    while True:
        try:
            producer.produce(
                record.topic,
                value=record.value_bytes,
                key=record.key_bytes,
                partition=record.partition,
                timestamp=record.timestamp_ms,
                headers=headers,
                on_delivery=on_delivery,
            )
            return
        except BufferError:  # the local queue is full: let deliveries drain, then retry
            producer.poll(0.5)


def _list_topics(admin: AdminClient, bootstrap: str, timeout_s: float) -> dict[str, int]:
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as error:
        raise SourceUnavailableError(
            f"Kafka broker {bootstrap} did not answer within {timeout_s:.0f} s "
            f"({error.args[0].str()}): check the address and that the broker is running."
        ) from None
    return {name: len(topic.partitions) for name, topic in metadata.topics.items()}
