"""Which SQL models are refreshed for their changed keys (gold.model_shapes): the key-local
shapes give a plan naming each input and its key columns; every other query gives the reason
it is recomputed whole."""

from __future__ import annotations

import pytest

from gold.model_shapes import IncrementalPlan, KeyedInput, incremental_plan
from lakehouse_core.models import SqlModel

pytestmark = pytest.mark.unit

A, B = ("silver", "a"), ("silver", "b")


@pytest.mark.parametrize(
    ("sql", "key", "inputs", "shape"),
    [
        ("SELECT id, name FROM silver.a WHERE v > 1", ["id"], [(A, ["id"])], "a projection"),
        ("SELECT DISTINCT id, name FROM silver.a", ["id"], [(A, ["id"])], "a projection"),
        (
            "SELECT t.id AS k, sum(v) AS s FROM silver.a t GROUP BY t.id HAVING sum(v) > 1",
            ["k"],
            [(A, ["id"])],
            "a GROUP BY",
        ),
        (
            "SELECT ID AS k, region, count(*) AS n FROM silver.a GROUP BY region, id",
            ["region", "k"],
            [(A, ["region", "ID"])],
            "a GROUP BY",
        ),
        (
            "SELECT o.id AS k, count(*) AS n FROM silver.a o JOIN silver.b p "
            "ON o.id = p.aid AND p.x > 0 GROUP BY o.id",
            ["k"],
            [(A, ["id"]), (B, ["aid"])],
            "a GROUP BY of the key over a join",
        ),
        (
            "SELECT o.id, p.x FROM silver.a o LEFT JOIN silver.b AS p ON p.aid <=> o.id",
            ["id"],
            [(A, ["id"]), (B, ["aid"])],
            "a projection of rows over a join",
        ),
        (
            "SELECT p.aid AS k, p.bid, o.v FROM silver.b p JOIN silver.a o ON o.id = p.aid",
            ["k", "bid"],
            [(B, ["aid", "bid"]), (A, ["id", None])],
            None,
        ),
    ],
)
def test_key_local_shapes_get_a_plan(
    sql: str, key: list[str], inputs: list[tuple[tuple[str, str], list[str]]], shape: str | None
) -> None:
    plan = incremental_plan(SqlModel("m", sql, tuple(key)))
    if shape is None:  # bid is no column of a: not equated by the join
        assert isinstance(plan, str)
        assert "does not equate p.bid" in plan
        return
    assert isinstance(plan, IncrementalPlan), plan
    assert plan.shape.startswith(shape)
    assert plan.inputs == tuple(KeyedInput(*t, tuple(c)) for t, c in inputs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sql", "key", "reason"),
    [
        ("SELECT id, name FROM silver.a", [], "it has no key"),
        ("SELECT id FROM silver.a UNION SELECT id FROM silver.b", ["id"], "not a single SELECT"),
        ("WITH x AS (SELECT id FROM silver.a) SELECT id FROM x", ["id"], "it has WITH"),
        ("SELECT id FROM silver.a ORDER BY id LIMIT 3", ["id"], "it has LIMIT"),
        ("SELECT id FROM silver.a WHERE id IN (SELECT aid FROM silver.b)", ["id"], "subquery"),
        ("SELECT id, sum(v) OVER (PARTITION BY id) AS s FROM silver.a", ["id"], "window"),
        ("SELECT id, rand() AS r FROM silver.a", ["id"], "rand()"),
        (
            "SELECT id, count(*) AS n FROM silver.a WHERE ts > current_timestamp() GROUP BY id",
            ["id"],
            "current_timestamp()",
        ),
        ("SELECT id, monotonically_increasing_id() AS r FROM silver.a", ["id"], "monotonically"),
        ("SELECT upper(id) AS k, count(*) AS n FROM silver.a GROUP BY 1", ["k"], "not a column"),
        ("SELECT id, count(*) AS n FROM silver.a GROUP BY ROLLUP(id)", ["id"], "ROLLUP"),
        ("SELECT id, count(*) AS n FROM silver.a GROUP BY ALL", ["id"], "GROUP BY ALL"),
        ("SELECT id, count(*) AS n FROM silver.a GROUP BY grp, v", ["id"], "GROUP BY its key"),
        ("SELECT max(id) AS id, count(*) AS n FROM silver.a", ["id"], "not a column"),
        ("SELECT id FROM silver.a TABLESAMPLE (10 PERCENT)", ["id"], "TABLESAMPLE"),
        ("SELECT id FROM silver.a LATERAL VIEW explode(xs) t AS x", ["id"], "LATERAL"),
        ("SELECT a.id FROM silver.a a, silver.b b WHERE a.id = b.id", ["id"], "CROSS join"),
        ("SELECT a.id FROM silver.a a JOIN silver.a b ON a.id = b.id", ["id"], "twice"),
        (
            "SELECT a.id FROM silver.a a JOIN silver.b b ON a.id = b.id "
            "JOIN silver.c c ON c.id = a.id",
            ["id"],
            "more than two",
        ),
        ("SELECT a.id FROM silver.a a FULL JOIN silver.b b ON a.id = b.id", ["id"], "FULL"),
        ("SELECT b.id FROM silver.a a LEFT JOIN silver.b b ON a.id = b.id", ["id"], "right side"),
        ("SELECT a.id FROM silver.a a JOIN silver.b b USING (id)", ["id"], "USING"),
        ("SELECT a.id FROM silver.a a JOIN silver.b b ON a.id < b.id", ["id"], "equate a.id"),
        ("SELECT id FROM silver.a a JOIN silver.b b ON a.id = b.id", ["id"], "name its table"),
        (
            "SELECT a.grp, count(*) AS n FROM silver.b b JOIN silver.a a ON a.id = b.aid "
            "GROUP BY a.grp",
            ["grp"],
            "equate a.grp",
        ),
    ],
)
def test_other_queries_are_recomputed_whole_with_the_reason(
    sql: str, key: list[str], reason: str
) -> None:
    found = incremental_plan(SqlModel("m", sql, tuple(key)))
    assert isinstance(found, str), found
    assert reason in found
