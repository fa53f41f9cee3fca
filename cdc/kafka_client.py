"""Broker calls of the Kafka source: metadata and watermarks (driver), range reads (executors).

Every call is bounded by the ``timeoutMs`` option; librdkafka would otherwise retry forever.
Failures become one-line :class:`~lakehouse_core.errors.LakehouseError` messages that start with
``Kafka source:``, name the problem and the fix, and carry no secret value.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any, cast

import pyarrow as pa
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from cdc.kafka_offsets import OffsetRange
from cdc.kafka_options import MESSAGE_PREFIX, KafkaSourceOptions
from cdc.records import arrow_schema
from lakehouse_core.errors import DataLossError, LakehouseError, SourceUnavailableError

log = logging.getLogger("cdc.kafka_source")
#: librdkafka's own log lines (connection retries...): not printed unless the application
#: configures logging, since every failure that matters is raised as an error.
librdkafka_log = logging.getLogger("cdc.kafka_source.librdkafka")
librdkafka_log.addHandler(logging.NullHandler())

_UNREACHABLE = {
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TIMED_OUT,
    KafkaError._RESOLVE,
    KafkaError.REQUEST_TIMED_OUT,
}
_REFUSED = {
    KafkaError._AUTHENTICATION,
    KafkaError._SSL,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.ILLEGAL_SASL_STATE,
    KafkaError.UNSUPPORTED_SASL_MECHANISM,
}
#: Records per ``consume`` call and per Arrow batch handed to Spark.
_BATCH_RECORDS = 20_000
#: Longest single wait inside a read; the overall wait is bounded by ``timeoutMs``.
_POLL_S = 1.0
_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: 0, TIMESTAMP_LOG_APPEND_TIME: 1}

Watermarks = dict[tuple[str, int], tuple[int, int]]


class BrokerClient:
    """A librdkafka consumer used only for assign/seek/consume and metadata; never subscribes
    or commits. It remembers the errors librdkafka reports, to explain a timeout."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self.options = options
        self._refused: KafkaError | None = None
        self._last_error: KafkaError | None = None
        config: dict[str, Any] = dict(options.client_config)
        config["error_cb"] = self._remember
        config["logger"] = librdkafka_log
        try:
            self.consumer = Consumer(config)
        except (KafkaException, ValueError, TypeError) as error:
            raise LakehouseError(
                f"{MESSAGE_PREFIX} invalid librdkafka setting: {options.scrub(str(error))}. "
                "Fix the kafka.* options."
            ) from None

    def _remember(self, error: KafkaError) -> None:
        if error.code() in _REFUSED:
            self._refused = error
        elif error.code() != KafkaError._ALL_BROKERS_DOWN:
            self._last_error = error

    def close(self) -> None:
        self.consumer.close()

    def topics(self) -> dict[str, list[int]]:
        """Every topic of the cluster and its partition ids.

        Raises:
            SourceUnavailableError: broker unreachable, or authentication/authorization refused.
        """
        try:
            metadata = self.consumer.list_topics(timeout=self.options.timeout_s)
        except KafkaException as error:
            raise self.failure(error.args[0], "listing topics") from None
        topics = {}
        for name, topic in metadata.topics.items():
            if topic.error is not None and topic.error.code() in _REFUSED:
                raise self.failure(topic.error, f"reading metadata of topic {name}")
            if topic.error is None:
                topics[name] = sorted(topic.partitions)
        return topics

    def watermarks(self, partitions: list[tuple[str, int]]) -> Watermarks:
        """The earliest available and the end offset (high watermark, or last stable offset
        under ``isolation.level=read_committed``) of each partition."""
        marks = {}
        for topic, partition in partitions:
            try:
                marks[(topic, partition)] = self.consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=self.options.timeout_s, cached=False
                )
            except KafkaException as error:
                raise self.failure(
                    error.args[0], f"reading offsets of {topic}[{partition}]"
                ) from None
        return marks

    def failure(self, error: KafkaError, action: str) -> LakehouseError:
        """A one-line error for a failed broker call, explained by librdkafka's last error when
        the call only timed out."""
        cause = error
        if error.code() in _UNREACHABLE:
            self.consumer.poll(0)  # serves error_cb: why connections failed (auth, TLS, refused)
            cause = self._refused or self._last_error or error
        reason = self.options.scrub(cause.str())
        servers = self.options.bootstrap_servers
        if cause.code() in _REFUSED:
            return SourceUnavailableError(
                f"{MESSAGE_PREFIX} the broker at {servers} refused access while {action} "
                f"({reason}). Check the kafka.security.protocol, kafka.sasl.* and kafka.ssl.* "
                "options and the ACLs."
            )
        if cause.code() in _UNREACHABLE:
            return SourceUnavailableError(
                f"{MESSAGE_PREFIX} cannot reach the Kafka broker at {servers} within "
                f"{self.options.timeout_ms} ms while {action} ({reason}). Check "
                "kafka.bootstrap.servers and that the broker is running, or raise timeoutMs."
            )
        return SourceUnavailableError(f"{MESSAGE_PREFIX} Kafka error while {action}: {reason}.")


