"""Maintenance: OPTIMIZE and VACUUM shrink the file count without changing data, tombstones
expire by age, and bronze retention drops old records only when silver does not need them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.records import Record
from cdc.sources import SourceSpec
from gold.verify import check_gold
from lakehouse.ops.maintenance import (
    MaintenanceReport,
    Trimmed,
    maintain,
    maintained_tables,
    trim_bronze,
)
from lakehouse.ops.replay import replay
from lakehouse.run.pipeline import run_from_bronze, run_once
from lakehouse_core.config import MaintenanceSpec, PipelineConfig, TableSpec, load_config
from lakehouse_core.delta_io import BATCH_MARK, FileStats, change_feed_complete, file_stats
from lakehouse_core.errors import ConfigError
from lakehouse_core.gold_tables import GoldTable, Measure, Window
from lakehouse_core.layout import Warehouse
from lakehouse_demo.generator import write_files
from lakehouse_demo.settings import SHOP_CONFIG
from tests.helpers import pg_envelope, pg_key
from tests.warehouses import (
    assert_same_tables,
    comparable,
    copy_warehouse,
    incremental_warehouse,
    load,
    rows,
)

pytestmark = pytest.mark.integration

TOPIC = "shop.public.customers"
BRONZE = "bronze.shop_public_customers"
ENTITIES = ("customers", "orders")  # the entities that have delete tombstones


def micros(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


def at_micros(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1_000_000, UTC)


@dataclass(frozen=True)
class Maintained:
    pristine: Warehouse
    warehouse: Warehouse
    before: dict[str, FileStats]
    tombstone_cutoff: int  # epoch micros: the second arrival's ingestion
    report: MaintenanceReport


@pytest.fixture(scope="module")
def maintained(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Maintained:
    """One ``maintain`` run on a copy of the shared warehouse, with VACUUM retention 0, a
    tombstone retention that expires the tombstones of the first arrival only, and a bronze
    retention of one day at a moment when every bronze record is older than that."""
    pristine = Warehouse.from_path(incremental_warehouse(spark, tmp_path_factory))
    warehouse = copy_warehouse(Path(pristine.root), tmp_path_factory.mktemp("maintain") / "wh")
    second_arrival = min(
        load(spark, warehouse, "bronze", name)
        .where(F.col("_ingest_batch") >= 1)
        .agg(F.min(F.unix_micros("_ingested_at")))
        .first()[0]  # type: ignore[index]
        for name in warehouse.table_names("bronze")
    )
    days = 2
    now = at_micros(second_arrival) + timedelta(days=days)
    config = PipelineConfig(
        tables=(
            *SHOP_CONFIG.tables,
            *(
                TableSpec(name, f"shop.public.{name}", tombstone_retention_days=days)
                for name in ENTITIES
            ),
        ),
        gold_tables=SHOP_CONFIG.gold_tables,
        maintenance=MaintenanceSpec(vacuum_retention_hours=0, bronze_retention_days=1),
    )
    before = {name: file_stats(spark, path) for name, path in maintained_tables(spark, warehouse)}
    report = maintain(spark, warehouse, config, now)
    return Maintained(pristine, warehouse, before, second_arrival, report)


def tombstones_ingested(spark: SparkSession, warehouse: Warehouse, entity: str) -> DataFrame:
    """The entity's tombstones with ``_seen``: when bronze ingested their delete (epoch µs)."""
    bronze = load(spark, warehouse, "bronze", f"shop_public_{entity}").select(
        F.col("partition").alias("_bronze_partition"),
        F.col("offset").alias("_bronze_offset"),
        F.unix_micros("_ingested_at").alias("_seen"),
    )
    tombstones = spark.read.format("delta").load(warehouse.tombstones(entity))
    return tombstones.join(bronze, ["_bronze_partition", "_bronze_offset"], "left")


