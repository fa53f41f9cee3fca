"""What a change of declarations implies (:mod:`lakehouse.run.changes`): per declaration added,
removed or changed, the effect a run with the new declarations has, and the changes it
refuses (and that a run refuses them before it records anything). No Spark."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lakehouse.declare import cdc_table, gold_table, measure, pipeline_config, tumbling
from lakehouse.run.changes import (
    Change,
    declaration_changes,
    refusal,
    replay_needed,
)
from lakehouse.run.declarations import (
    held_tables,
    newest_recorded,
    record_declarations,
    refuse_unrebuilt,
)
from lakehouse_core import storage
from lakehouse_core.config import PipelineConfig, QualitySpec
from lakehouse_core.errors import ConfigError
from lakehouse_core.gold_tables import GoldTable
from lakehouse_core.layout import Warehouse
from lakehouse_demo.job import DEMO_CONFIG
from lakehouse_demo.settings import SHOP_CONFIG

pytestmark = pytest.mark.unit


def _gold(config: PipelineConfig, name: str) -> GoldTable:
    return next(table for table in config.gold_tables if table.name == name)


def _one(changes: list[Change]) -> Change:
    assert len(changes) == 1, [change.line() for change in changes]
    return changes[0]


def test_the_same_declarations_change_nothing() -> None:
    assert declaration_changes(DEMO_CONFIG, DEMO_CONFIG) == []
    assert declaration_changes(PipelineConfig(), PipelineConfig()) == []


def test_new_gold_tables_and_patterns_backfill_from_silver() -> None:
    changes = declaration_changes(SHOP_CONFIG, DEMO_CONFIG)
    added = {change.name: change for change in changes if change.action == "added"}
    assert set(added) == {
        "revenue_by_tier",
        "spend_last_hour",
        "order_blocks",
        "order_attribution",
        "order_bursts",
        "abandoned_carts",
        "big_orders",
    }
    others = [change.what for change in changes if change.action != "added"]
    assert others == ["changed [quality] (packaged_suites)"]  # the demo's own suites
    bursts = added["order_bursts"]
    assert (bursts.kind, bursts.effect) == ("pattern", "backfill")
    assert bursts.line() == (
        "added pattern order_bursts: new: the run backfills gold.order_bursts from silver.orders"
    )
    # the shop ran one declaration over orders (a query of its own): the shared query is new
    assert added["spend_last_hour"].line() == (
        "added gold spend_last_hour: new: the run backfills gold.spend_last_hour from silver.orders"
    )


def test_a_new_member_of_a_running_shared_query_backfills_when_silver_next_changes() -> None:
    spend = _gold(DEMO_CONFIG, "spend_last_hour")
    before = replace(
        DEMO_CONFIG, gold_tables=tuple(t for t in DEMO_CONFIG.gold_tables if t != spend)
    )
    change = _one(declaration_changes(before, DEMO_CONFIG))
    assert change.effect == "backfill"
    assert change.says.endswith("(in its first micro-batch: when silver.orders next changes)")


def test_a_changed_gold_table_names_its_settings_and_how_to_rebuild_it() -> None:
    revenue = _gold(SHOP_CONFIG, "revenue_per_minute")
    wider = gold_table(
        "revenue_per_minute",
        source="orders",
        event_time=revenue.event_time,
        window=tumbling("5 minutes"),
        measures=[measure.sum("total", name="revenue")],
    )
    given = replace(
        SHOP_CONFIG,
        gold_tables=tuple(wider if t is revenue else t for t in SHOP_CONFIG.gold_tables),
    )
    change = _one(declaration_changes(SHOP_CONFIG, given))
    assert (change.kind, change.action, change.effect) == ("gold", "changed", "rebuild")
    assert "window" in change.settings and "measures" in change.settings
    assert change.what.startswith("changed gold revenue_per_minute (window, measures")
    assert change.says == (
        "the run rebuilds gold.revenue_per_minute from silver.orders: it drops the table with "
        "its state and backfills it as a new declaration; no other table is rewritten"
    )
    assert replay_needed([change]) == []


def test_a_changed_filter_is_named() -> None:
    revenue = _gold(SHOP_CONFIG, "revenue_per_minute")
    filtered = replace(revenue, filter="total > 0")
    given = replace(SHOP_CONFIG, gold_tables=(filtered, *SHOP_CONFIG.gold_tables[1:]))
    change = _one(declaration_changes(SHOP_CONFIG, given))
    assert (change.settings, change.effect) == (("filter",), "rebuild")


def test_a_pattern_changed_in_its_steps_is_rebuilt_and_in_its_alert_alone_is_not() -> None:
    bursts = next(p for p in DEMO_CONFIG.patterns if p.name == "order_bursts")
    assert bursts.alert

    def with_bursts(**settings: Any) -> PipelineConfig:
        changed = replace(bursts, **settings)
        others = tuple(p for p in DEMO_CONFIG.patterns if p is not bursts)
        return replace(DEMO_CONFIG, patterns=(changed, *others))

    quiet = _one(declaration_changes(DEMO_CONFIG, with_bursts(alert=False)))
    assert (quiet.kind, quiet.effect, quiet.settings) == ("pattern", "from_now", ("alert",))
    assert quiet.says == (
        "the run raises no alert for the matches it writes to gold.order_bursts from now on; "
        "the matches it holds are not rebuilt and the alerts raised stay"
    )
    steps = (replace(bursts.steps[0], condition="total > 80"),)
    both = _one(declaration_changes(DEMO_CONFIG, with_bursts(steps=steps, alert=False)))
    assert (both.effect, both.settings) == ("rebuild", ("steps", "alert"))


@pytest.mark.parametrize(
    "setting",
    [
        {"keys": ("event_id", "user_id")},
        {"sequence_by": ("event_id",)},
        {"stored_as_scd_type": 2},
        {"topic": "shop.clicks"},
    ],
)
def test_a_changed_silver_contract_needs_a_replay_of_that_table(setting: dict[str, Any]) -> None:
    clicks = SHOP_CONFIG.tables[0]
    given = replace(SHOP_CONFIG, tables=(replace(clicks, **setting),))
    change = _one(declaration_changes(SHOP_CONFIG, given))
    assert (change.kind, change.effect, change.settings) == ("table", "replay", tuple(setting))
    assert "lakehouse replay --table clickstream (a run refuses until then)" in change.says
    assert replay_needed([change]) == [change]
    assert replay_needed([change], present=["orders"]) == []
    line = refusal([change])
    assert line.startswith(
        f"The declarations change how silver.clickstream merges its records (changed table "
        f"clickstream ({next(iter(setting))}))"
    )
    assert "lakehouse replay --table clickstream" in line and "\n" not in line


def test_another_silver_setting_applies_from_now_on() -> None:
    clicks = SHOP_CONFIG.tables[0]
    given = replace(SHOP_CONFIG, tables=(replace(clicks, apply_as_deletes="action = 'x'"),))
    change = _one(declaration_changes(SHOP_CONFIG, given))
    assert (change.effect, change.settings) == ("from_now", ("apply_as_deletes",))
    assert "records it reads from now on" in change.says


def test_removed_declarations_leave_their_tables_orphaned() -> None:
    nothing = replace(PipelineConfig(), quality=DEMO_CONFIG.quality)
    changes = declaration_changes(DEMO_CONFIG, nothing)
    assert {change.action for change in changes} == {"removed"}
    assert {change.effect for change in changes} == {"orphaned"}
    by_name = {change.name: change for change in changes}
    assert by_name["user_sessions"].line() == (
        "removed gold user_sessions: gold.user_sessions stays in place, no longer updated "
        "(orphaned); to remove it: lakehouse drop gold.user_sessions --yes"
    )
    clicks = by_name["clickstream"]
    assert clicks.says.startswith(
        "silver.clickstream stays in place (orphaned): the run no longer applies topic "
        "shop.clickstream with its declaration"
    )
    assert clicks.says.endswith("lakehouse drop silver.clickstream --yes")
    assert "gold.alerts" in by_name["big_orders"].says


def test_tables_and_settings_declared_in_python_compare_like_toml() -> None:
    orders = cdc_table("orders", topic="shop.public.orders")
    before = pipeline_config(tables=[orders])
    after = pipeline_config(
        tables=[cdc_table("orders", topic="shop.public.orders", stored_as_scd_type=2)],
        quality=QualitySpec(),
    )
    assert _one(declaration_changes(before, after)).effect == "replay"
    added = _one(declaration_changes(PipelineConfig(), before))
    assert added.line() == (
        "added table orders: new: the run makes silver.orders from every record bronze holds "
        "of topic shop.public.orders"
    )
    history = cdc_table("orders", topic="shop.public.orders", stored_as_scd_type=2)
    declared = pipeline_config(tables=[history])
    assert _one(declaration_changes(PipelineConfig(), declared)).effect == "backfill"
    made = _one(declaration_changes(PipelineConfig(), declared, held=["orders"]))
    assert (made.action, made.effect, made.settings) == ("added", "replay", ("stored_as_scd_type",))
    assert made.says == (
        "silver.orders was merged with the Debezium defaults, from which the declared "
        "stored_as_scd_type differs: it must be rebuilt from bronze: lakehouse replay --table "
        "orders (a run refuses until then)"
    )
    keyed = pipeline_config(tables=[cdc_table("orders", topic="shop.public.orders", keys="id")])
    assert _one(declaration_changes(PipelineConfig(), keyed, ["orders"])).effect == "backfill"
    settings = declaration_changes(before, replace(before, quality=QualitySpec(suites="/x")))
    assert _one(settings).what == "changed [quality] (suites)"


@pytest.fixture
def plain_storage(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hadoop's writes as plain file writes (a local warehouse), so no Spark is needed."""

    def write_text(_spark: object, uri: str, text: str) -> None:
        Path(uri).parent.mkdir(parents=True, exist_ok=True)
        Path(uri).write_text(text, encoding="utf-8")

    monkeypatch.setattr(storage, "write_text", write_text)


