"""``lakehouse status`` reads a warehouse without Spark: run as a new process, it starts no
JVM (no child process at all) and its ``--json`` equals a plain-Python model of a warehouse
written with ``deltalake`` (counts from the Delta logs' statistics and commit metrics, the
silver query's place from its checkpoint, the newest batch and failure per query from the
event log, the quality sums); in a pipe at 80 columns it prints plain aligned text whose
every table and expectation name is whole."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from benchmarks.status_bench import Expected, synthetic_warehouse
from lakehouse.ops.status import pipeline_status, status_json
from lakehouse_core.layout import Warehouse
from lakehouse_demo.settings import SHOP_CONFIG
from tests.cli import SHOP_TOML

pytestmark = pytest.mark.integration

#: Runs ``lakehouse status`` in a process of its own, then says whether a JVM gateway exists
#: and which processes are its children.
PROBE = """
import json, os, sys
from pathlib import Path
from lakehouse.cli import main
code = 0
try:
    main(sys.argv[1:])
except SystemExit as exit_:
    code = exit_.code
from pyspark import SparkContext
me = str(os.getpid())
children = []
for stat in Path("/proc").glob("[0-9]*/stat"):
    try:
        fields = stat.read_text().rpartition(")")[2].split()
    except OSError:
        continue
    if fields[1] == me:
        children.append(stat.parent.name)
print(json.dumps({"code": code, "gateway": SparkContext._gateway is not None,
                  "children": children}), file=sys.stderr)
"""


def run_status(*args: str | Path, columns: int | None = None) -> tuple[str, dict[str, Any]]:
    """``lakehouse status ARGS`` in a new process (its stdout a pipe): what it printed, and
    the probe's findings after it."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "PYSPARK_GATEWAY_PORT")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "status", *map(str, args)],
        capture_output=True, text=True, check=False, env=env, timeout=300,
    )  # fmt: skip
    probe = json.loads(done.stderr.strip().splitlines()[-1])
    assert probe["code"] in (0, None), done.stderr
    return done.stdout, probe


def check_against_model(status: dict[str, Any], expected: Expected) -> None:
    orders = next(s for s in status["silver"] if s["table"] == "silver.orders")
    assert orders["bronze_table"] == "bronze.shop_public_orders"
    assert orders["bronze_records"] == expected.bronze_records
    assert orders["bronze_version"] == expected.bronze_version
    assert orders["applied_version"] == expected.applied_version
    assert orders["records_behind"] == expected.records_behind
    assert orders["rows"] == expected.rows
    newest = expected.newest_event.isoformat() if expected.newest_event else None
    assert orders["newest_applied_event"] == newest
    assert orders["quarantined"] == expected.quarantined
    assert status["event_log_rows"] == expected.event_log_rows
    batches = {"bronze": status["bronze_last_batch"], "silver_orders": orders["last_batch"]}
    for query, batch in batches.items():
        assert batch == expected.last_batches.get(query), query
    assert [(f["query"], f["at"]) for f in status["failing"]] == sorted(expected.failing)
    assert all(f["table"] == f["query"].replace("_", ".", 1) for f in status["failing"])
    assert status["quality"] == expected.quality


def test_status_starts_no_jvm_and_equals_the_model(tmp_path: Path) -> None:
    expected = synthetic_warehouse(tmp_path / "wh", silver_rows=2345, seed=11)
    printed, probe = run_status("--warehouse", tmp_path / "wh", "--json", "--config", SHOP_TOML)
    assert probe == {"code": 0, "gateway": False, "children": []}
    check_against_model(json.loads(printed), expected)


@pytest.mark.parametrize("seed", range(6))
def test_status_equals_the_model(tmp_path: Path, seed: int) -> None:
    """In this process (no Spark used): random warehouses, empty silver tables included."""
    rows = random.Random(seed).choice([0, 1, 999, 4321])
    expected = synthetic_warehouse(tmp_path / "wh", silver_rows=rows, seed=seed)
    report = pipeline_status(
        None, Warehouse.from_path(tmp_path / "wh"), SHOP_CONFIG, datetime.now(UTC)
    )
    check_against_model(status_json(report), expected)


def test_status_in_a_pipe_fits_80_columns(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    synthetic_warehouse(root, silver_rows=100, seed=3)
    long_topic = "shop.public.customer_addresses_with_their_delivery_preferences"
    bronze = str(root / "bronze" / "shop_public_customer_addresses_with_their_delivery_preferences")
    at = pa.array([datetime(2026, 1, 1, tzinfo=UTC)] * 2, pa.timestamp("us", "UTC"))
    write_deltalake(bronze, pa.table({"offset": [1, 2], "timestamp": at}))
    DeltaTable(bronze).alter.set_table_properties(
        {"lakehouse.topic": long_topic}, raise_if_not_exists=False
    )
    printed, probe = run_status("--warehouse", root, "--config", SHOP_TOML, columns=80)
    assert probe["children"] == [] and not probe["gateway"]
    lines = printed.splitlines()
    assert all(len(line) <= 80 for line in lines), printed
    assert not re.search("[\u2500-\u257f]|\x1b", printed), printed  # no box drawing, no colour
    words = set(printed.split())
    names = {
        "silver.orders", "silver.customer_addresses_with_their_delivery_preferences",
        "gold.revenue_per_minute", "bronze.shop_public_orders", "id_present", "total_ok",
        "own_topic",
    }  # fmt: skip
    assert names <= words, printed
    wide, _ = run_status("--warehouse", root, "--config", SHOP_TOML, "--wide", columns=80)
    assert "bronze.shop_public_orders" in wide.split() and "applied version" in wide
