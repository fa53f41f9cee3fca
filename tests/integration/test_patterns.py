"""Patterns through the whole pipeline, by hand-written cases: the matches of two runs, a
match removed by a late delete (recorded in gold.late_events), alerts, verify (and that it
sees a tampered table), replay and forget. The property test
(``test_patterns_property.py``) checks the engine against the oracle under random histories.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc.records import Record
from cdc.sources import SourceSpec
from gold.finality import FINAL
from lakehouse.ops.audit import verify_warehouse
from lakehouse.ops.forget import forget
from lakehouse.ops.replay import replay
from lakehouse.run.pipeline import run_once
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.gold_tables import GoldTable, Measure, Window
from lakehouse_core.layout import LATE_EVENTS, Warehouse
from lakehouse_core.models import ALERTS_TABLE
from lakehouse_core.patterns import Absent, Pattern, PatternMeasure, Step, match_id
from tests import gold_oracle

pytestmark = pytest.mark.integration

TOPIC = "test.card_uses"
SOURCE = TableSpec(
    name="uses",
    topic=TOPIC,
    format="events",
    keys=("event_id",),
    sequence_by=("seq",),
    schema="event_id bigint, card bigint, kind string, amount bigint, country string, "
    "ts timestamp, seq bigint, deleted boolean",
    apply_as_deletes="deleted = true",
)
TWO_COUNTRIES = Pattern(
    "two_countries",
    "uses",
    "ts",
    (Step("first_use"), Step("elsewhere", "country <> first_use.country")),
    "1 hour",
    partition_by=("card",),
    measures=(
        PatternMeasure("uses", "count"),
        PatternMeasure("home", "first", "country", "first_use"),
        PatternMeasure("spent", "sum", "amount"),
    ),
    alert=True,
    watermark_delay="10 minutes",
)
ABANDONED = Pattern(
    "abandoned",
    "uses",
    "ts",
    (Step("cart", "kind = 'cart'"),),
    "30 minutes",
    partition_by=("card",),
    absent=Absent("kind = 'buy'", "30 minutes"),
    watermark_delay="10 minutes",
)
BROWSING = Pattern(  # two or more views in a row, then no cart within 5 minutes
    "browsing",
    "uses",
    "ts",
    (Step("views", "kind = 'view'", times="2+"),),
    "1 hour",
    partition_by=("card",),
    absent=Absent("kind = 'cart'", "5 minutes"),
    measures=(PatternMeasure("views", "count"),),
    contiguity="strict",
    watermark_delay="10 minutes",
)
SPREAD = GoldTable(  # an expression over measures, kept by its job like any measure
    "spread",
    "uses",
    "ts",
    Window("tumbling", size="1 hour"),
    (Measure("spread", "expr", expr="max(amount) - min(amount)"), Measure("n", "count")),
    group_by=("card",),
)
CONFIG = PipelineConfig(
    tables=(SOURCE,), gold_tables=(SPREAD,), patterns=(TWO_COUNTRIES, ABANDONED, BROWSING)
)
BASE = datetime(2026, 1, 1)
#: event id, card, kind, amount, country, seconds after BASE
FIRST = [
    (1, 1, "view", 5, "FR", 0),
    (2, 1, "cart", 12, "FR", 60),
    (3, 1, "view", 15, "DE", 120),
    (4, 2, "cart", 20, "US", 0),
    (5, 2, "buy", 20, "US", 600),
    (6, 2, "cart", 30, "US", 7200),
    (7, 3, "view", 11, "FR", 0),
    (8, 3, "view", 11, "FR", 30),
]


def record(offset: int, event: tuple[Any, ...], seq: int = 0, deleted: bool = False) -> Record:
    event_id, card, kind, amount, country, seconds = event
    value = {
        "event_id": event_id,
        "card": card,
        "kind": kind,
        "amount": amount,
        "country": country,
        "ts": (BASE + timedelta(seconds=seconds)).isoformat() + "Z",
        "seq": seq,
        "deleted": deleted,
    }
    return Record(TOPIC, 0, offset, 0, {"event_id": event_id}, value)


def land(source: Path, name: str, records: list[Record]) -> None:
    hidden = source / f".{name}"
    hidden.write_text("".join(r.to_line() + "\n" for r in records), encoding="utf-8")
    hidden.rename(source / name)


def rows(spark: SparkSession, warehouse: Warehouse, name: str) -> list[dict[str, Any]]:
    frame = spark.read.format("delta").load(warehouse.table("gold", name))
    return [r.asDict() for r in frame.orderBy("card", "match_start").collect()]


def at(seconds: int) -> datetime:
    return BASE + timedelta(seconds=seconds)


@pytest.fixture(scope="module")
def shop(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two runs: the first events, then a late delete of card 1's use abroad (its match was
    final), a buy 100 s after card 2's last cart, and a use in Italy for card 3."""
    root = tmp_path_factory.mktemp("patterns")
    source = root / "source"
    source.mkdir()
    warehouse = Warehouse(str(root / "warehouse"))
    spec = SourceSpec.parse(f"files:{source}")
    land(source, "part-0.jsonl", [record(i, e) for i, e in enumerate(FIRST)])
    run_once(spark, spec, warehouse, CONFIG)
    first = {p.name: rows(spark, warehouse, p.name) for p in CONFIG.patterns}
    second = [
        record(100, FIRST[2], seq=1, deleted=True),
        record(101, (9, 2, "buy", 1, "US", 7300)),
        record(102, (10, 3, "view", 40, "IT", 600)),
        record(103, (11, 4, "view", 1, "US", 9000)),  # moves the watermark on
    ]
    land(source, "part-1.jsonl", second)
    run_once(spark, spec, warehouse, CONFIG)
    return {"warehouse": warehouse, "first": first, "spec": spec}


