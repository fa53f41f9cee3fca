"""Incremental SQL models: a keyed model whose query is key-local is refreshed for the keys
whose input rows changed, and its table equals its whole query's result after each refresh.

Two small silver tables with a change feed (``a``: id, grp, v; ``b``: bid, aid, w) take random
rounds of commits (appends, updates of values and of key columns, deletes; nulls in keys and
values; rounds that touch one table only). After each round every model is refreshed and its
table is compared with its query evaluated whole over the same input versions (the oracle);
the key-local models must say they were refreshed incrementally, the others that they were
recomputed whole. One Spark session, small frames: no streaming run.
"""

from __future__ import annotations

import random
from functools import reduce
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from gold.models import Outcome, pinned_query, refresh, refresh_models
from lakehouse_core.config import PipelineConfig
from lakehouse_core.layout import Warehouse
from lakehouse_core.models import SqlModel
from tests.logs import logged

pytestmark = pytest.mark.integration

A_SCHEMA = "id int, grp string, v int"
B_SCHEMA = "bid int, aid int, w int"
GROUPS = ("x", "y", "z", None)
IDS = tuple(range(14))
ROUNDS = 4
SEED = 20261207

INCREMENTAL = (
    SqlModel(
        "picked",
        "SELECT id, grp, v * 2 AS v2 FROM silver.a WHERE v IS NULL OR v > 3",
        key=("id",),
    ),
    SqlModel(
        "per_group",
        "SELECT grp AS g, count(*) AS n, sum(v) AS s FROM silver.a GROUP BY grp "
        "HAVING count(*) > 1",
        key=("g",),
    ),
    SqlModel(
        "per_group_value",
        "SELECT grp, v, count(*) AS n FROM silver.a GROUP BY grp, v",
        key=("grp", "v"),
    ),
    SqlModel(
        "with_bids",
        "SELECT a.id, max(a.grp) AS grp, sum(b.w) AS total, count(b.bid) AS n "
        "FROM silver.a a LEFT JOIN silver.b b ON b.aid = a.id GROUP BY a.id",
        key=("id",),
    ),
    SqlModel(
        "bid_counts",
        "SELECT b.aid AS auction, count(*) AS n, max(a.v) AS top FROM silver.b b "
        "JOIN silver.a AS a ON a.id = b.aid AND a.v IS NOT NULL WHERE b.w > 1 GROUP BY b.aid",
        key=("auction",),
    ),
)
WHOLE = (
    SqlModel(
        "bid_groups",  # a group is not the key of the rows it is made of
        "SELECT a.grp, count(*) AS n FROM silver.b b JOIN silver.a a ON a.id = b.aid "
        "GROUP BY a.grp",
        key=("grp",),
    ),
)


def a_row(rng: random.Random, id_: int | None) -> tuple[Any, ...]:
    return (id_, rng.choice(GROUPS), rng.choice([None, *range(8)]))


def b_row(rng: random.Random, bid: int) -> tuple[Any, ...]:
    return (bid, rng.choice([*IDS, None]), rng.choice([None, *range(5)]))


def change_a(spark: SparkSession, path: str, rng: random.Random, present: set[Any]) -> None:
    """One commit to ``a``, whose ids (``present``, kept up to date) stay unique as a silver
    table's keys: rows appended, values updated, an id changed, or rows deleted."""
    table = DeltaTable.forPath(spark, path)
    free = [i for i in (*IDS, None) if i not in present]
    which = rng.choice(["append", "update", "move", "delete"])
    if which == "append" and free:
        ids = rng.sample(free, min(3, len(free)))
        rows = [a_row(rng, i) for i in ids]
        spark.createDataFrame(rows, A_SCHEMA).write.format("delta").mode("append").save(path)
        present.update(ids)
    elif which == "update" and present:
        ids = rng.sample(sorted(present, key=repr), min(3, len(present)))
        grp, v = rng.choice(GROUPS), rng.choice([None, *range(8)])
        values = {"grp": F.lit(grp), "v": F.lit(v).cast("int")}
        table.update(reduce(Column.__or__, [F.col("id").eqNullSafe(i) for i in ids]), values)
    elif which == "move" and present and free:  # the row leaves one key for another
        old, new = rng.choice(sorted(present, key=repr)), rng.choice(free)
        table.update(F.col("id").eqNullSafe(old), {"id": F.lit(new).cast("int")})
        present.remove(old)
        present.add(new)
    elif present:
        ids = rng.sample(sorted(present, key=repr), min(2, len(present)))
        table.delete(reduce(Column.__or__, [F.col("id").eqNullSafe(i) for i in ids]))
        present.difference_update(ids)


