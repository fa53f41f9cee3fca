"""Replay: silver and gold rebuilt from bronze equal, row for row, what incremental processing
produced (silver, gold and quarantine), for the whole warehouse and for one table; without the
declarations that made the warehouse's tables, it refuses and changes nothing."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc.sources import SourceSpec
from lakehouse.ops.replay import replay
from lakehouse.run import swap
from lakehouse.run.entities import DERIVED_LAYERS
from lakehouse.run.pipeline import run_from_bronze, run_once
from lakehouse_core.config import PipelineConfig
from lakehouse_core.errors import ConfigError, TableNotFoundError
from lakehouse_core.layout import QUARANTINE_TABLE, Warehouse
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from lakehouse_demo.job import REVENUE_BY_TIER
from lakehouse_demo.settings import SHOP_CONFIG
from tests.cli import SHOP_TOML, run_cli, table_cells
from tests.logs import logged
from tests.warehouses import (
    assert_same_tables,
    copy_warehouse,
    incremental_warehouse,
    table_identity,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

REVENUE_TABLE = "revenue_per_minute"
SESSIONS_TABLE = "user_sessions"


def query_id(warehouse: Warehouse, job: str) -> str:
    """The id of the streaming query whose checkpoint this is."""
    metadata = Path(warehouse.checkpoint(job)) / "metadata"
    return str(json.loads(metadata.read_text(encoding="utf-8"))["id"])


@pytest.fixture(scope="module")
def pristine(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    return Warehouse.from_path(incremental_warehouse(spark, tmp_path_factory))


def test_replay_equals_incremental_processing(
    spark: SparkSession, pristine: Warehouse, tmp_path: Path
) -> None:
    warehouse = copy_warehouse(Path(pristine.root), tmp_path / "wh")
    bronze_before = {
        name: table_identity(spark, warehouse.table("bronze", name))
        for name in warehouse.table_names("bronze")
    }
    commits = (Path(warehouse.checkpoint("silver_orders")) / "commits").iterdir()
    assert len(list(commits)) >= 2  # the incremental run had several batches

    with pytest.raises(ConfigError, match=r"silver\.clickstream"):  # refused: nothing changed
        replay(spark, warehouse, PipelineConfig())

    report = replay(spark, warehouse, SHOP_CONFIG)

    assert report.entities == ["clickstream", "customers", "orders"]
    rebuilt = {name for name, _ in report.tables}
    assert {"silver.orders", f"gold.{REVENUE_TABLE}", f"gold.{SESSIONS_TABLE}"} <= rebuilt
    compared = assert_same_tables(spark, pristine, warehouse)
    assert f"silver.{QUARANTINE_TABLE}" in compared and f"gold.{SESSIONS_TABLE}" in compared
    assert {
        name: table_identity(spark, warehouse.table("bronze", name)) for name in bronze_before
    } == bronze_before
    # Fresh checkpoints (new streaming queries) replaced the old ones.
    for job in ("silver_orders", "gold_revenue_per_minute"):
        assert query_id(warehouse, job) != query_id(pristine, job), job
    assert not (Path(warehouse.root) / swap.STAGING).exists()
    # The swapped-in checkpoints work where they now are: the pipeline runs on after a replay.
    run_from_bronze(spark, warehouse, SHOP_CONFIG)
    assert_same_tables(spark, pristine, warehouse)


def test_replay_of_one_table_through_the_command_line(
    spark: SparkSession, pristine: Warehouse, tmp_path: Path
) -> None:
    warehouse = copy_warehouse(Path(pristine.root), tmp_path / "wh")
    untouched = {
        path: table_identity(spark, path)
        for path in (
            warehouse.table("silver", "customers"),
            warehouse.table("silver", "clickstream"),
            warehouse.table("gold", SESSIONS_TABLE),
        )
    }
    rebuilt = {
        path: table_identity(spark, path)
        for path in (warehouse.table("silver", "orders"), warehouse.table("gold", REVENUE_TABLE))
    }

    result = run_cli(
        "replay", "--config", SHOP_TOML, "--warehouse", warehouse.root, "--table", "orders"
    )

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    printed = {
        cells[0]: int(cells[1])
        for cells in table_cells(result.stdout)
        if len(cells) == 2 and cells[1].isdigit()
    }
    assert set(printed) == {"silver.orders", f"gold.{REVENUE_TABLE}", "silver.quarantine"}
    orders = spark.read.format("delta").load(warehouse.table("silver", "orders")).count()
    assert printed["silver.orders"] == orders > 0
    assert "- silver: applying shop.public.orders to silver.orders" in result.stdout
    assert "customers" not in result.stdout.split("replay: swapping")[0].split("rebuilding")[1]
    for path, identity in untouched.items():
        assert table_identity(spark, path) == identity, path
    for path, identity in rebuilt.items():
        assert table_identity(spark, path)[0] != identity[0], f"{path} was not rebuilt"
    assert_same_tables(spark, pristine, warehouse)


def test_replay_of_a_joined_entity_rebuilds_the_gold_tables_that_join_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``replay --table customers`` where ``gold.revenue_by_tier`` joins orders with customers:
    orders and that table are rebuilt with customers, and the pipeline carries on from the
    replayed warehouse as from the incremental one."""
    config = replace(SHOP_CONFIG, gold_tables=(*SHOP_CONFIG.gold_declarations, REVENUE_BY_TIER))
    records = generate(WorkloadConfig(events=200, seed=13))
    parts = write_files(records, tmp_path / "parts", lines_per_file=100)
    source = SourceSpec("files", str(tmp_path / "source"))
    (tmp_path / "source").mkdir()
    kept = Warehouse.from_path(tmp_path / "kept")
    parts[0].rename(tmp_path / "source" / parts[0].name)
    run_once(spark, source, kept, config)
    replayed = copy_warehouse(Path(kept.root), tmp_path / "replayed")

    report = replay(spark, replayed, config, table="customers")

    assert report.entities == ["customers", "orders"]
    assert {"silver.customers", "silver.orders", "gold.revenue_by_tier"} <= {
        name for name, _ in report.tables
    }
    assert_same_tables(spark, kept, replayed)
    parts[1].rename(tmp_path / "source" / parts[1].name)
    for warehouse in (kept, replayed):
        run_once(spark, source, warehouse, config)
    assert_same_tables(spark, kept, replayed)