def test_optimize_and_vacuum_leave_one_file_per_table(maintained: Maintained) -> None:
    results = {t.table: t for t in maintained.report.tables}
    assert set(results) == set(maintained.before)
    fragmented = [name for name, stats in maintained.before.items() if stats.files > 1]
    assert len(fragmented) >= 3, maintained.before
    for name, result in results.items():
        assert result.before == maintained.before[name]
        assert result.after is not None
        assert result.after.files <= 1, (name, result.after)
        assert result.after.files_on_disk == result.after.files, (name, result.after)
    assert sum(r.after.files_on_disk for r in results.values() if r.after) < sum(
        s.files_on_disk for s in maintained.before.values()
    )
    assert any("below Delta's 168 h" in note for note in maintained.report.notes)


def test_data_is_unchanged(spark: SparkSession, maintained: Maintained) -> None:
    assert_same_tables(
        spark, maintained.pristine, maintained.warehouse, ("bronze", "silver", "gold")
    )


def test_a_gold_table_declared_after_a_vacuum_starts_from_the_current_silver(
    spark: SparkSession, maintained: Maintained, tmp_path: Path
) -> None:
    """The vacuum removed the files of silver's early changes, so a new gold job cannot read
    the change feed from version 0: it starts from silver's current rows, and its table equals
    its declaration (on the code before, the run failed reading a vacuumed file)."""
    warehouse = copy_warehouse(Path(maintained.warehouse.root), tmp_path / "wh")
    orders = warehouse.table("silver", "orders")
    assert not change_feed_complete(spark, orders)
    added = GoldTable(
        name="orders_per_customer",
        source="orders",
        event_time="created_at",
        window=Window("tumbling", size="1 hour"),
        group_by=("customer_id",),
        measures=(Measure("orders", "count"), Measure("biggest", "max", "total")),
    )
    config = replace(SHOP_CONFIG, gold_tables=(*SHOP_CONFIG.gold_declarations, added))
    run_from_bronze(spark, warehouse, config, entities=["orders"])
    gold = warehouse.table("gold", added.name)
    assert spark.read.format("delta").load(gold).count() > 0
    check = check_gold(spark, orders, gold, added, warehouse.watermark(added.name))
    assert check.ok, check.differences[:5]


#: The start of the batch mark of every micro-batch commit (``lakehouse_core.delta_io.BATCH_MARK``).
MARKED = BATCH_MARK.split("{")[0]


def test_tombstones_older_than_their_retention_are_dropped(
    spark: SparkSession, maintained: Maintained
) -> None:
    removed = {t.table: t.rows_removed for t in maintained.report.tables}
    expired_total = kept_total = 0
    for entity in ENTITIES:
        before = tombstones_ingested(spark, maintained.pristine, entity)
        assert before.where(F.col("_seen").isNull()).isEmpty()
        young = before.where(F.col("_seen") >= maintained.tombstone_cutoff).drop("_seen")
        after = spark.read.format("delta").load(maintained.warehouse.tombstones(entity))
        assert rows(after.select(*young.columns)) == rows(young), entity
        expired = before.count() - young.count()
        assert removed[f"_system.tombstones.{entity}"] == expired
        expired_total, kept_total = expired_total + expired, kept_total + young.count()
        history = DeltaTable.forPath(spark, maintained.warehouse.tombstones(entity)).history()
        messages = [  # of the commits not made by the pipeline's micro-batches
            r.userMetadata
            for r in history.collect()
            if r.userMetadata and not r.userMetadata.startswith(MARKED)
        ]
        assert all(m.startswith("tombstone GC: deletes ingested before") for m in messages)
        assert len(messages) == (1 if expired else 0)
    assert expired_total > 0 and kept_total > 0


