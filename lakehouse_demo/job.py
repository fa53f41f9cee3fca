"""The demos: generate a workload, run every layer, verify, and query gold; or capture a real
PostgreSQL with Debezium, run every layer and compare silver with PostgreSQL."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from cdc.sources import SourceSpec
from expectations.metrics import quality_summary
from gold.alerts import alert_jobs, fit
from lakehouse.ops.audit import verify_warehouse
from lakehouse.ops.table_list import warehouse_tables
from lakehouse.run.declarations import record_declarations
from lakehouse.run.pipeline import run_once
from lakehouse_core.alerting import AlertSpec
from lakehouse_core.catalog import run_sql
from lakehouse_core.config import PipelineConfig, QualitySpec
from lakehouse_core.delta_io import table_exists
from lakehouse_core.gold_tables import GoldTable, Join, Measure, StreamJoin, Window
from lakehouse_core.layout import LATE_EVENTS, Warehouse
from lakehouse_core.patterns import Absent, Pattern, PatternMeasure, Step
from lakehouse_core.streaming import Trigger, run_to_end
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from lakehouse_demo.producer import ProduceReport, send_workload
from lakehouse_demo.settings import SHOP_CONFIG
from lakehouse_local.pg_compare import differences, silver_tables
from lakehouse_local.pg_workload import QUARANTINED
from lakehouse_local.real_cdc import TABLE_TOPIC_PREFIX, CapturedWorkload

log = logging.getLogger(__name__)

#: Orders far above or below their customer's usual amount.
DEMO_ALERT = AlertSpec(
    name="big_orders",
    source="orders",
    key="customer_id",
    value="total",
    event_time="created_at",
    method="mad",
    threshold=5.0,
    min_history=5,
)
#: Revenue of the last 5 minutes, every minute, by the tier of the order's customer: the
#: demo's enrichment join, on hopping windows.
REVENUE_BY_TIER = GoldTable(
    name="revenue_by_tier",
    source="orders",
    event_time="created_at",
    window=Window("hopping", size="5 minutes", slide="1 minute"),
    measures=(Measure("revenue", "sum", "total"), Measure("orders", "count")),
    group_by=("customer_tier",),
    join=Join("customers", (("customer_id", "id"),), ("tier",), prefix="customer_"),
)
#: Each order time of a customer with their spend in the hour up to it: a sliding window.
SPEND_LAST_HOUR = GoldTable(
    name="spend_last_hour",
    source="orders",
    event_time="created_at",
    window=Window("sliding", lookback="1 hour"),
    measures=(Measure("spend", "sum", "total"), Measure("orders", "count")),
    group_by=("customer_id",),
)
#: Every 3 orders of a customer, in order time: a count window.
ORDER_BLOCKS = GoldTable(
    name="order_blocks",
    source="orders",
    event_time="created_at",
    window=Window("count", count=3),
    measures=(
        Measure("median_total", "approx_percentile", "total"),
        Measure("biggest", "max", "total"),
    ),
    group_by=("customer_id",),
)
#: Each order with its customer's clicks of the 30 minutes before it: the demo's stream join.
#: The clickstream has no session id; the last action and the first click's time stand for
#: the session that led to the order.
ORDER_ATTRIBUTION = GoldTable(
    name="order_attribution",
    source="orders",
    event_time="created_at",
    window=Window("row", start_as="lookback_start", end_as="ordered_at"),
    measures=(
        Measure("clicks", "count"),
        Measure("pages", "count_distinct", "page"),
        Measure("last_page", "last", "page"),
        Measure("last_action", "last", "action"),
        Measure("first_click_at", "min", "ts"),
    ),
    group_by=("id", "customer_id"),
    stream_join=StreamJoin("clickstream", (("customer_id", "user_id"),), "ts", "30 minutes"),
)
#: A customer's bursts of orders: three or more orders over 50 within five minutes, each
#: burst also an alert.
ORDER_BURSTS = Pattern(
    name="order_bursts",
    source="orders",
    event_time="created_at",
    partition_by=("customer_id",),
    steps=(Step("big_orders", "total > 50", times="3+"),),
    within="5 minutes",
    measures=(
        PatternMeasure("orders", "count"),
        PatternMeasure("spent", "sum", "total"),
        PatternMeasure("largest", "max", "total"),
    ),
    alert=True,
)
#: Carts abandoned: an add to cart, then no checkout by that user within 30 minutes.
ABANDONED_CARTS = Pattern(
    name="abandoned_carts",
    source="clickstream",
    event_time="ts",
    partition_by=("user_id",),
    steps=(Step("cart", "action = 'add_to_cart'"),),
    within="30 minutes",
    absent=Absent("action = 'checkout'", "30 minutes"),
    measures=(PatternMeasure("product_page", "first", "page", "cart"),),
)
#: The shop pipeline with the suites shipped in expectations/suites, its alert, gold tables
#: of every window kind (tumbling and session: the shop's own two), both joins and two
#: patterns.
DEMO_CONFIG = replace(
    SHOP_CONFIG,
    quality=QualitySpec(packaged_suites=True),
    alerts=(DEMO_ALERT,),
    gold_tables=(
        *SHOP_CONFIG.gold_declarations,
        REVENUE_BY_TIER,
        SPEND_LAST_HOUR,
        ORDER_BLOCKS,
        ORDER_ATTRIBUTION,
    ),
    patterns=(ORDER_BURSTS, ABANDONED_CARTS),
)
LATE_QUERY = (
    "SELECT gold_table, count(*) AS changes, round(max(late_by_seconds) / 60) AS max_minutes "
    "FROM gold.late_events GROUP BY gold_table ORDER BY gold_table"
)
ALERTS_QUERY = (
    "SELECT key AS customer_id, row_key AS order_id, value AS total, round(score, 1) AS score "
    "FROM gold.alerts ORDER BY score DESC, order_id LIMIT 5"
)

#: Share of clicks the demo's generator sends late on purpose (see ``WorkloadConfig``).
DEMO_LATE_RATE = 0.02
#: The demo's workload arrives in this many parts, one pipeline run each, so later parts
#: bring changes to windows the watermark closed in an earlier run.
DEMO_ARRIVALS = 2

GOLD_QUERY = (
    "SELECT window_start, orders, revenue FROM gold.revenue_per_minute "
    "ORDER BY revenue DESC, window_start LIMIT 5"
)


@dataclass(frozen=True)
class DemoSummary:
    counts: list[list[Any]]
    quarantined: int
    verified: bool
    query: str
    result_columns: list[str]
    result_rows: list[list[Any]]
    warehouse: str
    quality_columns: list[str] = field(default_factory=list)
    quality_rows: list[list[Any]] = field(default_factory=list)
    alerts_query: str = ALERTS_QUERY
    alerts_columns: list[str] = field(default_factory=list)
    alerts_rows: list[list[Any]] = field(default_factory=list)
    #: Rows of gold.late_events per gold table.
    late_events: list[list[Any]] = field(default_factory=list)
    #: A customer id silver holds (the smallest; None: none), for the forget example.
    customer_id: int | None = None


def workload_source(report: ProduceReport, bootstrap: str) -> SourceSpec:
    """A Kafka source that reads exactly the records of one :func:`send_workload` run."""
    options = {
        "subscribe": ",".join(sorted(report.start_offsets)),
        "startingOffsets": json.dumps(report.start_offsets),
    }
    return SourceSpec("kafka", bootstrap, kafka_options=options)


def write_workload(
    out_dir: Path, config: WorkloadConfig, parts: int | None = None
) -> tuple[int, int]:
    """Generate and write a workload (in ``parts`` files, if given); return (files, records)."""
    records = generate(config)
    if parts is None:
        files = write_files(records, out_dir)
    else:
        files = write_files(records, out_dir, lines_per_file=max(1, -(-len(records) // parts)))
    return len(files), len(records)


def run_demo(
    spark: SparkSession,
    root: Path,
    events: int,
    seed: int,
    kafka_bootstrap: str | None = None,
) -> DemoSummary:
    """Generate a workload into files (or send it to Kafka at ``kafka_bootstrap``), run every
    layer once, verify silver and query gold."""
    workload = WorkloadConfig(
        events=events, seed=seed, malformed_rate=0.01, late_rate=DEMO_LATE_RATE
    )
    warehouse = Warehouse.from_path(root / "warehouse")
    # The alerts start after their baseline is fitted from silver (run_alerts), not before.
    config = replace(DEMO_CONFIG, alerts=())
    if kafka_bootstrap is None:
        source_dir, parts = root / "source", root / "arrivals"
        log.info(f"generating {events} records into {parts}, to arrive in {DEMO_ARRIVALS} parts")
        write_workload(parts, workload, DEMO_ARRIVALS)
        files = sorted(parts.glob("part-*.jsonl"))
        source_dir.mkdir(parents=True, exist_ok=True)
        source = SourceSpec("files", str(source_dir))
        for number, part in enumerate(files, start=1):
            log.info(f"part {number} of {len(files)} arrives in {source_dir}")
            part.rename(source_dir / part.name)
            run_once(spark, source, warehouse, config)
    else:
        log.info(f"producing {events} records to Kafka at {kafka_bootstrap}")
        source = workload_source(send_workload(workload, kafka_bootstrap), kafka_bootstrap)
        run_once(spark, source, warehouse, config)
    run_alerts(spark, warehouse, DEMO_CONFIG)
    # Its alerts too are the warehouse's now: commands run later on it need no --config.
    record_declarations(spark, warehouse, DEMO_CONFIG, "demo")
    log.info("verifying silver against the reference fold of bronze, gold against its declarations")
    checks = verify_warehouse(spark, warehouse, DEMO_CONFIG)
    # The rows of each table from its Delta log's statistics, as `lakehouse status` counts
    # them: no Spark job (a count of each of its 18 tables took 8 s of the demo under load).
    counts = [(t.name, t.rows) for t in warehouse_tables(warehouse, datetime.now(UTC))]
    quarantined = sum(rows for name, rows in counts if name == "silver.quarantine")
    result = run_sql(spark, warehouse, GOLD_QUERY)
    quality = quality_summary(spark, warehouse.quality())
    alerts = run_sql(spark, warehouse, ALERTS_QUERY)
    late = (
        run_sql(spark, warehouse, LATE_QUERY).collect()
        if table_exists(spark, warehouse.table("gold", LATE_EVENTS))
        else []
    )
    return DemoSummary(
        counts=[list(row) for row in counts],
        quarantined=int(quarantined),
        verified=bool(checks) and all(c.ok for c in checks),
        query=GOLD_QUERY,
        result_columns=result.columns,
        result_rows=[list(r) for r in result.collect()],
        warehouse=warehouse.root,
        quality_columns=quality.columns if quality is not None else [],
        quality_rows=[list(r) for r in quality.collect()] if quality is not None else [],
        alerts_columns=alerts.columns,
        alerts_rows=[list(r) for r in alerts.collect()],
        late_events=[list(r) for r in late],
        customer_id=_first_customer(spark, warehouse),
    )


def _first_customer(spark: SparkSession, warehouse: Warehouse) -> int | None:
    """The smallest customer id of ``silver.customers`` (None: no customer or no table)."""
    path = warehouse.table("silver", "customers")
    if not table_exists(spark, path):
        return None
    first = spark.read.format("delta").load(path).agg({"id": "min"}).first()
    return None if first is None or first[0] is None else int(first[0])


def run_alerts(spark: SparkSession, warehouse: Warehouse, config: PipelineConfig) -> None:
    """Fit every alert's baseline from silver (``lakehouse fit``), then score silver's change
    feed against it (the alert jobs a pipeline run starts once a baseline exists)."""
    for spec in config.alerts:
        log.info(f"gold: fitting {spec.baseline_table} from silver.{spec.source}")
        fit(spark, warehouse, spec)
    for job in alert_jobs(config):
        log.info(f"gold: {job.what} from silver.{job.input}")
        run_to_end(lambda job=job: job.start(spark, warehouse, Trigger()))  # type: ignore[misc]


@dataclass(frozen=True)
class PostgresDemoSummary:
    records: int
    #: Per table: name, rows in PostgreSQL, rows in silver, differing rows or cells.
    tables: list[list[Any]]
    differences: list[str]
    warehouse: str


def run_postgres_demo(
    spark: SparkSession, root: Path, captured: CapturedWorkload
) -> PostgresDemoSummary:
    """Run every layer on the events of a real capture (:func:`capture_postgres`) into
    ``root/warehouse`` and compare silver with PostgreSQL's final tables."""
    warehouse = Warehouse.from_path(root / "warehouse")
    source = SourceSpec("files", str(captured.source_dir))
    run_once(spark, source, warehouse, PipelineConfig())
    log.info("comparing silver with PostgreSQL's final tables")
    silver = silver_tables(spark, warehouse, captured.postgres, TABLE_TOPIC_PREFIX)
    found = differences(captured.postgres, silver, QUARANTINED)
    tables = [
        [pg.name, len(pg.rows), len(ours.rows), sum(1 for d in found if d.table == pg.name)]
        for pg, ours in zip(captured.postgres, silver, strict=True)
    ]
    return PostgresDemoSummary(
        records=captured.records,
        tables=tables,
        differences=[d.describe() for d in found],
        warehouse=warehouse.root,
    )
