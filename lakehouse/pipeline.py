"""Wires the layers into one pipeline run: source -> bronze -> silver -> gold."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import NamedTuple

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from bronze.job import start_bronze
from bronze.table import bronze_topic
from cdc.sources import SourceSpec, read_source
from gold.jobs import (
    REVENUE_QUERY,
    REVENUE_TABLE,
    SESSIONS_QUERY,
    SESSIONS_TABLE,
    start_revenue,
    start_sessions,
)
from lakehouse.config import GoldSpec, PipelineConfig, TableSpec
from lakehouse.layout import Warehouse
from lakehouse.streaming import Trigger, await_query
from silver.job import start_silver

Progress = Callable[[str], None]
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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
    progress(f"bronze: ingesting {source.describe()}")
    _finish(start_bronze(read_source(spark, source), warehouse, Trigger()), report)
    report.queries += run_from_bronze(spark, warehouse, config, progress).queries
    report.seconds = time.monotonic() - started
    return report


def run_from_bronze(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    progress: Progress = lambda _: None,
    entities: Collection[str] | None = None,
) -> RunReport:
    """Bring silver and gold up to date with what bronze holds now (no source is read).

    ``entities`` limits the run to those silver entities and the gold jobs that read them
    (None: every entity). Replay runs this on a staging warehouse with fresh checkpoints.
    """
    started = time.monotonic()
    report = RunReport()
    trigger = Trigger()
    for spec in entity_specs(spark, warehouse, config):
        if entities is None or spec.name in entities:
            progress(f"silver: applying {spec.topic} to silver.{spec.name}")
            _finish(start_silver(spark, warehouse, spec, trigger), report)
    for query in _start_gold(spark, warehouse, config, trigger, progress, set(), entities):
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
    """Run every layer on a processing-time trigger until a query fails, SIGINT or SIGTERM.

    Silver and gold queries start as soon as their input tables appear. On a signal the
    queries stop between micro-batches; their checkpoints make the next run continue.
    """
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in STOP_SIGNALS}
    source_frame = read_source(spark, source, continuous=True)
    running: dict[str, StreamingQuery] = {"bronze": start_bronze(source_frame, warehouse, trigger)}
    progress(f"bronze: streaming from {source.describe()} (Ctrl-C stops)")
    try:
        while not stop.is_set():
            for spec in entity_specs(spark, warehouse, config):
                name = f"silver_{spec.name}"
                if name not in running:
                    running[name] = start_silver(spark, warehouse, spec, trigger)
                    progress(f"silver: streaming {spec.topic} into silver.{spec.name}")
            for query in _start_gold(spark, warehouse, config, trigger, progress, set(running)):
                running[query.name] = query
            for query in running.values():
                if not query.isActive:
                    await_query(query)
            stop.wait(poll_seconds)
        progress("stopping")
    finally:
        for query in running.values():
            if query.isActive:
                query.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _start_gold(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    trigger: Trigger,
    progress: Progress,
    running: set[str],
    inputs: Collection[str] | None = None,
) -> list[StreamingQuery]:
    """Start the gold jobs whose silver input exists (and is in ``inputs``, if given) and that
    are not running yet."""
    silver = set(warehouse.table_names("silver"))
    queries = []
    for job in gold_jobs(config):
        wanted = inputs is None or job.input in inputs
        if wanted and job.input in silver and job.query not in running:
            progress(f"gold: {job.what} from silver.{job.input}")
            queries.append(job.start(spark, warehouse, config.gold, trigger))
    return queries


class GoldJob(NamedTuple):
    """A gold streaming job: its query (and checkpoint) name, gold table and silver input."""

    query: str
    table: str
    input: str
    what: str
    start: Callable[[SparkSession, Warehouse, GoldSpec, Trigger], StreamingQuery]


def gold_jobs(config: PipelineConfig) -> list[GoldJob]:
    """Every gold job of the pipeline with the silver table it reads."""
    gold = config.gold
    return [
        GoldJob(
            REVENUE_QUERY, REVENUE_TABLE, gold.orders_table, "revenue per window", start_revenue
        ),
        GoldJob(SESSIONS_QUERY, SESSIONS_TABLE, gold.clicks_table, "user sessions", start_sessions),
    ]


def _finish(query: StreamingQuery, report: RunReport) -> None:
    await_query(query)
    report.queries.append(query.name or str(query.id))
