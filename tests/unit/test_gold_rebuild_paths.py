"""What rebuilding a changed gold declaration deletes (:mod:`lakehouse.run.rebuild`): the
table and the state the pipeline kept for it, as ``lakehouse drop`` deletes them, and the
checkpoint of the query it shares, but nothing of another declaration. Plain files, no Spark."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lakehouse.ops.drop import DropTarget, dropped_paths
from lakehouse.run.changes import declaration_changes
from lakehouse.run.declarations import PLAIN_FILES
from lakehouse.run.rebuild import rebuild_paths, rebuilt
from lakehouse_core.gold_tables import Window
from lakehouse_core.layout import Warehouse
from lakehouse_demo.settings import SHOP_CONFIG

pytestmark = pytest.mark.unit

REVENUE, SESSIONS = SHOP_CONFIG.gold_tables
#: Two declarations over orders: they share the query ``gold_shared_orders``.
SHARED = replace(
    SHOP_CONFIG, gold_tables=(REVENUE, replace(REVENUE, name="orders_per_hour"), SESSIONS)
)
HELD = [
    "gold/revenue_per_minute/_delta_log/00000000000000000000.json",
    "gold/orders_per_hour/_delta_log/00000000000000000000.json",
    "gold/user_sessions/_delta_log/00000000000000000000.json",
    "_system/watermarks/revenue_per_minute.json",
    "_system/watermarks/orders_per_hour.json",
    "_system/checkpoints/gold_shared_orders/commits/0",
    "_system/checkpoints/gold_shared_orders._lakehouse_app_id",
    "_system/checkpoints/gold_shared_orders.current",
    "_system/checkpoints/gold_shared_orders@2/commits/0",
    "_system/checkpoints/gold_revenue_per_minute.applied.json",
    "_system/checkpoints/gold_orders_per_hour.applied.json",
    "_system/checkpoints/gold_user_sessions/commits/0",
    "_system/checkpoints/gold_user_sessions._lakehouse_app_id",
]


def _warehouse(root: Path) -> Warehouse:
    for relative in HELD:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("{}")
    return Warehouse.from_path(root)


def _relative(root: Path, paths: list[str]) -> list[str]:
    return sorted(path.removeprefix(f"{root}/") for path in paths)


def test_a_member_of_a_shared_query_takes_the_query_checkpoint_with_it(tmp_path: Path) -> None:
    warehouse = _warehouse(tmp_path)
    wider = replace(REVENUE, window=Window("tumbling", size="5 minutes"))
    given = replace(SHARED, gold_tables=(wider, *SHARED.gold_tables[1:]))
    changes = rebuilt(declaration_changes(SHARED, given))
    assert [change.name for change in changes] == ["revenue_per_minute"]
    paths = rebuild_paths(warehouse, given, ["revenue_per_minute"], PLAIN_FILES.names)
    assert _relative(tmp_path, paths) == [
        "_system/checkpoints/gold_revenue_per_minute.applied.json",
        "_system/checkpoints/gold_shared_orders",
        "_system/checkpoints/gold_shared_orders._lakehouse_app_id",
        "_system/checkpoints/gold_shared_orders.current",
        "_system/checkpoints/gold_shared_orders@2",
        "_system/watermarks/revenue_per_minute.json",
        "gold/revenue_per_minute",
    ]
    # lakehouse drop deletes the same state of the table, and leaves the query to the others
    dropped = dropped_paths(warehouse, DropTarget("gold", "revenue_per_minute"), PLAIN_FILES.names)
    assert _relative(tmp_path, dropped) == [
        "_system/checkpoints/gold_revenue_per_minute.applied.json",
        "_system/watermarks/revenue_per_minute.json",
        "gold/revenue_per_minute",
    ]


def test_a_declaration_with_a_query_of_its_own_takes_only_its_own(tmp_path: Path) -> None:
    warehouse = _warehouse(tmp_path)
    paths = rebuild_paths(warehouse, SHARED, ["user_sessions"], PLAIN_FILES.names)
    assert _relative(tmp_path, paths) == [
        "_system/checkpoints/gold_user_sessions",
        "_system/checkpoints/gold_user_sessions._lakehouse_app_id",
        "gold/user_sessions",
    ]
