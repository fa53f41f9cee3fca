"""``lakehouse run``: the pipeline, once or continuously."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich import box
from rich.table import Table
from rich.text import Text

from core.errors import LakehouseError
from lakehouse.commands.common import (
    CONFIG,
    KAFKA_OPTION,
    KAFKA_SETTINGS,
    WarehouseLocation,
    console,
    errors,
    kafka_options,
    progress,
    spark_options,
    spark_session,
)

if TYPE_CHECKING:
    from lakehouse.summary import RunSummary


@click.command()
@click.option(
    "--source",
    required=True,
    help="files:DIR (JSON-lines records) or kafka:HOST:PORT[,HOST:PORT] (bootstrap servers).",
)
@click.option(
    "--warehouse",
    required=True,
    type=WarehouseLocation(),
    help="Warehouse root: a directory or a Hadoop URI (s3a://bucket/warehouse, abfss://...).",
)
@click.option(
    "--once",
    "once",
    is_flag=True,
    default=False,
    help="Process what is available, then stop (the default).",
)
@click.option(
    "--processing-time", default=None, help="Run continuously with this trigger interval, e.g. 10s."
)
@click.option(
    "--two-hop",
    is_flag=True,
    default=False,
    help="With --processing-time: give each silver table a query of its own on the trigger, "
    "instead of applying each bronze micro-batch to silver in the same micro-batch.",
)
@CONFIG
@click.option(
    "--max-files-per-trigger",
    default=4,
    show_default=True,
    type=click.IntRange(min=1),
    help="File source: files per micro-batch.",
)
@KAFKA_OPTION
@KAFKA_SETTINGS
@click.option(
    "--kafka-format",
    type=click.Choice(["lakehouse", "spark"]),
    default="lakehouse",
    show_default=True,
    help="Kafka source: this project's confluent-kafka source, or Spark's own 'kafka' format "
    "(Databricks, or a cluster with the connector jar).",
)
@spark_options
def run(
    source: str,
    warehouse: str,
    once: bool,
    processing_time: str | None,
    two_hop: bool,
    config_path: Path | None,
    max_files_per_trigger: int,
    kafka_option: tuple[str, ...],
    kafka_settings: Path | None,
    kafka_format: str,
    spark_mode: str,
    master: str | None,
) -> None:
    """Run the pipeline: source -> bronze -> silver -> gold."""
    from dataclasses import replace

    from cdc.sources import SPARK_KAFKA_FORMAT, SourceSpec
    from core.config import load_config
    from core.layout import Warehouse
    from core.streaming import Trigger
    from lakehouse.pipeline import run_continuously, run_once
    from lakehouse.summary import RunSummary

    if once and processing_time:
        raise LakehouseError("Use either --once or --processing-time, not both.")
    if two_hop and not processing_time:
        raise LakehouseError(
            "--two-hop is for continuous runs: add --processing-time (a run with --once always "
            "applies bronze to silver after it)."
        )
    spec = replace(
        SourceSpec.parse(source),
        max_files_per_trigger=max_files_per_trigger,
        kafka_options=kafka_options(kafka_option, kafka_settings),
        kafka_format=SPARK_KAFKA_FORMAT if kafka_format == "spark" else None,
    )
    if spec.kind == "files" and not Path(spec.location).is_dir():
        raise LakehouseError(
            f"Source directory {spec.location} does not exist or is not a directory: point "
            "--source files:DIR at the directory of JSON-lines files (lakehouse generate "
            "writes one)."
        )
    trigger = Trigger.parse(processing_time)
    config = load_config(config_path)
    with spark_session(spark_mode, master) as spark:
        if trigger.once:
            report = run_once(spark, spec, Warehouse.from_path(warehouse), config, progress)
            summary = report.summary
            print_summary(summary)
            console.print(f"done: {len(report.queries)} queries in {report.seconds:.1f} s")
        else:
            summary = RunSummary()
            run_continuously(
                spark,
                spec,
                Warehouse.from_path(warehouse),
                config,
                trigger,
                progress,
                summary=summary,
                one_hop=not two_hop,
            )
            print_summary(summary)
        for warning in summary.warnings():
            errors.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)


def print_summary(summary: RunSummary) -> None:
    """Per silver table the records the run read from bronze, applied and quarantined (by
    reason), then the unreadable lines it kept in bronze."""
    from lakehouse.summary import UNREADABLE_TABLE

    title = "records of this run, per silver table"
    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left")
    table.add_column("silver table")
    for column in ("read", "applied", "quarantined"):
        table.add_column(column, justify="right")
    table.add_column("quarantine reasons")
    for entity, counts in sorted(summary.tables.items()):
        table.add_row(
            Text(f"silver.{entity}"),
            str(counts.read),
            str(counts.applied),
            str(counts.quarantined),
            Text(counts.reasons_text()),
        )
    console.print(table)
    console.print(
        f"unreadable lines: {summary.unreadable} (kept in bronze.{UNREADABLE_TABLE})",
        markup=False,
        highlight=False,
    )
