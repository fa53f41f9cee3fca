"""A kill while a table is being created never blocks later runs (issue 47, defect 3).

Every table the pipeline keeps (bronze, silver, quarantine, gold, tombstones, truncations,
history log, event log, quality, ...) is put, before a run, in each state a kill during its
creation can leave: an empty directory, an empty ``_delta_log``, a ``_delta_log`` holding only
the temporary file of commit 0, data files without any commit. The run then succeeds, every
such table is created again, and silver and gold equal a run on a clean warehouse.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc.sources import SourceSpec
from lakehouse.run.pipeline import run_once
from lakehouse.run.state_check import table_dirs
from lakehouse_core.delta_io import committed_log, half_created
from lakehouse_core.layout import Warehouse
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from lakehouse_demo.settings import SHOP_CONFIG
from tests.logs import logged
from tests.warehouses import assert_same_tables

#: A run per state after the reference run: minutes each on a loaded machine.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

STATES = ("empty_dir", "empty_log", "temp_commit_only", "data_without_commit")


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("half-created-source")
    write_files(generate(WorkloadConfig(events=300, seed=47, malformed_rate=0.02)), source, 150)
    return source


@pytest.fixture(scope="module")
def reference(
    spark: SparkSession, workload: Path, tmp_path_factory: pytest.TempPathFactory
) -> Warehouse:
    warehouse = Warehouse.from_path(tmp_path_factory.mktemp("half-created-ref") / "wh")
    run_once(spark, SourceSpec("files", str(workload)), warehouse, SHOP_CONFIG)
    return warehouse


def seed(table: Path, like: Path, state: str) -> None:
    """Put ``table`` in ``state``, copying commit 0 and data files from the finished ``like``."""
    table.mkdir(parents=True)
    if state == "empty_dir":
        return
    if state == "data_without_commit":
        for part in like.glob("part-*.parquet"):
            shutil.copy(part, table / part.name)
        if not any(table.iterdir()):  # a table without data files: one foreign part file
            (table / "part-00000-half.snappy.parquet").write_bytes(b"PAR1")
        return
    log = table / "_delta_log"
    log.mkdir()
    if state == "temp_commit_only":
        first = like / "_delta_log" / f"{0:020d}.json"
        shutil.copy(first, log / f".{first.name}.0d4c1f9e-half.tmp")


@pytest.mark.parametrize("state", STATES)
def test_every_table_half_created_is_created_again(
    spark: SparkSession, workload: Path, reference: Warehouse, tmp_path: Path, state: str
) -> None:
    root = Path(reference.root)
    tables = [Path(p).relative_to(root) for p in table_dirs(spark, reference.root)]
    kinds = {str(t.parent) for t in tables}
    assert {"bronze", "silver", "gold", "_system/tombstones"} <= kinds, kinds
    assert Path("_system/event_log") in tables
    warehouse = Warehouse.from_path(tmp_path / "wh")
    for table in tables:
        seed(tmp_path / "wh" / table, root / table, state)
    if state != "empty_dir":
        assert all(half_created(spark, f"{warehouse.root}/{t}") for t in tables)

    with logged() as lines:
        run_once(spark, SourceSpec("files", str(workload)), warehouse, SHOP_CONFIG)

    for table in tables:
        assert committed_log(spark, f"{warehouse.root}/{table}"), table
    said = {line.split(":")[0] for line in lines if "interrupted its creation" in line}
    # the lease (lakehouse.run.lease) is claimed before the run looks: it is created again then
    swept = {str(t) for t in tables} - {"_system/lease"}
    assert said == (set() if state == "empty_dir" else swept), said
    assert_same_tables(spark, reference, warehouse)
    bronze = {
        name: spark.read.format("delta").load(warehouse.table("bronze", name)).count()
        for name in warehouse.table_names("bronze")
    }
    assert bronze == {
        name: spark.read.format("delta").load(reference.table("bronze", name)).count()
        for name in reference.table_names("bronze")
    }
