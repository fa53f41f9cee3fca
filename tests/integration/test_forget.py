"""Privacy deletion: after ``forget`` no readable version of any table holds the key, gold no
longer counts it, bronze's history says why, and a replay still equals the warehouse."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from functools import reduce
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq
import pytest
from delta.tables import DeltaTable
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType

from bronze.table import ensure_bronze_table
from cdc.records import Record
from lakehouse.ops.forget import ForgetReport, forget
from lakehouse.ops.replay import replay
from lakehouse.run.pipeline import run_from_bronze
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.delta_io import versions
from lakehouse_core.errors import ConfigError, TableNotFoundError
from lakehouse_core.gold_tables import GoldTable, Measure, Window
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import LATE_EVENTS, LAYERS, Warehouse
from lakehouse_demo.settings import SHOP_CONFIG
from tests.cli import SHOP_TOML, run_cli
from tests.helpers import bronze_frame, customer_change
from tests.warehouses import assert_same_tables, copy_warehouse, incremental_warehouse, load

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

REVENUE_TABLE = "revenue_per_minute"

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
    # Without the declarations that made the clickstream and the gold tables, nothing is done.
    with pytest.raises(ConfigError, match=r"^forget refused: .*silver\.clickstream \(needs"):
        forget(spark, warehouse, PipelineConfig(), "orders", {"id": 1})
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
        "forget",
        "--config",
        SHOP_TOML,
        "--warehouse",
        forgotten.warehouse.root,
        "--table",
        "orders",
        "--key",
        key,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and phrase in errors[0], result.stderr


# --------------------------------------------------------------------------------------------
# A tiny SCD type 2 warehouse: every file under the warehouse, the history log included
# --------------------------------------------------------------------------------------------

TOPIC = "pg.public.customers"
CUSTOMERS = TableSpec(name="customers", topic=TOPIC, stored_as_scd_type=2)
SCD2_CONFIG = PipelineConfig(tables=(CUSTOMERS,))
SCD2_TOML = f"""
[[tables]]
name = "customers"
topic = "{TOPIC}"
stored_as_scd_type = 2
"""
FORGOTTEN_ID = 7
#: In every value of the forgotten customer, so that any file that still holds one is found.
MARKER = "SECRET7"


def customer(offset: int, op: str, id_: int, lsn: int, name: str | None = None) -> Record:
    notes = f"notes {MARKER}" if id_ == FORGOTTEN_ID else "notes"
    return customer_change(TOPIC, offset, op, id_, (100, lsn), name, notes)


#: Two bronze appends: customer 7 is created, renamed (a second history version), sent once with an
#: unknown op (quarantined), deleted and created again; customers 1 and 2 stay.
BATCHES = [
    [
        customer(0, "c", 7, 10, f"Ada {MARKER}"),
        customer(1, "c", 1, 11, "Bob"),
        customer(2, "u", 7, 20, f"Ada Lovelace {MARKER}"),
        customer(3, "c", 2, 21, "Cy"),
        customer(4, "x", 7, 22, f"Ada Unknown {MARKER}"),
    ],
    [
        customer(5, "d", 7, 30),
        customer(6, "u", 1, 31, "Bob B"),
        customer(7, "c", 7, 40, f"Ada Again {MARKER}"),
    ],
]


def build_scd2_warehouse(
    spark: SparkSession, root: Path, config: PipelineConfig = SCD2_CONFIG, runs: int = 1
) -> Warehouse:
    """:data:`BATCHES` in bronze, applied by ``runs`` pipeline runs (1: all in one run;
    otherwise one run per batch)."""
    warehouse = Warehouse.from_path(root)
    bronze = warehouse.table("bronze", table_name_for_topic(TOPIC))
    ensure_bronze_table(spark, bronze, TOPIC)
    for batch_id, records in enumerate(BATCHES):
        bronze_frame(spark, records, batch_id).write.format("delta").mode("append").save(bronze)
        if runs > 1:
            run_from_bronze(spark, warehouse, config)
    if runs == 1:
        run_from_bronze(spark, warehouse, config)
    return warehouse


def files_holding(root: Path, marker: str = MARKER) -> list[str]:
    """Data files (every parquet file outside the Delta logs, change-feed files included)
    under ``root`` with a value (at any depth) that contains ``marker``.

    The logs are left out: their statistics of removed files stay until Delta's log retention
    expires them (docs/operations.md, ``forget``)."""
    return [
        str(file.relative_to(root))
        for file in sorted(root.rglob("*.parquet"))
        if "_delta_log" not in file.parts and _holds(pq.read_table(file).to_pylist(), marker)
    ]


def _holds(value: Any, marker: str) -> bool:
    if isinstance(value, str):
        return marker in value
    if isinstance(value, bytes):
        return marker.encode() in value
    if isinstance(value, dict):
        value = list(value.values())
    return isinstance(value, list | tuple) and any(_holds(item, marker) for item in value)


def delta_tables(root: Path) -> list[Path]:
    """Every Delta table under ``root``: layers, ``_system`` state, anything else."""
    return sorted(log.parent for log in root.rglob("_delta_log") if log.is_dir())


def versions_holding(spark: SparkSession, table: Path) -> list[int]:
    """The readable versions of the table at ``table`` with a row of the forgotten customer:
    any value (binary as text) containing :data:`MARKER`, or its id in an ``id`` column."""
    history = DeltaTable.forPath(spark, str(table)).history().select("version").collect()
    hits = []
    for version in sorted(int(r.version) for r in history):
        frame = spark.read.format("delta").option("versionAsOf", version).load(str(table))
        if not all(Path(unquote(urlparse(f).path)).exists() for f in frame.inputFiles()):
            continue  # VACUUM removed some of its files: the version cannot be read
        values = [
            F.col(f.name).cast("string") if isinstance(f.dataType, BinaryType) else F.col(f.name)
            for f in frame.schema.fields
        ]
        rows = F.to_json(F.struct(*values)).contains(MARKER)
        if "id" in frame.columns:
            rows |= F.col("id") == FORGOTTEN_ID
        hits.append(frame.where(rows).select(F.lit(version).alias("version")))
    if not hits:
        return []
    found = reduce(DataFrame.unionAll, hits).distinct().collect()  # one Spark job per table
    return sorted(int(r.version) for r in found)


def all_files(root: Path) -> set[tuple[str, int]]:
    """(path, size) of every file under ``root``, but the lease a command takes
    (``_system/lease``)."""
    lease = root / "_system" / "lease"
    return {
        (str(f.relative_to(root)), f.stat().st_size)
        for f in root.rglob("*")
        if f.is_file() and lease not in f.parents
    }


@pytest.fixture(scope="module")
def scd2_pristine(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    warehouse = build_scd2_warehouse(spark, tmp_path_factory.mktemp("scd2") / "wh")
    assert tables_holding(Path(warehouse.root)) >= {
        "bronze/pg_public_customers",
        "silver/quarantine",
        "silver/customers",
        "silver/customers_history",
        "_system/history_log/customers",
    }
    return warehouse


def tables_holding(root: Path) -> set[str]:
    """The tables (paths relative to ``root``) with a data file that holds :data:`MARKER`."""
    return {str(table_of(root / file).relative_to(root)) for file in files_holding(root)}


def table_of(file: Path) -> Path:
    """The Delta table a data file belongs to."""
    return next(parent for parent in file.parents if (parent / "_delta_log").is_dir())


@pytest.fixture(scope="module")
def scd2_forgotten(
    spark: SparkSession, scd2_pristine: Warehouse, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Warehouse, ForgetReport]:
    root = tmp_path_factory.mktemp("scd2-forget") / "wh"
    warehouse = copy_warehouse(Path(scd2_pristine.root), root)
    report = forget(spark, warehouse, SCD2_CONFIG, "customers", {"id": FORGOTTEN_ID}, REASON)
    return warehouse, report


def test_the_layout_lists_every_table_that_holds_an_entitys_rows(
    scd2_pristine: Warehouse,
) -> None:
    """``forget`` removes a key from the tables the layout lists: a new table that holds an
    entity's rows must be among them."""
    root = Path(scd2_pristine.root)
    listed = scd2_pristine.entity_tables("customers", TOPIC)
    assert tables_holding(root) <= {str(Path(t.path).relative_to(root)) for t in listed}


