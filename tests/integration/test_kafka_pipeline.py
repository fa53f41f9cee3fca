"""The pipeline from Kafka: the same workload through files and through Kafka gives the same
bronze records, silver and gold; and runs killed with SIGKILL while they consume, while records
keep arriving, end with each Kafka record exactly once in bronze and a silver that equals the
fold of bronze.

Each test reads exactly the records it sent (subscribe list + per-partition ``startingOffsets``
taken before sending), so the module also works against a shared broker
(``KAFKA_BOOTSTRAP_SERVERS``).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.records import Record
from cdc.sources import SourceSpec
from lakehouse.ops.audit import verify_warehouse
from lakehouse.ops.idle import nothing_new
from lakehouse.run.pipeline import run_once
from lakehouse_core.layout import LAYERS, QUARANTINE_TABLE, Warehouse
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from lakehouse_demo.job import workload_source
from lakehouse_demo.producer import (
    ProduceReport,
    end_offsets,
    ensure_topics,
    produce,
    send_workload,
)
from lakehouse_demo.settings import SHOP_CONFIG
from tests.cli import LAKEHOUSE, run_cli
from tests.runs import Run, assert_same_rows, described, load

pytestmark = [pytest.mark.kafka, pytest.mark.integration, pytest.mark.timeout(1800)]

SEED = 11
EVENTS = 4000
KILLS = 1  # one real SIGKILL while consuming (commit boundaries: test_commit_boundaries)
BUDGET_SECONDS = 900
# Columns that hold Kafka offsets: equal between the paths only when the topics start empty.
OFFSET_COLUMNS = {"_bronze_offset", "offset"}
QUARANTINE_RUN_COLUMNS = ("_quarantined_at", "_batch_id")


@dataclass(frozen=True)
class Produced:
    workload: WorkloadConfig
    report: ProduceReport
    bootstrap: str

    @property
    def source(self) -> SourceSpec:
        return workload_source(self.report, self.bootstrap)


@pytest.fixture(scope="module")
def produced(kafka_bootstrap: str) -> Produced:
    workload = WorkloadConfig(events=EVENTS, seed=SEED, malformed_rate=0.01)
    report = send_workload(workload, kafka_bootstrap)
    assert report.records == EVENTS
    return Produced(workload, report, kafka_bootstrap)


@pytest.fixture(scope="module")
def kafka_warehouse(
    spark: SparkSession, produced: Produced, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """One run from Kafka, in this process."""
    root = tmp_path_factory.mktemp("from-kafka")
    run_once(spark, produced.source, Warehouse.from_path(root), SHOP_CONFIG)
    return root


def comparable(frame: DataFrame, name: str, same_offsets: bool) -> DataFrame:
    dropped = [] if same_offsets else [c for c in frame.columns if c in OFFSET_COLUMNS]
    if name == QUARANTINE_TABLE:
        dropped += QUARANTINE_RUN_COLUMNS
    return frame.drop(*dropped)


def starts_empty(report: ProduceReport) -> bool:
    return all(o == 0 for parts in report.start_offsets.values() for o in parts.values())


def test_kafka_and_files_give_the_same_warehouse(
    spark: SparkSession, produced: Produced, kafka_warehouse: Path, tmp_path: Path
) -> None:
    files_root = tmp_path / "from-files"
    write_files(generate(produced.workload), tmp_path / "source", lines_per_file=1000)
    source = SourceSpec("files", str(tmp_path / "source"), max_files_per_trigger=1)
    run_once(spark, source, Warehouse.from_path(files_root), SHOP_CONFIG)

    same_offsets = starts_empty(produced.report)
    names = {layer: Warehouse.from_path(files_root).table_names(layer) for layer in LAYERS}
    for layer in LAYERS:
        assert Warehouse.from_path(kafka_warehouse).table_names(layer) == names[layer]
    assert {"customers", "orders", "clickstream", QUARANTINE_TABLE} <= set(names["silver"])
    assert {"revenue_per_minute", "user_sessions"} <= set(names["gold"])
    for name in names["bronze"]:
        columns = ["topic", "partition", "key", "value", "timestamp", "timestampType"]
        columns += [F.to_json("headers").alias("headers")]
        if same_offsets:
            columns.append("offset")
        want = load(spark, files_root, "bronze", name).select(*columns)
        got = load(spark, kafka_warehouse, "bronze", name).select(*columns)
        assert_same_rows("bronze", name, want, got)
    for layer in ("silver", "gold"):
        for name in names[layer]:
            want = comparable(load(spark, files_root, layer, name), name, same_offsets)
            got = comparable(load(spark, kafka_warehouse, layer, name), name, same_offsets)
            assert_same_rows(layer, name, want, got)

    checks = verify_warehouse(spark, Warehouse.from_path(kafka_warehouse), SHOP_CONFIG)
    assert checks and all(check.ok for check in checks), [c for c in checks if not c.ok]


def test_a_run_is_told_nothing_is_new_from_the_brokers_offsets_alone(
    produced: Produced, kafka_warehouse: Path
) -> None:
    """After a run read every record, the check ``run --once`` makes before starting Spark
    finds nothing new; one more record on a subscribed topic is new."""
    warehouse = Warehouse.from_path(kafka_warehouse)
    assert nothing_new(produced.source, warehouse, SHOP_CONFIG)
    topic = sorted(produced.report.start_offsets)[0]
    record = Record(topic, 0, 0, int(time.time() * 1000), {"id": -1}, None)
    produce([record], produced.bootstrap)
    assert not nothing_new(produced.source, warehouse, SHOP_CONFIG)


CHUNKS = KILLS + 1  # the workload arrives in chunks: one before each run
KILL_SERVER = "killshop"  # its own topics, so the runs read only what this test sends
KILL_CONFIG = f"""
[[tables]]
name = "clickstream"
topic = "{KILL_SERVER}.clickstream"
format = "events"
keys = ["event_id"]
sequence_by = ["ts"]
schema = "event_id string, user_id bigint, page string, action string, ts timestamp"
"""


def test_runs_killed_while_consuming_keep_each_record_exactly_once(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Records keep arriving between runs; each run is killed at a random moment after it
    starts consuming, the last one finishes."""
    deadline = time.monotonic() + BUDGET_SECONDS
    warehouse = tmp_path / "killed"
    config = tmp_path / "pipeline.toml"
    config.write_text(KILL_CONFIG, encoding="utf-8")
    workload = WorkloadConfig(events=EVENTS, seed=SEED, malformed_rate=0.01, server=KILL_SERVER)
    records = generate(workload)
    topics = sorted({r.topic for r in records})
    ensure_topics(kafka_bootstrap, dict.fromkeys(topics, workload.partitions))
    start = end_offsets(kafka_bootstrap, topics)
    args = [str(LAKEHOUSE), "run", "--warehouse", str(warehouse), "--once", "--config", str(config)]
    args += ["--source", f"kafka:{kafka_bootstrap}"]
    args += ["--kafka-option", f"subscribe={','.join(topics)}"]
    args += ["--kafka-option", f"startingOffsets={json.dumps(start)}"]
    chunk = -(-len(records) // CHUNKS)
    rng = random.Random(SEED)
    kills: list[str] = []
    runs: list[Run] = []
    try:
        for index in range(CHUNKS):
            produce(records[index * chunk : (index + 1) * chunk], kafka_bootstrap)
            if index == CHUNKS - 1:  # the last run is not killed: it runs in this process
                finished = run_cli(*args[1:])
                assert finished.returncode == 0, finished.stdout + finished.stderr
                break
            run = Run(args)
            runs.append(run)
            assert run.wait_for("bronze", 1, deadline) is not None, run.output()
            time.sleep(rng.uniform(0.3, 3.0))
            if run.process.poll() is not None:
                assert run.process.returncode == 0, run.output()
                continue
            kills.append(run.phase_now() or "start-up")
            run.kill()
    finally:
        for started_run in runs:
            if started_run.process.poll() is None:
                started_run.kill()
    assert len(kills) == KILLS, kills
    assert_each_record_once(spark, warehouse, records, start)

    verify = run_cli("verify", "--warehouse", warehouse, "--config", config)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "orders" in verify.stdout and "clickstream" in verify.stdout, verify.stdout
    print(f"kills landed in: {kills}")


def assert_each_record_once(
    spark: SparkSession, warehouse: Path, records: list[Record], start: dict[str, dict[str, int]]
) -> None:
    """Bronze holds the Kafka coordinates of ``records`` (produced from ``start``) once each."""
    per_partition = Counter((r.topic, r.partition) for r in records)
    expected = Counter(
        (topic, partition, start[topic][str(partition)] + i)
        for (topic, partition), n in per_partition.items()
        for i in range(n)
    )
    got: Counter[tuple[str, int, int]] = Counter()
    for name in Warehouse.from_path(warehouse).table_names("bronze"):
        rows = load(spark, warehouse, "bronze", name).select("topic", "partition", "offset")
        got.update((r.topic, r.partition, r.offset) for r in rows.collect())
    duplicated = Counter({row: n for row, n in got.items() if n > 1})
    assert not duplicated, f"records ingested twice: {described(duplicated)}"
    missing, extra = described(expected - got), described(got - expected)
    assert got == expected, f"missing {missing}, extra {extra}"