def test_the_first_run_finds_each_match(shop: dict[str, Any]) -> None:
    two = shop["first"]["two_countries"]
    assert [
        (r["card"], r["match_start"], r["match_end"], r["uses"], r["home"], r["spent"]) for r in two
    ] == [(1, at(0), at(120), 2, "FR", 20)]
    assert two[0]["match_id"] == match_id([1], [1])
    abandoned = shop["first"]["abandoned"]
    # card 1's cart has no buy; card 2's first cart was bought 600 s later; its second is open
    assert [(r["card"], r["match_start"]) for r in abandoned] == [(1, at(60)), (2, at(7200))]
    # the watermark (7200 s - 10 minutes) has passed card 1's absence window, not card 2's
    assert [r[FINAL] for r in abandoned] == [True, False]
    # card 1's views are not in a row (a cart between); card 3's are, with no cart after
    browsing = shop["first"]["browsing"]
    assert [(r["card"], r["match_end"], r["views"], r[FINAL]) for r in browsing] == [
        (3, at(30), 2, True)
    ]


def test_the_second_run_removes_creates_and_records_late(
    spark: SparkSession, shop: dict[str, Any]
) -> None:
    warehouse = shop["warehouse"]
    two = rows(spark, warehouse, "two_countries")
    # card 1 no longer left France; card 3 used its card in Italy 600 s after France
    assert [(r["card"], r["match_start"], r["match_end"], r["home"]) for r in two] == [
        (3, at(0), at(600), "FR")
    ]
    abandoned = rows(spark, warehouse, "abandoned")
    assert [(r["card"], r["match_start"]) for r in abandoned] == [(1, at(60))]  # card 2 bought
    late = spark.read.format("delta").load(warehouse.table("gold", LATE_EVENTS))
    removed = late.where(F.col("gold_table") == "two_countries").collect()
    assert [(r.change_type, r.window_start, r.group_values) for r in removed] == [
        ("match_removed", at(0), {"card": "1"})
    ]
    # card 3's view in Italy is its next event: the final match grows and moves its window
    browsing = rows(spark, warehouse, "browsing")
    assert [(r["card"], r["match_end"], r["views"]) for r in browsing] == [(3, at(600), 3)]
    changed = late.where(F.col("gold_table") == "browsing").collect()
    assert [(r.change_type, r.window_end) for r in changed] == [("match_changed", at(30))]
    spread = spark.read.format("delta").load(warehouse.table("gold", "spread"))
    silver = spark.read.format("delta").load(warehouse.table("silver", "uses"))
    want = gold_oracle.evaluate([r.asDict() for r in silver.collect()], SPREAD)
    assert sorted((r["card"], r["spread"], r["n"]) for r in spread.collect()) == sorted(
        (r["card"], r["spread"], r["n"]) for r in want
    )
    assert (3, 29, 3) in {(r["card"], r["spread"], r["n"]) for r in spread.collect()}


def test_each_match_raised_its_alert_once(spark: SparkSession, shop: dict[str, Any]) -> None:
    alerts = spark.read.format("delta").load(shop["warehouse"].table("gold", ALERTS_TABLE))
    raised = alerts.where(F.col("method") == "pattern").orderBy("key").collect()
    assert [(r.alert, r.key, r.row_key) for r in raised] == [
        ("two_countries", "1", match_id([1], [1])),  # raised, then its match went: kept
        ("two_countries", "3", match_id([3], [7])),
    ]


def test_verify_agrees_and_sees_a_tampered_match(spark: SparkSession, shop: dict[str, Any]) -> None:
    warehouse = shop["warehouse"]
    checks = {c.table: c for c in verify_warehouse(spark, warehouse, CONFIG)}
    assert all(check.differences == [] for check in checks.values()), checks
    assert {"two_countries", "abandoned", "browsing", "spread"} <= set(checks)
    assert checks["two_countries"].actual_rows == 1
    table = DeltaTable.forPath(spark, warehouse.table("gold", "abandoned"))
    version = table.history(1).first()["version"]
    table.delete()
    try:
        tampered = {c.table: c for c in verify_warehouse(spark, warehouse, CONFIG)}
        assert tampered["abandoned"].differences and tampered["abandoned"].actual_rows == 0
    finally:
        table.restoreToVersion(version)


def test_replay_rebuilds_the_same_matches(spark: SparkSession, shop: dict[str, Any]) -> None:
    warehouse = shop["warehouse"]

    def current() -> dict[str, list[dict[str, Any]]]:
        return {
            p.name: [
                {k: v for k, v in r.items() if k != "_finalized_at"}
                for r in rows(spark, warehouse, p.name)
            ]
            for p in CONFIG.patterns
        }

    before = current()
    replay(spark, warehouse, CONFIG)
    assert current() == before
    assert all(not c.differences for c in verify_warehouse(spark, warehouse, CONFIG))


def test_forget_removes_the_matches_of_a_forgotten_event(
    spark: SparkSession, shop: dict[str, Any]
) -> None:
    warehouse = shop["warehouse"]
    forget(spark, warehouse, CONFIG, "uses", {"event_id": 10})  # card 3's use in Italy
    assert rows(spark, warehouse, "two_countries") == []
    assert [r["card"] for r in rows(spark, warehouse, "abandoned")] == [1]
    assert [(r["card"], r["views"]) for r in rows(spark, warehouse, "browsing")] == [(3, 2)]
