"""The Kafka source against a real Kafka-protocol broker (the ``kafka_bootstrap`` fixture).

Every test makes its own uniquely named topics and a fresh checkpoint, and runs bounded
queries (``availableNow``, or ``processAllAvailable`` then ``stop``) whose micro-batches are
collected with ``foreachBatch``.
"""

from __future__ import annotations

import contextlib
import io
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from cdc.kafka_source import KAFKA_FORMAT, SPARK_KAFKA_SCHEMA, read_kafka_stream
from cdc.records import KAFKA_SCHEMA
from lakehouse_core.errors import ConfigError, LakehouseError, raised_error
from lakehouse_core.streaming import await_query

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

SECRET = "s3cr3t-Pa55word"
Batches = list[list[Row]]
#: (partition, offset, key, value, timestamp ms, headers) of a produced record.
Produced = tuple[int, int, bytes | None, bytes | None, int, list[tuple[str, bytes]] | None]


@pytest.fixture(scope="module")
def admin(kafka_bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


def new_topic(admin: AdminClient, partitions: int, prefix: str = "kst") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)
    return name


def produce(bootstrap: str, topic: str, count: int, partitions: int, first: int = 0) -> None:
    """``count`` records ``k<i>``/``v<i>`` spread round-robin over the partitions."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(first, first + count):
        producer.produce(
            topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % partitions
        )
    assert producer.flush(30) == 0


def options(bootstrap: str, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, **extra}


def start(
    spark: SparkSession, source: dict[str, str], checkpoint: Path, trigger: dict[str, Any]
) -> tuple[StreamingQuery, Batches]:
    """Start a query on the source that collects each micro-batch's rows."""
    batches: Batches = []

    def collect(frame: DataFrame, _batch_id: int) -> None:
        batches.append(frame.collect())

    query = (
        read_kafka_stream(spark, source)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )
    return query, batches


def run_available_now(spark: SparkSession, source: dict[str, str], checkpoint: Path) -> Batches:
    query, batches = start(spark, source, checkpoint, {"availableNow": True})
    try:
        query.awaitTermination()
        assert query.exception() is None
    finally:
        query.stop()
    return batches


@contextlib.contextmanager
def running(
    spark: SparkSession, source: dict[str, str], checkpoint: Path
) -> Iterator[tuple[StreamingQuery, Batches]]:
    query, batches = start(spark, source, checkpoint, {"processingTime": "100 milliseconds"})
    try:
        yield query, batches
        assert query.exception() is None
    finally:
        query.stop()


def failure(spark: SparkSession, source: dict[str, str], checkpoint: Path) -> str:
    """Run until the query fails; return the one-line message ``await_query`` reports."""
    query, _ = start(spark, source, checkpoint, {"availableNow": True})
    try:
        with pytest.raises(LakehouseError) as raised:
            await_query(query)
    finally:
        query.stop()
    return str(raised.value)


def offsets(batches: Batches) -> list[tuple[str, int, int]]:
    return sorted((row.topic, row.partition, row.offset) for batch in batches for row in batch)


def test_schema_is_spark_kafka_source_schema(spark: SparkSession, kafka_bootstrap: str) -> None:
    plain = read_kafka_stream(spark, options(kafka_bootstrap, subscribe="any"))
    assert plain.schema == SPARK_KAFKA_SCHEMA
    assert [f.name for f in plain.schema] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType"
    ]  # fmt: skip
    with_headers = read_kafka_stream(
        spark, options(kafka_bootstrap, subscribe="any", includeHeaders="true")
    )
    assert with_headers.schema == KAFKA_SCHEMA


def test_reading_works_while_another_session_that_knows_the_source_is_active(
    spark: SparkSession, kafka_bootstrap: str
) -> None:
    """A notebook or an earlier run may leave another session active (PySpark's
    ``createDataFrame`` activates its session); Spark then resolved the source's name through
    that session and refused to register it again (``DATA_SOURCE_ALREADY_EXISTS``)."""
    other = spark.newSession()
    read_kafka_stream(other, options(kafka_bootstrap, subscribe="any"))
    other.createDataFrame([(1,)], "n int").collect()  # ``other`` is now the active session
    frame = read_kafka_stream(spark, options(kafka_bootstrap, subscribe="any"))
    assert frame.schema == SPARK_KAFKA_SCHEMA
    assert SparkSession.getActiveSession() is spark


