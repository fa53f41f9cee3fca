"""Kafka figures for ``make bench``: the raw confluent-kafka consume rate (the ceiling), the
Kafka -> bronze ingest rate of our Spark source, and end-to-end freshness (produce -> visible in
silver) with a processing-time trigger at a steady produce rate.

Freshness is measured in one hop (the default of a continuous run) and in two, one after the
other on fresh warehouses. Freshness of a record = commit time of the silver version that
applied it (Change Data Feed ``_commit_timestamp``) minus its Kafka timestamp (set by the
producer when it sent the record).
Records superseded by a newer one for the same key in the same micro-batch are never applied on
their own and are not counted.

Fresh reads (``fresh_reads=True``, two hops: bronze on the trigger, silver's MERGE on
``silver_trigger``): a reader beside the pipeline makes a fresh read of every silver table
(:func:`lakehouse.ops.fresh.fresh_read`) one after another and collects where each row's value
came from (its bronze partition and offset); a record's fresh-read freshness = the time the
first read that showed it had finished minus its Kafka timestamp (so a read's own duration is
counted). The plain figures of the same run are measured as above.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from math import nan
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from benchmarks.recording import write_results
from bronze.job import start_bronze
from cdc.records import Record
from cdc.sources import SourceSpec, read_source
from lakehouse.ops.fresh import fresh_read
from lakehouse.run.pipeline import start_one_hop
from lakehouse_core.config import TableSpec
from lakehouse_core.errors import TableNotFoundError
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import Warehouse
from lakehouse_core.spark import get_spark
from lakehouse_core.specs import FreshSpec
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
from silver.fresh import FreshReadError
from silver.job import start_silver

#: Records sent before the freshness measurement starts.
WARM_UP = 300
#: Silver's trigger while fresh reads are measured (bronze runs on the bench's trigger).
FRESH_SILVER_TRIGGER = "10s"


@dataclass(frozen=True)
class Freshness:
    records: int  # produced during the measurement
    applied: int  # of them, applied to silver on their own
    rate: float  # records/s produced
    p50: float
    p99: float
    fresh: FreshFigures | None = None  # the fresh reads' figures (None: not measured)


@dataclass(frozen=True)
class FreshFigures:
    """Freshness in fresh reads: records seen on their own, the reads made, their median
    seconds, the seconds from produce to seen (p50, p99) and the reads refused (over the
    bound, with their messages' first words)."""

    seen: int
    reads: int
    read_seconds: float
    p50: float
    p99: float
    refused: tuple[str, ...]


class FreshReader:
    """Fresh reads of the silver tables of ``specs`` one after another on a thread until
    stopped; for each (table, bronze partition, offset) the epoch ms the first read showing
    it as a row's source finished."""

    def __init__(self, spark: SparkSession, warehouse: Warehouse, specs: list[TableSpec]) -> None:
        self.spark, self.warehouse = spark, warehouse
        self.bronze = {spec.name: table_name_for_topic(spec.topic) for spec in specs}
        self.names = list(self.bronze)
        self.seen: dict[tuple[str, int, int], int] = {}
        self.durations: list[float] = []
        self.refused: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fresh-reader", daemon=True)

    def __enter__(self) -> FreshReader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        config = replace(SHOP_CONFIG, fresh=FreshSpec(max_records=1_000_000, max_age_seconds=3600))
        while not self._stop.is_set():
            for name in self.names:
                started = time.perf_counter()
                try:
                    read = fresh_read(self.spark, self.warehouse, config, name)
                    rows = read.rows.select("_bronze_partition", "_bronze_offset").collect()
                except (FreshReadError, TableNotFoundError) as error:
                    self.refused.append(str(error)[:80])
                    continue
                done = int(time.time() * 1000)
                self.durations.append(time.perf_counter() - started)
                for row in rows:
                    self.seen.setdefault((name, row[0], row[1]), done)

    def lags(self, spark: SparkSession, measured_from: int) -> list[float]:
        """Seconds from send to first seen of each record seen, sent after ``measured_from``."""
        if not self.seen:
            return []
        seen = spark.createDataFrame(
            [(n, p, o, ms) for (n, p, o), ms in self.seen.items()],
            "name string, partition int, offset long, seen_ms long",
        )
        lags: list[float] = []
        for name in self.names:
            path = self.warehouse.table("bronze", self.bronze[name])
            bronze = spark.read.format("delta").load(path)
            mine = seen.where(F.col("name") == name).drop("name")
            joined = mine.join(bronze, ["partition", "offset"]).where(
                F.unix_millis(bronze.timestamp) >= measured_from
            )
            lag = (F.col("seen_ms") - F.unix_millis(bronze.timestamp)).alias("lag")
            lags += [row.lag / 1000 for row in joined.select(lag).collect()]
        return sorted(lags)


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
    silver_trigger: str | None = None,
    fresh_reads: bool = False,
) -> Freshness:
    """Produce at ``rate`` for ``seconds`` while the pipeline runs on ``trigger``: in one hop
    (each bronze micro-batch applied to silver in the same micro-batch, as ``lakehouse run
    --processing-time`` does), or in two (a silver query per table on ``silver_trigger``,
    default ``trigger``); with ``fresh_reads`` (two hops) a :class:`FreshReader` reads the
    silver tables fresh meanwhile.

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
            merge_every = Trigger.parse(silver_trigger or trigger)
            queries += [start_silver(spark, warehouse, spec, merge_every) for spec in specs]
        for query in queries:
            query.processAllAvailable()
        reader = FreshReader(spark, warehouse, specs)
        measured_from = int(time.time() * 1000)
        if fresh_reads and not one_hop:
            with reader:
                sent = send_records(paced(records[WARM_UP:], rate, stop), bootstrap)
                time.sleep(2.0)  # the reads after the last record was sent
        else:
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
    fresh = None
    if fresh_reads and not one_hop:
        seen = reader.lags(spark, measured_from)
        fresh = FreshFigures(
            seen=len(seen),
            reads=len(reader.durations),
            read_seconds=statistics.median(reader.durations) if reader.durations else nan,
            p50=_quantile(seen, 0.5),
            p99=_quantile(seen, 0.99),
            refused=tuple(dict.fromkeys(reader.refused)),
        )
    return Freshness(
        records=sent.records,
        applied=len(lags),
        rate=rate,
        p50=_quantile(lags, 0.5),
        p99=_quantile(lags, 0.99),
        fresh=fresh,
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
    fresh_reads: bool = True,
) -> dict[str, Any]:
    """All Kafka figures on a fresh local broker: produce, raw consume, Kafka -> bronze and
    freshness in one hop at ``rate`` records/s for ``seconds`` (and in two hops with
    ``two_hop``; with ``fresh_reads``, in two hops with silver's MERGE every
    :data:`FRESH_SILVER_TRIGGER` and fresh reads beside it); JSON-ready."""
    broker = LocalBroker(home=work / "kafka-broker", port=free_port())
    shutil.rmtree(broker.home / "data", ignore_errors=True)
    for name in ("kafka-warehouse", "fresh-one-hop", "fresh-two-hop", "fresh-fresh-reads"):
        shutil.rmtree(work / name, ignore_errors=True)
    modes = [("one-hop", True, False)]
    modes += [("two-hop", False, False)] if two_hop else []
    modes += [("fresh-reads", False, True)] if fresh_reads else []
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
                silver_trigger=FRESH_SILVER_TRIGGER if reads else None,
                fresh_reads=reads,
            )
            for hops, one_hop, reads in modes
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
                **({"fresh_read": fresh_figures(figures.fresh)} if figures.fresh else {}),
            }
            for hops, figures in fresh.items()
        },
    }


def fresh_figures(fresh: FreshFigures) -> dict[str, Any]:
    """The fresh reads' figures, JSON-ready."""
    return {
        "silver_trigger": FRESH_SILVER_TRIGGER,
        "records_seen": fresh.seen,
        "reads": fresh.reads,
        "read_seconds_median": round(fresh.read_seconds, 2),
        "p50_seconds": round(fresh.p50, 2),
        "p99_seconds": round(fresh.p99, 2),
        "refused": list(fresh.refused),
    }