def data_loss(
    options: KafkaSourceOptions, topic: str, partition: int, expected: int, earliest: int | None
) -> None:
    """Report records that are gone: raise :class:`DataLossError` when ``failOnDataLoss`` is
    true, else log a warning (the caller continues from the earliest available offset)."""
    where = f"{topic}[{partition}]"
    if earliest is None:
        problem = f"partition {where} disappeared (topic deleted?) while offset {expected} was next"
    else:
        problem = (
            f"offsets of {where} from {expected} are no longer available "
            f"(earliest available is {earliest}; aged out by retention or the topic was recreated)"
        )
    if options.fail_on_data_loss:
        raise DataLossError(
            f"{MESSAGE_PREFIX} data loss: {problem}. Set failOnDataLoss=false to skip them, "
            "or start from a fresh checkpoint."
        )
    log.warning("%s skipping lost records: %s", MESSAGE_PREFIX, problem)


def read_range(options: KafkaSourceOptions, offsets: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``offsets`` as Arrow batches in the source's schema.

    Reads by assign + seek, stops at the planned end or at the end of the partition (offsets
    may have gaps: compaction, transaction markers), and fails when no record arrives for
    ``timeoutMs``.

    Raises:
        DataLossError: the range start is gone and ``failOnDataLoss`` is true.
        SourceUnavailableError: the broker failed or stalled.
    """
    client = BrokerClient(options)
    topic, partition, end = offsets.topic, offsets.partition, offsets.end
    try:
        client.consumer.assign([TopicPartition(topic, partition, offsets.start)])
        next_offset = offsets.start
        deadline = time.monotonic() + options.timeout_s
        while next_offset < end:
            wait = max(0.0, min(_POLL_S, deadline - time.monotonic()))
            messages = client.consumer.consume(min(end - next_offset, _BATCH_RECORDS), wait)
            records: list[Message] = []
            for message in messages:
                error = message.error()
                if error is None:
                    offset = cast(int, message.offset())
                    if offset >= end:
                        next_offset = end
                        break
                    records.append(message)
                    next_offset = offset + 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    next_offset = end
                    break
                elif error.code() == KafkaError._AUTO_OFFSET_RESET:
                    earliest = client.watermarks([(topic, partition)])[(topic, partition)][0]
                    data_loss(options, topic, partition, next_offset, earliest)
                    next_offset = max(next_offset, earliest)
                    client.consumer.assign([TopicPartition(topic, partition, next_offset)])
                    break
                else:
                    raise client.failure(error, f"reading {topic}[{partition}]")
            if records:
                yield to_arrow(records, options.include_headers)
                deadline = time.monotonic() + options.timeout_s
            elif time.monotonic() >= deadline and next_offset < end:
                raise SourceUnavailableError(
                    f"{MESSAGE_PREFIX} no record of {topic}[{partition}] arrived within "
                    f"{options.timeout_ms} ms at offset {next_offset} (planned end {end}). "
                    "Check that the broker is up, or raise timeoutMs."
                )
    finally:
        client.close()


def to_arrow(records: list[Message], include_headers: bool) -> pa.RecordBatch:
    """Records as one Arrow batch; ``timestampType`` is Kafka's id (0 create, 1 log append).

    Columns are built from Python lists of plain ints and bytes, which pyarrow converts fast;
    the timestamp column is cast from epoch milliseconds in Arrow.
    """
    stamps = [record.timestamp() for record in records]
    kinds = [kind for kind, _ in stamps]
    unknown = pa.array([kind not in _TIMESTAMP_TYPES for kind in kinds])
    millis = pa.array([ms for _, ms in stamps], pa.int64(), mask=unknown)
    arrays = [
        pa.array([record.key() for record in records], pa.binary()),
        pa.array([record.value() for record in records], pa.binary()),
        pa.array([record.topic() for record in records], pa.string()),
        pa.array([record.partition() for record in records], pa.int32()),
        pa.array([record.offset() for record in records], pa.int64()),
        millis.cast(pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC")),
        pa.array([_TIMESTAMP_TYPES.get(kind, -1) for kind in kinds], pa.int32()),
    ]
    schema = arrow_schema(include_headers)
    if include_headers:
        arrays.append(pa.array([_headers(record) for record in records], schema.field(7).type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _headers(record: Message) -> list[dict[str, Any]] | None:
    """Spark's form: null when the record has no header, else (key, value) structs in order."""
    headers = record.headers()
    if not headers:
        return None
    pairs = headers.items() if isinstance(headers, dict) else headers
    return [{"key": key, "value": value} for key, value in pairs]
