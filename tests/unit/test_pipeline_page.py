"""The pipeline page drawn from a ``status --json`` object: random statuses (tables, counts,
batches in random order) checked against a plain model of what the page must show: a node per
table, an edge per flow, the JSON's numbers on them, a chart per flow with a bar per batch;
and nothing that loads from anywhere (no script, no link, no web address)."""

from __future__ import annotations

import random
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest
from bs4 import BeautifulSoup

from expectations.offline_docs import external_references
from lakehouse.ops.pipeline_page import pipeline_server, render_pipeline_page
from lakehouse_core.errors import ConfigError

pytestmark = pytest.mark.unit


def batch(rng: random.Random, batch_id: int) -> dict[str, Any]:
    return {
        "batch_id": batch_id,
        "at": f"2026-01-01T00:{batch_id:02d}:00+00:00",
        "duration_ms": rng.randrange(1, 20_000),
        "input_rows": rng.randrange(0, 5_000_000),
    }


def random_status(rng: random.Random) -> dict[str, Any]:
    entities = rng.sample(["orders", "customers", "clickstream", "a_b", "x1"], rng.randint(1, 5))
    silver = [
        {
            "table": f"silver.{name}",
            "bronze_table": f"bronze.shop_{name}",
            "bronze_version": rng.randrange(0, 99),
            "bronze_records": rng.randrange(0, 10**7),
            "newest_record": "2026-01-01T01:58:59+00:00",
            "applied_version": rng.choice([None, 3]),
            "records_behind": rng.randrange(0, 10_000),
            "rows": rng.randrange(0, 10**7),
            "newest_applied_event": None,
            "freshness_seconds": rng.choice([None, rng.uniform(0, 10**6)]),
            "quarantined": rng.randrange(0, 1000),
            "last_batch": rng.choice([None, batch(rng, rng.randrange(0, 50))]),
        }
        for name in entities
    ]
    gold = [
        {
            "table": f"gold.{source.split('.')[1]}_per_{window}",
            "input": source,
            "input_version": 7,
            "applied_version": 5,
            "versions_behind": rng.randrange(0, 20),
            "rows": rng.randrange(0, 10**6),
            "watermark": None,
            "late_changes": rng.randrange(0, 100),
            "last_batch": rng.choice([None, batch(rng, rng.randrange(0, 50))]),
        }
        for source in (s["table"] for s in silver)
        for window in rng.sample(["minute", "hour"], rng.randint(0, 2))
    ]
    quality = [
        {
            "table": table,
            "expectation": f"e{i}",
            "action": "warn",
            "checked": 10,
            "failed": rng.choice([0, 0, 3]),
            "dropped": 0,
            "broken_batches": 0,
        }
        for table in [s["table"] for s in silver] + [g["table"] for g in gold]
        for i in range(rng.randint(0, 3))
    ]
    return {
        "warehouse": "/w/<h&m>",
        "at": "2026-01-01T02:00:00+00:00",
        "running": None,
        "bronze_last_batch": rng.choice([None, batch(rng, 4)]),
        "silver": silver,
        "gold": gold,
        "event_log_rows": rng.randrange(0, 999),
        "quality": quality,
        "failing": [],
    }


def random_batches(rng: random.Random, status: dict[str, Any]) -> list[dict[str, Any]]:
    queries = ["bronze"] + [f"silver_{s['table'][7:]}" for s in status["silver"]]
    queries += [f"gold_{g['table'][5:]}" for g in status["gold"]]
    rows = [
        {
            "query": query,
            "event": "progress",
            "batch_id": i,
            "timestamp": f"2026-01-01T00:00:{i:02d}+00:00",
            "input_rows": rng.randrange(0, 10_000),
            "duration_ms": rng.randrange(1, 9_000),
        }
        for query in queries
        for i in range(rng.randint(0, 12))
    ]
    rows.append({**rows[0], "event": "failed"} if rows else {"query": "bronze", "event": "failed"})
    rng.shuffle(rows)
    return rows


