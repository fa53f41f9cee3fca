"""Kafka figures for ``make bench``: the raw confluent-kafka consume rate (the ceiling), the
Kafka -> bronze ingest rate of our Spark source, and end-to-end freshness (produce -> visible in
silver) with a processing-time trigger at a steady produce rate.

Freshness is measured in one hop (the default of a continuous run) and in two, one after the
other on fresh warehouses. Freshness of a record = commit time of the silver version that
applied it (Change Data Feed ``_commit_timestamp``) minus its Kafka timestamp (set by the
producer when it sent the record).
Records superseded by a newer one for the same key in the same micro-batch are never applied on
their own and are not counted.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bronze.job import start_bronze
from cdc.records import Record
from cdc.sources import SourceSpec, read_source
from lakehouse.run.pipeline import start_one_hop
from lakehouse_core.config import TableSpec
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import Trigger, await_query
from lakehouse_demo.generator import WorkloadConfig, generate
from lakehouse_demo.job import workload_source
from lakehouse_demo.producer import (
    ProduceReport,
    client_settings,
    end_offsets,
    ensure_topics,
    send_workload,
)
from lakehouse_demo.producer import produce as send_records
from lakehouse_demo.settings import SHOP_CONFIG
from lakehouse_local.broker import LocalBroker, free_port
from silver.job import start_silver

#: Records sent before the freshness measurement starts.
WARM_UP = 300


@dataclass(frozen=True)
class Freshness:
    records: int  # produced during the measurement
    applied: int  # of them, applied to silver on their own
    rate: float  # records/s produced
    p50: float
    p99: float


def raw_consume_seconds(report: ProduceReport, bootstrap: str) -> tuple[int, float]:
    """Read every record of ``report`` with one plain consumer; return (records, seconds)."""
    settings = {**client_settings(bootstrap, None), "group.id": "bench-raw"}
    consumer = Consumer({**settings, "enable.auto.commit": False})
    consumer.assign(
        [
            TopicPartition(topic, int(partition), start)
            for topic, parts in report.start_offsets.items()
            for partition, start in parts.items()
        ]
    )
    count = 0
    started = time.perf_counter()
    try:
        while count < report.records:
            messages = consumer.consume(10_000, timeout=10.0)
            if not messages:
                raise TimeoutError(f"raw consumer stalled after {count} records")
            count += sum(1 for message in messages if message.error() is None)
    finally:
        consumer.close()
    return count, time.perf_counter() - started


def kafka_to_bronze_seconds(
    spark: SparkSession, report: ProduceReport, bootstrap: str, warehouse: Warehouse
) -> float:
    """Ingest the records of ``report`` into bronze with ``availableNow``; return seconds."""
    source = workload_source(report, bootstrap)
    started = time.perf_counter()
    await_query(start_bronze(read_source(spark, source), warehouse, Trigger()))
    return time.perf_counter() - started


def paced(records: Iterable[Record], rate: float, stop: threading.Event) -> Iterator[Record]:
    """``records`` at ``rate`` per second, each stamped with the time it is sent."""
    started = time.monotonic()
    for sent, record in enumerate(records):
        delay = started + sent / rate - time.monotonic()
        if delay > 0 and stop.wait(delay):
            return
        yield replace(record, timestamp_ms=int(time.time() * 1000))


def freshness(
    spark: SparkSession,
    bootstrap: str,
    warehouse: Warehouse,
    one_hop: bool,
    rate: float = 100.0,
    seconds: float = 60.0,
    trigger: str = "1s",
) -> Freshness:
    """Produce at ``rate`` for ``seconds`` while the pipeline runs on ``trigger``: in one hop
    (each bronze micro-batch applied to silver in the same micro-batch, as ``lakehouse run
    --processing-time`` does), or in two (a silver query per table on the trigger).

    The first ``WARM_UP`` records of the workload go first, unmeasured: they create the bronze
    and silver tables, and every query commits them before the clock starts.
    """
    workload = WorkloadConfig(events=WARM_UP + int(rate * seconds), seed=99)
    records = generate(workload)
    topics = sorted({record.topic for record in records})
    ensure_topics(bootstrap, dict.fromkeys(topics, workload.partitions))
    start = end_offsets(bootstrap, topics)
    send_records(records[:WARM_UP], bootstrap)
    options = {"subscribe": ",".join(topics), "startingOffsets": json.dumps(start)}
    source = read_source(spark, SourceSpec("kafka", bootstrap, kafka_options=options), True)
    every = Trigger.parse(trigger)
    specs = [SHOP_CONFIG.spec_for_topic(topic) for topic in topics]
    stop = threading.Event()
    if one_hop:
        queries = [start_one_hop(spark, source, warehouse, SHOP_CONFIG, every)]
    else:
        queries = [start_bronze(source, warehouse, every)]
    try:
        _wait_for_tables(warehouse, [table_name_for_topic(topic) for topic in topics])
        if not one_hop:
            queries += [start_silver(spark, warehouse, spec, every) for spec in specs]
        for query in queries:
            query.processAllAvailable()
        measured_from = int(time.time() * 1000)
        sent = send_records(paced(records[WARM_UP:], rate, stop), bootstrap)
        for query in queries:  # bronze first: then silver sees every record
            query.processAllAvailable()
    finally:
        stop.set()
        for query in queries:
            query.stop()
    lags = sorted(
        lag for spec in specs for lag in _silver_lags(spark, warehouse, spec, measured_from)
    )
    return Freshness(
        records=sent.records,
        applied=len(lags),
        rate=rate,
        p50=_quantile(lags, 0.5),
        p99=_quantile(lags, 0.99),
    )


def _wait_for_tables(warehouse: Warehouse, names: list[str], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not set(names) <= set(warehouse.table_names("bronze")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"bronze tables {names} did not appear in {timeout_s:.0f} s")
        time.sleep(0.5)


def _silver_lags(
    spark: SparkSession, warehouse: Warehouse, spec: TableSpec, measured_from: int
) -> list[float]:
    """Seconds from send to silver commit of each record of ``spec`` sent after
    ``measured_from`` (epoch ms) that a silver version applied."""
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(warehouse.table("silver", spec.name))
        .where(F.col("_change_type").isin("insert", "update_postimage"))
    )
    bronze = spark.read.format("delta").load(
        warehouse.table("bronze", table_name_for_topic(spec.topic))
    )
    joined = changes.join(
        bronze,
        (changes["_bronze_partition"] == bronze["partition"])
        & (changes["_bronze_offset"] == bronze["offset"]),
    ).where(F.unix_millis(bronze.timestamp) >= measured_from)
    lag = F.unix_millis(changes._commit_timestamp) - F.unix_millis(bronze.timestamp)
    return [row.lag / 1000 for row in joined.select(lag.alias("lag")).collect()]


def _quantile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


def kafka_results(
    spark: SparkSession,
    events: int,
    seed: int,
    work: Path,
    rate: float,
    seconds: float,
    two_hop: bool = False,
) -> dict[str, Any]:
    """All Kafka figures on a fresh local broker: produce, raw consume, Kafka -> bronze and
    freshness in one hop at ``rate`` records/s for ``seconds`` (and in two hops with
    ``two_hop``); JSON-ready."""
    broker = LocalBroker(home=work / "kafka-broker", port=free_port())
    shutil.rmtree(broker.home / "data", ignore_errors=True)
    for name in ("kafka-warehouse", "fresh-one-hop", "fresh-two-hop"):
        shutil.rmtree(work / name, ignore_errors=True)
    modes = (("one-hop", True), ("two-hop", False)) if two_hop else (("one-hop", True),)
    broker.start()
    try:
        report = send_workload(WorkloadConfig(events=events, seed=seed), broker.bootstrap)
        raw_records, raw_seconds = raw_consume_seconds(report, broker.bootstrap)
        warehouse = Warehouse.from_path(work / "kafka-warehouse")
        bronze_seconds = kafka_to_bronze_seconds(spark, report, broker.bootstrap, warehouse)
        fresh = {
            hops: freshness(
                spark,
                broker.bootstrap,
                Warehouse.from_path(work / f"fresh-{hops}"),
                one_hop,
                rate,
                seconds,
            )
            for hops, one_hop in modes
        }
    finally:
        broker.stop()
    raw_rate = raw_records / raw_seconds
    bronze_rate = report.records / bronze_seconds
    return {
        "records": report.records,
        "produce_records_per_second": round(report.records / report.seconds),
        "raw_consume_records_per_second": round(raw_rate),
        "kafka_to_bronze_records_per_second": round(bronze_rate),
        "bronze_vs_raw_consume": round(bronze_rate / raw_rate, 3),
        "freshness": {
            hops: {
                "produce_rate_per_second": figures.rate,
                "records": figures.records,
                "applied_on_their_own": figures.applied,
                "p50_seconds": round(figures.p50, 2),
                "p99_seconds": round(figures.p99, 2),
            }
            for hops, figures in fresh.items()
        },
    }
