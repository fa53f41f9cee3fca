"""Broker outages (issue 47, defect 2).

After an interrupted run, one ``availableNow`` run reads everything the broker holds. A
processing-time run with ``maxOffsetsPerTrigger`` and ``capFirstBatch`` is stopped with its
newest batch planned but not committed (the state a kill or a broker outage leaves: the
offsets file written, its commit not). Before the fix an ``availableNow`` run fell back to
Spark's ``once`` (a Python source has no ``SupportsTriggerAvailableNow``): it re-ran only that
planned batch and stopped, with most records unread.

A continuous run's queries (:class:`lakehouse.run.queries.RunningQueries`) ride out a broker
stopped and restarted on the same data: the source's failure is noted (the run's summary, so
``lakehouse status`` and the event log, has it), one line per attempt says the run waits for the
source, the query goes on exactly once when the broker is back, and a source unreachable for
longer than the give-up time stops the run with :class:`~lakehouse.run.queries.SourceGoneError`.
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
from cdc.sources import SourceSpec
from lakehouse.ops.source_check import partition_gaps
from lakehouse.run.pipeline import run_once
from lakehouse.run.queries import Backoff, RunningQueries, SourceGoneError
from lakehouse.run.summary import RunSummary
from lakehouse_core.errors import SourceUnavailableError
from lakehouse_core.layout import Warehouse
from lakehouse_demo.settings import SHOP_CONFIG
from lakehouse_local.broker import LocalBroker, free_port
from tests.cli import SHOP_TOML, run_cli
from tests.logs import logged

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
    newest = max(int(f.name) for f in (checkpoint / "offsets").glob("[0-9]*"))
    if (checkpoint / "commits" / str(newest)).exists():  # else the stop left it uncommitted
        (checkpoint / "commits" / str(newest)).unlink()  # planned, not committed
        (checkpoint / "commits" / f".{newest}.crc").unlink(missing_ok=True)
    committed = {(p, o) for b, p, o in seen if b < newest}
    assert len(committed) < RECORDS // 2

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
    assert 0 < len(rerun) <= CAP  # the planned (capped) batch ran again, then the rest
    assert max(b for b, _, _ in seen) == newest + 1


def wait_until(condition: object, seconds: float, what: str, running: RunningQueries) -> None:
    """Call ``running.check()`` until ``condition()`` holds (the run's own loop does so)."""
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        running.check()
        time.sleep(0.5)


def test_a_continuous_run_waits_for_the_broker_and_goes_on_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    broker = LocalBroker(home=tmp_path / "broker", port=free_port())
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = f"outage-{uuid.uuid4().hex[:10]}"
        admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(timeout=30)
        produce(broker.bootstrap, topic, RECORDS, partitions=3)
        seen: list[tuple[int, int]] = []

        def collect(frame: DataFrame, _batch_id: int) -> None:
            seen.extend((r.partition, r.offset) for r in frame.collect())

        source = {
            "kafka.bootstrap.servers": broker.bootstrap,
            "subscribe": topic,
            "maxOffsetsPerTrigger": str(CAP),
            "capFirstBatch": "true",
            "timeoutMs": "3000",
        }

        def start() -> object:
            return (
                read_kafka_stream(spark, source)
                .writeStream.foreachBatch(collect)
                .option("checkpointLocation", str(tmp_path / "ck"))
                .trigger(processingTime="500 milliseconds")
                .start()
            )

        summary = RunSummary()
        backoff = Backoff(first_seconds=1.0, max_seconds=2.0, give_up_seconds=600.0)
        running = RunningQueries(summary, backoff)
        with logged() as lines:
            running.start("bronze", start)  # type: ignore[arg-type]
            try:
                wait_until(lambda: len(seen) >= CAP, 300, "a first batch", running)
                broker.stop()
                wait_until(lambda: summary.failing_now(), 300, "the outage", running)
                waiting = [line for line in lines if "the source is unreachable" in line]
                assert waiting[0].startswith("bronze: the source is unreachable"), lines
                assert "waiting for it: attempt 2 in 1 s, giving up in" in waiting[0], waiting[0]
                failing = summary.failing_now()
                assert [f.table for f in failing] == ["bronze"]
                assert isinstance(failing[0].failure.error, SourceUnavailableError)
                wait_until(  # attempts go on while it is down: one line each
                    lambda: len([ln for ln in lines if "the source is unreachable" in ln]) >= 2,
                    300,
                    "a second attempt",
                    running,
                )

                broker.start()  # the same folder: the same data
                wait_until(
                    lambda: any("running again" in ln for ln in lines), 300, "recovery", running
                )
                assert not summary.failing_now()
                running.catch_up()
            finally:
                running.stop()
        assert sorted(seen) == sorted({(i % 3, i // 3) for i in range(RECORDS)})  # once each

        broker.stop()  # and it does not come back: the run gives up
        gives_up(start)
    finally:
        broker.stop()


def gives_up(start: object) -> None:
    """A run whose source stays unreachable longer than its give-up time stops, one line."""
    quick = RunningQueries(backoff=Backoff(1.0, 1.0, 3.0))
    quick.start("bronze", start)  # type: ignore[arg-type]
    try:
        with pytest.raises(SourceGoneError) as raised:
            wait_until(lambda: False, 300, "giving up", quick)
    finally:
        quick.stop()
    message = str(raised.value)
    assert message.startswith("bronze: the source has been unreachable for"), message
    assert "--give-up-after" in message and "\n" not in message, message


def test_partition_gaps_name_what_bronze_lacks(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topic = f"gaps-{uuid.uuid4().hex[:10]}"
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(timeout=30)
    produce(kafka_bootstrap, topic, 30, partitions=3)
    source = SourceSpec("kafka", kafka_bootstrap, kafka_options={"subscribe": topic})
    warehouse = Warehouse.from_path(tmp_path / "wh")
    assert [g.missing for g in partition_gaps(spark, warehouse, source)] == [10, 10, 10]

    run_once(spark, source, warehouse, SHOP_CONFIG, raise_on_failure=False)
    assert partition_gaps(spark, warehouse, source) == []

    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(7):
        producer.produce(topic, key=b"k", value=f"late{i}".encode(), partition=1)
    assert producer.flush(30) == 0
    gaps = partition_gaps(spark, warehouse, source)
    assert [(g.topic, g.partition, g.missing, g.newest) for g in gaps] == [(topic, 1, 7, 9)]
    assert gaps[0].line() == (
        f"{topic}[1]: bronze lacks 7 of the 17 records the broker holds (offsets 0 to 16; "
        "bronze has up to offset 9); run the pipeline to read them"
    )
    # The command line: verify --source names the gap and exits 1, then 0 once it is read.
    verify = ("verify", "--config", SHOP_TOML, "--warehouse", warehouse.root)
    verify += ("--source", f"kafka:{kafka_bootstrap}")
    found = run_cli(*verify, "--kafka-option", f"subscribe={topic}")
    assert found.returncode == 1, found.stdout + found.stderr
    assert f"source: {gaps[0].line()}" in found.stdout.splitlines(), found.stdout
    run_once(spark, source, warehouse, SHOP_CONFIG, raise_on_failure=False)
    held = run_cli(*verify, "--kafka-option", f"subscribe={topic}")
    assert held.returncode == 0, held.stdout + held.stderr
    assert f"source: bronze holds every record of kafka:{kafka_bootstrap}" in held.stdout