def change_b(spark: SparkSession, path: str, rng: random.Random, next_bid: int) -> int:
    """One commit to ``b``; the next bid id to use."""
    table = DeltaTable.forPath(spark, path)
    which = rng.choice(["append", "update", "move", "delete"])
    if which == "append":
        rows = [b_row(rng, next_bid + i) for i in range(3)]
        spark.createDataFrame(rows, B_SCHEMA).write.format("delta").mode("append").save(path)
        return next_bid + 3
    bids = rng.sample(range(max(next_bid, 1)), min(2, max(next_bid, 1)))
    if which == "update":
        table.update(
            F.col("bid").isin(bids), {"w": F.lit(rng.choice([None, *range(5)])).cast("int")}
        )
    elif which == "move":
        aid = F.lit(rng.choice([*IDS, None])).cast("int")
        table.update(F.col("bid").isin(bids), {"aid": aid})
    else:
        table.delete(F.col("bid").isin(bids))
    return next_bid


def create(spark: SparkSession, path: str, schema: str, rows: list[tuple[Any, ...]]) -> None:
    (
        DeltaTable.create(spark)
        .location(path)
        .addColumns(spark.createDataFrame([], schema).schema)
        .property("delta.enableChangeDataFeed", "true")
        .execute()
    )
    spark.createDataFrame(rows, schema).write.format("delta").mode("append").save(path)


def as_rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in frame.collect()), key=repr)


def test_incremental_models_equal_their_whole_query_after_random_changes(
    spark: SparkSession, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    warehouse = Warehouse(str(tmp_path))
    a_path, b_path = warehouse.table("silver", "a"), warehouse.table("silver", "b")
    present: set[Any] = set(range(10))
    create(spark, a_path, A_SCHEMA, [a_row(rng, i) for i in sorted(present)])
    create(spark, b_path, B_SCHEMA, [b_row(rng, i) for i in range(10)])
    next_bid = 10
    models = (*INCREMENTAL, *WHOLE)
    first = {m.name: refresh(spark, warehouse, m) for m in models}
    assert all(done.how.startswith("full recompute") for done in first.values()), first

    incremental_refreshes = 0
    for number in range(ROUNDS):
        touch = "ab" if number % 3 == 0 else rng.choice(["a", "b", "ab"])
        for _ in range(rng.randint(1, 3)):
            if "a" in touch:
                change_a(spark, a_path, rng, present)
            if "b" in touch:
                next_bid = change_b(spark, b_path, rng, next_bid)
        views = {("silver", "a"): "current_a", ("silver", "b"): "current_b"}
        for (_, table), view in views.items():
            spark.read.format("delta").load(warehouse.table("silver", table)).createTempView(view)
        for model in models:
            done = refresh(spark, warehouse, model)
            expected = spark.sql(pinned_query(model, views))  # the whole query, now
            actual = spark.read.format("delta").load(warehouse.table("gold", model.name))
            assert as_rows(actual) == as_rows(expected), (number, model.name, done)
            if done.outcome is Outcome.CURRENT:
                continue
            if model in INCREMENTAL:
                assert done.how.startswith("incremental: "), (model.name, done.how)
                incremental_refreshes += 1
            else:
                assert done.how.startswith("full recompute: "), (model.name, done.how)
        for view in views.values():
            spark.catalog.dropTempView(view)
    assert incremental_refreshes >= 2 * ROUNDS


def test_each_refresh_says_whether_it_was_incremental(spark: SparkSession, tmp_path: Path) -> None:
    """The progress line of a refresh names what it did: the changed keys and the shape, or
    the full recompute and why (here: an input without a change feed)."""
    rng = random.Random(SEED + 1)
    warehouse = Warehouse(str(tmp_path))
    a_path = warehouse.table("silver", "a")
    create(spark, a_path, A_SCHEMA, [a_row(rng, i) for i in range(6)])
    picked, per_group = INCREMENTAL[0], INCREMENTAL[1]
    config = PipelineConfig(tables=(), models=(picked, per_group))
    with logged() as lines:
        assert refresh_models(spark, warehouse, config) == []
    assert "gold: model picked refreshed (full recompute: its first refresh)" in lines, lines

    DeltaTable.forPath(spark, a_path).update(F.col("id") == 2, {"v": F.lit(50)})
    with logged() as lines:
        assert refresh_models(spark, warehouse, config) == []
    said = [line for line in lines if line.startswith("gold: model picked ")]
    assert said == [
        "gold: model picked refreshed (1 rows changed; incremental: 1 changed key(s), "
        "a projection of rows)"
    ], lines

    spark.sql(
        f"ALTER TABLE delta.`{a_path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = false)"
    )
    DeltaTable.forPath(spark, a_path).update(F.col("id") == 3, {"v": F.lit(60)})
    with logged() as lines:
        assert refresh_models(spark, warehouse, config) == []
    said = [line for line in lines if line.startswith("gold: model picked ")]
    assert said == [
        "gold: model picked refreshed (1 rows changed; full recompute: silver.a has no change "
        "feed since the last refresh)"
    ], lines
