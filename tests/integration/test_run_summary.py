"""The summary a ``lakehouse run --once`` ends with: per silver table the records it read from
bronze, applied and quarantined (by reason), the unreadable lines, and a warning for a table
whose every record was quarantined (here: a ``keys`` column no record has)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from rich.console import Console

from cdc.records import Record
from lakehouse.cli import run as run_command
from lakehouse.run.summary import RunSummary
from silver.job import BatchReport
from tests.cli import run_cli
from tests.helpers import customer_change

pytestmark = pytest.mark.integration

ACCOUNTS = "test.public.accounts"
PAYMENTS = "test.public.payments"
CONFIG = f"""
[[tables]]
name = "accounts"
topic = "{ACCOUNTS}"
keys = ["account_id"]
"""


def row(output: str, table: str) -> str:
    """The summary row of ``table``, its cells separated by one blank."""
    lines = [
        " ".join(line.split()) for line in output.splitlines() if line.strip().startswith(table)
    ]
    assert len(lines) == 1, output
    return lines[0]


def test_run_ends_with_a_summary_and_warns_of_a_table_quarantined_whole(
    spark: SparkSession, tmp_path: Path
) -> None:
    source, warehouse, config = tmp_path / "source", tmp_path / "warehouse", tmp_path / "p.toml"
    config.write_text(CONFIG, encoding="utf-8")
    records = [
        customer_change(ACCOUNTS, 0, "c", 1, (None, 10)),
        customer_change(ACCOUNTS, 1, "c", 2, (None, 11)),
        customer_change(PAYMENTS, 0, "c", 1, (None, 10)),
        customer_change(PAYMENTS, 1, "c", 2, (None, 11)),
        customer_change(PAYMENTS, 2, "u", 1, (None, 12), name="m"),
        Record(PAYMENTS, 0, 3, 1_767_225_600_000, {"id": 3}, "not json"),
    ]
    source.mkdir()
    lines = [record.to_line() for record in records] + ["this is not a record"]
    (source / "part-00000.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = ("run", "--source", f"files:{source}", "--warehouse", warehouse, "--once")

    first = run_cli(*args, "--config", config)

    assert first.returncode == 0, first.stdout + first.stderr
    # read, applied, quarantined, reasons
    assert row(first.stdout, "silver.accounts") == "silver.accounts 2 0 2 2 missing key"
    assert row(first.stdout, "silver.payments") == "silver.payments 4 2 1 1 unparseable"
    assert "unreadable lines: 1 (kept in bronze.unreadable_lines)" in first.stdout
    assert first.stderr.splitlines() == [
        "warning: silver.accounts: all 2 records of this run were quarantined (100 %), 2 as "
        "'missing key'. Check its 'keys' in the config: no record has those columns (the "
        "records are in silver.quarantine)."
    ]

    again = run_cli(*args, "--config", config)  # nothing new: every count is of this run

    assert again.returncode == 0, again.stdout + again.stderr
    assert row(again.stdout, "silver.accounts") == "silver.accounts 0 0 0"
    assert row(again.stdout, "silver.payments") == "silver.payments 0 0 0"
    assert "unreadable lines: 0" in again.stdout
    assert again.stderr == ""


def test_the_summary_shows_long_table_names_and_reasons_in_full_at_80_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two tables whose names share a 30-character prefix, and long quarantine reasons: at 80
    columns each name and reason is there in full (reasons wrap between words), no line is
    wider, and the counts stay in their columns."""
    prefix = "customer_addresses_history_eu_"
    assert len(prefix) == 30
    names = [f"{prefix}west_region_a", f"{prefix}west_region_b"]
    summary = RunSummary()
    reasons = (
        ("missing key", 3),
        ("incompatible type for column total: table decimal(10,2), record string", 2),
    )
    summary.silver_batch(names[0], BatchReport(12, 5, 0, 7, reasons))
    summary.silver_batch(names[1], BatchReport(1_200_000, 0, 0, 1_200_000))
    out = io.StringIO()
    monkeypatch.setattr(run_command, "console", Console(file=out, width=80))

    run_command.print_summary(summary)

    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert [line.split()[0] for line in lines if "silver.customer" in line] == [
        f"silver.{name}" for name in names
    ], lines
    text = " ".join(out.getvalue().split())  # the name first, then its counts and reasons
    assert (
        f"silver.{names[0]} 12 7 5 quarantined: 3 missing key, 2 incompatible type for column "
        f"total: table decimal(10,2), record string silver.{names[1]} 1200000 1200000 0 "
        "unreadable lines: 0"
    ) in text, lines
