"""Fuzz: damaged records mixed with good ones lose nothing, stop nothing and change nothing good.

Four thousand file lines damaged by :mod:`tests.fuzz` (wrong types in key, row and schema,
missing fields, garbage envelopes, deep nesting, multi-megabyte values, flipped bytes, cuts,
invalid UTF-8, NUL bytes) go with a good shop workload through the file source, and a thousand
damaged Kafka records with good ones through a Kafka-protocol broker. The damaged records are
on topics of their own (the ``fuzz`` server), so the good topics must come out exactly as
without them. Every run must exit 0 with no traceback, every line must be in bronze (as a
record or an unreadable line), and a later batch of good records must be processed.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from cdc.files import UNREADABLE_TOPIC
from cdc.records import Record
from cdc.sources import SourceSpec
from lakehouse.ops.audit import verify_warehouse
from lakehouse.run.pipeline import run_once
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import Warehouse
from lakehouse_demo.generator import WorkloadConfig, generate
from lakehouse_demo.producer import client_settings, ensure_topics
from lakehouse_demo.settings import SHOP_CONFIG
from tests.fuzz import mutated_lines, mutated_records
from tests.runs import described, load

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

SEED = 2026
FUZZ_LINES = 4_000
KAFKA_FUZZ_RECORDS = 1_000
GOOD = WorkloadConfig(events=800, seed=SEED, malformed_rate=0.0)
FUZZ_BASE = WorkloadConfig(events=300, seed=SEED + 1, malformed_rate=0.0, server="fuzz")
(SHOP_CLICKS,) = SHOP_CONFIG.tables
#: The fuzz topics are their own entities; a type their table cannot take is quarantined. No
#: gold table: the shop's read only good topics (silver orders and clickstream), whose bronze
#: and silver are what this test compares, so they would add a run's gold work and nothing
#: the fuzz reaches.
CONFIG = PipelineConfig(
    tables=(
        SHOP_CLICKS,
        TableSpec(
            name="fuzz_clickstream",
            topic="fuzz.clickstream",
            format="events",
            keys=SHOP_CLICKS.keys,
            sequence_by=SHOP_CLICKS.sequence_by,
            schema=SHOP_CLICKS.schema,
            on_incompatible_type="quarantine",
        ),
        TableSpec(
            name="fuzz_customers",
            topic="fuzz.public.customers",
            on_incompatible_type="quarantine",
        ),
        TableSpec(
            name="fuzz_orders", topic="fuzz.public.orders", on_incompatible_type="quarantine"
        ),
    ),
)


def write_lines(directory: Path, name: str, lines: list[bytes]) -> None:
    """One JSON-lines file, appearing at once (as the file source requires)."""
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{name}.tmp"
    partial.write_bytes(b"\n".join(lines) + b"\n")
    partial.replace(directory / name)


def bronze_rows(spark: SparkSession, warehouse: Warehouse) -> int:
    return sum(
        spark.read.format("delta").load(warehouse.table("bronze", name)).count()
        for name in warehouse.table_names("bronze")
    )


def assert_good_topics_exact(
    spark: SparkSession, warehouse: Warehouse, good: list[Record], topics: set[str]
) -> None:
    """Bronze holds exactly the good records of ``topics`` and their silver tables equal the
    independent fold of that bronze (so: of the good records alone)."""
    want = Counter((r.topic, r.partition, r.offset, r.key_bytes, r.value_bytes) for r in good)
    got: Counter[tuple[object, ...]] = Counter()
    for topic in topics:
        table = load(spark, Path(warehouse.root), "bronze", table_name_for_topic(topic))
        rows = table.select("topic", "partition", "offset", "key", "value").collect()
        got.update((t, p, o, _bytes(k), _bytes(v)) for t, p, o, k, v in rows)
    assert got == want, f"missing {described(want - got)}, extra {described(got - want)}"
    entities = {CONFIG.spec_for_topic(topic).name for topic in topics}
    checks = [c for c in verify_warehouse(spark, warehouse, CONFIG) if c.table in entities]
    assert len(checks) == len(entities), checks
    assert all(check.ok for check in checks), [c for c in checks if not c.ok]


def _bytes(value: bytearray | None) -> bytes | None:
    return None if value is None else bytes(value)


def test_damaged_file_lines_lose_nothing_and_stop_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    good = generate(GOOD)
    fuzz_base = generate(FUZZ_BASE)
    damaged = mutated_lines(fuzz_base, FUZZ_LINES, SEED)
    first, later = good[: len(good) * 3 // 4], good[len(good) * 3 // 4 :]
    # Kafka allows topic names of 249 characters, more than a table name may have.
    customer = next(r for r in fuzz_base if r.topic == "fuzz.public.customers" and r.value)
    long_topic = replace(customer, topic="fuzz.public." + "c" * 237)
    lines = [r.to_line().encode() for r in [*first, *fuzz_base, long_topic]] + damaged
    source, warehouse = tmp_path / "source", Warehouse.from_path(tmp_path / "warehouse")
    write_lines(source, "part-00000.jsonl", lines)
    spec = SourceSpec("files", str(source))

    run_once(spark, spec, warehouse, CONFIG)

    assert bronze_rows(spark, warehouse) == len(lines)
    unreadable = load(spark, Path(warehouse.root), "bronze", table_name_for_topic(UNREADABLE_TOPIC))
    kept = Counter(bytes(row.value) for row in unreadable.select("value").collect())
    assert not kept - Counter(lines), "an unreadable line is not one of the input lines"
    assert kept.total() > FUZZ_LINES // 10, "the damage should make many lines unreadable"
    shop_topics = {r.topic for r in good}
    assert (
        load(spark, Path(warehouse.root), "bronze", table_name_for_topic(long_topic.topic)).count()
        == 1
    )
    assert_good_topics_exact(spark, warehouse, first, shop_topics)

    # Nothing is stuck: a later file of good records is processed (a query that failed or
    # stopped would have ended run_once with an error).
    write_lines(source, "part-00001.jsonl", [r.to_line().encode() for r in later])
    run_once(spark, spec, warehouse, CONFIG)
    assert bronze_rows(spark, warehouse) == len(lines) + len(later)
    assert_good_topics_exact(spark, warehouse, good, shop_topics)


@pytest.mark.kafka
def test_damaged_kafka_records_lose_nothing_and_stop_nothing(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    suffix = os.urandom(3).hex()
    good_topic, fuzz_topic = f"shop{suffix}.public.customers", f"fuzz{suffix}.public.customers"
    good = [
        Record(good_topic, r.partition, r.offset, r.timestamp_ms, r.key, r.value, r.headers)
        for r in generate(GOOD)
        if r.topic.endswith(".customers")
    ]
    damaged = mutated_records(
        [r for r in generate(FUZZ_BASE) if r.topic.endswith(".customers")], KAFKA_FUZZ_RECORDS, SEED
    )
    ensure_topics(kafka_bootstrap, {good_topic: 3, fuzz_topic: 3})
    producer = Producer(client_settings(kafka_bootstrap, None))
    for record in good:
        producer.produce(
            good_topic, record.value_bytes, record.key_bytes, partition=record.partition
        )
    for n, (key, value) in enumerate(damaged):
        producer.produce(fuzz_topic, value, key, partition=n % 3)
    assert producer.flush(60) == 0
    source = SourceSpec(
        "kafka", kafka_bootstrap, kafka_options={"subscribe": f"{good_topic},{fuzz_topic}"}
    )
    warehouse = Warehouse.from_path(tmp_path / "warehouse")
    config = PipelineConfig(
        tables=(TableSpec(name="fuzzed", topic=fuzz_topic, on_incompatible_type="quarantine"),)
    )

    run_once(spark, source, warehouse, config)

    assert bronze_rows(spark, warehouse) == len(good) + len(damaged)
    checks = {c.table: c for c in verify_warehouse(spark, warehouse, config)}
    assert checks["customers"].ok, checks["customers"]
    assert checks["customers"].actual_rows > 0