def test_rows_are_exactly_what_was_produced(
    spark: SparkSession, kafka_bootstrap: str, admin: AdminClient, tmp_path: Path
) -> None:
    topic = new_topic(admin, 3)
    produced: list[Produced] = []

    def delivered(headers: list[tuple[str, bytes]] | None) -> Callable[[Any, Message], None]:
        def record(error: Any, message: Message) -> None:
            assert error is None
            produced.append(
                (message.partition(), message.offset(), message.key(), message.value(),
                 message.timestamp()[1], headers)
            )  # fmt: skip

        return record

    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    base_ms = int(time.time() * 1000) - 60_000  # recent: older records would age out
    for i in range(60):
        headers = [("h1", f"x{i}".encode()), ("h2", b"\x00")] if i % 2 else None
        producer.produce(
            topic,
            key=None if i % 7 == 0 else f"key-{i}".encode(),
            value=None if i % 11 == 0 else bytes([i % 256, 0, 255]) + f"value-{i}".encode(),
            partition=i % 3,
            timestamp=base_ms + i,
            headers=headers,
            on_delivery=delivered(headers),
        )
    assert producer.flush(30) == 0

    # minPartitions splits each partition's range: reads must start and stop mid-partition.
    source = options(kafka_bootstrap, subscribe=topic, includeHeaders="true", minPartitions="7")
    batches = run_available_now(spark, source, tmp_path / "ck")

    rows = [row for batch in batches for row in batch]
    assert len(rows) == 60
    got = sorted(
        (
            row.partition,
            row.offset,
            None if row.key is None else bytes(row.key),
            None if row.value is None else bytes(row.value),
            int(row.timestamp.timestamp() * 1000 + 0.5),
            None if row.headers is None else [(h.key, bytes(h.value)) for h in row.headers],
        )
        for row in rows
    )
    assert got == sorted(produced, key=lambda r: (r[0], r[1]))
    assert {row.topic for row in rows} == {topic}
    assert {row.timestampType for row in rows} == {0}


def test_starting_offsets_json_and_latest(
    spark: SparkSession, kafka_bootstrap: str, admin: AdminClient, tmp_path: Path
) -> None:
    topic = new_topic(admin, 2)
    produce(kafka_bootstrap, topic, 10, partitions=2)  # offsets 0..4 in each partition

    json_start = f'{{"{topic}": {{"0": 2, "1": -1}}}}'
    from_json = run_available_now(
        spark, options(kafka_bootstrap, subscribe=topic, startingOffsets=json_start), tmp_path / "j"
    )
    assert offsets(from_json) == [(topic, 0, 2), (topic, 0, 3), (topic, 0, 4)]

    latest = options(kafka_bootstrap, subscribe=topic, startingOffsets="latest")
    assert offsets(run_available_now(spark, latest, tmp_path / "l")) == []
    produce(kafka_bootstrap, topic, 2, partitions=2, first=10)
    assert offsets(run_available_now(spark, latest, tmp_path / "l")) == [
        (topic, 0, 5),
        (topic, 1, 5),
    ]


def test_cap_holds_across_a_restart_and_offsets_continue_exactly(
    spark: SparkSession, kafka_bootstrap: str, admin: AdminClient, tmp_path: Path
) -> None:
    """Processing-time trigger with maxOffsetsPerTrigger=10, stopped and restarted on one
    checkpoint. The first batch of each run reads the backlog uncapped (PySpark 4.0 cannot tell
    a processing-time first batch from availableNow's only one); later batches are capped."""
    topic = new_topic(admin, 2)
    source = options(kafka_bootstrap, subscribe=topic, maxOffsetsPerTrigger="10")
    checkpoint = tmp_path / "ck"
    produce(kafka_bootstrap, topic, 25, partitions=2)
    all_batches: Batches = []
    produced = 25
    for backlog in (25, 15):
        with running(spark, source, checkpoint) as (query, batches):
            query.processAllAvailable()
            assert sum(len(b) for b in batches) == backlog  # the uncapped first batch
            first = len(batches)
            produce(kafka_bootstrap, topic, 35, partitions=2, first=produced)
            produced += 35
            query.processAllAvailable()
        capped = [len(b) for b in batches[first:] if b]
        assert sum(capped) == 35
        assert max(capped) <= 10
        assert len(capped) >= 4
        all_batches += batches
        produce(kafka_bootstrap, topic, 15, partitions=2, first=produced)  # backlog for run 2
        produced += 15
    got = offsets(all_batches)
    assert len(got) == len(set(got)) == produced - 15  # no duplicates; the last 15 not read yet
    for partition in (0, 1):
        mine = [o for t, p, o in got if p == partition]
        assert mine == list(range(len(mine)))  # no gaps


