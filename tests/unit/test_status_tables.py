"""``lakehouse status`` names every table the warehouse holds, read without Spark: a gold
query's place is read from the offset of its own input (a joined query's checkpoint holds one
offset per source, a change feed is read a whole commit at a time), SQL models with how many
commits their inputs had since their refresh, tables no declaration makes as orphaned; the
report reads as text and as HTML tables (a notebook's display), and the pipeline page draws the
models and the orphaned tables."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from bs4 import BeautifulSoup
from deltalake import DeltaTable, write_deltalake

from gold.models import ModelState
from lakehouse.ops.pipeline_page import render_pipeline_page
from lakehouse.ops.status import HeldTable, ModelStatus, OrphanedTable, fed_version, pipeline_status
from lakehouse_core.layout import Warehouse
from lakehouse_core.loader import config_from_toml

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 2, 10, 0, tzinfo=UTC)


def offsets(checkpoint: Path, batch: int, *sources: tuple[str, int, int]) -> None:
    """Micro-batch ``batch`` committed, its offsets one per ``(table id, version, index)``."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    lines = ["v1", json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1})]
    lines += [
        json.dumps(
            {
                "sourceVersion": 1,
                "reservoirId": table_id,
                "reservoirVersion": version,
                "index": index,
                "isStartingVersion": False,
            }
        )
        for table_id, version, index in sources
    ]
    (checkpoint / "offsets" / str(batch)).write_text("\n".join(lines), encoding="utf-8")
    (checkpoint / "commits" / str(batch)).write_text("v1\n{}", encoding="utf-8")


def test_a_joined_query_is_placed_by_the_offset_of_its_own_input(tmp_path: Path) -> None:
    """The enrichment's second source (customers, last in the file) is not the place in
    orders; an offset into a version (index >= 0) has read that whole commit."""
    checkpoint = tmp_path / "gold_revenue_by_tier"
    offsets(checkpoint, 0, ("orders", 2, -1), ("customers", 2, -1))
    offsets(checkpoint, 1, ("orders", 3, 1), ("customers", 2, -1))
    assert fed_version(str(checkpoint), "orders") == 3
    assert fed_version(str(checkpoint), "customers") == 1
    assert fed_version(str(checkpoint), "another id") == 3  # the first source: its input
    assert fed_version(str(tmp_path / "none"), "orders") is None


def test_status_names_models_and_orphaned_tables(tmp_path: Path) -> None:
    warehouse = Warehouse.from_path(tmp_path)
    rows = pa.table({"id": [1, 2, 3]})
    for layer, name in [("silver", "orders"), ("silver", "gone"), ("gold", "old_tier")]:
        write_deltalake(warehouse.table(layer, name), rows)  # type: ignore[arg-type]
    write_deltalake(warehouse.table("silver", "orders"), rows, mode="append")
    write_deltalake(warehouse.table("gold", "counts"), pa.table({"n": [6]}))
    write_deltalake(warehouse.table("gold", "late_events"), pa.table({"gold_table": ["x"]}))
    orders = DeltaTable(warehouse.table("silver", "orders"))
    config = config_from_toml(
        '[[models]]\nname = "counts"\nsql = "SELECT count(*) AS n FROM silver.orders"\n'
    )
    state = ModelState(
        "counts", config.models[0].digest, "g", 1, {"silver.orders": (str(orders.metadata().id), 0)}
    )
    models = tmp_path / "_system" / "models"
    models.mkdir(parents=True)
    (models / "counts.json").write_text(state.to_json(), encoding="utf-8")

    report = pipeline_status(None, warehouse, config, NOW)

    assert report.models == [
        ModelStatus("gold.counts", ["silver.orders"], 1, 1, None, "model_counts")
    ]
    # silver.orders is no bronze topic's entity here: this warehouse has no bronze
    assert report.orphaned == [
        OrphanedTable("silver.gone", 3),
        OrphanedTable("silver.orders", 6),
        OrphanedTable("gold.old_tier", 3),
    ]
    assert report.other_gold == [
        HeldTable("gold.late_events", 1, "the log of late changes (gold.late_events)")
    ]
    text = str(report)
    for name in ("gold.counts", "silver.gone", "gold.old_tier", "orphaned", "gold.late_events"):
        assert name in text.split() or name in text, text
    html = BeautifulSoup(report._repr_html_(), "html.parser")
    cells = [[td.text for td in tr.find_all("td")] for tr in html.find_all("tr")]
    assert ["gold.counts", "silver.orders", "1", "1", "none"] in cells, cells
    assert ["gold.old_tier", "3"] in cells, cells
    assert "PipelineStatus(" not in report._repr_html_() and "PipelineStatus(" not in text

    page = BeautifulSoup(render_pipeline_page(report.to_json(), []), "html.parser")
    layers = {g["data-table"]: g["data-layer"] for g in page.select("g.node")}
    assert layers == {
        "gold.counts": "model",
        "silver.gone": "orphaned",
        "silver.orders": "orphaned",
        "gold.old_tier": "orphaned",
        "gold.late_events": "gold",
    }, layers
