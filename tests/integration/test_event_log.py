"""The event log holds one row per micro-batch of each query of a run, and ``lakehouse status``
reports the warehouse as the tables and checkpoints are: counts, how far each layer applied,
quarantine, the last batches, and a running pipeline."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bronze.job import start_bronze
from cdc.sources import SourceSpec, read_source
from lakehouse.ops.status import pipeline_status
from lakehouse.run.event_log import EventLogListener, _Recorder, recording
from lakehouse_core.delta_io import TXN_APP_ID, TXN_VERSION, USER_METADATA, session_settings
from lakehouse_core.layout import Warehouse
from lakehouse_core.parallel import active_session
from lakehouse_core.spark import get_spark
from lakehouse_core.streaming import Trigger, run_to_end
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from lakehouse_demo.settings import SHOP_CONFIG
from tests.cli import SHOP_TOML, run_cli

pytestmark = pytest.mark.integration

ENTITIES = ("orders", "customers", "clickstream")


def test_event_log_and_status(spark: SparkSession, tmp_path: Path) -> None:
    records = generate(WorkloadConfig(events=400, seed=5, malformed_rate=0.05))
    parts = write_files(records, tmp_path / "parts", lines_per_file=100)
    source, root = tmp_path / "source", tmp_path / "wh"
    source.mkdir()
    for part in parts[:3]:
        part.rename(source / part.name)
    ran = run_cli(
        "run", "--config", SHOP_TOML, "--source", f"files:{source}", "--warehouse", root, "--once",
        "--max-files-per-trigger", "2",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    warehouse = Warehouse.from_path(root)
    log = spark.read.format("delta").load(warehouse.event_log)
    committed = check_one_row_per_batch(log, root)

    status = json.loads(
        run_cli("status", "--config", SHOP_TOML, "--warehouse", root, "--json").stdout
    )
    assert status["running"] is None
    assert status["event_log_rows"] == log.count()
    silver = {s["table"]: s for s in status["silver"]}
    assert set(silver) == {f"silver.{name}" for name in ENTITIES}
    for entity in ENTITIES:
        check_silver(spark, warehouse, log, silver[f"silver.{entity}"], entity)
        assert silver[f"silver.{entity}"]["last_batch"]["batch_id"] == max(
            committed[f"silver_{entity}"]
        )
    assert all(g["versions_behind"] == 0 and g["last_batch"] for g in status["gold"])
    check_gold_time(spark, warehouse, status["gold"])
    counted = run_cli("sql", "--warehouse", root, "--format", "json",
                      "SELECT count(*) AS n FROM system.event_log")  # fmt: skip
    assert json.loads(counted.stdout) == [{"n": log.count()}], counted.stderr

    # New records reach bronze only: silver is behind by exactly those of its topic.
    parts[3].rename(source / parts[3].name)
    new_orders = sum(1 for r in records[300:] if r.topic == "shop.public.orders")
    frame = read_source(spark, SourceSpec("files", str(source)))
    run_to_end(lambda: start_bronze(frame, warehouse, Trigger()))
    with recording(spark, warehouse, None, "continuous"):
        report = pipeline_status(spark, warehouse, SHOP_CONFIG, datetime.now(UTC))
    orders = next(s for s in report.silver if s.table == "silver.orders")
    assert orders.records_behind == new_orders > 0
    assert orders.applied_version is not None
    assert orders.bronze_version == orders.applied_version + 1
    assert report.running is not None and report.running.alive
    assert report.running.mode == "continuous"
    assert not Path(warehouse.heartbeat).exists()  # removed when the run ended


def test_rows_hold_offsets_watermarks_and_failures(spark: SparkSession, tmp_path: Path) -> None:
    """A progress row holds its sources' end offsets (JSON) and its watermark; a query that
    fails leaves a ``failed`` row with its error."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "lines.txt").write_text("1\n2\n", encoding="utf-8")
    warehouse = Warehouse.from_path(tmp_path / "wh")
    lines = spark.readStream.format("text").load(str(tmp_path / "in"))
    stamped = lines.withColumn("at", F.current_timestamp()).withWatermark("at", "1 minute")

    def fail(batch: DataFrame, batch_id: int) -> None:
        raise ValueError("this batch fails")

    def started(frame: DataFrame, name: str) -> Any:
        writer = frame.writeStream.queryName(name).trigger(availableNow=True)
        return writer.option("checkpointLocation", str(tmp_path / name))

    with recording(spark, warehouse, None, "once"):
        started(stamped, "lines").format("noop").start().awaitTermination()
        with pytest.raises(StreamingQueryException):
            started(lines, "failing").foreachBatch(fail).start().awaitTermination()
    log = spark.read.format("delta").load(warehouse.event_log)
    rows = {row.query: row for row in log.collect()}
    assert rows["lines"].event == "progress" and rows["lines"].input_rows == 2
    assert json.loads(rows["lines"].end_offset) == [{"logOffset": 0}]
    assert rows["lines"].watermark is not None
    assert rows["failing"].event == "failed" and rows["failing"].error


