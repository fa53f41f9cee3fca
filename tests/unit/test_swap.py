"""The staging swap of replay: complete or not at all, and finished after an interruption."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse.run import swap

pytestmark = pytest.mark.unit


def put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "replay" not in p.parts
    }


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """A live warehouse with an entity's tables and state, and a sealed rebuild of them."""
    put(tmp_path / "bronze/t/data", "bronze")
    put(tmp_path / "silver/orders/data", "old orders")
    put(tmp_path / "silver/customers/data", "customers")
    put(tmp_path / "_system/tombstones/orders/data", "old tombstones")
    put(tmp_path / "_system/checkpoints/silver_orders/commits/0", "old checkpoint")
    put(tmp_path / "_system/checkpoints/silver_orders._lakehouse_app_id", "old id")
    staging = swap.prepare(tmp_path)
    put(staging / "silver/orders/data", "new orders")
    put(staging / "_system/checkpoints/silver_orders/commits/0", "new checkpoint")
    put(staging / "_system/checkpoints/silver_orders._lakehouse_app_id", "new id")
    retire = [
        "silver/orders",
        "_system/tombstones/orders",
        "_system/checkpoints/silver_orders",
        "_system/checkpoints/silver_orders._lakehouse_app_id",
    ]
    swap.seal(staging, retire)
    return tmp_path


EXPECTED = {
    "bronze/t/data": "bronze",
    "silver/customers/data": "customers",
    "silver/orders/data": "new orders",
    "_system/checkpoints/silver_orders/commits/0": "new checkpoint",
    "_system/checkpoints/silver_orders._lakehouse_app_id": "new id",
}


def test_swap_installs_the_rebuild_and_retires_stale_state(warehouse: Path) -> None:
    installed = swap.swap(warehouse)
    assert tree(warehouse) == EXPECTED
    assert "silver/orders" in installed
    assert not (warehouse / swap.STAGING).exists() and not (warehouse / swap.RETIRED).exists()


def test_an_interrupted_swap_is_finished_by_recover(warehouse: Path) -> None:
    # The crash came after the live table was moved aside, before the staged one moved in.
    (warehouse / swap.RETIRED / "silver").mkdir(parents=True)
    (warehouse / "silver/orders").rename(warehouse / swap.RETIRED / "silver/orders")
    assert swap.recover(warehouse) is True
    assert tree(warehouse) == EXPECTED


def test_an_unsealed_rebuild_is_discarded(tmp_path: Path) -> None:
    put(tmp_path / "silver/orders/data", "live")
    staging = swap.prepare(tmp_path)
    put(staging / "silver/orders/data", "half built")
    assert swap.recover(tmp_path) is False
    assert tree(tmp_path) == {"silver/orders/data": "live"}
    assert not (tmp_path / swap.STAGING).exists()


def test_a_swap_keeps_a_live_table_the_rebuild_did_not_make(tmp_path: Path) -> None:
    put(tmp_path / "silver/orders/data", "old orders")
    put(tmp_path / "silver/clickstream/data", "clicks")
    put(tmp_path / "_system/tombstones/clickstream/data", "old tombstones")
    staging = swap.prepare(tmp_path)
    put(staging / "silver/orders/data", "new orders")
    swap.seal(staging, ["silver/orders", "silver/clickstream", "_system/tombstones/clickstream"])
    swap.swap(tmp_path)
    assert tree(tmp_path) == {
        "silver/orders/data": "new orders",
        "silver/clickstream/data": "clicks",
    }
