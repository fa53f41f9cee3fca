"""``lakehouse status`` and every other command print plain aligned tables that fit 80
columns: every table and expectation name whole on one line, no box characters, the essential
numbers of each row there to read back; ``--wide`` keeps every column."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta

import pytest

from lakehouse.cli.common import console, print_table
from lakehouse.cli.run import summary_lines
from lakehouse.ops.plain import Column, table_lines
from lakehouse.ops.status import GoldStatus, LastBatch, PipelineStatus, QualityStatus, SilverStatus
from lakehouse.ops.status_text import status_lines
from lakehouse.run.summary import RunSummary
from silver.job import BatchReport
from tests.cli import table_cells

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 2, 10, 0, tzinfo=UTC)
BOX = re.compile("[\u2500-\u257f]")
REASONS = ["missing key", "unparseable", "missing sequence", "unknown op", "reserved column name"]


def report(rng: random.Random) -> PipelineStatus:
    """A status with names from short to very long and random counts."""

    def name(prefix: str) -> str:
        return prefix + "_".join(rng.choice(["clickstream", "order", "x", "customer_address"])
                                 for _ in range(rng.randint(1, 4)))  # fmt: skip

    def batch() -> LastBatch | None:
        if rng.random() < 0.2:
            return None
        return LastBatch(rng.randint(0, 10**5), NOW - timedelta(seconds=rng.randint(0, 10**6)),
                         rng.randint(0, 10**6), rng.randint(0, 10**7))  # fmt: skip

    silver = [
        SilverStatus(
            table=f"silver.{name(f't{i}_')}",
            bronze_table=f"bronze.{name('shop_')}",
            bronze_version=rng.randint(0, 10**4),
            bronze_records=rng.randint(0, 10**9),
            newest_record=NOW,
            applied_version=rng.choice([None, rng.randint(0, 10**4)]),
            records_behind=rng.randint(0, 10**6),
            rows=rng.randint(0, 10**9),
            newest_applied_event=NOW,
            freshness_seconds=rng.random() * 10**5,
            quarantined=rng.randint(0, 10**5),
            last_batch=batch(),
        )
        for i in range(rng.randint(1, 6))
    ]
    gold = [
        GoldStatus(
            table=f"gold.{name(f't{i}_')}",
            input=f"silver.{name('')}",
            input_version=rng.randint(0, 99),
            applied_version=rng.randint(0, 99),
            versions_behind=rng.randint(0, 99),
            rows=rng.randint(0, 10**8),
            watermark=NOW,
            late_changes=rng.randint(0, 999),
            last_batch=batch(),
        )
        for i in range(rng.randint(0, 6))
    ]
    quality = [
        QualityStatus(
            f"silver.{name('')}",
            name("expect_") + f"_{i}_not_null",
            "drop",
            rng.randint(0, 10**9),
            rng.randint(0, 10**6),
            rng.randint(0, 10**6),
            rng.randint(0, 10**4),
        )
        for i in range(rng.randint(0, 6))
    ]
    return PipelineStatus(
        warehouse="/wh", at=NOW, running=None, bronze_last_batch=batch(), silver=silver,
        gold=gold, event_log_rows=rng.randint(0, 10**6), quality=quality,
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(40))
def test_status_fits_80_columns_with_every_name_whole(seed: int) -> None:
    rng = random.Random(seed)
    status = report(rng)
    lines = status_lines(status, 80)
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert not any(BOX.search(line) for line in lines)
    words = {word for line in lines for word in line.split()}
    for s in status.silver:
        assert s.table in words
        # Its row (the name's line, or the line below it) holds its rows and records behind.
        at = next(i for i, line in enumerate(lines) if s.table in line.split())
        row = " ".join(lines[at : at + 3]).split()
        assert str(s.rows) in row and str(s.records_behind) in row
    for g in status.gold:
        assert g.table in words
    for q in status.quality:
        assert q.table in words and q.expectation in words
        at = next(i for i, line in enumerate(lines) if q.expectation in line.split())
        assert str(q.failed) in " ".join(lines[at : at + 2]).split()


@pytest.mark.parametrize("seed", range(10))
def test_wide_keeps_every_column(seed: int) -> None:
    status = report(random.Random(seed))
    text = "\n".join(status_lines(status, 80, wide=True))
    for s in status.silver:
        row = next(line for line in text.splitlines() if line.split()[:1] == [s.table])
        assert row.split()[1] == s.bronze_table
        assert str(s.bronze_records) in row.split() and str(s.quarantined) in row.split()
    for header in ("bronze version", "applied version", "newest record", "watermark"):
        assert header in text


def test_columns_are_left_out_by_rank_then_names_stack() -> None:
    columns = [Column("name", name=True), Column("n"), Column("extra", drop_rank=1)]
    rows = [["a" * 10, 1, "e" * 30]]
    assert table_lines("t", columns, rows, 80)[3].split() == ["a" * 10, "1", "e" * 30]
    narrow = table_lines("t", columns, rows, 30)
    assert narrow[1].split() == ["name", "n"] and narrow[3].split() == ["a" * 10, "1"]
    long_name = "b" * 40
    stacked = table_lines("t", columns, [[long_name, 7, "e"]], 20)
    assert stacked[1].strip() == "name" and long_name in [line.strip() for line in stacked]
    assert stacked[-1].split() == ["7"] and all(len(line) <= 42 for line in stacked)


@pytest.mark.parametrize("seed", range(20))
def test_run_summary_fits_80_columns_with_every_table_name_whole(seed: int) -> None:
    """The run's summary (``lakehouse run``): at 80 columns no line is longer, and every
    silver table's name and counts are there, the name never cut."""
    rng = random.Random(seed)
    summary = RunSummary()
    tables = {}
    for i in range(rng.randint(1, 6)):
        entity = f"t{i}_" + "_".join(
            rng.choice(["customer_address", "order", "x", "clickstream_events"])
            for _ in range(rng.randint(1, 4))
        )
        report = BatchReport(
            records=rng.randint(0, 10**7), quarantined=0, tombstones=0,
            applied=rng.randint(0, 10**7),
            reasons=tuple((r, rng.randint(1, 99)) for r in rng.sample(REASONS, rng.randint(0, 3))),
        )  # fmt: skip
        summary.silver_batch(entity, report)
        tables[f"silver.{entity}"] = report
    lines = summary_lines(summary, 80)
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    for name, report in tables.items():
        at = next(i for i, line in enumerate(lines) if name in line.split())
        row = " ".join(lines[at : at + 2]).split()
        assert str(report.records) in row and str(report.applied) in row