def test_no_file_of_an_scd2_warehouse_holds_the_forgotten_key(
    spark: SparkSession, scd2_forgotten: tuple[Warehouse, ForgetReport]
) -> None:
    warehouse, report = scd2_forgotten
    root = Path(warehouse.root)
    assert files_holding(root) == []
    tables = delta_tables(root)
    assert root / "_system" / "history_log" / "customers" in tables
    holding = {str(t.relative_to(root)): versions_holding(spark, t) for t in tables}
    assert {table: found for table, found in holding.items() if found} == {}
    assert dict(report.removed) == {
        "bronze.pg_public_customers": 5,
        "silver.customers": 1,
        "silver.quarantine": 1,  # the unknown op
        "silver.customers_history": 3,  # Ada, Ada Lovelace (deleted), Ada Again
        "_system.history_log.customers": 4,  # the changes
    }, report.removed
    kept = load(spark, warehouse, "silver", "customers").select("id", "name").collect()
    assert sorted(tuple(r) for r in kept) == [(1, "Bob B"), (2, "Cy")]


def test_history_rebuilt_after_forget_does_not_bring_the_key_back(
    spark: SparkSession, scd2_forgotten: tuple[Warehouse, ForgetReport], tmp_path: Path
) -> None:
    """A new customer 7 arrives: its history is rebuilt from the log, which must not hold the
    forgotten customer's events any more."""
    warehouse = copy_warehouse(Path(scd2_forgotten[0].root), tmp_path / "wh")
    bronze = warehouse.table("bronze", table_name_for_topic(TOPIC))
    again = [customer_change(TOPIC, 8, "c", FORGOTTEN_ID, (100, 50), "Eve", "new")]
    bronze_frame(spark, again, 2).write.format("delta").mode("append").save(bronze)
    run_from_bronze(spark, warehouse, SCD2_CONFIG)
    history = load(spark, warehouse, "silver", "customers_history").where(
        F.col("id") == FORGOTTEN_ID
    )
    assert [(r.name, r.notes, r["__is_current"]) for r in history.collect()] == [
        ("Eve", "new", True)
    ]
    assert files_holding(Path(warehouse.root)) == []