@pytest.mark.parametrize("seed", range(25))
def test_every_table_a_node_every_flow_an_edge_numbers_from_the_json(seed: int) -> None:
    rng = random.Random(seed)
    status = random_status(rng)
    batches = random_batches(rng, status)
    page = render_pipeline_page(status, batches)
    dom = BeautifulSoup(page, "html.parser")

    silver, gold = status["silver"], status["gold"]
    tables = {s["table"] for s in silver} | {s["bronze_table"] for s in silver}
    tables |= {g["table"] for g in gold} | {"silver.quarantine"}
    nodes = {n["data-table"]: n for n in dom.select("g.node")}
    assert set(nodes) == tables
    for s in silver:
        node = nodes[s["table"]]
        assert node["data-rows"] == str(s["rows"])
        assert node["data-quarantined"] == str(s["quarantined"])
        assert f"rows {s['rows']:,}" in node.get_text(" ")
        failed = sum(1 for q in status["quality"] if q["table"] == s["table"] and q["failed"])
        assert node["data-failed-expectations"] == str(failed)
        bronze = nodes[s["bronze_table"]]
        assert bronze["data-records"] == str(s["bronze_records"])
    for g in gold:
        node = nodes[g["table"]]
        assert node["data-rows"] == str(g["rows"])
        assert node["data-late-changes"] == str(g["late_changes"])
        assert f"late changes {g['late_changes']:,}" in node.get_text(" ")
    assert nodes["silver.quarantine"]["data-rows"] == str(sum(s["quarantined"] for s in silver))

    edges = {(e["data-source"], e["data-target"]): e for e in dom.select("g.flow")}
    expected = {(s["bronze_table"], s["table"]) for s in silver}
    expected |= {(g["input"], g["table"]) for g in gold}
    expected |= {(s["table"], "silver.quarantine") for s in silver}
    assert set(edges) == expected
    for s in silver:
        edge = edges[(s["bronze_table"], s["table"])]
        assert edge["data-records-behind"] == str(s["records_behind"])
        assert f"lag {s['records_behind']:,} records" in edge.get_text(" ")
        rows = (s["last_batch"] or {}).get("input_rows")
        assert edge.get("data-input-rows") == ("" if rows is None else str(rows))
    for g in gold:
        edge = edges[(g["input"], g["table"])]
        assert edge["data-versions-behind"] == str(g["versions_behind"])

    charts = {c["data-query"]: c for c in dom.select("div.chart")}
    assert len(dom.select("div.chart")) == 1 + len(silver) + len(gold)
    for query, chart in charts.items():
        drawn = [
            (int(b["data-batch-id"]), int(b["data-input-rows"]), int(b["data-duration-ms"]))
            for b in chart.select("rect.bar")
        ]
        model = sorted(
            (b["batch_id"], b["input_rows"], b["duration_ms"])
            for b in batches
            if b["query"] == query and b["event"] == "progress"
        )
        assert drawn == model, query

    assert not dom.select("script, link, iframe, img")
    assert external_references(page) == []
    assert "<h&m>" not in page and "&lt;h&amp;m&gt;" in page


def test_an_empty_warehouse_draws_an_empty_graph() -> None:
    status = {"warehouse": "w", "at": None, "running": None, "silver": [], "gold": []}
    dom = BeautifulSoup(render_pipeline_page(status, []), "html.parser")
    assert dom.select("g.node") == [] and dom.select("g.flow") == []
    assert [c["data-query"] for c in dom.select("div.chart")] == ["bronze"]


def test_the_server_answers_on_loopback_only() -> None:
    served = iter(range(100))
    server = pipeline_server(lambda: f"<html>page {next(served)}</html>", "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        address = f"http://127.0.0.1:{server.server_address[1]}"
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy
        pages = [direct.open(f"{address}/", timeout=10).read() for _ in range(2)]
        assert pages == [b"<html>page 0</html>", b"<html>page 1</html>"]  # made anew each time
        with pytest.raises(urllib.error.HTTPError) as missing:
            direct.open(f"{address}/other", timeout=10)
        assert missing.value.code == 404
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    for host in ("192.0.2.7", "0.0.0.0"):  # a documentation address, every interface
        with pytest.raises(ConfigError, match="not a loopback address"):
            pipeline_server(lambda: "", host, 0)


def test_the_served_page_reloads_itself() -> None:
    status = {"warehouse": "w", "at": None, "running": None, "silver": [], "gold": []}
    dom = BeautifulSoup(render_pipeline_page(status, [], refresh_seconds=5), "html.parser")
    assert dom.select_one('meta[http-equiv="refresh"]')["content"] == "5"
    assert "refresh" not in render_pipeline_page(status, [])
