"""Which tables a warehouse holds that the declarations given lack (what replay, forget and
maintain refuse on), and which live tables a swap may retire."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakehouse.run.entities import missing_declarations, refusal
from lakehouse.run.swap import retirable, unreplaced_tables
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_demo.settings import SHOP_CLICKSTREAM, SHOP_CONFIG

pytestmark = pytest.mark.unit

CUSTOMERS = TableSpec("customers", "shop.public.customers")
ORDERS = TableSpec("orders", "shop.public.orders")
#: What ``make demo``'s warehouse holds.
HELD = [
    "silver.clickstream",
    "silver.customers",
    "silver.orders",
    "silver.quarantine",
    "gold.late_events",
    "gold.revenue_per_minute",
    "gold.user_sessions",
]


def test_the_config_the_pipeline_ran_with_lacks_nothing() -> None:
    specs = [SHOP_CLICKSTREAM, CUSTOMERS, ORDERS]
    assert missing_declarations(SHOP_CONFIG, specs, HELD, []) == []


def test_without_a_config_the_events_table_and_the_gold_tables_are_named() -> None:
    # No declaration: the clickstream's held table is taken for Debezium defaults.
    specs = [TableSpec("clickstream", "shop.clickstream"), CUSTOMERS, ORDERS]
    lacking = missing_declarations(PipelineConfig(), specs, HELD, ["shop.clickstream"])
    assert lacking == [
        "gold.revenue_per_minute (needs its [[gold]], [[patterns]], [[models]] or [[alerts]] "
        "entry)",
        "gold.user_sessions (needs its [[gold]], [[patterns]], [[models]] or [[alerts]] entry)",
        'silver.clickstream (needs topic shop.clickstream declared with format = "events")',
    ]


def test_a_renamed_entity_and_a_history_without_type_2_are_named() -> None:
    clicks = replace(SHOP_CLICKSTREAM, name="clicks")
    specs = [clicks, CUSTOMERS, ORDERS]
    config = replace(SHOP_CONFIG, tables=(clicks,), gold_tables=())
    held = ["silver.clickstream", "silver.customers", "silver.customers_history"]
    assert missing_declarations(config, specs, held, []) == [
        "silver.clickstream (needs a [[tables]] entry named clickstream for its topic)",
        "silver.customers_history (needs stored_as_scd_type = 2 on table customers)",
    ]
    typed = replace(CUSTOMERS, stored_as_scd_type=2)
    assert missing_declarations(config, [clicks, typed, ORDERS], held[1:], []) == []


def test_the_refusal_is_one_line_with_the_fix() -> None:
    line = refusal("replay", ["silver.clickstream (needs x)", "gold.user_sessions (needs y)"])
    assert "\n" not in line
    assert line.startswith("replay refused: ")
    assert "silver.clickstream (needs x), gold.user_sessions (needs y)" in line
    assert line.endswith("pass the --config the pipeline ran with.")


def test_a_swap_never_retires_a_layer_table_the_rebuild_did_not_make() -> None:
    install = ["silver/orders", "_system/checkpoints/silver_orders"]
    retire = [
        "silver/orders",
        "silver/clickstream",
        "gold/user_sessions",
        "_system/tombstones/clickstream",
        "_system/checkpoints/silver_clickstream",
    ]
    assert unreplaced_tables(install, retire) == ["gold/user_sessions", "silver/clickstream"]
    assert retirable(install, iter(retire)) == [
        "_system/checkpoints/silver_clickstream",
        "_system/tombstones/clickstream",
        "silver/orders",
    ]
