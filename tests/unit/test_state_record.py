"""The record of each table's newest version, read without Spark: a table whose log lost
commits since the record is named; a table of another id (a replay's), a dropped table and a
damaged record are not (issue 61, item 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakehouse.run.state_check import VERSIONS_FILE, local_tables_behind

pytestmark = pytest.mark.unit


def commit(table: Path, version: int, table_id: str) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    actions: list[dict[str, object]] = [{"commitInfo": {"operation": "WRITE"}}]
    if version == 0:
        actions.append({"metaData": {"id": table_id, "format": {"provider": "parquet"}}})
    (log / f"{version:020d}.json").write_text("\n".join(map(json.dumps, actions)) + "\n")
    checksum = {"metadata": {"id": table_id}, "numFiles": 1}
    (log / f"{version:020d}.crc").write_text(json.dumps(checksum))


def record(root: Path, tables: dict[str, tuple[str, int]]) -> None:
    recorded = {path: {"id": i, "version": v} for path, (i, v) in tables.items()}
    (root / "_system").mkdir(parents=True, exist_ok=True)
    text = json.dumps({"recorded": "2026-01-01T00:00:00+00:00", "tables": recorded})
    (root / "_system" / VERSIONS_FILE).write_text(text)


def lose(table: Path, version: int) -> None:
    for suffix in ("json", "crc"):
        (table / "_delta_log" / f"{version:020d}.{suffix}").unlink()


def test_a_table_that_lost_its_newest_commit_is_named(tmp_path: Path) -> None:
    for version in range(3):
        commit(tmp_path / "silver" / "orders", version, "id-orders")
        commit(tmp_path / "_system" / "tombstones" / "orders", version, "id-tombs")
    record(
        tmp_path, {"silver/orders": ("id-orders", 2), "_system/tombstones/orders": ("id-tombs", 2)}
    )
    assert local_tables_behind(tmp_path) == []
    lose(tmp_path / "silver" / "orders", 2)
    lose(tmp_path / "_system" / "tombstones" / "orders", 2)
    assert local_tables_behind(tmp_path) == ["silver.orders", "_system.tombstones.orders"]


def test_the_id_is_read_from_the_newest_checksum_once_the_first_commit_is_cleaned_up(
    tmp_path: Path,
) -> None:
    table = tmp_path / "gold" / "revenue"
    for version in range(4):
        commit(table, version, "id-gold")
    lose(table, 0)
    lose(table, 3)
    record(tmp_path, {"gold/revenue": ("id-gold", 3)})
    assert local_tables_behind(tmp_path) == ["gold.revenue"]


def test_another_table_a_dropped_table_or_a_damaged_record_is_not_named(tmp_path: Path) -> None:
    commit(tmp_path / "silver" / "customers", 0, "id-rebuilt")  # a replay installed a new table
    record(tmp_path, {"silver/customers": ("id-old", 5), "gold/dropped": ("id-gone", 3)})
    assert local_tables_behind(tmp_path) == []
    (tmp_path / "_system" / VERSIONS_FILE).write_text('{"tables": {"silver/cust')
    assert local_tables_behind(tmp_path) == []
    (tmp_path / "_system" / VERSIONS_FILE).unlink()
    assert local_tables_behind(tmp_path) == []