@pytest.mark.parametrize("seed", range(20))
def test_printed_tables_keep_every_cell_whole_at_80_columns(
    seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo's, ``sql``'s and the other commands' tables (:func:`print_table`), piped at
    80 columns: no box characters, no cell cut or broken inside a word; a table that fits
    reads back cell for cell from the dashes under its headers."""
    rng = random.Random(seed)
    words = ["silver", "orders", "total_mostly_not_negative", "customer_address", "x" * 30]
    headers = [rng.choice(["table", "expectation", "rows", "n"]) for _ in range(rng.randint(1, 6))]

    def cell() -> object:
        text = ".".join(rng.choices(words, k=rng.randint(1, 3)))
        return rng.choice([rng.randint(-5, 10**6), text, None])

    rows = [[cell() for _ in headers] for _ in range(rng.randint(0, 8))]
    width = console.width
    console.width = 80
    try:
        print_table("Quality", headers, rows)
    finally:
        console.width = width
    printed = capsys.readouterr().out
    assert not BOX.search(printed), printed
    shown = [["NULL" if v is None else str(v) for v in row] for row in rows]
    sizes = [max([len(h), *(len(row[i]) for row in shown)]) for i, h in enumerate(headers)]
    if sum(sizes) + 2 * len(sizes) <= 80:
        assert table_cells(printed) == shown, printed
    else:  # every text cell whole on a line; a line over 80 holds one name longer than that
        lines = printed.splitlines()
        texts = {cell for row in shown for cell in row if not re.fullmatch(r"-?\d+|NULL", cell)}
        assert all(any(cell in line for line in lines) for cell in texts), printed
        assert all(len(line) <= 80 or line.strip() in texts for line in lines), printed
