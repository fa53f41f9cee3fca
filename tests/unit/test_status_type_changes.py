"""``lakehouse status`` names the table, the column and the fix of records an incompatible
type change quarantined, as the run's summary does (read without Spark, from the quarantine
table's ``entity`` and ``reason`` columns)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from benchmarks.status_bench import synthetic_warehouse
from lakehouse.ops.status import pipeline_status, status_json
from lakehouse.ops.status_text import status_html, status_lines
from lakehouse_core.config import PipelineConfig
from lakehouse_core.layout import Warehouse

pytestmark = pytest.mark.unit

TOTAL = "incompatible type for column total: table decimal(10,2), record string"
CONFIG = PipelineConfig()  # the warehouse's topics are tables by the Debezium defaults
QTY = "incompatible type for column qty: table int, record timestamp"


def test_status_names_column_and_fix(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    synthetic_warehouse(root, silver_rows=10, seed=1)
    reasons = [TOTAL] * 3 + [QTY] + ["missing key"] * 5 + [TOTAL]
    entities = ["orders"] * 9 + ["customers"]
    table = pa.table({"entity": entities, "reason": reasons})
    write_deltalake(str(root / "silver" / "quarantine"), table, mode="overwrite")

    report = pipeline_status(None, Warehouse.from_path(root), CONFIG, datetime.now(UTC))
    orders = next(s for s in report.silver if s.table == "silver.orders")
    assert orders.quarantined == 9
    assert orders.type_changes == ((TOTAL, 3), (QTY, 1))
    text = "\n".join(status_lines(report, 80))
    flat = " ".join(text.split())
    assert (
        f"silver.orders: 3 records quarantined as '{TOTAL}': no type holds both, the rest of "
        "the table was applied. To keep the new values, give the column a new name in the "
        "source (a new column of the new type); the records are in silver.quarantine."
    ) in flat
    assert f"silver.orders: 1 records quarantined as '{QTY}'" in flat
    assert "missing key" not in flat  # only type changes get a line
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "column total" in status_html(report)
    silver = status_json(report)["silver"]
    assert next(s for s in silver if s["table"] == "silver.orders")["type_changes"] == [
        [TOTAL, 3],
        [QTY, 1],
    ]


def test_status_without_type_changes_says_nothing_of_them(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    synthetic_warehouse(root, silver_rows=10, seed=2)  # its quarantine reasons are all "x"
    report = pipeline_status(None, Warehouse.from_path(root), CONFIG, datetime.now(UTC))
    assert all(s.type_changes == () for s in report.silver)
    assert "incompatible" not in "\n".join(status_lines(report, 80))