def check_one_row_per_batch(log: DataFrame, root: Path) -> dict[str, list[int]]:
    """Every query has one progress row per committed micro-batch, with its batch ids."""
    logged = {
        row.query: sorted(row.ids)
        for row in log.groupBy("query").agg(F.collect_list("batch_id").alias("ids")).collect()
    }
    checkpoints = Path(root, "_system", "checkpoints")
    committed = {
        query.name: sorted(int(c.name) for c in (query / "commits").iterdir() if c.name.isdigit())
        for query in checkpoints.iterdir()
        if (query / "commits").is_dir()
    }
    assert logged == committed
    assert len(committed["bronze"]) == 2  # three files, two per micro-batch
    assert {"silver_orders", "silver_customers", "gold_revenue_per_minute"} <= set(logged)
    assert log.where("event != 'progress' OR duration_ms IS NULL").count() == 0
    return committed


def check_gold_time(spark: SparkSession, warehouse: Warehouse, gold: list[dict[str, Any]]) -> None:
    """Each gold table's watermark and late changes in the status are its job's state and its
    rows of ``gold.late_events``."""
    load = spark.read.format("delta").load
    late = load(warehouse.table("gold", "late_events"))
    for table in gold:
        name = table["table"].removeprefix("gold.")
        state = json.loads(Path(warehouse.watermark(name)).read_text(encoding="utf-8"))
        assert table["watermark"] == state["watermark"]
        assert table["late_changes"] == late.where(F.col("gold_table") == name).count()


def check_silver(
    spark: SparkSession, warehouse: Warehouse, log: DataFrame, table: dict[str, Any], entity: str
) -> None:
    """The entity's event-log rows and status agree with its bronze, silver and quarantine."""
    load = spark.read.format("delta").load
    bronze = load(warehouse.table("bronze", table["bronze_table"].removeprefix("bronze.")))
    held = load(warehouse.table("silver", "quarantine")).where(F.col("entity") == entity).count()
    rows = log.where(F.col("query") == f"silver_{entity}")
    sums = rows.agg(F.sum("records"), F.sum("quarantined"), F.sum("input_rows")).first()
    assert tuple(sums or ()) == (bronze.count(), held, bronze.count())
    assert table["bronze_records"] == bronze.count()
    assert table["quarantined"] == held
    assert table["rows"] == load(warehouse.table("silver", entity)).count()
    assert table["records_behind"] == 0
    assert table["applied_version"] == table["bronze_version"]
    assert table["freshness_seconds"] is None or table["freshness_seconds"] > 0


def test_event_log_appends_carry_no_commit_settings_of_the_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The recorder appends from a thread of its own while the run writes: a SQL model's
    refresh sets its mark and transaction id as the run session's settings for its MERGE.
    Appends landing meanwhile carry neither, and the second is not taken for the first (with
    the model's transaction id, Delta skipped it as already written)."""
    warehouse = Warehouse(str(tmp_path))
    recorder = _Recorder(spark, warehouse, EventLogListener(None), "continuous")
    model = {USER_METADATA: '{"model": "m"}', TXN_APP_ID: "model m", TXN_VERSION: "4"}
    with session_settings(spark, model):
        for batch in (1, 2):
            recorder.listener.give_back([{"query": "q", "event": "progress", "batch_id": batch}])
            recorder.flush()
    rows = spark.read.format("delta").load(warehouse.event_log)
    assert sorted(r.batch_id for r in rows.collect()) == [1, 2]
    log = Path(warehouse.event_log, "_delta_log")
    actions = [
        json.loads(line) for f in sorted(log.glob("*.json")) for line in f.read_text().splitlines()
    ]
    assert [a["txn"] for a in actions if "txn" in a] == []
    assert [a["commitInfo"].get("userMetadata") for a in actions if "commitInfo" in a] == [
        None,
        None,
    ]


def test_an_append_leaves_the_callers_session_active(spark: SparkSession, tmp_path: Path) -> None:
    """The recorder appends through a copy of the run's session, from the run's thread when it
    ends. Making its rows a DataFrame there does not leave the copy active in that thread, where
    the next command run in process (``get_spark()``) would take it, without the catalog names
    the run registered since."""
    recorder = _Recorder(spark, Warehouse(str(tmp_path)), EventLogListener(None), "once")
    spark.createDataFrame([(0,)], "n int")  # the caller's session is active in this thread
    recorder.listener.give_back([{"query": "q", "event": "progress", "batch_id": 1}])
    recorder.flush()
    assert active_session() is spark
    assert get_spark() is spark
