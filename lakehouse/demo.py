"""The demos: generate a workload, run every layer, verify, and query gold; or capture a real
PostgreSQL with Debezium, run every layer and compare silver with PostgreSQL."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from cdc.generator import WorkloadConfig, generate, write_files
from cdc.producer import ProduceReport, send_workload
from cdc.sources import SourceSpec
from core.catalog import run_sql
from core.config import SHOP_CONFIG, PipelineConfig, QualitySpec
from core.layout import LAYERS, Warehouse
from expectations.metrics import quality_summary
from lakehouse.audit import verify_warehouse
from lakehouse.pg_compare import differences, silver_tables
from lakehouse.pg_workload import QUARANTINED
from lakehouse.pipeline import Progress, run_once
from lakehouse.real_cdc import TABLE_TOPIC_PREFIX, CapturedWorkload

#: The shop pipeline with the suites shipped in expectations/suites.
DEMO_CONFIG = replace(SHOP_CONFIG, quality=QualitySpec(packaged_suites=True))

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


def workload_source(report: ProduceReport, bootstrap: str) -> SourceSpec:
    """A Kafka source that reads exactly the records of one :func:`send_workload` run."""
    options = {
        "subscribe": ",".join(sorted(report.start_offsets)),
        "startingOffsets": json.dumps(report.start_offsets),
    }
    return SourceSpec("kafka", bootstrap, kafka_options=options)


def write_workload(out_dir: Path, config: WorkloadConfig) -> tuple[int, int]:
    """Generate and write a workload; return (files, records)."""
    records = generate(config)
    files = write_files(records, out_dir)
    return len(files), len(records)


def run_demo(
    spark: SparkSession,
    root: Path,
    events: int,
    seed: int,
    progress: Progress,
    kafka_bootstrap: str | None = None,
) -> DemoSummary:
    """Generate a workload into files (or send it to Kafka at ``kafka_bootstrap``), run every
    layer once, verify silver and query gold."""
    workload = WorkloadConfig(events=events, seed=seed, malformed_rate=0.01)
    if kafka_bootstrap is None:
        source_dir = root / "source"
        progress(f"generating {events} records into {source_dir}")
        write_workload(source_dir, workload)
        source = SourceSpec("files", str(source_dir))
    else:
        progress(f"producing {events} records to Kafka at {kafka_bootstrap}")
        source = workload_source(send_workload(workload, kafka_bootstrap), kafka_bootstrap)
    warehouse = Warehouse.from_path(root / "warehouse")
    run_once(spark, source, warehouse, DEMO_CONFIG, progress)
    progress("verifying silver against the reference fold of bronze")
    checks = verify_warehouse(spark, warehouse, SHOP_CONFIG)
    counts: list[tuple[str, int]] = [
        (f"{layer}.{name}", spark.read.format("delta").load(warehouse.table(layer, name)).count())
        for layer in LAYERS
        for name in warehouse.table_names(layer, spark)
    ]
    quarantined = sum(rows for name, rows in counts if name == "silver.quarantine")
    result = run_sql(spark, warehouse, GOLD_QUERY)
    quality = quality_summary(spark, warehouse.quality())
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
    )


@dataclass(frozen=True)
class PostgresDemoSummary:
    records: int
    #: Per table: name, rows in PostgreSQL, rows in silver, differing rows or cells.
    tables: list[list[Any]]
    differences: list[str]
    warehouse: str


def run_postgres_demo(
    spark: SparkSession, root: Path, captured: CapturedWorkload, progress: Progress
) -> PostgresDemoSummary:
    """Run every layer on the events of a real capture (:func:`capture_postgres`) into
    ``root/warehouse`` and compare silver with PostgreSQL's final tables."""
    warehouse = Warehouse.from_path(root / "warehouse")
    source = SourceSpec("files", str(captured.source_dir))
    run_once(spark, source, warehouse, PipelineConfig(), progress)
    progress("comparing silver with PostgreSQL's final tables")
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
