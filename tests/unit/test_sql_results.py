"""``lakehouse sql`` output: CSV and JSON carry every value in full, the table cuts nothing."""

from __future__ import annotations

import csv
import io
import json
from datetime import date, datetime
from decimal import Decimal

import pytest
from pyspark.sql import Row

from lakehouse.cli.common import console, print_table
from lakehouse.cli.results import cell_text, json_value, write_csv, write_json
from lakehouse_core.errors import LakehouseError

pytestmark = pytest.mark.unit

LONG = "x" * 500
TRICKY = 'a, "quoted" [bold]markup[/bold] :smile:\nsecond line'
COLUMNS = ["id", "text", "raw", "amount", "at", "nested", "ratio", "none", "flag"]
ROW = (
    1,
    TRICKY + LONG,
    bytearray(b"\x00\xffraw"),
    Decimal("12345678901234567890.123456789"),
    datetime(2026, 11, 24, 5, 6, 7, 890),
    Row(day=date(2026, 1, 2), tags=["a", "b"], attrs={"k": None}),
    float("nan"),
    None,
    True,
)


def test_csv_carries_every_value_in_full() -> None:
    out = io.StringIO()
    write_csv(out, COLUMNS, [ROW])
    header, row = list(csv.reader(io.StringIO(out.getvalue())))
    assert header == COLUMNS
    assert row == [
        "1",
        TRICKY + LONG,
        "AP9yYXc=",
        "12345678901234567890.123456789",
        "2026-11-24 05:06:07.000890",
        '{"day": "2026-01-02", "tags": ["a", "b"], "attrs": {"k": null}}',
        "NaN",
        "",
        "true",
    ]


def test_json_carries_every_value_in_full() -> None:
    out = io.StringIO()
    write_json(out, COLUMNS, [ROW, ROW])
    records = json.loads(out.getvalue())
    assert len(records) == 2
    assert records[0] == {
        "id": 1,
        "text": TRICKY + LONG,
        "raw": "AP9yYXc=",
        "amount": "12345678901234567890.123456789",
        "at": "2026-11-24T05:06:07.000890",
        "nested": {"day": "2026-01-02", "tags": ["a", "b"], "attrs": {"k": None}},
        "ratio": "NaN",
        "none": None,
        "flag": True,
    }
    empty = io.StringIO()
    write_json(empty, ["a"], [])
    assert json.loads(empty.getvalue()) == []


def test_json_refuses_repeated_column_names() -> None:
    with pytest.raises(LakehouseError, match="id appears more than once"):
        write_json(io.StringIO(), ["id", "id"], [(1, 2)])


def test_infinities_and_cells() -> None:
    assert [json_value(float("inf")), json_value(float("-inf"))] == ["Infinity", "-Infinity"]
    assert [cell_text(float("-inf")), cell_text(None), cell_text(False)] == [
        "-Infinity",
        "NULL",
        "false",
    ]


def test_table_shows_values_literally_and_in_full(capsys: pytest.CaptureFixture[str]) -> None:
    """Piped (80 columns), a long value is printed whole on a line of its own (never cut to
    ``xxx…`` or folded inside a word), markup and emoji codes as they are, no box characters."""
    width = console.width
    console.width = 80
    try:
        print_table(None, ["text"], [[LONG], ["[bold]markup[/bold] :smile: [x]"]])
    finally:
        console.width = width
    printed = capsys.readouterr().out
    lines = [line.strip() for line in printed.splitlines()]
    assert lines[:4] == ["text", "----", LONG, "[bold]markup[/bold] :smile: [x]"], printed
    assert not set(printed) & set("│┃━─…"), printed