def test_bronze_retention_refuses_when_silver_needs_the_records(maintained: Maintained) -> None:
    refused = maintained.report.refused
    assert len(refused) == 3, refused
    for bronze, entity in (
        ("shop_clickstream", "clickstream"),
        ("shop_public_customers", "customers"),
        ("shop_public_orders", "orders"),
    ):
        [line] = [r for r in refused if r.startswith(f"bronze.{bronze} keeps")]
        assert f"key(s) of silver.{entity}" in line and "their latest event is among them" in line
    removed = {t.table: t.rows_removed for t in maintained.report.tables}
    assert all(
        removed[f"bronze.{name}"] == 0 for name in maintained.warehouse.table_names("bronze")
    )


# --- bronze retention that can drop records ------------------------------------------------


def customer(id_: int, name: str) -> dict[str, Any]:
    return {"id": id_, "name": name, "notes": None}


def records(offsets: range, *events: tuple[Any, Any]) -> list[Record]:
    start = 1_767_225_600_000
    return [
        Record(TOPIC, 0, offset, start + offset, key, value)
        for offset, (key, value) in zip(offsets, events, strict=True)
    ]


FIRST = records(
    range(0, 7),
    (pg_key(1), pg_envelope("c", (1, 10), customer(1, "Ann"))),
    (pg_key(2), pg_envelope("c", (2, 20), customer(2, "Bo"))),
    (pg_key(3), pg_envelope("c", (3, 30), customer(3, "Cy"))),
    (pg_key(2), pg_envelope("u", (4, 40), customer(2, "Bo2"), customer(2, "Bo"))),
    (pg_key(3), pg_envelope("d", (5, 50), None, customer(3, "Cy"))),
    (pg_key(3), None),  # Kafka tombstone after the delete
    (pg_key(9), {"payload": {"after": {"id": 9}}}),  # no op: quarantined
)
SECOND = records(
    range(7, 10),
    (pg_key(1), pg_envelope("u", (6, 60), customer(1, "Ann2"), customer(1, "Ann"))),
    (pg_key(2), pg_envelope("u", (7, 70), customer(2, "Bo3"), customer(2, "Bo2"))),
    (pg_key(4), pg_envelope("c", (8, 80), customer(4, "Di"))),
)
THIRD = records(
    range(10, 11),
    (pg_key(4), pg_envelope("u", (9, 90), customer(4, "Di2"), customer(4, "Di"))),
)


def arrive(spark: SparkSession, root: Path, part: str, batch: list[Record]) -> None:
    """Write ``batch`` as a new file of the source directory and run the pipeline once."""
    written = write_files(batch, root / "parts" / part)
    (root / "source").mkdir(exist_ok=True)
    for path in written:
        path.rename(root / "source" / f"{part}-{path.name}")
    run_once(
        spark,
        SourceSpec("files", str(root / "source")),
        Warehouse.from_path(root / "wh"),
        SHOP_CONFIG,
    )