def test_a_failed_replay_leaves_the_warehouse_as_it_was(
    spark: SparkSession, pristine: Warehouse, tmp_path: Path
) -> None:
    warehouse = copy_warehouse(Path(pristine.root), tmp_path / "wh")
    tables = [
        warehouse.table(layer, name)
        for layer in ("silver", "gold")
        for name in warehouse.table_names(layer)
    ]
    before = {path: table_identity(spark, path) for path in tables}
    with pytest.raises(TableNotFoundError, match=r"Unknown table 'payments'.*customers, orders"):
        replay(spark, warehouse, SHOP_CONFIG, "payments")

    def fail_at_gold(message: str) -> None:  # silver is rebuilt, gold not yet
        if message.startswith("gold: "):
            raise RuntimeError("simulated crash during the rebuild")

    with pytest.raises(RuntimeError, match="simulated crash"), logged(fail_at_gold):
        replay(spark, warehouse, SHOP_CONFIG)

    staging = Path(warehouse.root) / swap.STAGING
    assert (staging / "silver" / "customers" / "_delta_log").is_dir()  # the rebuild had begun
    assert {path: table_identity(spark, path) for path in tables} == before
    assert_same_tables(spark, pristine, warehouse)
    assert swap.recover(warehouse.root) is False  # an unsealed rebuild is discarded
    assert not staging.exists()


def test_replay_without_the_declarations_refuses_and_changes_nothing(
    spark: SparkSession, pristine: Warehouse, tmp_path: Path
) -> None:
    """``make demo``'s warehouse replayed without its config: the clickstream is an events
    table that no declaration makes now, and nothing declares the gold tables. The replay
    refuses in one line naming them before it stages anything; every table keeps its rows."""
    warehouse = copy_warehouse(Path(pristine.root), tmp_path / "wh")
    tables = {
        f"{layer}.{name}": warehouse.table(layer, name)
        for layer in DERIVED_LAYERS
        for name in warehouse.table_names(layer)
    }
    assert {"silver.clickstream", f"gold.{SESSIONS_TABLE}"} <= set(tables)
    before = {name: table_identity(spark, path) for name, path in tables.items()}
    counts = {name: spark.read.format("delta").load(path).count() for name, path in tables.items()}

    with pytest.raises(ConfigError) as refused:
        replay(spark, warehouse, PipelineConfig())
    message = str(refused.value)
    assert "\n" not in message and message.startswith("replay refused: ")
    assert 'silver.clickstream (needs topic shop.clickstream declared with format = "events")' in (
        message
    )
    assert f"gold.{REVENUE_TABLE}" in message and f"gold.{SESSIONS_TABLE}" in message
    assert "--config the pipeline ran with" in message
    assert "silver.orders" not in message  # its Debezium defaults are what made it

    # The command without --config runs with the declarations the warehouse recorded; one
    # written before runs recorded them (none here) has only the Debezium defaults.
    assert (Path(warehouse.declarations) / "0000000001.toml").exists()
    shutil.rmtree(warehouse.declarations)
    result = run_cli("replay", "--warehouse", warehouse.root)

    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert errors == [f"error: {message}"], result.stderr
    assert "replayed" not in result.stdout
    assert not (Path(warehouse.root) / swap.STAGING).exists()  # nothing was staged
    assert {name: table_identity(spark, path) for name, path in tables.items()} == before
    assert {
        name: spark.read.format("delta").load(path).count() for name, path in tables.items()
    } == counts
    assert counts["silver.clickstream"] > 0
