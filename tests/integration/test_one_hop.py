"""One hop from source to silver (:mod:`silver.one_hop`): each bronze micro-batch is applied to
silver in the same micro-batch, exactly once across crashes, and runs in one hop and in two
hops hand the silver checkpoint over without reading a bronze record twice."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

import lakehouse_core.quarantine
import silver.job
import silver.one_hop
import silver.write
from cdc.records import Record
from cdc.sources import SourceSpec, read_source
from lakehouse.ops.audit import verify_warehouse
from lakehouse.run.pipeline import run_from_bronze, run_once, start_one_hop
from lakehouse.run.summary import RunSummary
from lakehouse_core import checkpoints
from lakehouse_core.delta_io import current_version, table_exists
from lakehouse_core.errors import LakehouseError
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import Trigger, await_query
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from lakehouse_demo.settings import SHOP_CONFIG
from tests.faults import GUARDED_DML, CommitFaults
from tests.helpers import customer_change, deliver, pg_key
from tests.warehouses import assert_same_tables

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

CONFIG = SHOP_CONFIG  # the shop workload's settings: its clickstream is declared
TOPIC = "pg.public.customers"


def hop(spark: SparkSession, source: Path, warehouse: Warehouse) -> RunSummary:
    """Everything in ``source`` through bronze and, in the same micro-batches, silver."""
    summary = RunSummary()
    frame = read_source(spark, SourceSpec("files", str(source)))
    await_query(start_one_hop(spark, frame, warehouse, CONFIG, Trigger(), summary=summary))
    return summary


def silver_read(summary: RunSummary) -> int:
    """Bronze records the run's silver batches read."""
    return sum(counts.read for counts in summary.tables.values())


def appended(summary: RunSummary) -> int:
    """Records the run appended to bronze tables of entities."""
    return sum(n for topic, n in summary.ingested.items() if not topic.startswith("_"))


def test_runs_in_one_hop_and_in_two_read_each_bronze_record_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    """One hop, two hops, one hop again over three arrivals: silver reads exactly the records
    each run appended (the checkpoint is handed over both ways), and the warehouse equals one
    run in two hops over everything, quarantine included."""
    records = generate(WorkloadConfig(events=90, seed=11, malformed_rate=0.05))
    parts = write_files(records, tmp_path / "parts", lines_per_file=len(records) // 3 + 1)
    assert len(parts) == 3
    source = tmp_path / "source"
    source.mkdir()
    warehouse = Warehouse(str(tmp_path / "hops"))

    parts[0].rename(source / parts[0].name)
    first = hop(spark, source, warehouse)
    assert silver_read(first) == appended(first) > 0
    for topic in (t for t in first.ingested if not t.startswith("_")):
        spec = CONFIG.spec_for_topic(topic)
        place = checkpoints.current(spark, warehouse.checkpoint(f"silver_{spec.name}"))
        bronze = warehouse.table("bronze", table_name_for_topic(topic))
        assert place.starting_version == current_version(spark, bronze) + 1, topic

    parts[1].rename(source / parts[1].name)
    second = run_once(spark, SourceSpec("files", str(source)), warehouse, CONFIG).summary
    assert silver_read(second) == appended(second) > 0

    parts[2].rename(source / parts[2].name)
    third = hop(spark, source, warehouse)
    assert silver_read(third) == appended(third) > 0
    run_from_bronze(spark, warehouse, CONFIG)  # nothing left for silver queries to read
    checks = verify_warehouse(spark, warehouse, CONFIG)
    assert checks and all(check.ok for check in checks), checks

    reference = Warehouse(str(tmp_path / "reference"))  # silver only: no gold to compute
    run_once(spark, SourceSpec("files", str(source)), reference, replace(CONFIG, gold_tables=()))
    assert_same_tables(spark, reference, warehouse, layers=("silver",))


FIRST = [
    customer_change(TOPIC, 0, "c", 1, (100, 10), "ann"),
    customer_change(TOPIC, 1, "c", 2, (100, 11), "bob"),
]
#: A batch that commits to every silver table: a malformed record, upserts and a delete.
SECOND = [
    Record(TOPIC, 0, 2, 1_005, pg_key(9), "not json"),
    customer_change(TOPIC, 3, "u", 1, (200, 20), "ann 2"),
    customer_change(TOPIC, 4, "c", 3, (200, 21), "cy"),
    customer_change(TOPIC, 5, "d", 2, (200, 22)),
    Record(TOPIC, 0, 6, 1_006, pg_key(2), None),
]
#: The commits of a hop's silver work, and the checkpoint hand-over after it.
SITES = [
    (lakehouse_core.quarantine, "append"),
    (silver.write, GUARDED_DML),
    (silver.write, "append"),
    (silver.one_hop.checkpoints, "point"),
]


def state(spark: SparkSession, root: Path) -> dict[str, tuple[int, list[str]]]:
    """Per table of the warehouse (tombstones too): its latest version and its rows (without
    run times)."""
    tables = sorted(
        p.parent
        for p in root.rglob("_delta_log")
        if "_system" not in str(p) or "tombstones" in str(p)
    )
    result = {}
    for path in tables:
        if not table_exists(spark, str(path)):
            continue
        latest = DeltaTable.forPath(spark, str(path)).history(1).first()
        assert latest is not None
        frame = spark.read.format("delta").load(str(path))
        frame = frame.drop("_quarantined_at", "_ingested_at")
        result[str(path.relative_to(root))] = (
            int(latest.version),
            sorted(map(str, frame.collect())),
        )
    return result


def test_a_crash_after_any_commit_of_a_hop_then_a_restart_gives_the_uncrashed_tables(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after each commit of a hop's micro-batch (or after its hand-over, before the
    checkpoint): the restarted query does the batch again and every table ends as in a run
    that never crashed, with as many versions: nothing is applied or quarantined twice."""
    faults = CommitFaults(monkeypatch, SITES)
    source = tmp_path / "source"
    source.mkdir()
    start = tmp_path / "after-first-batch"
    deliver(source, 0, FIRST)
    hop(spark, source, Warehouse(str(start)))
    deliver(source, 1, SECOND)

    def run(root: Path) -> Any:
        return hop(spark, source, Warehouse(str(root)))

    reference = tmp_path / "reference"
    shutil.copytree(start, reference)
    faults.arm(None)
    run(reference)
    boundaries = list(faults.calls)
    assert boundaries == ["append", "merge_silver", "append", "point"], boundaries
    expected = state(spark, reference)

    for boundary, site in enumerate(boundaries, start=1):
        root = tmp_path / f"crash-{boundary}"
        shutil.copytree(start, root)
        faults.arm(boundary)
        with pytest.raises(LakehouseError, match="Streaming query bronze failed"):
            run(root)
        assert faults.crashed[-1] == site
        faults.arm(None)
        run(root)
        assert state(spark, root) == expected, f"crash after commit #{boundary} ({site})"

    # Crashed twice in the same batch (the restart's hop dies too, before its hand-over),
    # then a run in two hops: silver still gets the batch, from the unfinished batch's place.
    root = tmp_path / "crash-twice"
    shutil.copytree(start, root)
    for _ in range(2):
        faults.arm(2)  # after the silver MERGE (the second attempt's is skipped, then crashes)
        with pytest.raises(LakehouseError, match="Streaming query bronze failed"):
            run(root)
    faults.arm(None)
    run_once(spark, SourceSpec("files", str(source)), Warehouse(str(root)), CONFIG)
    twice = state(spark, root)
    for table in ("silver/customers", "_system/tombstones/customers"):
        assert twice.get(table, (-1, []))[1] == expected[table][1], table
