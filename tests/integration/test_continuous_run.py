"""The continuous runner (``lakehouse run --processing-time``): queries that start together,
and a stop by signal."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from bronze.table import ensure_bronze_table
from cdc.records import Record
from lakehouse.run.pipeline import RunningQueries, start_ready
from lakehouse_core.config import PipelineConfig
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import QUARANTINE_TABLE, Warehouse
from lakehouse_core.spark import mute_jvm_stderr
from lakehouse_core.streaming import Trigger
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from tests.cli import LAKEHOUSE, SHOP_TABLES_TOML, run_cli
from tests.helpers import bronze_frame, customer_change
from tests.runs import Run

pytestmark = pytest.mark.integration

ENTITIES = 4
STOP_BUDGET_SECONDS = 840  # the whole signal test; every wait in it is bounded by it
MAX_STOP_OUTPUT_LINES = 30  # progress lines and the run's summary


def test_entities_quarantining_in_their_first_batch_start_together(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Several silver queries whose first micro-batch quarantines a record start at once; the
    quarantine table they share exists before they start, so no first write races another."""
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    topics = [f"shop.public.t{i}" for i in range(ENTITIES)]
    for topic in topics:
        bronze = warehouse.table("bronze", table_name_for_topic(topic))
        ensure_bronze_table(spark, bronze, topic)
        records = [
            customer_change(topic, 0, "c", 1, (None, 10)),
            Record(topic, 0, 1, 1_767_225_600_000, {"id": 2}, "not json"),
        ]
        bronze_frame(spark, records).write.format("delta").mode("append").save(bronze)
    running = RunningQueries()
    try:
        start_ready(spark, warehouse, PipelineConfig(), Trigger("1 second"), running)
        running.catch_up()
        assert all(running.query(name).exception() is None for name in running.names())
    finally:
        running.stop()
    quarantined = spark.read.format("delta").load(warehouse.table("silver", QUARANTINE_TABLE))
    assert sorted((r.topic, r.reason) for r in quarantined.collect()) == [
        (topic, "unparseable") for topic in topics
    ]
    assert set(warehouse.table_names("silver")) == {
        QUARANTINE_TABLE,
        *(f"t{i}" for i in range(ENTITIES)),
    }


def in_flight(checkpoints: Path) -> tuple[str, int] | None:
    """(query, batch) of a micro-batch that has started (its offsets are logged) and not yet
    committed, if any query of the warehouse has one now."""
    for offsets in checkpoints.glob("*/offsets"):
        started = [int(f.name) for f in offsets.iterdir() if f.name.isdigit()]
        if started and not (offsets.parent / "commits" / str(max(started))).exists():
            return offsets.parent.name, max(started)
    return None


def wait_in_flight(run: Run, checkpoints: Path, deadline: float) -> tuple[str, int]:
    """Wait until bronze has committed a micro-batch (which, in one hop, applied it to silver)
    and some query is inside one; return it."""
    while True:
        assert run.process.poll() is None, run.output()
        assert time.monotonic() < deadline, f"no bronze batch in time:\n{run.output()}"
        if (checkpoints / "bronze" / "commits" / "0").exists():
            batch = in_flight(checkpoints)
            if batch is not None:
                return batch
        time.sleep(0.02)


@pytest.mark.slow
def test_sigterm_stops_between_micro_batches(spark: SparkSession, tmp_path: Path) -> None:
    """SIGTERM while micro-batches run: the running batch commits, the run exits 0 with a
    line or two and no stack trace, and a later ``--once`` run completes the rest."""
    deadline = time.monotonic() + STOP_BUDGET_SECONDS
    source, warehouse = tmp_path / "source", tmp_path / "warehouse"
    records = generate(WorkloadConfig(events=300, seed=3, malformed_rate=0.02))
    write_files(records, source, lines_per_file=50)
    run = Run(
        [
            str(LAKEHOUSE),
            "run",
            "--config",
            str(SHOP_TABLES_TOML),
            "--source",
            f"files:{source}",
            "--warehouse",
            str(warehouse),
            "--processing-time",
            "1s",
            "--max-files-per-trigger",
            "1",
        ]
    )
    checkpoints = warehouse / "_system" / "checkpoints"
    try:
        query, batch_id = wait_in_flight(run, checkpoints, deadline)
        run.process.send_signal(signal.SIGTERM)
        code = run.finish(deadline)

    finally:
        if run.process.poll() is None:
            run.kill()
    output = "\n".join(line for _, line in run.lines)
    assert code == 0, output
    assert (checkpoints / query / "commits" / str(batch_id)).exists(), (
        f"batch {batch_id} of {query} was interrupted:\n{output}"
    )
    shown = "\n".join(output.splitlines()[:40])
    assert "Traceback" not in output and "Exception" not in output, shown
    assert len(run.lines) <= MAX_STOP_OUTPUT_LINES, shown
    assert "records of this run, per silver table" in output, shown
    # In one hop the bronze query's micro-batches applied silver: the event log has their rows.
    log = spark.read.format("delta").load(Warehouse.from_path(warehouse).event_log)
    bronze_ids = {r.query_id for r in log.where("query = 'bronze'").collect()}
    hop_rows = log.where("query LIKE 'silver_%' AND records > 0").collect()
    assert hop_rows and {r.query_id for r in hop_rows} <= bronze_ids, hop_rows[:3]

    finished = run_cli(
        "run",
        "--config",
        SHOP_TABLES_TOML,
        "--source",
        f"files:{source}",
        "--warehouse",
        warehouse,
        "--once",
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    bronze = sum(
        spark.read.format("delta").load(str(warehouse / "bronze" / name)).count()
        for name in Warehouse.from_path(warehouse).table_names("bronze")
    )
    assert bronze == len(records)
    verified = run_cli("verify", "--config", SHOP_TABLES_TOML, "--warehouse", warehouse)
    assert verified.returncode == 0, verified.stdout


def test_a_stop_waits_only_for_the_running_batch_when_batches_outlast_the_trigger(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Batches longer than the trigger run back to back, so there is never a moment between
    two of them: the stop ends the query once the batch running when it began has committed
    (the next one, just begun, is interrupted), not after the drain time."""
    committed: list[int] = []

    def slow(frame: object, batch_id: int) -> None:
        time.sleep(2.0)  # a batch of 2 s on a trigger of 0.2 s
        committed.append(batch_id)

    def start() -> object:
        return (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 5)
            .load()
            .writeStream.foreachBatch(slow)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(processingTime="0.2 seconds")
            .start()
        )

    running = RunningQueries()
    query = running.start("slow", start)  # type: ignore[arg-type]
    assert query is not None
    try:
        while query.lastProgress is None or not query.status["isTriggerActive"]:
            query.awaitTermination(0.1)
        in_flight = query.lastProgress.batchId + 1
        interrupted = running.stop_between_batches(spark, 0.2, 300.0, threading.Event())
    finally:
        query.stop()
        spark.sparkContext.setLogLevel("ERROR")  # as the suite's session has it
        mute_jvm_stderr(False)
    assert interrupted == [], interrupted
    assert not query.isActive
    assert in_flight in committed and (tmp_path / "ck" / "commits" / str(in_flight)).exists()
    assert max(committed) <= in_flight + 1, committed
