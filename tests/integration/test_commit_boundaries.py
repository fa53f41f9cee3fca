"""Crash safety of the silver job at every commit boundary of a micro-batch, in process.

A micro-batch commits to up to four Delta tables (quarantine, truncation marks, silver,
tombstones; SCD type 2 adds the history log and table, whose crash and replay
``test_silver_history`` covers). For every commit it makes,
the batch is run with a crash injected right after that commit (:mod:`tests.faults`), then run
again with the same batch id, as Spark does after a restart. The result must be the tables of a
run that never crashed, with exactly as many versions per table: a commit that landed before
the crash is not made a second time. The last boundary is the one after every commit, before
the checkpoint: there the whole batch is replayed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

import silver.job
import silver.write
from cdc.records import Record
from lakehouse_core.config import TableSpec
from lakehouse_core.delta_io import table_exists
from lakehouse_core.layout import Warehouse
from silver.job import apply_batch, entity_tables
from silver.tables import EntityTables
from tests.faults import GUARDED_DML, CommitFaults, InjectedCrash
from tests.helpers import bronze_frame, customer_change, pg_key

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

TOPIC = "pg.public.customers"
SPEC = TableSpec(name="customers", topic=TOPIC)
APP_ID = "commit-boundaries"
#: The calls of the silver job that commit to a Delta table (ensure_table only creates or
#: widens a table, which a replay finds done).
COMMIT_SITES = [
    (silver.write, "append"),
    (silver.write, GUARDED_DML),  # delete_older_than, merge_silver
]


def change(offset: int, op: str, id_: int | None, commit: int, lsn: int, name: str = "n") -> Record:
    return customer_change(TOPIC, offset, op, id_, (commit, lsn), name)


FIRST = [
    change(0, "c", 1, 100, 10, "ann"),
    change(1, "c", 2, 100, 11, "bob"),
    change(2, "c", 3, 100, 12, "cy"),
    change(3, "d", 2, 100, 13),
    Record(TOPIC, 0, 4, 1_000, pg_key(2), None),
]
#: A batch that commits to every table: a malformed record, a truncate, events older than it,
#: upserts and a delete after it.
SECOND = [
    Record(TOPIC, 0, 5, 1_005, pg_key(9), "not json"),
    change(6, "t", None, 200, 5),
    change(7, "u", 3, 150, 1, "too late"),
    change(8, "c", 1, 200, 10, "ann again"),
    change(9, "c", 4, 200, 11, "dee"),
    change(10, "u", 4, 200, 12, "dee 2"),
    change(11, "c", 5, 200, 13, "eve"),
    change(12, "d", 5, 200, 14),
    Record(TOPIC, 0, 13, 1_013, pg_key(5), None),
]


def paths(tables: EntityTables) -> dict[str, str]:
    return {
        "silver": tables.silver,
        "tombstones": tables.tombstones,
        "truncations": tables.truncations,
        "quarantine": tables.quarantine,
    }


def state(spark: SparkSession, tables: EntityTables) -> dict[str, tuple[int, list[Any]]]:
    """Per table: its latest version and its rows (without the quarantine's run time)."""
    result = {}
    for name, path in paths(tables).items():
        if not table_exists(spark, path):
            result[name] = (-1, [])
            continue
        version = DeltaTable.forPath(spark, path).history(1).first()
        assert version is not None
        frame = spark.read.format("delta").load(path).drop("_quarantined_at")
        result[name] = (int(version.version), sorted(map(str, frame.collect())))
    return result


def test_a_crash_after_any_commit_then_a_replay_gives_the_uncrashed_tables(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = CommitFaults(monkeypatch, COMMIT_SITES)
    start = tmp_path / "after-first-batch"
    first = entity_tables(Warehouse(str(start)), SPEC)
    apply_batch(bronze_frame(spark, FIRST, 0), 0, SPEC, first, APP_ID)

    reference_root = tmp_path / "reference"
    shutil.copytree(start, reference_root)
    reference = entity_tables(Warehouse(str(reference_root)), SPEC)
    faults.arm(None)
    apply_batch(bronze_frame(spark, SECOND, 1), 1, SPEC, reference, APP_ID)
    boundaries = list(faults.calls)
    expected = state(spark, reference)
    assert set(boundaries) == {"append", "delete_older_than", "merge_silver"}
    assert all(version >= 0 for version, _ in expected.values()), expected

    replayed_sites = {}
    for boundary, site in enumerate(boundaries, start=1):
        root = tmp_path / f"crash-{boundary}"
        shutil.copytree(start, root)
        tables = entity_tables(Warehouse(str(root)), SPEC)
        faults.arm(boundary)
        with pytest.raises(InjectedCrash):
            apply_batch(bronze_frame(spark, SECOND, 1), 1, SPEC, tables, APP_ID)
        faults.arm(None)
        apply_batch(bronze_frame(spark, SECOND, 1), 1, SPEC, tables, APP_ID)
        replayed_sites[(boundary, site)] = list(faults.calls)
        assert state(spark, tables) == expected, f"crash after commit #{boundary} ({site})"

    # The replay after a crash right after the silver MERGE reaches that MERGE again (the batch
    # still has a delete the tombstone table lacks): its batch mark makes it a no-op.
    after_merge = next(b for b in replayed_sites if b[1] == "merge_silver")
    assert "merge_silver" in replayed_sites[after_merge]