def test_maintain_refuses_to_trim_an_events_table_without_its_declaration(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Bronze retention judged with the Debezium defaults of a held ``events`` table (its
    declaration missing) is refused before anything is changed."""
    pristine = Warehouse.from_path(incremental_warehouse(spark, tmp_path_factory))
    warehouse = copy_warehouse(Path(pristine.root), tmp_path_factory.mktemp("refused") / "wh")
    config = PipelineConfig(maintenance=MaintenanceSpec(bronze_retention_days=1))
    before = {name: file_stats(spark, path) for name, path in maintained_tables(spark, warehouse)}
    with pytest.raises(ConfigError, match=r"^maintain refused: .*silver\.clickstream \(needs"):
        maintain(spark, warehouse, config, datetime.now(UTC) + timedelta(days=30))
    assert {
        name: file_stats(spark, path) for name, path in maintained_tables(spark, warehouse)
    } == before


def test_bronze_retention_drops_superseded_records(spark: SparkSession, tmp_path: Path) -> None:
    arrive(spark, tmp_path, "first", FIRST)
    arrive(spark, tmp_path, "second", SECOND)
    warehouse = Warehouse.from_path(tmp_path / "wh")
    bronze = load(spark, warehouse, "bronze", "shop_public_customers")
    second_at = bronze.where(F.col("offset") >= 7).agg(F.min("_ingested_at")).first()[0]  # type: ignore[index]
    first_at = bronze.where(F.col("offset") < 7).agg(F.max("_ingested_at")).first()[0]  # type: ignore[index]
    assert first_at < second_at
    silver_before = rows(comparable(spark, warehouse, "silver", "customers"))
    quarantine_before = rows(comparable(spark, warehouse, "silver", "quarantine"))
    spec = SHOP_CONFIG.spec_for_topic(TOPIC)

    # Nothing is old yet: nothing to do.
    assert trim_bronze(spark, warehouse, SHOP_CONFIG, spec, first_at) == Trimmed(BRONZE)
    # Everything is old: the latest events of keys 1, 2 and 4 would go. Refused.
    late = bronze.agg(F.max("_ingested_at")).first()[0] + timedelta(microseconds=1)  # type: ignore[index]
    refused = trim_bronze(spark, warehouse, SHOP_CONFIG, spec, late)
    assert refused.dropped == 0 and refused.refusal is not None
    assert "would change 3 key(s) of silver.customers" in refused.refusal, refused.refusal
    assert "3 their latest event is among them" in refused.refusal
    assert load(spark, warehouse, "bronze", "shop_public_customers").count() == 10
    # Only the first arrival is old: keys 1 and 2 were updated since, key 3 deleted. Dropped.
    trimmed = trim_bronze(spark, warehouse, SHOP_CONFIG, spec, second_at)

    assert trimmed.refusal is None and trimmed.dropped == 6
    assert trimmed.note is not None and "kept 1 old records that silver quarantined" in trimmed.note
    bronze = load(spark, warehouse, "bronze", "shop_public_customers")
    assert sorted(r.offset for r in bronze.select("offset").collect()) == [6, 7, 8, 9]
    table = DeltaTable.forPath(spark, warehouse.table("bronze", "shop_public_customers"))
    last = table.history(2).select("operation", "userMetadata").collect()[-1]
    assert last.operation == "MERGE" and last.userMetadata.startswith("bronze retention: drop")
    assert table.detail().first().properties["delta.appendOnly"] == "true"  # type: ignore[union-attr]
    assert rows(comparable(spark, warehouse, "silver", "customers")) == silver_before

    # The pipeline goes on after the rewrite, and a rebuild from what is left is the same.
    arrive(spark, tmp_path, "third", THIRD)
    names = dict((r.id, r.name) for r in load(spark, warehouse, "silver", "customers").collect())
    assert names == {1: "Ann2", 2: "Bo3", 4: "Di2"}
    copy = copy_warehouse(tmp_path / "wh", tmp_path / "replayed")
    replay(spark, copy, SHOP_CONFIG)
    assert_same_tables(spark, warehouse, copy, ("silver",))
    assert Counter(quarantine_before) == rows(comparable(spark, copy, "silver", "quarantine"))


# --- configuration -------------------------------------------------------------------------


@pytest.mark.unit
def test_maintenance_settings_are_read_and_validated(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text("[maintenance]\nvacuum_retention_hours = 24\nbronze_retention_days = 30\n")
    assert load_config(path).maintenance == MaintenanceSpec(24, 30)
    assert load_config(None).maintenance == MaintenanceSpec(168, None)
    for text, phrase in (
        ("[maintenance]\nvacuum_retention_hours = -1\n", "0 or more"),
        ("[maintenance]\nbronze_retention_days = 0\n", "1 or more"),
        ("[maintenance]\nbronze_retention_days = '7'\n", "must be an integer"),
        ("[maintenance]\nvacuum_hours = 1\n", "Unknown setting(s) vacuum_hours"),
        ("maintenance = 3\n", "must be a table"),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError, match=phrase.replace("(", r"\(").replace(")", r"\)")):
            load_config(path)
