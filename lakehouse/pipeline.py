"""Wires the layers into one pipeline run: source -> bronze -> silver -> gold."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from bronze.job import start_bronze
from bronze.table import bronze_topic
from cdc.sources import SourceSpec, read_source
from gold.jobs import start_revenue, start_sessions
from lakehouse.config import PipelineConfig, TableSpec
from lakehouse.layout import Warehouse
from lakehouse.streaming import Trigger, await_query
from silver.job import start_silver

Progress = Callable[[str], None]


@dataclass
class RunReport:
    """What a run started and finished."""

    queries: list[str] = field(default_factory=list)
    seconds: float = 0.0


def entity_specs(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig
) -> list[TableSpec]:
    """The silver spec of every bronze topic present (internal topics excluded)."""
    specs = []
    for name in warehouse.table_names("bronze"):
        topic = bronze_topic(spark, warehouse.table("bronze", name))
        if topic and not topic.startswith("_"):
            specs.append(config.spec_for_topic(topic))
    return specs


def run_once(
    spark: SparkSession,
    source: SourceSpec,
    warehouse: Warehouse,
    config: PipelineConfig,
    progress: Progress = lambda _: None,
) -> RunReport:
    """Process everything available now through every layer, then return."""
    started = time.monotonic()
    report = RunReport()
    trigger = Trigger()
    progress(f"bronze: ingesting {source.describe()}")
    _finish(start_bronze(read_source(spark, source), warehouse, trigger), report)
    for spec in entity_specs(spark, warehouse, config):
        progress(f"silver: applying {spec.topic} to silver.{spec.name}")
        _finish(start_silver(spark, warehouse, spec, trigger), report)
    for query in _start_gold(spark, warehouse, config, trigger, progress):
        _finish(query, report)
    report.seconds = time.monotonic() - started
    return report


def run_continuously(
    spark: SparkSession,
    source: SourceSpec,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    progress: Progress = lambda _: None,
    poll_seconds: float = 5.0,
) -> None:
    """Run every layer on a processing-time trigger until a query fails or Ctrl-C.

    Silver and gold queries start as soon as their input tables appear.
    """
    running: dict[str, StreamingQuery] = {
        "bronze": start_bronze(read_source(spark, source), warehouse, trigger)
    }
    progress(f"bronze: streaming from {source.describe()}")
    try:
        while True:
            for spec in entity_specs(spark, warehouse, config):
                name = f"silver_{spec.name}"
                if name not in running:
                    running[name] = start_silver(spark, warehouse, spec, trigger)
                    progress(f"silver: streaming {spec.topic} into silver.{spec.name}")
            if not any(n.startswith("gold") for n in running):
                for query in _start_gold(spark, warehouse, config, trigger, progress):
                    running[f"gold_{query.name}"] = query
            for query in running.values():
                if not query.isActive:
                    await_query(query)
            time.sleep(poll_seconds)
    finally:
        for query in running.values():
            if query.isActive:
                query.stop()


def _start_gold(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    progress: Progress,
) -> list[StreamingQuery]:
    silver = set(warehouse.table_names("silver"))
    gold = config.gold
    queries = []
    if gold.orders_table in silver:
        progress(f"gold: revenue per window from silver.{gold.orders_table}")
        queries.append(start_revenue(spark, warehouse, gold, trigger))
    if gold.clicks_table in silver:
        progress(f"gold: user sessions from silver.{gold.clicks_table}")
        queries.append(start_sessions(spark, warehouse, gold, trigger))
    return queries


def _finish(query: StreamingQuery, report: RunReport) -> None:
    await_query(query)
    report.queries.append(query.name or str(query.id))