def test_cap_first_batch_caps_the_backlog_after_a_restart(
    spark: SparkSession, kafka_bootstrap: str, admin: AdminClient, tmp_path: Path
) -> None:
    """With capFirstBatch=true (processing-time runs) no batch exceeds the cap, restart or not."""
    topic = new_topic(admin, 2)
    source = options(
        kafka_bootstrap, subscribe=topic, maxOffsetsPerTrigger="10", capFirstBatch="true"
    )
    produce(kafka_bootstrap, topic, 25, partitions=2)
    sizes: list[int] = []
    for more in (0, 15):
        produce(kafka_bootstrap, topic, more, partitions=2, first=25)
        with running(spark, source, tmp_path / "ck") as (query, batches):
            query.processAllAvailable()
        sizes += [len(b) for b in batches if b]
    assert sum(sizes) == 40 and max(sizes) <= 10 and len(sizes) >= 4, sizes


def test_available_now_with_cap_reads_everything_available_at_start(
    spark: SparkSession, kafka_bootstrap: str, admin: AdminClient, tmp_path: Path
) -> None:
    topic = new_topic(admin, 2)
    source = options(kafka_bootstrap, subscribe=topic, maxOffsetsPerTrigger="10")
    produce(kafka_bootstrap, topic, 50, partitions=2)

    first = run_available_now(spark, source, tmp_path / "ck")
    assert sum(len(b) for b in first) == 50
    assert [len(b) for b in first] == [50]  # Spark 4.0 plans one batch for a Python source

    assert sum(len(b) for b in run_available_now(spark, source, tmp_path / "ck")) == 0
    produce(kafka_bootstrap, topic, 5, partitions=2, first=50)
    again = run_available_now(spark, source, tmp_path / "ck")
    assert offsets(again) == sorted([(topic, 0, 25), (topic, 0, 26), (topic, 0, 27),
                                     (topic, 1, 25), (topic, 1, 26)])  # fmt: skip


