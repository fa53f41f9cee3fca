"""Gold measures that are expressions over aggregates (``expr = "max(battery) -
min(battery)"``, issue 64 item 3): the declaration (TOML and Python, one line per mistake,
``lag`` refused naming a SQL model) and the engine's evaluation (``gold.aggregates.evaluate``,
what each job recomputes its scope with) against the plain-Python oracle
(tests/gold_oracle.py) over drawn readings, every window kind in one Spark session.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from gold.aggregates import evaluate
from lakehouse import gold_table, measure, sliding, tumbling
from lakehouse_core.config import load_config
from lakehouse_core.errors import ConfigError
from lakehouse_core.gold_tables import GoldTable, Measure, StreamJoin, TopN, Window
from tests import gold_oracle
from tests.draws import draw_examples, example_count, property_seed

pytestmark = pytest.mark.unit

DROP = Measure("drop", "expr", expr="max(battery) - min(battery)")


def test_an_expression_is_one_measure_from_toml_and_python(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text(
        '[[gold]]\nname = "battery"\nsource = "readings"\nevent_time = "ts"\n'
        'group_by = ["device"]\nwindow = { kind = "tumbling", size = "1 hour" }\n'
        'measures = [{ name = "drop", expr = "max(battery) - min(battery)" }]\n',
        encoding="utf-8",
    )
    (loaded,) = load_config(path).gold_tables
    declared = gold_table(
        "battery",
        source="readings",
        event_time="ts",
        group_by=["device"],
        window=tumbling("1 hour"),
        measures=[measure.expr("max(battery) - min(battery)", name="drop")],
    )
    assert loaded == declared and loaded.measures == (DROP,)
    assert [(p.fn, p.column) for p in DROP.parts] == [("max", "battery"), ("min", "battery")]
    assert loaded.source_columns == ("ts", "device", "battery")
    same = Measure("m", "expr", expr="sum(x) / count(*) + sum(x)", filter="x > 0")
    assert [(p.fn, p.column, p.filter) for p in same.parts] == [
        ("sum", "x", "x > 0"),
        ("count", None, "x > 0"),
    ]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"expr": "battery - lag(battery)"},
            "Measure 'm': lag reads other rows of the group (the row before, a window), which "
            "a gold measure cannot: write it in a SQL model ([[models]], docs/models.md).",
        ),
        ({"expr": "sum(x) OVER (ORDER BY ts)"}, "write it in a SQL model"),
        ({"expr": "x + max(y)"}, "reads column 'x' outside an aggregate: wrap it in one"),
        ({"expr": "sum(max(x))"}, "an aggregate inside an aggregate"),
        ({"expr": "max(x + 1)"}, "aggregates an expression: aggregate a column"),
        ({"expr": "percentile_approx(x, 0.5)"}, "declare it as a measure of its own"),
        ({"expr": "count(DISTINCT x)"}, 'fn = "count_distinct"'),
        ({"expr": "1 + 2"}, "has no aggregate"),
        ({"expr": "max(x) +"}, "is not an expression"),
        ({"expr": "max(x) = 'a' + "}, "is not an expression"),
        ({"expr": "max(x)", "column": "x"}, "(expr) takes no column"),
        ({"expr": "max(x)", "fn": "sum"}, 'expr goes with fn = "expr" (or no fn), not with sum'),
        ({"fn": "expr"}, 'needs expr = "..."'),
        ({"expr": "max(x)", "filter": "x >"}, "filter of measure 'm'"),
    ],
)
def test_one_line_per_mistake(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Measure(**{"name": "m", "fn": "expr", **settings})
    assert message in str(raised.value) and "\n" not in str(raised.value), str(raised.value)


def test_a_stream_join_refuses_expressions() -> None:
    with pytest.raises(ConfigError, match="expr measures are not supported with a stream join"):
        GoldTable(
            "g",
            "orders",
            "ts",
            Window("row"),
            (Measure("m", "expr", expr="max(amount) - min(amount)"),),
            group_by=("user",),
            stream_join=StreamJoin("clicks", (("user", "user"),), "ts", "10 minutes"),
        )


# --------------------------------------------------------------------------------------------
# The engine against the oracle
# --------------------------------------------------------------------------------------------

SCHEMA = (
    "device string, battery bigint, temp double, level decimal(6,2), ts timestamp, "
    "_bronze_partition int, _bronze_offset bigint"  # count windows' tiebreak
)
BASE = datetime(2026, 1, 1)
MEASURES = (
    DROP,
    Measure("n", "count"),
    Measure("warmth", "expr", expr="round(avg(temp), 2) - min(temp)"),
    Measure(
        "share", "expr", expr="CASE WHEN count(*) > 0 THEN count(battery) * 100 / count(*) END"
    ),
    Measure("level_span", "expr", expr="max(level) - min(level) + sum(level) * 0"),
    Measure("hot_drop", "expr", expr="max(battery) - min(battery)", filter="temp > 20"),
    Measure("none_yet", "expr", expr="coalesce(max(battery), -1) + count(temp)"),
)
TABLES = (
    GoldTable(
        "by_hour", "readings", "ts", Window("tumbling", size="10 minutes"), MEASURES,
        group_by=("device",),
    ),
    GoldTable(
        "sessions", "readings", "ts", Window("session", gap="5 minutes"), MEASURES,
        group_by=("device",),
    ),
    GoldTable(
        "threes", "readings", "ts", Window("count", count=3), MEASURES, group_by=("device",)
    ),
    GoldTable(
        "recent", "readings", "ts", sliding("10 minutes"), MEASURES, group_by=("device",)
    ),
    GoldTable(
        "top_drops", "readings", "ts", Window("tumbling", size="30 minutes"), MEASURES,
        group_by=("device",), top_n=TopN(1, (("drop", True),)),
    ),
)  # fmt: skip


@st.composite
def readings(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A few devices' readings, minutes apart, with NULLs in every column."""
    rows = []
    for index in range(draw(st.integers(0, 12))):
        minute = draw(st.integers(0, 59))
        rows.append(
            {
                "device": f"{draw(st.sampled_from(('a', 'b', None)))}-{index % 2}",
                "battery": draw(st.one_of(st.none(), st.integers(0, 100))),
                "temp": draw(st.one_of(st.none(), st.sampled_from((12.5, 20.0, 21.25, 30.0)))),
                "level": draw(st.one_of(st.none(), st.sampled_from(("0.10", "5.25", "99.99")))),
                "ts": None if minute == 59 else BASE + timedelta(minutes=minute),
            }
        )
    return rows


