"""Which entities a replay of one table rebuilds: a gold table that reads it is rebuilt, and so
are the other silver tables that gold table reads (its checkpoint holds versions of each)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakehouse.run.entities import dependent_gold, rebuilt_together
from lakehouse_demo.job import DEMO_CONFIG, ORDER_ATTRIBUTION, REVENUE_BY_TIER
from lakehouse_demo.settings import SHOP_CONFIG

pytestmark = pytest.mark.unit

PRESENT = ["clickstream", "customers", "orders"]


def test_a_table_no_gold_table_joins_is_rebuilt_alone() -> None:
    assert rebuilt_together(SHOP_CONFIG, ["customers"], PRESENT) == ["customers"]
    assert rebuilt_together(SHOP_CONFIG, ["orders"], PRESENT) == ["orders"]


def test_an_enrichment_join_takes_its_source_and_its_entity_together() -> None:
    config = replace(SHOP_CONFIG, gold_tables=(*SHOP_CONFIG.gold_declarations, REVENUE_BY_TIER))
    assert rebuilt_together(config, ["customers"], PRESENT) == ["customers", "orders"]
    assert rebuilt_together(config, ["orders"], PRESENT) == ["customers", "orders"]
    assert rebuilt_together(config, ["clickstream"], PRESENT) == ["clickstream"]
    assert "revenue_by_tier" in {job.table for job in dependent_gold(config, ["customers"])}


def test_joins_chain_and_absent_entities_are_left_out() -> None:
    # customers -> revenue_by_tier -> orders -> order_attribution -> clickstream
    assert rebuilt_together(DEMO_CONFIG, ["customers"], PRESENT) == PRESENT
    stream_join_only = replace(SHOP_CONFIG, gold_tables=(ORDER_ATTRIBUTION,))
    assert rebuilt_together(stream_join_only, ["clickstream"], PRESENT) == [
        "clickstream",
        "orders",
    ]
    assert rebuilt_together(stream_join_only, ["clickstream"], ["clickstream"]) == ["clickstream"]