@pytest.mark.usefixtures("plain_storage")
def test_a_run_refuses_a_changed_contract_of_a_held_silver_table(tmp_path: Path) -> None:
    warehouse = Warehouse.from_path(tmp_path)
    clicks = SHOP_CONFIG.tables[0]
    rekeyed = replace(SHOP_CONFIG, tables=(replace(clicks, keys=("event_id", "user_id")),))
    assert record_declarations(None, warehouse, SHOP_CONFIG, "run --once") == 1  # type: ignore[arg-type]
    # silver.clickstream not made yet: nothing merged under the old keys
    assert record_declarations(None, warehouse, rekeyed, "run --once") == 2  # type: ignore[arg-type]
    (tmp_path / "silver" / "clickstream" / "_delta_log").mkdir(parents=True)
    assert held_tables(warehouse, "silver") == ["clickstream"]
    with pytest.raises(ConfigError) as refused:
        record_declarations(None, warehouse, SHOP_CONFIG, "run --once")  # type: ignore[arg-type]
    assert str(refused.value).startswith(
        "The declarations change how silver.clickstream merges its records (changed table "
        "clickstream (keys)): the rows it holds were merged under the old declarations"
    )
    assert "first: lakehouse replay --table clickstream (given the same declarations)" in str(
        refused.value
    )
    with pytest.raises(ConfigError):
        record_declarations(None, warehouse, SHOP_CONFIG, "demo")  # type: ignore[arg-type]
    newest = newest_recorded(warehouse)
    assert newest is not None and newest.version == 2  # nothing written
    assert record_declarations(None, warehouse, SHOP_CONFIG, "replay") == 3  # type: ignore[arg-type]
    assert record_declarations(None, warehouse, SHOP_CONFIG, "run --once") is None  # type: ignore[arg-type]


