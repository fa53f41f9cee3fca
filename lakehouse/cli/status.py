"""``lakehouse status``: how far each layer has applied its input, the last micro-batches,
freshness, quarantine, and whether a pipeline runs. It starts no Spark (see
:mod:`lakehouse.ops.status`), and its tables fit the terminal: a row per table with the essentials
(``--wide``: every column; ``--json``: every field), plain aligned text, names never cut."""

from __future__ import annotations

import json
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from lakehouse.cli.common import CONFIG, EXISTING_WAREHOUSE, console, declarations, given_config
from lakehouse.cli.plain import Column, table_lines

if TYPE_CHECKING:
    from lakehouse.ops.status import Failing, LastBatch, PipelineStatus


@click.command()
@EXISTING_WAREHOUSE
@CONFIG
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON object.")
@click.option(
    "--html",
    "html_path",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the pipeline page (a graph of the tables and flows, one self-contained "
    "HTML file) to this file; with --watch, rewritten at every refresh.",
)
@click.option(
    "--wide", is_flag=True, help="Every column of every table, however wide the terminal."
)
@click.option(
    "--watch", is_flag=True, help="Print it again every --interval seconds (Ctrl-C ends)."
)
@click.option(
    "--interval",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0.5),
    help="Seconds between two refreshes of --watch.",
)
@click.option("--spark-mode", hidden=True, default=None, help="Ignored: status starts no Spark.")
@click.option("--master", hidden=True, default=None, help="Ignored: status starts no Spark.")
def status(
    warehouse: str,
    config_path: Path | None,
    as_json: bool,
    html_path: Path | None,
    wide: bool,
    watch: bool,
    interval: float,
    spark_mode: str | None,
    master: str | None,
) -> None:
    """Per table: bronze version and newest record, how far silver and gold have applied,
    the last micro-batch, freshness and quarantine; and whether a pipeline runs now. Read
    from the Delta logs, checkpoints and event log without starting Spark."""
    from lakehouse.ops.status import pipeline_status, status_json
    from lakehouse_core.layout import Warehouse

    config = declarations(given_config(config_path), warehouse).config
    try:
        while True:
            now = datetime.now(UTC)
            report = pipeline_status(None, Warehouse.from_path(warehouse), config, now)
            if html_path is not None:
                from lakehouse.ops.pipeline_page import write_pipeline_page

                write_pipeline_page(Warehouse.from_path(warehouse), status_json(report), html_path)
            if watch and not as_json:
                console.clear()
            if as_json:
                click.echo(json.dumps(status_json(report), sort_keys=True))
            else:
                for line in status_lines(report, console.width, wide):
                    console.print(line, markup=False, highlight=False, emoji=False, crop=False)
            if not watch:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        if not watch:
            raise


def status_lines(report: PipelineStatus, width: int, wide: bool = False) -> list[str]:
    """The status as plain lines for a terminal ``width`` columns wide (``wide``: every
    column, whatever the width)."""
    now = report.at
    room = 10**6 if wide else width
    lines: list[str] = []
    if report.running is None:
        lines.append("pipeline: not running")
    else:
        run = report.running
        state = "running" if run.alive else "not running (its last heartbeat is stale: it died)"
        lines += _wrapped(
            f"pipeline: {state}; {run.mode} run, pid {run.pid} on {run.host}, since "
            f"{_time(run.started)}, heartbeat {_ago(now, run.heartbeat)}",
            width,
        )
    for failing in report.failing:
        lines += _wrapped(f"failing: {_failing(now, failing)}", width)
    lines += _wrapped(f"bronze: last batch {_batch(report.bronze_last_batch, now, wide)}", width)
    lines += table_lines(
        "silver",
        [
            Column("table", name=True),
            Column("bronze table", name=True, drop_rank=9),
            Column("bronze version", drop_rank=8),
            Column("bronze records", drop_rank=6),
            Column("newest record", drop_rank=7),
            Column("applied version", drop_rank=5),
            Column("behind"),
            Column("rows"),
            Column("freshness", drop_rank=2),
            Column("quarantined", drop_rank=3),
            Column("last batch", drop_rank=1),
        ],
        [
            [
                s.table,
                s.bronze_table,
                s.bronze_version,
                s.bronze_records,
                _time(s.newest_record),
                s.applied_version,
                s.records_behind,
                s.rows,
                _seconds(s.freshness_seconds),
                s.quarantined,
                _batch(s.last_batch, now, wide),
            ]
            for s in report.silver
        ],
        room,
    )
    lines += table_lines(
        "gold",
        [
            Column("table", name=True),
            Column("input", name=True, drop_rank=9),
            Column("input version", drop_rank=8),
            Column("applied version", drop_rank=7),
            Column("behind"),
            Column("rows"),
            Column("watermark", drop_rank=4),
            Column("late", drop_rank=2),
            Column("last batch", drop_rank=1),
        ],
        [
            [
                g.table,
                g.input,
                g.input_version,
                g.applied_version,
                g.versions_behind,
                g.rows,
                _time(g.watermark),
                g.late_changes,
                _batch(g.last_batch, now, wide),
            ]
            for g in report.gold
        ],
        room,
    )
    if report.quality:
        lines += table_lines(
            "quality (system.quality)",
            [
                Column("table", name=True),
                Column("expectation", name=True),
                Column("action", drop_rank=1),
                Column("checked", drop_rank=2),
                Column("failed"),
                Column("dropped", drop_rank=3),
                Column("broken batches", drop_rank=4),
            ],
            [
                [q.table, q.expectation, q.action, q.checked, q.failed, q.dropped, q.broken_batches]
                for q in report.quality
            ],
            room,
        )
    else:
        lines.append("quality: no expectations checked yet (system.quality is empty)")
    lines.append(f"event log: {report.event_log_rows} rows (system.event_log)")
    if not wide:
        lines += _wrapped(
            "(behind: silver in bronze records, gold in silver commits; --wide or --json "
            "for every column)",
            width,
        )
    return lines


def _wrapped(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken between words only (the lines
    after the first indented)."""
    return textwrap.wrap(
        text, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    ) or [""]


def _failing(now: datetime, failing: Failing) -> str:
    """``silver.orders: SomeError: ... (failed 3 times in a row, last 12 s ago; next attempt
    in 40 s)``, in full whatever the width (the terminal wraps it)."""
    when = f"failed {_ago(now, failing.at)}"
    if failing.attempts > 1:
        when = f"failed {failing.attempts} times in a row, last {_ago(now, failing.at)}"
    if failing.retry_at is not None:
        when += f"; next attempt in {_seconds(max(0.0, (failing.retry_at - now).total_seconds()))}"
    else:
        when += "; the next run tries again"
    return f"{failing.table}: {failing.error} ({when})"


def _batch(batch: LastBatch | None, now: datetime, full: bool = True) -> str:
    """The last micro-batch: ``#12 at 2026-01-02 10:00:00, 1.2 s, 300 rows`` (``full``), else
    ``#12, 3.1 min ago``."""
    if batch is None:
        return "none"
    if not full:
        return f"#{batch.batch_id}, {_ago(now, batch.at)}"
    return (
        f"#{batch.batch_id} at {_time(batch.at)}, {batch.duration_ms / 1000:.1f} s, "
        f"{batch.input_rows} rows"
    )


def _time(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _ago(now: datetime, then: datetime) -> str:
    return f"{_seconds((now - then).total_seconds())} ago"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} s"
