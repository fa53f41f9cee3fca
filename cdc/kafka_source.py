"""Kafka as a Spark streaming source, on the PySpark Python Data Source API and confluent-kafka.

``register_kafka_source(spark)`` makes ``spark.readStream.format("lakehouse_kafka")`` available;
rows have the columns and types of Spark's built-in Kafka source (``headers`` only with
``includeHeaders=true``), so Spark's ``kafka`` format can replace it unchanged where it exists.

Options (Spark's names; see :mod:`cdc.kafka_options`): ``kafka.bootstrap.servers`` (required);
``subscribe`` (comma list) or ``subscribePattern`` (full-match regex; never matches topics
starting with ``_``); ``startingOffsets`` ``earliest`` (default: unlike Spark's ``latest``,
because bronze must hold the whole topic), ``latest`` or JSON ``{"t":{"0":23,"1":-2}}``;
``maxOffsetsPerTrigger``; ``capFirstBatch`` (default false, see below); ``failOnDataLoss``
(default true); ``includeHeaders`` (default
false); ``timeoutMs`` (default 30000, bounds every broker call); ``minPartitions``; and any
librdkafka setting as ``kafka.<setting>``.

Offsets live in the Spark checkpoint as ``{"topic": {"partition": next_offset}}``; exactly-once
comes from the checkpoint plus an idempotent sink. Partitions and pattern-matching topics that
appear while a query runs are read from their earliest offset.

``maxOffsetsPerTrigger`` and ``trigger(availableNow=True)``: in PySpark 4.0 a Python source is
asked for ``latestOffset()`` without the batch start, and under ``availableNow`` (Spark's
wrapper, turned on by :func:`register_kafka_source`) Spark asks only once per run, first re-runs
a batch a crash left planned but uncommitted, then reads everything up to that answer in one
more batch; the source cannot tell the triggers apart. So by default the first
``latestOffset()`` of each query run is not capped (under ``availableNow`` the run reads
everything available at its start, then stops) and every later one is. With a processing-time
trigger set ``capFirstBatch=true``: then the first batch after a (re)start is capped too
(``lakehouse run --processing-time`` does).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from cdc.kafka_client import BrokerClient, data_loss, read_range
from cdc.kafka_offsets import OffsetRange, cap_ends, from_json, split_ranges, to_json
from cdc.kafka_options import (
    EARLIEST,
    LATEST,
    MESSAGE_PREFIX,
    KafkaSourceOptions,
    PartitionOffsets,
    parse_options,
)
from cdc.records import KAFKA_SCHEMA
from lakehouse_core.errors import ConfigError, SourceUnavailableError
from lakehouse_core.parallel import make_active

KAFKA_FORMAT = "lakehouse_kafka"

#: Spark's Kafka source schema without ``includeHeaders``: the first 7 columns.
SPARK_KAFKA_SCHEMA = StructType(KAFKA_SCHEMA.fields[:7])


#: Option names whose values ``explain()`` and Spark's plan strings must hide. Spark's default
#: ``spark.redaction.regex`` hides ``password``/``secret``/``token`` but not a JAAS config or a
#: PEM private key.
REDACTED_OPTIONS = r"(?i)kafka\..*(password|secret|token|jaas|oauthbearer\.config|pem)"
_REDACTION_CONF = "spark.sql.redaction.options.regex"
#: Spark's switch that gives a source without ``SupportsTriggerAvailableNow`` (every Python
#: source in 4.0) real ``availableNow`` semantics: its end is fixed once at the start and every
#: batch up to it runs, the re-run of a planned batch a crash left uncommitted included. Off
#: (Spark's default), ``availableNow`` falls back to ``once``: a run after a crash only re-runs
#: that planned batch and stops.
_AVAILABLE_NOW_WRAPPER_CONF = "spark.sql.streaming.triggerAvailableNowWrapper.enabled"


def register_kafka_source(spark: SparkSession) -> str:
    """Register the source with ``spark`` (again is harmless) and return its format name.

    ``spark`` becomes this thread's active session first: Spark resolves a Python data source's
    name through the active session, so registering while another session that knows the name
    is active fails with ``DATA_SOURCE_ALREADY_EXISTS``, and reading finds no source.

    Also extends the session's ``spark.sql.redaction.options.regex`` with
    :data:`REDACTED_OPTIONS`, so plan strings never show a secret ``kafka.*`` option, and turns
    on Spark's ``availableNow`` wrapper (:data:`_AVAILABLE_NOW_WRAPPER_CONF`), so an
    ``availableNow`` run reads everything available at its start, also after a crash.
    """
    current = spark.conf.get(_REDACTION_CONF) or ""
    if REDACTED_OPTIONS not in current:
        spark.conf.set(
            _REDACTION_CONF, f"{current}|{REDACTED_OPTIONS}" if current else REDACTED_OPTIONS
        )
    spark.conf.set(_AVAILABLE_NOW_WRAPPER_CONF, "true")
    make_active(spark)
    spark.dataSource.register(KafkaDataSource)
    return KAFKA_FORMAT


def read_kafka_stream(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """A streaming DataFrame of ``options``' topics; options are validated here first, so a bad
    value raises a plain :class:`ConfigError` instead of a Spark analysis error."""
    parse_options(options)
    return spark.readStream.format(register_kafka_source(spark)).options(**options).load()


class KafkaDataSource(DataSource):
    """The ``lakehouse_kafka`` data source (streaming reads only)."""

    @classmethod
    def name(cls) -> str:
        return KAFKA_FORMAT

    def __repr__(self) -> str:
        return f"{type(self).__name__}({KAFKA_FORMAT})"

    def schema(self) -> StructType:
        options = parse_options(self.options)
        return KAFKA_SCHEMA if options.include_headers else SPARK_KAFKA_SCHEMA

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        return KafkaStreamReader(parse_options(self.options))


class KafkaStreamReader(DataSourceStreamReader):
    """Plans micro-batches from broker watermarks (driver) and reads offset ranges (executors).

    Spark calls ``partitions(start, end)`` for every planned batch, and ``partitions(o, o)``
    with the checkpointed offset on restart; the last ``end`` seen is the start of the next
    ``latestOffset()``, which PySpark 4.0 calls without one.
    """

    def __init__(self, options: KafkaSourceOptions) -> None:
        self.options = options
        self._client: BrokerClient | None = None
        self._initial: PartitionOffsets | None = None
        self._start: PartitionOffsets | None = None
        self._capped = False

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}

    def _broker(self) -> BrokerClient:
        if self._client is None:
            self._client = BrokerClient(self.options)
        return self._client

    def initialOffset(self) -> dict[str, Any]:
        """Where a query without checkpoint starts, resolved once per run."""
        if self._initial is None:
            partitions = self._subscribed_partitions(known={})
            marks = self._broker().watermarks(partitions)
            wanted = self.options.starting_offsets
            if isinstance(wanted, dict):
                missing = sorted(set(wanted) - set(partitions))
                if missing:
                    listed = ", ".join(f"{t}[{p}]" for t, p in missing)
                    raise ConfigError(
                        f"{MESSAGE_PREFIX} startingOffsets names partition(s) {listed} that do "
                        "not exist. Use existing partitions."
                    )
            self._initial = {}
            for tp in partitions:
                low, high = marks[tp]
                offset = wanted.get(tp, EARLIEST) if isinstance(wanted, dict) else EARLIEST
                if wanted == "latest" or offset == LATEST:
                    offset = high
                elif offset == EARLIEST:
                    offset = low
                self._initial[tp] = offset
        return to_json(self._initial)

    def latestOffset(self) -> dict[str, Any]:
        """End offsets of the next batch: the current end of every subscribed partition, capped
        by ``maxOffsetsPerTrigger`` from the second call of a query run on (see module doc)."""
        start = self._start if self._start is not None else from_json(self.initialOffset())
        partitions = self._subscribed_partitions(known=start)
        marks = self._broker().watermarks(partitions)
        begin: PartitionOffsets = {}
        latest: PartitionOffsets = {}
        for tp in partitions:
            low, high = marks[tp]
            offset = start.get(tp, low)
            if high < offset:  # the topic was recreated: partitions() reports it
                offset = low
            begin[tp], latest[tp] = offset, high
        for (topic, partition), offset in start.items():
            if (topic, partition) not in latest:
                data_loss(self.options, topic, partition, offset, None)
                begin[(topic, partition)] = latest[(topic, partition)] = offset
        cap = self.options.max_offsets_per_trigger
        capped = self._capped or self.options.cap_first_batch
        ends = cap_ends(begin, latest, cap) if cap is not None and capped else latest
        self._capped = True
        return to_json(ends)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One range per partition with records in ``[start, end)``; a partition absent from
        ``start`` is new and starts at its earliest offset.

        Raises:
            DataLossError: records of the range are gone and ``failOnDataLoss`` is true.
        """
        begin, ends = from_json(start), from_json(end)
        self._start = ends
        moved = [tp for tp, offset in ends.items() if begin.get(tp) != offset]
        if not moved:
            return []
        marks = self._broker().watermarks(moved)
        ranges = []
        for topic, partition in moved:
            low = marks[(topic, partition)][0]
            offset = begin.get((topic, partition), low)
            stop = ends[(topic, partition)]
            if offset < low or offset > stop:
                data_loss(self.options, topic, partition, offset, low)
                offset = low
            if stop > offset:
                ranges.append(OffsetRange(topic, partition, offset, stop))
        return split_ranges(ranges, self.options.min_partitions)

    def has_unread(self, read: PartitionOffsets) -> bool:
        """Whether the subscribed topics hold records after ``read`` (the end offsets of a
        committed micro-batch), or a partition of it is gone: what :meth:`latestOffset` would
        plan a batch for, asked of the brokers from the driver alone."""
        partitions = self._subscribed_partitions(known=read)
        if any(tp not in partitions for tp in read):
            return True
        for tp, (low, high) in self._broker().watermarks(partitions).items():
            if high != read.get(tp, low):  # records after it, or the topic was recreated
                return True
        return False

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        return read_range(self.options, partition)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _subscribed_partitions(self, known: Mapping[tuple[str, int], int]) -> list[tuple[str, int]]:
        """The partitions of the subscribed topics that exist now.

        Raises:
            SourceUnavailableError: a topic listed in ``subscribe`` does not exist (and was not
                read before: a topic that disappears is data loss).
        """
        topics = self._broker().topics()
        seen = {topic for topic, _ in known}
        missing = [t for t in self.options.subscribe if t not in topics and t not in seen]
        if missing:
            raise SourceUnavailableError(
                f"{MESSAGE_PREFIX} topic(s) {', '.join(missing)} do not exist on "
                f"{self.options.bootstrap_servers}. Create them or fix the 'subscribe' option."
            )
        return [
            (topic, partition)
            for topic, ids in sorted(topics.items())
            if self.options.subscribes_to(topic)
            for partition in ids
        ]
