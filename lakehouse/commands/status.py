"""``lakehouse status``: how far each layer has applied its input, the last micro-batches,
freshness, quarantine, and whether a pipeline runs. It starts no Spark (see
:mod:`lakehouse.status`), and its tables fit the terminal: a row per table with the essentials
(``--wide``: every column; ``--json``: every field), plain aligned text, names never cut."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from lakehouse.commands.common import CONFIG, EXISTING_WAREHOUSE, console

if TYPE_CHECKING:
    from lakehouse.status import Failing, LastBatch, PipelineStatus

#: Spaces between two columns, and the indent of a row under a name printed on its own line.
GAP, INDENT = 2, 4


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
    from core.config import load_config
    from core.layout import Warehouse
    from lakehouse.status import pipeline_status, status_json

    config = load_config(config_path)
    try:
        while True:
            now = datetime.now(UTC)
            report = pipeline_status(None, Warehouse.from_path(warehouse), config, now)
            if html_path is not None:
                from lakehouse.pipeline_page import write_pipeline_page

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


@dataclass(frozen=True)
class Column:
    """A column of a printed table: its header, whether its cells are names (shown whole,
    left-aligned, on a line of their own when the row has no room) and, for the others, its
    rank when room runs out (the highest rank goes first; 0: never left out)."""

    header: str
    name: bool = False
    drop_rank: int = 0


def table_lines(
    title: str, columns: Sequence[Column], rows: Sequence[Sequence[Any]], width: int
) -> list[str]:
    """A table as plain aligned lines of at most ``width`` columns (where its names allow):
    the title, the header, then a row per item.

    Columns are left out, highest ``drop_rank`` first, until a row fits; if it still does not,
    each name cell goes on a line of its own (indented under the one before) and the other
    cells on the line below. A cell is never cut or broken: a name longer than the whole
    width is the one thing that makes a line longer than ``width``.
    """
    cells = [[_cell(value) for value in row] for row in rows]
    kept = list(range(len(columns)))

    def widths(chosen: list[int]) -> dict[int, int]:
        return {i: max([len(columns[i].header), *(len(r[i]) for r in cells)]) for i in chosen}

    def line_width(chosen: list[int]) -> int:
        return sum(widths(chosen).values()) + GAP * (len(chosen) - 1) + GAP

    droppable = sorted(
        (i for i, c in enumerate(columns) if c.drop_rank), key=lambda i: -columns[i].drop_rank
    )
    for i in droppable:
        if line_width(kept) <= width:
            break
        kept.remove(i)
    sizes = widths(kept)
    stacked = line_width(kept) > width
    names = [i for i in kept if columns[i].name] if stacked else []
    inline = [i for i in kept if i not in names]
    depth = len(names) * INDENT if stacked else 0

    def joined(values: dict[int, str], indent: int) -> str:
        parts = [
            values[i].ljust(sizes[i]) if columns[i].name else values[i].rjust(sizes[i])
            for i in inline
        ]
        return (" " * (GAP + indent) + (" " * GAP).join(parts)).rstrip()

    header_names = [" " * (GAP + INDENT * k) + columns[i].header for k, i in enumerate(names)]
    header = joined({i: columns[i].header for i in inline}, depth)
    lines = [title, *header_names, header, " " * GAP + "-" * max(1, len(header) - GAP)]
    for row in cells:
        lines += [" " * (GAP + INDENT * k) + row[i] for k, i in enumerate(names)]
        lines.append(joined(dict(enumerate(row)), depth))
    return lines


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


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


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
