"""``lakehouse run``: the pipeline, once or continuously."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from lakehouse.cli.common import (
    CONFIG,
    DEBUG,
    KAFKA_OPTION,
    KAFKA_SETTINGS,
    WarehouseLocation,
    console,
    declarations,
    errors,
    given_config,
    kafka_options,
    print_failures,
    spark_options,
    spark_session,
)
from lakehouse_core.errors import LakehouseError

if TYPE_CHECKING:
    from lakehouse.run.summary import RunSummary


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
@click.option(
    "--give-up-after",
    default="30m",
    show_default=True,
    help="With --processing-time: how long to wait for an unreachable source (a broker "
    "outage) before stopping with an error, e.g. 90s, 2h, or never.",
)
@click.option(
    "--debug",
    is_flag=True,
    default=False,
    help="Print the whole trace of an internal error (one that is not the user's to fix), "
    "not only its line.",
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
    give_up_after: str,
    debug: bool,
    spark_mode: str,
    master: str | None,
) -> None:
    """Run the pipeline: source -> bronze -> silver -> gold.

    A table that fails does not stop the others: a --once run finishes their work, then exits
    non-zero with one error line per failed table; a --processing-time run starts a failed
    table again with backoff (shown by 'lakehouse status') while the others go on."""
    from dataclasses import replace

    from cdc.sources import SPARK_KAFKA_FORMAT, SourceSpec
    from lakehouse.ops.idle import nothing_new
    from lakehouse.run.pipeline import run_continuously, run_once
    from lakehouse.run.queries import Backoff, give_up_seconds
    from lakehouse.run.summary import RunSummary
    from lakehouse_core.catalog import catalog_outlives_session
    from lakehouse_core.layout import Warehouse, is_uri
    from lakehouse_core.streaming import Trigger

    started = time.monotonic()

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
            "--source files:DIR at the directory of JSON-lines files (in a source checkout, "
            "python -m lakehouse_demo generate writes one)."
        )
    DEBUG.set(debug)
    trigger = Trigger.parse(processing_time)
    backoff = Backoff(give_up_seconds=give_up_seconds(give_up_after))
    given = given_config(config_path)
    place = Warehouse.from_path(warehouse)
    chosen = None if is_uri(place.root) else declarations(given, warehouse)
    idle = None if not trigger.once or chosen is None else nothing_new(spec, place, chosen.config)
    if idle is not None:
        summary = RunSummary()
        for entity in idle.silver:
            summary.add_table(entity)
        print_summary(summary)
        console.print(
            "done: nothing new (bronze has read the whole source and every table is up to "
            f"date; checked without starting Spark) in {time.monotonic() - started:.1f} s",
            soft_wrap=True,
        )
        return
    with spark_session(spark_mode, master, warehouse) as spark:
        config = (chosen or declarations(given, warehouse, spark)).config
        # SQL names outlive this process only in a catalog that outlives its session.
        register_names = catalog_outlives_session(spark)
        if trigger.once:
            report = run_once(
                spark,
                spec,
                place,
                config,
                raise_on_failure=False,
                register_names=register_names,
            )
            summary = report.summary
            print_summary(summary)
            failures = report.failures
            if not failures:  # else the errors below end the output
                console.print(f"done: {len(report.queries)} queries in {report.seconds:.1f} s")
        else:
            summary = RunSummary()
            run_continuously(
                spark,
                spec,
                place,
                config,
                trigger,
                summary=summary,
                one_hop=not two_hop,
                backoff=backoff,
                register_names=register_names,
            )
            print_summary(summary)
            failures = summary.failing_now()  # still failing when the run stopped
        for warning in summary.warnings():
            errors.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    if failures:
        sys.exit(print_failures(failures, debug, warehouse))


#: The summary's columns: the table, its counts, the quarantine reasons.
NAME_HEADER = "silver table"
COUNTS = ("read", "applied", "quarantined")
REASONS_HEADER = "quarantine reasons"
#: The narrowest the quarantine reasons may be beside the counts (else they go below them).
MIN_REASONS_WIDTH = 24


def print_summary(summary: RunSummary) -> None:
    """Per silver table the records the run read from bronze, applied and quarantined (by
    reason), then the unreadable lines it kept in bronze (see :func:`summary_lines`)."""
    from lakehouse.run.summary import UNREADABLE_TABLE

    for line in summary_lines(summary, console.width):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(
        f"unreadable lines: {summary.unreadable} (kept in bronze.{UNREADABLE_TABLE})",
        markup=False,
        highlight=False,
    )


def summary_lines(summary: RunSummary, width: int) -> list[str]:
    """The summary's table at ``width`` columns: a row per silver table with its counts and
    its quarantine reasons, every table name and reason in full.

    Reasons too wide for the room beside the counts wrap between words onto the lines below
    (under their column, or indented below the row if that column has no room); a name too
    long to leave room for the counts has a line of its own above them."""
    rows = [
        (f"silver.{entity}", (c.read, c.applied, c.quarantined), c.reasons_text())
        for entity, c in sorted(summary.tables.items())
    ]
    count_widths = [
        max([len(column), *(len(str(cells[i])) for _, cells, _ in rows)])
        for i, column in enumerate(COUNTS)
    ]
    counts_width = sum(2 + w for w in count_widths)
    longest = max([len(NAME_HEADER), *(len(name) for name, _, _ in rows)])
    name_width = max(len(NAME_HEADER), min(longest, width - 2 - counts_width))
    reasons_at = 2 + name_width + counts_width + 2
    beside = width - reasons_at >= MIN_REASONS_WIDTH

    def row_line(name: str, cells: tuple[object, ...]) -> str:
        counted = "".join(f"  {cell!s:>{w}}" for cell, w in zip(cells, count_widths, strict=True))
        return f"  {name:<{name_width}}{counted}"

    header = row_line(NAME_HEADER, COUNTS) + (f"  {REASONS_HEADER}" if beside else "")
    lines = ["records of this run, per silver table", header, "  " + "-" * (len(header) - 2)]
    for name, cells, reasons in rows:
        own_line = len(name) > name_width
        if own_line:
            lines.append(f"  {name}")
        line = row_line("" if own_line else name, cells)
        if not reasons:
            lines.append(line.rstrip())
        elif beside:
            first, *more = _wrap(reasons, width - reasons_at)
            lines.append(f"{line}  {first}")
            lines += [" " * reasons_at + text for text in more]
        else:
            lines.append(line.rstrip())
            lines += ["      " + text for text in _wrap(f"quarantined: {reasons}", width - 6)]
    return lines


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken between words (a word longer
    than a line is broken, never cut)."""
    return textwrap.wrap(text, max(width, 8), break_on_hyphens=False) or [text]
