"""A pipeline declared in Python runs from the command line (``lakehouse run --declarations``)
and the warehouse records it as it records a TOML file's; declarations that change a held
silver table's keys are refused by the run, before it records or writes anything, with the
command that makes the change (``lakehouse replay --table``), as ``lakehouse plan`` says first;
a removed declaration's table stays until ``lakehouse drop`` removes it with its state.

On a copy of the shared shop warehouse (:mod:`tests.warehouses`); the runs read no new record."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse.cli.declared import load_declarations
from lakehouse.run.declarations import newest_recorded
from lakehouse_demo.settings import SHOP_CONFIG
from tests.cli import run_cli
from tests.warehouses import copy_warehouse, incremental_warehouse

pytestmark = pytest.mark.integration

#: The shop's pipeline declared in Python, as a notebook would (a Lakehouse), with ``{change}``.
DECLARED = """
    from dataclasses import replace

    from lakehouse import Lakehouse, retention
    from lakehouse_demo.settings import SHOP_CONFIG

    lh = Lakehouse(
        {root!r},
        tables={tables},
        gold=SHOP_CONFIG.gold_tables,
        maintenance=retention(bronze_retention_days=400),
    )
    """
SHOP_TABLES = "SHOP_CONFIG.tables"
REKEYED_TABLES = "[replace(SHOP_CONFIG.tables[0], keys=('event_id', 'user_id'))]"


def declared(folder: Path, root: Path, tables: str, name: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(DECLARED.format(root=str(root), tables=tables)), "utf-8")
    return path


def test_a_pipeline_declared_in_python_runs_is_recorded_and_a_changed_key_is_refused(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    pristine = incremental_warehouse(spark, tmp_path_factory)
    warehouse = copy_warehouse(pristine, tmp_path / "wh")
    root = Path(warehouse.root)
    source = f"files:{pristine.parent / 'source'}"  # every file read already
    before = newest_recorded(warehouse)
    assert before is not None and before.config == SHOP_CONFIG

    same = declared(tmp_path, root, SHOP_TABLES, "shop_pipeline.py")
    planned = run_cli("plan", "--warehouse", root, "--declarations", same)
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.splitlines()[1:] == [
        "1 change:",
        "  changed [maintenance] (bronze_retention_days): the run uses the new settings from "
        "its start",
    ]
    ran = run_cli("run", "--once", "--source", source, "--warehouse", root, "--declarations", same)
    assert ran.returncode == 0, ran.stderr
    assert (
        "- declarations: changed [maintenance] (bronze_retention_days): the run uses the new "
        "settings from its start"
    ) in ran.stdout.splitlines(), ran.stdout
    recorded = newest_recorded(warehouse)
    assert recorded is not None
    assert (recorded.version, recorded.command) == (before.version + 1, "run --once")
    assert recorded.config == load_declarations(f"{same}:lh")

    rekeyed = declared(tmp_path, root, REKEYED_TABLES, "rekeyed.py")
    planned = run_cli("plan", "--warehouse", root, "--declarations", rekeyed)
    assert planned.returncode == 3, planned.stderr
    assert "  changed table clickstream (keys): silver.clickstream must be rebuilt" in (
        planned.stdout
    )
    refused = run_cli(
        "run", "--once", "--source", source, "--warehouse", root, "--declarations", rekeyed
    )
    assert refused.returncode == 2, refused.stdout
    error = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1
    assert error[0].startswith(
        "error: The declarations change how silver.clickstream merges its records (changed "
        "table clickstream (keys)):"
    )
    assert "lakehouse replay --table clickstream" in error[0]
    after = newest_recorded(warehouse)
    assert after is not None and after.version == recorded.version  # nothing recorded


def test_a_removed_gold_table_stays_orphaned_until_dropped(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    pristine = incremental_warehouse(spark, tmp_path_factory)
    warehouse = copy_warehouse(pristine, tmp_path / "wh")
    root = Path(warehouse.root)
    without = tmp_path / "without_sessions.toml"
    without.write_text(
        replace(SHOP_CONFIG, gold_tables=SHOP_CONFIG.gold_tables[:1]).to_toml(), "utf-8"
    )
    planned = run_cli("plan", "--warehouse", root, "--config", without)
    assert planned.stdout.splitlines()[1:] == [
        "1 change:",
        "  removed gold user_sessions: gold.user_sessions stays in place, no longer updated "
        "(orphaned); to remove it: lakehouse drop gold.user_sessions --yes",
    ]
    refused = run_cli("drop", "gold.user_sessions", "--warehouse", root, "--yes")
    assert refused.returncode == 2
    assert "gold.user_sessions is declared ([[gold]] user_sessions)" in refused.stderr
    dropped = run_cli(
        "drop", "gold.user_sessions", "--warehouse", root, "--config", without, "--yes"
    )
    assert dropped.returncode == 0, dropped.stderr
    assert dropped.stdout.splitlines()[0] == "deleted gold/user_sessions"
    assert dropped.stdout.splitlines()[-1] == "dropped gold.user_sessions"
    assert not (root / "gold" / "user_sessions").exists()
    assert not list((root / "_system" / "checkpoints").glob("gold_user_sessions*"))
    assert (root / "gold" / "revenue_per_minute" / "_delta_log").is_dir()
    assert warehouse.table_names("gold", spark) == ["late_events", "revenue_per_minute"]