def test_forget_purges_what_deletion_vectors_only_mark_deleted(
    spark: SparkSession, tmp_path: Path
) -> None:
    """With ``deletion_vectors``, a MERGE or DELETE leaves the rows it replaces in their files
    (a vector marks them deleted): ``forget`` rewrites those files before its VACUUM."""
    config = PipelineConfig(tables=(replace(CUSTOMERS, deletion_vectors=True),))
    warehouse = build_scd2_warehouse(spark, tmp_path / "wh", config, runs=len(BATCHES))
    silver = warehouse.table("silver", "customers")
    assert deletion_vector_files(spark, silver), "the MERGEs wrote no deletion vector"
    forget(spark, warehouse, config, "customers", {"id": FORGOTTEN_ID}, REASON)
    assert files_holding(Path(warehouse.root)) == []
    kept = load(spark, warehouse, "silver", "customers").select("id", "name").collect()
    assert sorted(tuple(r) for r in kept) == [(1, "Bob B"), (2, "Cy")]


def deletion_vector_files(spark: SparkSession, path: str) -> list[str]:
    """Data files that a commit of the table at ``path`` gave a deletion vector."""
    actions = spark.read.json(f"{path}/_delta_log/*.json")
    marked = actions.where(F.col("add.deletionVector").isNotNull()).select("add.path")
    return [row.path for row in marked.collect()]


