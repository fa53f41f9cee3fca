"""No hidden demo defaults: a warehouse without declarations gets only what its data implies.

Debezium topics become silver tables on their own; an event topic without a declaration is
named in the run's output (one line, with the fix) and its records stay in bronze, so a later
run with the declaration applies them, giving the tables a run with it from the start gives.
The demo's settings are asked for: ``lakehouse_demo.demo_lakehouse`` and
``--config examples/shop.toml``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc.sources import SourceSpec, read_source
from gold.finality import FINALIZED_AT
from lakehouse import Lakehouse
from lakehouse.run.pipeline import run_once, start_one_hop
from lakehouse_core.config import PipelineConfig, load_config
from lakehouse_core.layout import Layer, Warehouse
from lakehouse_core.streaming import Trigger, await_query
from lakehouse_demo import demo_lakehouse
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from lakehouse_demo.job import DEMO_CONFIG
from lakehouse_demo.settings import SHOP_CONFIG
from silver.topic_kind import holds_plain_events
from tests.cli import SHOP_TOML, run_cli
from tests.helpers import table_rows

pytestmark = pytest.mark.integration

WORKLOAD = WorkloadConfig(events=240, seed=13, malformed_rate=0.0)
CLICKS = "shop.clickstream"
UNDECLARED = f"silver: {CLICKS}: plain events without a declaration, kept in bronze only"


def shop_source(folder: Path, debezium_only: bool = False) -> Path:
    """The shop workload as files in ``folder`` (only its Debezium topics, if asked)."""
    records = [r for r in generate(WORKLOAD) if not debezium_only or r.topic != CLICKS]
    write_files(records, folder)
    return folder


def rows_of(spark: SparkSession, path: str) -> list[dict[str, object]]:
    """The table's rows in a fixed order, without ``_finalized_at`` (the wall-clock time a
    window became final)."""
    rows = [{k: v for k, v in row.items() if k != FINALIZED_AT} for row in table_rows(spark, path)]
    return sorted(rows, key=lambda row: repr(sorted(row.items())))


def test_a_warehouse_without_declarations_gets_its_debezium_topics_as_silver_tables(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = shop_source(tmp_path / "source", debezium_only=True)
    lh = Lakehouse(tmp_path / "wh", spark=spark)
    assert lh.config == PipelineConfig()
    report = lh.run(f"files:{source}")
    assert report.undeclared_topics == []
    warehouse = Warehouse.from_path(tmp_path / "wh")
    assert {"customers", "orders"} <= set(warehouse.table_names("silver", spark))
    assert warehouse.table_names("gold", spark) == []  # nothing declared, nothing computed
    assert spark.read.format("delta").load(warehouse.table("silver", "orders")).count() > 0
    assert lh.verify().ok


def test_an_undeclared_event_topic_is_reported_kept_in_bronze_and_applied_once_declared(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = shop_source(tmp_path / "source")
    late, early = tmp_path / "late", tmp_path / "early"
    args = ("run", "--source", f"files:{source}", "--once")

    first = run_cli(*args, "--warehouse", late)
    assert first.returncode == 0, first.stdout + first.stderr
    said = [line for line in first.stdout.splitlines() if CLICKS in line]
    assert len(said) == 1 and said[0].startswith(f"- {UNDECLARED}"), first.stdout
    assert "[[tables]]" in said[0] and "keys and sequence_by" in said[0], said[0]
    assert "events_table(...)" in said[0], said[0]
    warehouse = Warehouse.from_path(late)
    silver = set(warehouse.table_names("silver", spark))
    assert {"customers", "orders"} <= silver and "clickstream" not in silver
    clicks = [r for r in generate(WORKLOAD) if r.topic == CLICKS]
    bronze = spark.read.format("delta").load(warehouse.table("bronze", "shop_clickstream"))
    assert bronze.count() == len(clicks) > 0  # nothing lost
    assert holds_plain_events(bronze)
    quarantine = spark.read.format("delta").load(warehouse.table("silver", "quarantine"))
    assert quarantine.where(f"topic = '{CLICKS}'").count() == 0  # not guessed as Debezium

    declared = run_cli(*args, "--warehouse", late, "--config", SHOP_TOML)
    assert declared.returncode == 0, declared.stdout + declared.stderr
    assert "without a declaration" not in declared.stdout, declared.stdout
    from_start = run_cli(*args, "--warehouse", early, "--config", SHOP_TOML)
    assert from_start.returncode == 0, from_start.stdout + from_start.stderr
    reference = Warehouse.from_path(early)
    compared: tuple[tuple[Layer, str], ...] = (
        ("silver", "clickstream"),
        ("silver", "orders"),
        ("gold", "user_sessions"),
        ("gold", "revenue_per_minute"),
    )
    for layer, name in compared:
        got = rows_of(spark, warehouse.table(layer, name))
        want = rows_of(spark, reference.table(layer, name))
        assert got and got == want, (layer, name)


def test_the_demo_settings_are_asked_for(tmp_path: Path) -> None:
    lh = demo_lakehouse(tmp_path / "wh")
    assert lh.config is DEMO_CONFIG
    names = [table.name for table in lh.config.gold_declarations]
    assert {"revenue_per_minute", "user_sessions"} <= set(names)
    assert SHOP_CONFIG.tables[0] in lh.config.tables
    assert load_config(SHOP_TOML) == SHOP_CONFIG
    assert Lakehouse(tmp_path / "mine").config.gold_declarations == ()


def test_one_hop_leaves_an_undeclared_event_topic_in_bronze(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A continuous run's hops (bronze and silver in one micro-batch) apply the Debezium topics
    and leave the event topic to a later run that declares it."""
    source = shop_source(tmp_path / "source")
    warehouse = Warehouse.from_path(tmp_path / "wh")
    frame = read_source(spark, SourceSpec("files", str(source)))
    await_query(start_one_hop(spark, frame, warehouse, PipelineConfig(), Trigger()))
    silver = set(warehouse.table_names("silver", spark))
    assert {"customers", "orders"} <= silver and "clickstream" not in silver
    clicks = {r.value["event_id"] for r in generate(WORKLOAD) if r.topic == CLICKS}
    declared = replace(SHOP_CONFIG, gold_tables=())  # its silver table is what is looked at
    run_once(spark, SourceSpec("files", str(source)), warehouse, declared)
    applied = spark.read.format("delta").load(warehouse.table("silver", "clickstream"))
    assert {row.event_id for row in applied.select("event_id").collect()} == clicks
