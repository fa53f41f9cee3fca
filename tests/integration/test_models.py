"""SQL models (``[[models]]``): after every run, each model equals its query computed by an
independent path, in dependency order, exactly once.

A pipeline of two event tables (auctions with a category, bids with a price) and one gold
declaration (the highest bid per auction and hour) feeds two models: ``avg_price`` (keyed by
category: the average winning bid per category, a join of gold with silver, then an
aggregate of it) and ``top_categories`` (unkeyed, over ``avg_price``: gold over a model),
declared in the wrong order so the config must order them. Two runs deliver inserts,
updates (a bid raised, an auction moved to another category), deletes, duplicates and an
older version delivered after a newer one; after each, both models equal a plain-Python
computation from the collected inputs. A run with nothing new commits nothing; a refresh
retried over the same versions, or after a crash between its commit and its state file,
commits nothing; nor does an input commit that changes no row of a keyed model's result. A
failing model is one failed table and a model whose input does not exist yet waits, while the
others are left as they are. ``verify`` passes, then reports a tampered row (and that the
model over it is behind); ``replay`` rebuilds both equal.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc.records import Record
from cdc.sources import SourceSpec
from gold.models import (
    ModelState,
    Outcome,
    _merge_changes,
    check_models_of,
    ordered_models,
    refresh,
    refresh_models,
    state_path,
)
from lakehouse.ops.audit import verify_warehouse
from lakehouse.ops.replay import replay
from lakehouse.run.pipeline import run_once
from lakehouse_core import storage
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.delta_io import current_version, merge_materialized
from lakehouse_core.gold_tables import GoldTable, Measure, Window
from lakehouse_core.layout import Warehouse
from lakehouse_core.models import SqlModel
from tests.helpers import deliver, table_rows
from tests.logs import logged

pytestmark = pytest.mark.integration

AUCTIONS, BIDS = "test.auctions", "test.bids"
TABLES = (
    TableSpec(
        name="auctions",
        topic=AUCTIONS,
        format="events",
        keys=("id",),
        sequence_by=("seq",),
        schema="id bigint, category string, seq bigint, deleted boolean",
        apply_as_deletes="deleted = true",
    ),
    TableSpec(
        name="bids",
        topic=BIDS,
        format="events",
        keys=("bid_id",),
        sequence_by=("seq",),
        schema="bid_id bigint, auction bigint, price bigint, ts timestamp, seq bigint, "
        "deleted boolean",
        apply_as_deletes="deleted = true",
    ),
)
WINNING = GoldTable(
    name="winning_bids",
    source="bids",
    event_time="ts",
    window=Window("tumbling", size="1 hour"),
    group_by=("auction",),
    measures=(Measure("max_price", "max", "price"), Measure("bids", "count")),
)
AVG_PRICE = SqlModel(
    "avg_price",
    "SELECT a.category, avg(w.max_price) AS avg_price, count(*) AS windows "
    "FROM gold.winning_bids w JOIN silver.auctions a ON a.id = w.auction GROUP BY a.category",
    key=("category",),
)
TOP = SqlModel(
    "top_categories",
    "WITH ranked AS (SELECT category, avg_price FROM gold.avg_price WHERE windows >= 2) "
    "SELECT category, avg_price FROM ranked WHERE avg_price > 10",
)
#: Declared out of order: the config refreshes avg_price first.
CONFIG = PipelineConfig(tables=TABLES, gold_tables=(WINNING,), models=(TOP, AVG_PRICE))
BASE = datetime(2026, 3, 1)
CATEGORIES = ("books", "games", None)
SEED = 20260301


def expected_avg(winning: list[dict[str, Any]], auctions: list[dict[str, Any]]) -> dict[Any, Any]:
    """avg_price computed in Python from the collected inputs: category -> (avg, windows)."""
    category = {a["id"]: a["category"] for a in auctions}
    prices: dict[Any, list[int]] = defaultdict(list)
    for row in winning:
        if row["auction"] in category:
            prices[category[row["auction"]]].append(row["max_price"])
    return {c: (round(sum(p) / len(p), 6), len(p)) for c, p in prices.items()}


def stored(spark: SparkSession, warehouse: Warehouse, name: str) -> dict[Any, Any]:
    rows = table_rows(spark, warehouse.table("gold", name))
    if name == "avg_price":
        return {r["category"]: (round(r["avg_price"], 6), r["windows"]) for r in rows}
    return {r["category"]: round(r["avg_price"], 6) for r in rows}


def expected_top(avg: dict[Any, Any]) -> dict[Any, Any]:
    return {c: a for c, (a, windows) in avg.items() if windows >= 2 and a > 10}


def batches(rng: random.Random) -> list[list[Record]]:
    """Two deliveries: auctions and bids, then updates and deletes of both (some delivered
    twice, one older version after a newer one, a deleted auction back)."""
    offsets = {AUCTIONS: 0, BIDS: 0}
    seqs: dict[tuple[str, int], int] = defaultdict(int)

    def event(topic: str, key: int, **value: Any) -> Record:
        seqs[(topic, key)] += 1
        name = "id" if topic == AUCTIONS else "bid_id"
        record = Record(
            topic,
            0,
            offsets[topic],
            0,
            {name: key},
            {name: key, "seq": seqs[(topic, key)], **value},
        )
        offsets[topic] += 1
        return record

    def auction(key: int, category: str | None, deleted: bool = False) -> Record:
        return event(AUCTIONS, key, category=category, deleted=deleted)

    def bid(key: int, auction_id: int, price: int, hour: int, deleted: bool = False) -> Record:
        ts = (BASE + timedelta(hours=hour, minutes=rng.randrange(60))).isoformat() + "Z"
        return event(BIDS, key, auction=auction_id, price=price, ts=ts, deleted=deleted)

    first = [auction(a, CATEGORIES[a % 3]) for a in range(9)]
    first += [bid(b, b % 9, rng.randrange(1, 40), b % 3) for b in range(40)]
    second = [
        auction(1, "games"),  # moves to another category
        auction(4, None, deleted=True),
        bid(3, 3, 99, 0),  # a bid raised
        bid(5, 5, 0, 2, deleted=True),
        bid(40, 7, 55, 4),
    ]
    second += second[:2]  # redelivered
    late = auction(2, "books")  # an older version, delivered after the newer one
    newer = auction(2, "games")
    third = [newer, late, bid(41, 4, 77, 1), auction(4, "books"), bid(6, 6, 1, 0, deleted=True)]
    rng.shuffle(first)
    return [first, second + third]


def model_versions(spark: SparkSession, warehouse: Warehouse) -> dict[str, int]:
    return {
        m.name: current_version(spark, warehouse.table("gold", m.name)) for m in (TOP, AVG_PRICE)
    }


def assert_models_equal_python(spark: SparkSession, warehouse: Warehouse, when: str) -> None:
    winning = table_rows(spark, warehouse.table("gold", "winning_bids"))
    auctions = table_rows(spark, warehouse.table("silver", "auctions"))
    want = expected_avg(winning, auctions)
    got = stored(spark, warehouse, "avg_price")
    assert got == want, f"{when}: gold.avg_price {got}, expected {want} (seed {SEED})"
    got_top = stored(spark, warehouse, "top_categories")
    assert got_top == expected_top(got), f"{when}: gold.top_categories {got_top}"


def test_models_follow_their_inputs_exactly_once(spark: SparkSession, tmp_path: Path) -> None:
    assert [m.name for m in ordered_models(CONFIG)] == ["avg_price", "top_categories"]
    source = tmp_path / "source"
    source.mkdir()
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    spec = SourceSpec.parse(f"files:{source}")
    delivered = batches(random.Random(SEED))
    with logged() as lines:
        for number, records in enumerate(delivered):
            deliver(source, number, records)
            run_once(spark, spec, warehouse, CONFIG)
            assert_models_equal_python(spark, warehouse, f"after run {number}")
    assert any("model avg_price refreshed" in line for line in lines), lines
    assert len(stored(spark, warehouse, "top_categories")) >= 1

    # Nothing new: no commit. The same versions again (a retried refresh): nothing.
    settled = model_versions(spark, warehouse)
    run_once(spark, spec, warehouse, CONFIG)
    assert model_versions(spark, warehouse) == settled
    assert refresh(spark, warehouse, AVG_PRICE).outcome is Outcome.CURRENT
    # A crash between the commit and the state file: the commit's own record is adopted.
    storage.delete(spark, state_path(warehouse, "top_categories"))
    assert refresh(spark, warehouse, TOP).outcome is Outcome.CURRENT
    assert model_versions(spark, warehouse) == settled
    # An input commit that changes no row of the keyed result: a MERGE of nothing, no commit
    # (and the model over it has nothing new).
    auctions = DeltaTable.forPath(spark, warehouse.table("silver", "auctions"))
    auctions.update(F.col("id") == 0, {"category": F.col("category")})
    assert refresh(spark, warehouse, AVG_PRICE).outcome is Outcome.UNCHANGED
    assert refresh(spark, warehouse, TOP).outcome is Outcome.CURRENT
    assert model_versions(spark, warehouse) == settled

    # A failing model is one failed table; one whose input does not exist waits; others go on.
    broken = SqlModel("broken", "SELECT no_such_column AS x FROM silver.auctions")
    later = SqlModel("later", "SELECT id FROM silver.not_yet")
    wider = replace(CONFIG, models=(*CONFIG.models, broken, later))
    once: set[str] = set()  # a continuous run's: the wait is said once per run
    with logged() as said:
        for _ in range(2):
            failures = refresh_models(spark, warehouse, wider, once)
            assert [(f.query, f.table) for f in failures] == [("model_broken", "gold.broken")]
            assert "no_such_column" in failures[0].failure.message
    assert said == ["gold: model later waits for silver.not_yet"]
    assert model_versions(spark, warehouse) == settled

    checks = {f"{c.layer}.{c.table}": c for c in verify_warehouse(spark, warehouse, CONFIG)}
    assert {"gold.avg_price", "gold.top_categories"} <= set(checks)
    assert all(c.ok for c in checks.values()), [c.differences for c in checks.values()]

    # Tampered: verify names the row; the model over it is behind, not wrong.
    DeltaTable.forPath(spark, warehouse.table("gold", "avg_price")).update(
        F.col("category") == "books", {"windows": F.col("windows") + 100}
    )
    tampered, over = check_models_of(spark, warehouse, CONFIG)  # verify's part for models
    assert not tampered.ok and len(tampered.differences) == 2, tampered.differences
    assert any("unexpected row" in d and "'books'" in d for d in tampered.differences)
    assert over.ok and over.note.startswith("behind by 1 input version"), over.note

    replay(spark, warehouse, CONFIG)
    assert_models_equal_python(spark, warehouse, "after replay")
    assert [(c.ok, c.note) for c in check_models_of(spark, warehouse, CONFIG)] == [(True, "")] * 2


def test_writes_made_during_a_models_merge_carry_none_of_its_settings(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh's MERGE commits with its mark and transaction id; a write made through the
    run's session meanwhile (the event log's thread, a notebook's own write under a pipeline
    handle) carries neither, so a second such write is not skipped as already written."""
    path, other = str(tmp_path / "model"), str(tmp_path / "other")
    spark.createDataFrame([(1, "a")], "category string, value string").write.format("delta").save(
        path
    )
    result = spark.createDataFrame([("1", "b"), ("2", "c")], "category string, value string")
    model = SqlModel("m", "SELECT category, value FROM silver.items", key=("category",))
    new = ModelState(model="m", digest="d", generation="g", refresh=4, inputs={})

    def merge_with_writes_meanwhile(*args: Any) -> None:
        for n in (1, 2):
            spark.createDataFrame([(n,)], "n long").write.format("delta").mode("append").save(other)
        merge_materialized(*args)

    monkeypatch.setattr("gold.models.merge_materialized", merge_with_writes_meanwhile)
    assert _merge_changes(spark, path, model, result.localCheckpoint(), new) == 2
    assert sorted(row.n for row in spark.read.format("delta").load(other).collect()) == [1, 2]
    newest = DeltaTable.forPath(spark, path).history(1).first()
    assert newest is not None and newest.userMetadata == new.to_json()
