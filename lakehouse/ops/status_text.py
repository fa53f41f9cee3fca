"""``lakehouse status`` as text: plain aligned lines that fit a terminal (a row per table with
the essentials; wide: every column), names never cut; and as HTML tables for a notebook (what
the pipeline handle's ``status()`` shows there)."""

from __future__ import annotations

import html
import textwrap
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lakehouse.ops.plain import Column, table_lines
from lakehouse.run.type_changes import type_change_lines

if TYPE_CHECKING:
    from lakehouse.ops.status import Failing, LastBatch, PipelineStatus


#: A printed table: its title, columns and rows.
Table = tuple[str, list[Column], list[list[Any]]]


def status_lines(report: PipelineStatus, width: int, wide: bool = False) -> list[str]:
    """The status as plain lines for a terminal ``width`` columns wide (``wide``: every
    column, whatever the width)."""
    room = 10**6 if wide else width
    lines: list[str] = []
    for line in _head(report, wide):
        lines += _wrapped(line, width)
    for title, columns, rows in _tables(report, wide):
        lines += table_lines(title, columns, rows, room)
    if not report.quality:
        lines.append("quality: no expectations checked yet (system.quality is empty)")
    lines.append(f"event log: {report.event_log_rows} rows (system.event_log)")
    if not wide:
        lines += _wrapped(
            "(behind: silver in bronze records, gold in silver commits, models in their "
            "inputs' commits; --wide or --json for every column)",
            width,
        )
    return lines


def status_html(report: PipelineStatus) -> str:
    """The status as HTML (a notebook's rich display): its head lines, then a table per
    section with every column; every value escaped."""
    parts = [f"<div><b>Pipeline status of {html.escape(report.warehouse)}</b>"]
    parts += [f"<div>{html.escape(line)}</div>" for line in _head(report, True)]
    for title, columns, rows in _tables(report, True):
        head = "".join(f"<th>{html.escape(c.header)}</th>" for c in columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
            for row in rows
        )
        parts.append(
            f"<p><b>{html.escape(title)}</b></p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        )
    parts.append(f"<div>event log: {report.event_log_rows} rows (system.event_log)</div></div>")
    return "\n".join(parts)


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _head(report: PipelineStatus, wide: bool) -> list[str]:
    """The lines before the tables: whether a pipeline runs, what fails, the columns whose
    type changes quarantined records, bronze's batch."""
    now = report.at
    lines: list[str] = []
    if report.running is None:
        lines.append("pipeline: not running")
    else:
        run = report.running
        state = "running" if run.alive else "not running (its last heartbeat is stale: it died)"
        lines.append(
            f"pipeline: {state}; {run.mode} run, pid {run.pid} on {run.host}, since "
            f"{_time(run.started)}, heartbeat {_ago(now, run.heartbeat)}"
        )
    lines += [f"failing: {_failing(now, failing)}" for failing in report.failing]
    for silver in report.silver:
        entity = silver.table.removeprefix("silver.")
        lines += type_change_lines(entity, dict(silver.type_changes))
    lines.append(f"bronze: last batch {_batch(report.bronze_last_batch, now, wide)}")
    return lines


def _tables(report: PipelineStatus, wide: bool) -> list[Table]:
    """The status's tables: silver, gold, SQL models, the other gold tables, orphaned
    tables, quality (the last four only where there are any)."""
    now = report.at
    tables: list[Table] = []
    tables.append(
        (
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
                    f"{s.quarantined} ({s.rescued} rescued)" if s.rescued else s.quarantined,
                    _batch(s.last_batch, now, wide),
                ]
                for s in report.silver
            ],
        )
    )
    tables.append(
        (
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
        )
    )
    if report.models:
        tables.append(
            (
                "SQL models",
                [
                    Column("table", name=True),
                    Column("inputs", name=True, drop_rank=3),
                    Column("behind"),
                    Column("rows"),
                    Column("last refresh", drop_rank=1),
                ],
                [
                    [
                        m.table,
                        ", ".join(m.inputs),
                        "-" if m.inputs_behind is None else m.inputs_behind,
                        m.rows,
                        _batch(m.last_batch, now, wide),
                    ]
                    for m in report.models
                ],
            )
        )
    if report.other_gold:
        tables.append(
            (
                "other gold tables",
                [Column("table", name=True), Column("rows"), Column("what", name=True)],
                [[o.table, o.rows, o.what] for o in report.other_gold],
            )
        )
    if report.orphaned:
        tables.append(
            (
                "orphaned (held, but no current declaration makes them: kept, not run)",
                [Column("table", name=True), Column("rows")],
                [[o.table, o.rows] for o in report.orphaned],
            )
        )
    if report.quality:
        tables.append(
            (
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
                    [
                        q.table,
                        q.expectation,
                        q.action,
                        q.checked,
                        q.failed,
                        q.dropped,
                        q.broken_batches,
                    ]
                    for q in report.quality
                ],
            )
        )
    return tables


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
