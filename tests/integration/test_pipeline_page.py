"""``lakehouse status --html FILE`` on the shared shop warehouse (issue 46, item 5): the page,
opened in headless Chromium with the network off, shows every table of ``status --json`` as a
node and every flow as an edge with the JSON's numbers, and a chart per flow whose bars are
the event log's micro-batches (read here with Spark, not as the page read them); a
screenshot is written."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from pyspark.sql import SparkSession

from expectations.offline_docs import external_references
from lakehouse_core.layout import Warehouse
from tests.browser import Browser, dump_dom_offline, screenshot_offline
from tests.cli import SHOP_TOML, run_cli
from tests.warehouses import incremental_warehouse

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def page(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any], Path]:
    """The page written by ``status --html``, the ``status --json`` object, the warehouse."""
    root = incremental_warehouse(spark, tmp_path_factory)
    target = tmp_path_factory.mktemp("pipeline-page") / "pipeline.html"
    done = run_cli("status", "--config", SHOP_TOML, "--warehouse", root, "--html", target)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = run_cli("status", "--config", SHOP_TOML, "--warehouse", root, "--json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    return target, json.loads(listed.stdout), root


def test_every_table_a_node_every_flow_an_edge(
    page: tuple[Path, dict[str, Any], Path], chromium: Browser, tmp_path: Path, spark: SparkSession
) -> None:
    target, status, root = page
    text = target.read_text(encoding="utf-8")
    assert external_references(text) == []
    if chromium.executable is None:
        pytest.skip(f"no headless Chromium to open the page: {chromium.reason}")
    dom = BeautifulSoup(dump_dom_offline(chromium.executable, target), "html.parser")

    silver, gold = status["silver"], status["gold"]
    assert silver and gold, status
    nodes = {n["data-table"]: n for n in dom.select("g.node")}
    tables = {s["table"] for s in silver} | {s["bronze_table"] for s in silver}
    others = {o["table"] for o in status["other_gold"]}  # gold.late_events, where held
    assert set(nodes) == tables | {g["table"] for g in gold} | {"silver.quarantine"} | others
    for s in silver:
        shown = nodes[s["table"]].get_text(" ")
        assert f"rows {s['rows']:,}" in shown and f"quarantined {s['quarantined']:,}" in shown
        assert f"records {s['bronze_records']:,}" in nodes[s["bronze_table"]].get_text(" ")
    for g in gold:
        shown = nodes[g["table"]].get_text(" ")
        assert f"rows {g['rows']:,}" in shown and f"late changes {g['late_changes']:,}" in shown
    quarantined = sum(s["quarantined"] for s in silver)
    assert quarantined > 0  # the shop workload has malformed records
    assert f"rows {quarantined:,}" in nodes["silver.quarantine"].get_text(" ")

    edges = {(e["data-source"], e["data-target"]): e for e in dom.select("g.flow")}
    flows = {(s["bronze_table"], s["table"]) for s in silver} | {
        (g["input"], g["table"]) for g in gold
    }
    assert set(edges) == flows | {(s["table"], "silver.quarantine") for s in silver}
    for s in silver:
        shown = edges[(s["bronze_table"], s["table"])].get_text(" ")
        assert f"lag {s['records_behind']:,} records" in shown
        assert f"{s['last_batch']['input_rows']:,} rows/batch" in shown
    for g in gold:
        shown = edges[(g["input"], g["table"])].get_text(" ")
        assert f"lag {g['versions_behind']:,} commits" in shown

    # The charts against the event log as Spark reads it.
    log = spark.read.format("delta").load(Warehouse.from_path(root).event_log)
    model: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for row in log.where("event = 'progress'").collect():
        model[row.query].append((row.batch_id, row.input_rows, row.duration_ms))
    charts = {c["data-query"]: c for c in dom.select("div.chart")}
    assert len(dom.select("div.chart")) == 1 + len(silver) + len(gold)
    assert {f"silver_{s['table'][7:]}" for s in silver} | {"bronze"} <= set(charts)
    for query, chart in charts.items():
        drawn = [
            (int(b["data-batch-id"]), int(b["data-input-rows"]), int(b["data-duration-ms"]))
            for b in chart.select("rect.bar")
        ]
        assert sorted(drawn) == sorted(model[query]), query
        assert drawn, query  # every flow of the shop ran batches

    png = screenshot_offline(chromium.executable, target, tmp_path / "pipeline.png", "1400,1000")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 50_000, png.stat().st_size