def fresh_read_line(figures: dict[str, Any]) -> str:
    """One line of :func:`fresh_figures`' figures."""
    refused = f"; refused: {figures['refused']}" if figures["refused"] else ""
    return (
        f"fresh reads (silver's MERGE every {figures['silver_trigger']}): "
        f"p50 {figures['p50_seconds']:.2f} s, p99 {figures['p99_seconds']:.2f} s "
        f"(goal p50 <= 2 s, p99 <= 5 s; {figures['records_seen']:,} records seen, "
        f"{figures['reads']} reads of {figures['read_seconds_median']:.2f} s median{refused})"
    )


def main() -> None:
    """Freshness of plain and fresh reads only (two hops, silver's MERGE every
    :data:`FRESH_SILVER_TRIGGER`), on a local broker:
    ``python -m benchmarks.kafka_bench --rate 1000 --seconds 60 [--json]``."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--rate", type=float, default=1_000.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--json", action="store_true", help="write benchmarks/results JSON")
    args = parser.parse_args()
    spark = get_spark(mode="local-jars")
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="fresh-freshness-"))
    broker = LocalBroker(home=work / "kafka-broker", port=free_port())
    broker.start()
    try:
        figures = freshness(
            spark,
            broker.bootstrap,
            Warehouse.from_path(work / "warehouse"),
            one_hop=False,
            rate=args.rate,
            seconds=args.seconds,
            silver_trigger=FRESH_SILVER_TRIGGER,
            fresh_reads=True,
        )
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    assert figures.fresh is not None
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_average": list(os.getloadavg()),
        "produce_rate_per_second": figures.rate,
        "records": figures.records,
        "plain": {
            "applied_on_their_own": figures.applied,
            "p50_seconds": round(figures.p50, 2),
            "p99_seconds": round(figures.p99, 2),
        },
        "fresh_read": fresh_figures(figures.fresh),
    }
    print(
        f"at {figures.rate:.0f} records/s ({figures.records:,} records, load average "
        f"{result['load_average'][0]:.1f}): plain reads p50 {figures.p50:.2f} s, p99 "
        f"{figures.p99:.2f} s; {fresh_read_line(result['fresh_read'])}"
    )
    if args.json:
        write_results(result, "fresh-freshness")


if __name__ == "__main__":
    main()