def normalized(value: Any) -> Any:
    if isinstance(value, float | Decimal):
        return round(float(value), 6)
    return value


@pytest.mark.spark
def test_expressions_equal_the_oracle_in_every_window_kind(spark: SparkSession) -> None:
    seed = property_seed("GOLD_EXPR_SEED")
    histories = draw_examples(readings(), seed, example_count(40))
    rows = []
    for number, history in enumerate(histories):  # each history its own devices
        for row in history:
            level = None if row["level"] is None else Decimal(row["level"])
            device = f"{number}:{row['device']}"
            where = {"_bronze_partition": 0, "_bronze_offset": len(rows)}
            rows.append({**row, "device": device, "level": level, **where})
    frame = spark.createDataFrame(rows, SCHEMA).cache()
    checked = 0
    for table in TABLES:
        got = Counter(
            tuple(normalized(r[c]) for c in table.columns) for r in evaluate(frame, table).collect()
        )
        want = Counter(
            tuple(normalized(r[c]) for c in table.columns)
            for r in gold_oracle.evaluate(rows, table)
        )
        assert got == want, (table.name, seed, (want - got).most_common(2), (got - want))
        checked += len(want)
    assert checked >= 200, checked
    # Types are checked when the plan is built, as the job does at start: one line.
    wrong = Measure("m", "expr", expr="max(device) - min(battery)")
    with pytest.raises(ConfigError, match="Gold table 'by_hour': measure 'm'") as raised:
        evaluate(frame, GoldTable("by_hour", "readings", "ts", TABLES[0].window, (wrong,)))
    assert "\n" not in str(raised.value)
