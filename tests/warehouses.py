"""A shop warehouse built incrementally, shared by the operations tests, and table comparisons.

The workload arrives in :data:`ARRIVALS` parts; after each, ``run_once`` processes what is new,
so silver and gold are the result of several micro-batches (MERGE updates, change-feed
retractions, many small files), as in production. It is built once per test run (under
xdist, by the first worker that asks, while the others wait for it) and tests work on copies.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from cdc.sources import SourceSpec
from gold.finality import FINALIZED_AT
from lakehouse.run.pipeline import run_once
from lakehouse_core.layout import LATE_EVENTS, QUARANTINE_TABLE, Warehouse
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from lakehouse_demo.settings import SHOP_CONFIG
from silver.verify import canonical_rows

EVENTS = 1500
ARRIVALS = 2
SEED = 11
#: Quarantine columns that record when a run quarantined a record, not what it was.
QUARANTINE_RUN_COLUMNS = ("_quarantined_at", "_batch_id")
#: Gold columns that record when a run's commits happened (silver's commit time and version),
#: which two runs of the same input do not share: a window's ``_finalized_at``, when an alert's
#: baseline was fitted (``fitted_at``), and when a late change was applied.
GOLD_RUN_COLUMNS = (FINALIZED_AT, "fitted_at")
LATE_EVENTS_RUN_COLUMNS = ("silver_version", "changed_at")


def incremental_warehouse(spark: SparkSession, factory: pytest.TempPathFactory) -> Path:
    """The root of the shared warehouse (build it if this run has not yet). Read only."""
    base = _run_temp(factory) / "ops-incremental"
    root = base / "warehouse"
    with (base.parent / "ops-incremental.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (base / "_COMPLETE").exists():
            _build(spark, base)
    return root


def _run_temp(factory: pytest.TempPathFactory) -> Path:
    """A temporary directory of this test run, shared by its xdist workers."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _build(spark: SparkSession, base: Path) -> None:
    shutil.rmtree(base, ignore_errors=True)
    parts = base / "parts"
    records = generate(WorkloadConfig(events=EVENTS, seed=SEED, malformed_rate=0.01))
    files = write_files(records, parts, lines_per_file=-(-EVENTS // ARRIVALS))
    source = base / "source"
    source.mkdir()
    for part in files:
        part.rename(source / part.name)
        run_once(
            spark,
            SourceSpec("files", str(source)),
            Warehouse.from_path(base / "warehouse"),
            SHOP_CONFIG,
        )
    (base / "_COMPLETE").touch()


def copy_warehouse(root: Path, target: Path) -> Warehouse:
    """A private copy of a warehouse (tables, checkpoints and state) at ``target``."""
    shutil.copytree(root, target)
    return Warehouse.from_path(target)


def load(spark: SparkSession, warehouse: Warehouse, layer: Any, name: str) -> DataFrame:
    return spark.read.format("delta").load(warehouse.table(layer, name))


def rows(frame: DataFrame) -> Counter[tuple[Any, ...]]:
    """The rows of ``frame`` as a multiset of canonical tuples (column order as in the frame)."""
    return Counter(_hashable(tuple(row.values())) for row in canonical_rows(frame))


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def comparable(spark: SparkSession, warehouse: Warehouse, layer: Any, name: str) -> DataFrame:
    """A table without the columns that depend on when it was computed."""
    return without_run_columns(layer, name, load(spark, warehouse, layer, name))


def without_run_columns(layer: str, name: str, frame: DataFrame) -> DataFrame:
    """``frame`` (the table ``layer.name``) without the columns that depend on when it was
    computed rather than on its input."""
    if layer == "silver" and name == QUARANTINE_TABLE:
        return frame.drop(*QUARANTINE_RUN_COLUMNS)
    if layer == "gold" and name == LATE_EVENTS:
        return frame.drop(*LATE_EVENTS_RUN_COLUMNS)
    if layer == "gold":
        return frame.drop(*GOLD_RUN_COLUMNS)
    return frame


def assert_same_tables(
    spark: SparkSession,
    want: Warehouse,
    got: Warehouse,
    layers: tuple[Any, ...] = ("silver", "gold"),
) -> list[str]:
    """Every table of ``layers`` exists in both and holds the same rows (schema included);
    return the names compared."""
    compared = []
    for layer in layers:
        names = want.table_names(layer)
        assert got.table_names(layer) == names, layer
        for name in names:
            expected = comparable(spark, want, layer, name)
            actual = comparable(spark, got, layer, name)
            assert actual.schema == expected.schema, f"{layer}.{name}: schema differs"
            want_rows, got_rows = rows(expected), rows(actual)
            assert got_rows == want_rows, (
                f"{layer}.{name}: missing {list((want_rows - got_rows).items())[:3]}, "
                f"extra {list((got_rows - want_rows).items())[:3]}"
            )
            compared.append(f"{layer}.{name}")
    return compared


def table_identity(spark: SparkSession, path: str) -> tuple[str, int]:
    """A Delta table's id and latest version: both stay the same while nothing writes it."""
    detail = DeltaTable.forPath(spark, path).detail().select("id").first()
    latest = DeltaTable.forPath(spark, path).history(1).select("version").first()
    assert detail is not None and latest is not None
    return str(detail.id), int(latest.version)


class Bundle:
    """A warehouse and its source, live (always at the same paths), a pristine copy to
    restore, the workload's later part to deliver, and a declarations file, all under
    ``base``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.live = base / "live"
        self.pristine = base / "pristine"
        self.later = base / "later"
        self.config = base / "pipeline.toml"

    @property
    def warehouse(self) -> Path:
        return self.live / "wh"

    @property
    def source(self) -> Path:
        return self.live / "source"

    def restore(self) -> None:
        shutil.rmtree(self.live, ignore_errors=True)
        shutil.copytree(self.pristine, self.live)

    def arrive(self) -> None:
        """The workload's later part arrives in the source (a run with nothing new may end
        before Spark starts)."""
        for part in self.later.iterdir():
            shutil.copy(part, self.source / part.name)