def test_new_partitions_and_pattern_topics_are_picked_up(
    spark: SparkSession, kafka_bootstrap: str, admin: AdminClient, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    first = f"pat-{tag}-a"
    admin.create_topics([NewTopic(first, 1, 1)])[first].result(timeout=30)
    produce(kafka_bootstrap, first, 3, partitions=1)
    source = options(kafka_bootstrap, subscribePattern=f".*pat-{tag}-.*")
    checkpoint = tmp_path / "ck"
    assert offsets(run_available_now(spark, source, checkpoint)) == [
        (first, 0, o) for o in range(3)
    ]

    admin.create_partitions([NewPartitions(first, 2)])[first].result(timeout=30)
    second, internal = f"pat-{tag}-b", f"_pat-{tag}-internal"
    for name in (second, internal):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
        produce(kafka_bootstrap, name, 2, partitions=1)
    produce(kafka_bootstrap, first, 4, partitions=2, first=3)  # 2 to the old, 2 to the new one

    assert offsets(run_available_now(spark, source, checkpoint)) == [
        (first, 0, 3), (first, 0, 4), (first, 1, 0), (first, 1, 1), (second, 0, 0), (second, 0, 1)
    ]  # fmt: skip


def test_data_loss_fails_with_a_clear_line_or_skips_when_allowed(
    spark: SparkSession,
    kafka_bootstrap: str,
    admin: AdminClient,
    tmp_path: Path,
) -> None:
    """Records between the checkpoint and the log start are deleted (DeleteRecords, as
    retention would), then the query resumes from that checkpoint. (The warning logged when
    skipping is checked in the unit tests: it is written by Spark's Python worker.)"""
    topic = new_topic(admin, 1)
    produce(kafka_bootstrap, topic, 10, partitions=1)
    strict = options(kafka_bootstrap, subscribe=topic, **{"kafka.sasl.password": SECRET})
    checkpoint = tmp_path / "ck"
    assert len(offsets(run_available_now(spark, strict, checkpoint))) == 10
    produce(kafka_bootstrap, topic, 10, partitions=1, first=10)
    admin.delete_records([TopicPartition(topic, 0, 15)])[TopicPartition(topic, 0, 15)].result(30)

    message = failure(spark, strict, checkpoint)
    assert (
        f"Kafka source: data loss: offsets of {topic}[0] from 10 are no longer available" in message
    )
    assert "(earliest available is 15;" in message
    assert "Set failOnDataLoss=false" in message

    lenient = {**strict, "failOnDataLoss": "false"}
    assert offsets(run_available_now(spark, lenient, checkpoint)) == [
        (topic, 0, o) for o in range(15, 20)
    ]
    assert SECRET not in message


def test_unreachable_broker_fails_within_the_timeout(
    spark: SparkSession, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"
    source = {
        **options(closed, subscribe="t", timeoutMs="2000"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.username": "user",
        "kafka.sasl.password": SECRET,
    }
    message = failure(spark, source, tmp_path / "ck")  # bounded by the test's timeout
    assert f"Kafka source: cannot reach the Kafka broker at {closed} within 2000 ms" in message
    assert "Check kafka.bootstrap.servers" in message
    assert "\n" not in message
    logged = capfd.readouterr()
    assert SECRET not in message + logged.out + logged.err


def test_unknown_topic_is_named(
    spark: SparkSession, kafka_bootstrap: str, admin: AdminClient, tmp_path: Path
) -> None:
    known = new_topic(admin, 1)
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    message = failure(
        spark, options(kafka_bootstrap, subscribe=f"{known},{missing}"), tmp_path / "ck"
    )
    assert message.endswith(
        f"Kafka source: topic(s) {missing} do not exist on {kafka_bootstrap}. "
        "Create them or fix the 'subscribe' option."
    )


def test_auth_failure_is_one_line_without_the_password(
    spark: SparkSession, kafka_bootstrap: str, admin: AdminClient, tmp_path: Path
) -> None:
    """The test broker fails every SCRAM login (it accepts any PLAIN login), which librdkafka
    reports as a SASL authentication error: the source must name it in one line."""
    source = {
        **options(kafka_bootstrap, subscribe=new_topic(admin, 1), timeoutMs="3000"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.username": "user",
        "kafka.sasl.password": SECRET,
    }
    message = failure(spark, source, tmp_path / "ck")
    assert f"Kafka source: the broker at {kafka_bootstrap} refused access while " in message
    assert "SASL authentication error" in message
    assert "Check the kafka.security.protocol, kafka.sasl.* and kafka.ssl.* options" in message
    assert "\n" not in message
    assert SECRET not in message


def test_bad_option_values_give_one_clear_line(spark: SparkSession, kafka_bootstrap: str) -> None:
    bad = options(kafka_bootstrap, subscribe="t", maxOffsetsPerTrigger="-1")
    with pytest.raises(ConfigError, match=r"^Kafka source: option maxOffsetsPerTrigger must be a "):
        read_kafka_stream(spark, bad)
    # Straight through Spark, the same line is inside Spark's error text.
    with pytest.raises(Exception) as raised:
        spark.readStream.format(KAFKA_FORMAT).options(**bad).load()
    assert str(raised_error(str(raised.value))) == (
        "Kafka source: option maxOffsetsPerTrigger must be a positive integer, not '-1'."
    )


def test_secrets_never_reach_explain(spark: SparkSession, kafka_bootstrap: str) -> None:
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule password="{SECRET}j";'
    frame = read_kafka_stream(
        spark,
        {
            **options(kafka_bootstrap, subscribe="t"),
            "kafka.sasl.password": SECRET,
            "kafka.sasl.jaas.config": jaas,
            "kafka.ssl.key.pem": f"-----BEGIN PRIVATE KEY-----{SECRET}k",
        },
    )
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        frame.explain(True)
    assert "kafka.sasl.password" in shown.getvalue()
    assert SECRET not in shown.getvalue()
    assert SECRET not in repr(frame)


def test_query_progress_counts_rows_per_capped_batch(
    spark: SparkSession, kafka_bootstrap: str, admin: AdminClient, tmp_path: Path
) -> None:
    """``numInputRows`` of each progress (what monitoring sees) respects the cap too."""
    topic = new_topic(admin, 3)
    source = options(kafka_bootstrap, subscribe=topic, maxOffsetsPerTrigger="7")
    with running(spark, source, tmp_path / "ck") as (query, _):
        query.processAllAvailable()  # first (uncapped) batch: the topic is empty
        produce(kafka_bootstrap, topic, 30, partitions=3)
        query.processAllAvailable()
        rows = [p.numInputRows for p in query.recentProgress if p.numInputRows]
    assert sum(rows) == 30
    assert max(rows) <= 7
