"""Alerts end to end: the generator's injected anomalies, ``lakehouse fit`` and the streaming
alert job; precision and recall against the ground truth, and replays that add nothing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bronze.job import start_bronze
from cdc.sources import SourceSpec, read_source
from gold.alerts import ALERTS_TABLE, fit, start_alerts
from lakehouse.ops.replay import replay
from lakehouse.run.pipeline import run_from_bronze
from lakehouse_core.alerting import AlertSpec
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import Trigger, run_to_end
from lakehouse_demo.generator import WorkloadConfig, generate_workload, write_files
from lakehouse_demo.settings import SHOP_CONFIG
from tests.logs import logged

pytestmark = pytest.mark.integration

WORKLOAD = WorkloadConfig(events=6000, seed=7, anomaly_rate=0.05)
SPEC = AlertSpec(
    name="big_orders",
    source="orders",
    key="customer_id",
    value="total",
    event_time="created_at",
    method="mad",
    threshold=5.0,
    min_history=5,
)
MIN_PRECISION = MIN_RECALL = 0.8


def test_alerts_find_injected_anomalies(spark: SparkSession, tmp_path: Path) -> None:
    workload = generate_workload(WORKLOAD)
    orders = [r for r in workload.records if r.topic.endswith(".orders")]
    write_files(orders, tmp_path / "source")  # the alert reads orders only
    warehouse = Warehouse.from_path(tmp_path / "wh")
    config = replace(SHOP_CONFIG, alerts=(SPEC,))
    source = SourceSpec("files", str(tmp_path / "source"))
    run_to_end(lambda: start_bronze(read_source(spark, source), warehouse, Trigger()))
    with logged() as lines:
        run_from_bronze(spark, warehouse, config, entities={"orders"})
    assert "gold: alerts big_orders waits for a baseline: run 'lakehouse fit'" in lines

    fitted = fit(spark, warehouse, SPEC)
    assert (fitted.version, fitted.table) == (1, "gold.big_orders_baseline")
    with logged() as lines:
        run_from_bronze(spark, warehouse, config, entities={"orders"})
    assert "gold: alerts big_orders from silver.orders" in lines

    alerts_path = warehouse.table("gold", ALERTS_TABLE)
    alerts = spark.read.format("delta").load(alerts_path)
    flagged = {int(r.row_key) for r in alerts.select("row_key").collect()}
    assert alerts.count() == len(flagged)  # one row per order
    baseline = spark.read.format("delta").load(warehouse.table("gold", SPEC.baseline_table))
    scored_keys = {
        r.key for r in baseline.where(F.col("count") >= SPEC.min_history).select("key").collect()
    }
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(warehouse.table("silver", "orders"))
    )
    # Detectable: injected orders that reached silver, of customers with enough history.
    detectable = {
        int(r.id)
        for r in changes.where(F.col("customer_id").isin(list(scored_keys)))
        .select("id")
        .distinct()
        .collect()
    } & workload.anomalous_orders
    found = flagged & workload.anomalous_orders
    precision = len(found) / len(flagged)
    recall = len(found) / len(detectable)
    print(
        f"alerts: {len(flagged)} flagged, {len(detectable)} detectable of "
        f"{len(workload.anomalous_orders)} injected: precision {precision:.2f}, "
        f"recall {recall:.2f}"
    )
    assert len(detectable) >= 5
    assert precision >= MIN_PRECISION and recall >= MIN_RECALL
    row = alerts.where(F.col("row_key") == str(min(found))).first()
    assert row is not None and row.baseline_version == 1 and row.threshold == 5.0
    assert row.reason.startswith("total ") and "by mad" in row.reason

    # Replays add nothing: the last micro-batch again (its commit mark removed), then the
    # whole change feed of a rebuilt silver table.
    before = (alerts.count(), _version(spark, alerts_path))
    commits = Path(warehouse.checkpoint(f"gold_alerts_{SPEC.name}")) / "commits"
    last = max(commits.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    run_to_end(lambda: start_alerts(spark, warehouse, SPEC, Trigger()))
    assert (alerts.count(), _version(spark, alerts_path)) == before
    expected = sorted(alerts.drop("silver_version").collect())
    # A replay rebuilds silver.orders as a new table and retires the alert job's checkpoint:
    # the next run scores the rebuilt change feed from its start, into the same alerts.
    replay(spark, warehouse, config, "orders")
    run_from_bronze(spark, warehouse, config, entities={"orders"})
    again = spark.read.format("delta").load(alerts_path).drop("silver_version")
    assert sorted(again.collect()) == expected


def _version(spark: SparkSession, path: str) -> int:
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, path).history(1).select("version").first()
    assert row is not None
    return int(row.version)
