"""Privacy deletion: after ``forget`` no readable version of any table holds the key, gold no
longer counts it, bronze's history says why, and a replay still equals the warehouse."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from core.config import SHOP_CONFIG
from core.errors import ConfigError, TableNotFoundError
from core.layout import LAYERS, Warehouse
from gold.jobs import REVENUE_TABLE
from lakehouse.forget import ForgetReport, forget
from lakehouse.replay import replay
from tests.cli import run_cli
from tests.warehouses import assert_same_tables, copy_warehouse, incremental_warehouse, load

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

BRONZE = "shop_public_orders"
REASON = "test: privacy request"


def json_ids(column: str) -> list[Column]:
    """The order id wherever a Debezium record carries it: record key or before/after image,
    with or without the schema/payload wrapper."""
    text = F.col(column).cast("string")
    paths = ["$.id", "$.payload.id"] if column == "key" else []
    for side in ("before", "after"):
        paths += [f"$.{side}.id", f"$.payload.{side}.id"]
    return [F.get_json_object(text, path) for path in paths]


def holds_raw(order_id: int) -> Column:
    """Bronze or quarantine rows whose key or value carries the order id."""
    wanted = str(order_id)
    hits = [c == wanted for c in (*json_ids("key"), *json_ids("value"))]
    return F.coalesce(*[F.when(hit, True) for hit in hits], F.lit(False))


@dataclass(frozen=True)
class Forgotten:
    pristine: Warehouse
    warehouse: Warehouse
    order_id: int
    order: dict[str, Any]
    raw_records: int  # bronze records that carried the id before
    window_before: tuple[int, Decimal]  # (orders, revenue) of the order's gold window
    report: ForgetReport


def window_of(spark: SparkSession, warehouse: Warehouse, at: datetime) -> tuple[int, Decimal]:
    revenue = load(spark, warehouse, "gold", REVENUE_TABLE)
    row = revenue.where(
        (F.col("window_start") <= F.lit(at)) & (F.col("window_end") > F.lit(at))
    ).first()
    return (0, Decimal(0)) if row is None else (int(row.orders), Decimal(row.revenue))


@pytest.fixture(scope="module")
def pristine(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    return Warehouse.from_path(incremental_warehouse(spark, tmp_path_factory))


@pytest.fixture(scope="module")
def forgotten(
    spark: SparkSession, pristine: Warehouse, tmp_path_factory: pytest.TempPathFactory
) -> Forgotten:
    """Forget the live order with the most bronze records."""
    warehouse = copy_warehouse(Path(pristine.root), tmp_path_factory.mktemp("forget") / "wh")
    bronze = load(spark, warehouse, "bronze", BRONZE)
    ids = bronze.select(F.coalesce(*json_ids("key")).cast("bigint").alias("id"))
    busiest = (
        load(spark, warehouse, "silver", "orders")
        .join(ids.groupBy("id").count(), "id")
        .orderBy(F.desc("count"), "id")
        .first()
    )
    assert busiest is not None and busiest["count"] >= 2, "no order with an update"
    order_id = int(busiest.id)
    raw_records = bronze.where(holds_raw(order_id)).count()
    window = window_of(spark, warehouse, busiest.created_at)
    assert window[0] >= 1
    report = forget(spark, warehouse, SHOP_CONFIG, "orders", {"id": order_id}, REASON)
    return Forgotten(pristine, warehouse, order_id, busiest.asDict(), raw_records, window, report)


def all_tables(warehouse: Warehouse) -> list[tuple[str, str]]:
    tables = [
        (f"{layer}.{name}", warehouse.table(layer, name))
        for layer in LAYERS
        for name in warehouse.table_names(layer)
    ]
    for kind in ("tombstones", "truncations"):
        directory = Path(warehouse.root) / "_system" / kind
        tables += [(f"_system.{kind}.{p.name}", str(p)) for p in sorted(directory.iterdir())]
    return tables


def holding_rows(frame: DataFrame, order_id: int, table: str) -> Column | None:
    """How a row of ``table`` would hold the order, or None if the table cannot hold it."""
    if "key" in frame.columns and "value" in frame.columns:
        return holds_raw(order_id)
    if table in ("silver.orders", "_system.tombstones.orders"):
        return F.col("id") == order_id
    return None


def found_in(frame: DataFrame, rows: Column) -> bool | None:
    """Whether ``frame`` has such a row; None if its files are gone (not readable)."""
    try:
        return not frame.where(rows).isEmpty()
    except PySparkException as error:
        if "FILE_NOT_EXIST" in str(error):
            return None
        raise
    except Exception as error:  # Py4J wraps some read errors
        if "FILE_NOT_EXIST" in str(error) or "FileNotFoundException" in str(error):
            return None
        raise


def test_no_readable_version_of_any_table_holds_the_key(
    spark: SparkSession, forgotten: Forgotten
) -> None:
    assert forgotten.raw_records >= 2
    readable: dict[str, list[int]] = {}
    holding: list[str] = []
    for table, path in all_tables(forgotten.warehouse):
        history = DeltaTable.forPath(spark, path).history().select("version").collect()
        for version in sorted(int(r.version) for r in history):
            frame = spark.read.format("delta").option("versionAsOf", version).load(path)
            rows = holding_rows(frame, forgotten.order_id, table)
            if rows is None:
                continue
            found = found_in(frame, rows)
            if found is not None:
                readable.setdefault(table, []).append(version)
            if found:
                holding.append(f"{table}@v{version}")
            if table == "silver.orders":
                changes = (
                    spark.read.format("delta")
                    .option("readChangeFeed", "true")
                    .option("startingVersion", version)
                    .option("endingVersion", version)
                    .load(path)
                )
                if found_in(changes, rows):
                    holding.append(f"{table}@v{version} change feed")
    assert not holding, holding
    for layer, name in (("bronze", BRONZE), ("silver", "orders")):
        table = f"{layer}.{name}"
        # The last version before forget held the key; VACUUM removed its files.
        assert latest_version(spark, forgotten.pristine.table(layer, name)) not in readable[table]
        assert latest_version(spark, forgotten.warehouse.table(layer, name)) in readable[table]


def latest_version(spark: SparkSession, path: str) -> int:
    last = DeltaTable.forPath(spark, path).history(1).select("version").first()
    assert last is not None
    return int(last.version)


def test_the_key_is_gone_and_nothing_else(
    spark: SparkSession, pristine: Warehouse, forgotten: Forgotten
) -> None:
    removed = dict(forgotten.report.removed)
    assert removed[f"bronze.{BRONZE}"] == forgotten.raw_records
    assert removed["silver.orders"] == 1
    for layer, name in (("bronze", BRONZE), ("silver", "orders")):
        before = load(spark, pristine, layer, name).count()
        after = load(spark, forgotten.warehouse, layer, name).count()
        assert after == before - removed[f"{layer}.{name}"], name
    for name in ("customers", "clickstream"):
        assert_rows_equal(spark, pristine, forgotten.warehouse, "silver", name)


def assert_rows_equal(
    spark: SparkSession, want: Warehouse, got: Warehouse, layer: Any, name: str
) -> None:
    expected = load(spark, want, layer, name)
    actual = load(spark, got, layer, name)
    assert actual.exceptAll(expected).isEmpty() and expected.exceptAll(actual).isEmpty(), name


def test_gold_no_longer_counts_the_order(spark: SparkSession, forgotten: Forgotten) -> None:
    orders, revenue = window_of(spark, forgotten.warehouse, forgotten.order["created_at"])
    orders_before, revenue_before = forgotten.window_before
    assert orders == orders_before - 1
    assert revenue == revenue_before - Decimal(forgotten.order["total"])
    assert forgotten.report.recomputed == [f"gold.{REVENUE_TABLE}"]


def test_bronze_history_records_the_reason(spark: SparkSession, forgotten: Forgotten) -> None:
    bronze = DeltaTable.forPath(spark, forgotten.warehouse.table("bronze", BRONZE))
    history = bronze.history().select("version", "operation", "userMetadata").collect()
    message = f"forget key {json.dumps({'id': forgotten.order_id})} of table orders: {REASON}"
    deletes = [h for h in history if h.operation == "DELETE"]
    assert [h.userMetadata for h in deletes] == [message]
    detail = bronze.detail().select("properties").first()
    assert detail is not None and detail.properties["delta.appendOnly"] == "true"


def test_replay_after_forget_equals_the_warehouse(
    spark: SparkSession, forgotten: Forgotten, tmp_path: Path
) -> None:
    replayed = copy_warehouse(Path(forgotten.warehouse.root), tmp_path / "replayed")
    replay(spark, replayed, SHOP_CONFIG, "orders")  # the only entity whose bronze changed
    compared = assert_same_tables(spark, forgotten.warehouse, replayed)
    assert "silver.orders" in compared and f"gold.{REVENUE_TABLE}" in compared


def test_bad_keys_are_refused_before_anything_changes(
    spark: SparkSession, forgotten: Forgotten
) -> None:
    warehouse = forgotten.warehouse
    before = DeltaTable.forPath(spark, warehouse.table("bronze", BRONZE)).history(1).first()
    with pytest.raises(ConfigError, match=r"must name exactly its key column\(s\) id; got ord"):
        forget(spark, warehouse, SHOP_CONFIG, "orders", {"ord": 1})
    with pytest.raises(ConfigError, match=r"value 'abc' of column 'id' is not a valid bigint"):
        forget(spark, warehouse, SHOP_CONFIG, "orders", {"id": "abc"})
    with pytest.raises(TableNotFoundError, match=r"Unknown table 'payments'"):
        forget(spark, warehouse, SHOP_CONFIG, "payments", {"id": 1})
    after = DeltaTable.forPath(spark, warehouse.table("bronze", BRONZE)).history(1).first()
    assert before == after


@pytest.mark.parametrize(
    ("key", "phrase"),
    [
        ("{'id': 1}", "--key is not valid JSON"),
        ('{"id": [1]}', "use a string or number"),
    ],
)
def test_bad_key_on_the_command_line_is_one_error_line(
    forgotten: Forgotten, key: str, phrase: str
) -> None:
    result = run_cli(
        "forget", "--warehouse", forgotten.warehouse.root, "--table", "orders", "--key", key
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and phrase in errors[0], result.stderr