def test_forget_of_a_key_nothing_holds_says_so_and_changes_nothing(
    scd2_pristine: Warehouse, tmp_path: Path
) -> None:
    warehouse = copy_warehouse(Path(scd2_pristine.root), tmp_path / "wh")
    config = tmp_path / "pipeline.toml"
    config.write_text(SCD2_TOML, encoding="utf-8")
    before = all_files(Path(warehouse.root))
    result = run_cli(
        "forget",
        "--warehouse",
        warehouse.root,
        "--table",
        "customers",
        "--key",
        '{"id": 999}',
        "--config",
        config,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    said = [line for line in result.stdout.splitlines() if line and not line.startswith("- ")]
    assert said == [
        'nothing in the warehouse holds key {"id": 999} of table customers: nothing changed'
    ], result.stdout
    assert all_files(Path(warehouse.root)) == before


# --------------------------------------------------------------------------------------------
# gold.late_events: its rows about a forgotten key's records go too
# --------------------------------------------------------------------------------------------

CLICKS_TOPIC = "t.clicks"
CLICKS = TableSpec(
    name="clicks",
    topic=CLICKS_TOPIC,
    format="events",
    keys=("event_id",),
    sequence_by=("ts",),
    schema="event_id bigint, user_id bigint, ts timestamp",
)
CLICKS_CONFIG = PipelineConfig(
    tables=(CLICKS,),
    gold_tables=(
        GoldTable(
            "clicks_per_10_minutes",
            "clicks",
            "ts",
            Window("tumbling", size="10 minutes"),
            (Measure("clicks", "count"),),
            group_by=("user_id",),
            watermark_delay="1 minute",
        ),
    ),
)


def click(offset: int, event_id: int, minute: int) -> Record:
    value = {"event_id": event_id, "user_id": 1, "ts": f"2026-01-01T10:{minute:02d}:00Z"}
    return Record(CLICKS_TOPIC, 0, offset, 0, {"event_id": event_id}, value)


def test_forget_removes_the_late_events_of_the_key(spark: SparkSession, tmp_path: Path) -> None:
    """Clicks 3 and 4 arrive after the watermark passed their window: both are late events.
    Forgetting click 3 removes its late row (and the one its retraction adds), keeps click 4's
    and leaves no readable version of gold.late_events with a row about click 3's record."""
    warehouse = Warehouse.from_path(tmp_path / "wh")
    bronze = warehouse.table("bronze", table_name_for_topic(CLICKS_TOPIC))
    ensure_bronze_table(spark, bronze, CLICKS_TOPIC)
    deliveries = [[click(0, 1, 0), click(1, 2, 30)], [click(2, 3, 5), click(3, 4, 6)]]
    for batch_id, records in enumerate(deliveries):
        bronze_frame(spark, records, batch_id).write.format("delta").mode("append").save(bronze)
        run_from_bronze(spark, warehouse, CLICKS_CONFIG)
    late_path = warehouse.table("gold", LATE_EVENTS)
    late_offsets = {r.bronze_offset for r in load(spark, warehouse, "gold", LATE_EVENTS).collect()}
    assert late_offsets == {2, 3}  # the test's premise: clicks 3 and 4 landed late

    report = forget(spark, warehouse, CLICKS_CONFIG, "clicks", {"event_id": 3}, REASON)

    removed = dict(report.removed)
    assert removed[f"bronze.{table_name_for_topic(CLICKS_TOPIC)}"] == 1
    assert removed[f"gold.{LATE_EVENTS}"] >= 1, report.removed
    kept = load(spark, warehouse, "gold", LATE_EVENTS).collect()
    assert {r.bronze_offset for r in kept} == {3}, kept
    holding = []
    for version in versions(spark, late_path):
        frame = spark.read.format("delta").option("versionAsOf", version).load(late_path)
        if found_in(frame, F.col("bronze_offset") == 2):
            holding.append(version)
    assert holding == [], f"gold.late_events versions {holding} still hold click 3's record"
    counts = load(spark, warehouse, "gold", "clicks_per_10_minutes").collect()
    assert sorted((str(r.window_start), r.clicks) for r in counts) == [
        ("2026-01-01 10:00:00", 2),  # clicks 1 and 4
        ("2026-01-01 10:30:00", 1),
    ]