@pytest.mark.usefixtures("plain_storage")
def test_a_run_logs_what_each_change_implies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse = Warehouse.from_path(tmp_path)
    record_declarations(None, warehouse, SHOP_CONFIG, "run --once")  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="lakehouse.run.declarations"):
        assert record_declarations(None, warehouse, DEMO_CONFIG, "run --once") == 2  # type: ignore[arg-type]
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 8
    assert (
        "declarations: added gold spend_last_hour: new: the run backfills gold.spend_last_hour "
        "from silver.orders"
    ) in said


@pytest.mark.usefixtures("plain_storage")
def test_a_replay_refuses_declarations_that_change_a_table_it_does_not_rebuild(
    tmp_path: Path,
) -> None:
    warehouse = Warehouse.from_path(tmp_path)
    orders = cdc_table("orders", topic="shop.public.orders")
    both = replace(SHOP_CONFIG, tables=(*SHOP_CONFIG.tables, orders))
    record_declarations(None, warehouse, both, "run --once")  # type: ignore[arg-type]
    for name in ("orders", "clickstream"):
        (tmp_path / "silver" / name / "_delta_log").mkdir(parents=True)
    clicks = replace(SHOP_CONFIG.tables[0], keys=("event_id", "user_id"))
    changed = replace(both, tables=(clicks, replace(orders, stored_as_scd_type=2)))
    with pytest.raises(ConfigError) as refused:
        refuse_unrebuilt(None, warehouse, changed, ["orders"])  # type: ignore[arg-type]
    assert str(refused.value) == (
        "replay of orders refused: the declarations given also change how silver.clickstream "
        "merges its records (changed table clickstream (keys)), which this replay does not "
        "rebuild: replay them together (lakehouse replay rebuilds every table). Nothing was "
        "changed."
    )
    refuse_unrebuilt(None, warehouse, changed, ["orders", "clickstream"])  # type: ignore[arg-type]
    refuse_unrebuilt(None, warehouse, both, ["orders"])  # type: ignore[arg-type]
