"""``lakehouse status``: how far each layer has applied its input, the last micro-batches,
freshness, quarantine, and whether a pipeline runs."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from lakehouse.commands.common import (
    CONFIG,
    EXISTING_WAREHOUSE,
    console,
    print_table,
    spark_options,
    spark_session,
)

if TYPE_CHECKING:
    from lakehouse.status import Failing, LastBatch, PipelineStatus


@click.command()
@EXISTING_WAREHOUSE
@CONFIG
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON object.")
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
@spark_options
def status(
    warehouse: str,
    config_path: Path | None,
    as_json: bool,
    watch: bool,
    interval: float,
    spark_mode: str,
    master: str | None,
) -> None:
    """Per table: bronze version and newest record, how far silver and gold have applied,
    the last micro-batch, freshness and quarantine; and whether a pipeline runs now."""
    from core.config import load_config
    from core.layout import Warehouse
    from lakehouse.status import pipeline_status, status_json

    config = load_config(config_path)
    with spark_session(spark_mode, master) as spark:
        try:
            while True:
                now = datetime.now(UTC)
                report = pipeline_status(spark, Warehouse.from_path(warehouse), config, now)
                if watch and not as_json:
                    console.clear()
                if as_json:
                    click.echo(json.dumps(status_json(report), sort_keys=True))
                else:
                    print_status(report)
                if not watch:
                    return
                time.sleep(interval)
        except KeyboardInterrupt:
            if not watch:
                raise


def print_status(report: PipelineStatus) -> None:
    """The status as tables on stdout."""
    now = report.at
    if report.running is None:
        console.print("pipeline: not running")
    else:
        run = report.running
        state = "running" if run.alive else "not running (its last heartbeat is stale: it died)"
        console.print(
            f"pipeline: {state}; {run.mode} run, pid {run.pid} on {run.host}, since "
            f"{_time(run.started)}, heartbeat {_ago(now, run.heartbeat)}",
            markup=False,
        )
    for failing in report.failing:
        console.print(f"failing: {_failing(now, failing)}", markup=False, soft_wrap=True)
    console.print(f"bronze: last batch {_batch(report.bronze_last_batch)}", markup=False)
    print_table(
        "silver",
        [
            "table",
            "bronze version",
            "bronze records",
            "newest record",
            "applied version",
            "records behind",
            "rows",
            "freshness",
            "quarantined",
            "last batch",
        ],
        [
            [
                s.table,
                s.bronze_version,
                s.bronze_records,
                _time(s.newest_record),
                s.applied_version,
                s.records_behind,
                s.rows,
                _seconds(s.freshness_seconds),
                s.quarantined,
                _batch(s.last_batch),
            ]
            for s in report.silver
        ],
    )
    print_table(
        "gold",
        [
            "table",
            "input",
            "input version",
            "applied version",
            "versions behind",
            "rows",
            "watermark",
            "late changes",
            "last batch",
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
                _batch(g.last_batch),
            ]
            for g in report.gold
        ],
    )
    if report.quality:
        print_table(
            "quality (system.quality)",
            ["table", "expectation", "action", "checked", "failed", "dropped", "broken batches"],
            [
                [q.table, q.expectation, q.action, q.checked, q.failed, q.dropped, q.broken_batches]
                for q in report.quality
            ],
        )
    else:
        console.print("quality: no expectations checked yet (system.quality is empty)")
    console.print(f"event log: {report.event_log_rows} rows (system.event_log)", markup=False)


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


def _batch(batch: LastBatch | None) -> str:
    if batch is None:
        return "none"
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
