"""Schema evolution (docs/silver-semantics.md, "Schema changes").

The first test is a running pipeline: the continuous runner's queries (silver from a bronze
table, the gold revenue job on silver's change feed) on a processing-time trigger, caught up
with ``processAllAvailable`` after each append to bronze. The source adds a column; silver's
query keeps running, the gold query is restarted from its checkpoint by the runner.

The other tests apply micro-batches through ``apply_batch``, then run the gold job across the
type changes (as ``run --once`` does), or the silver job for the error line the user sees.
Silver agrees with the reference fold (``lakehouse verify``), gold with silver.
"""

from __future__ import annotations

import base64
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from bronze.table import ensure_bronze_table
from cdc.records import Record
from gold.jobs import query_name, start_gold
from lakehouse.run.pipeline import RunningQueries, start_ready
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.delta_io import TYPE_WIDENING_PROPERTY
from lakehouse_core.errors import SchemaChangeError
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import Trigger, run_to_end
from lakehouse_core.widening import TYPE_WIDENING_MODES, TypeWidening
from lakehouse_demo.settings import ShopGoldSpec, shop_gold_tables
from silver.job import QueryState, apply_batch, entity_tables, start_silver
from silver.verify import check_history, check_table
from tests.delta_rs import assert_delta_rs_reads_same_rows
from tests.helpers import bronze_frame, pg_envelope

pytestmark = pytest.mark.integration

TOPIC = "shop.public.orders"
SPEC = TableSpec(name="orders", topic=TOPIC)
QUARANTINING = TableSpec(name="orders", topic=TOPIC, on_incompatible_type="quarantine")
FAILING = TableSpec(name="orders", topic=TOPIC, on_incompatible_type="fail")
BASE_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in microseconds
MINUTE = 60_000_000

REVENUE = shop_gold_tables(ShopGoldSpec())[0]
REVENUE_TABLE = REVENUE.name
REVENUE_QUERY = query_name(REVENUE)


# --------------------------------------------------------------------------------------------
# Debezium records of an orders table whose schema changes
# --------------------------------------------------------------------------------------------


def field(column: str, type_: str, **extra: Any) -> dict[str, Any]:
    """A Connect struct field (``name`` in ``extra``: a logical type)."""
    return {"type": type_, "optional": column != "id", **extra, "field": column}


def decimal_field(name: str, precision: int, scale: int) -> dict[str, Any]:
    parameters = {"scale": str(scale), "connect.decimal.precision": str(precision)}
    return field(name, "bytes", name="org.apache.kafka.connect.data.Decimal", parameters=parameters)


def micros_field(name: str) -> dict[str, Any]:
    return field(name, "int64", name="io.debezium.time.MicroTimestamp")


V1 = [
    field("id", "int64"),
    decimal_field("total", 10, 2),
    field("qty", "int32"),
    micros_field("created_at"),
]
V2 = [*V1, field("coupon", "string")]  # ALTER TABLE orders ADD COLUMN coupon text


def encode_decimal(value: str, scale: int) -> str:
    """Connect's precise decimal: base64 of the big-endian two's-complement unscaled value."""
    unscaled = int(Decimal(value).scaleb(scale))
    size = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode()


def order(
    offset: int,
    op: str,
    id_: int,
    lsn: int,
    fields: Sequence[dict[str, Any]],
    **values: Any,
) -> Record:
    """A wrapped Debezium event for one order; ``values`` in plain form (decimals as text)."""
    row: dict[str, Any] = {"id": id_}
    for spec in fields:
        name = spec["field"]
        if name in values and values[name] is not None and spec["type"] == "bytes":
            row[name] = encode_decimal(values[name], int(spec["parameters"]["scale"]))
        elif name != "id":
            row[name] = values.get(name)
    key = {
        "schema": {"type": "struct", "fields": [field("id", "int64")]},
        "payload": {"id": id_},
    }
    after, before = (None, {"id": id_}) if op == "d" else (row, None)
    value = pg_envelope(op, (100, lsn), after=after, before=before, fields=fields)
    return Record(TOPIC, 0, offset, 1_000 + offset, key, value)


def silver_rows(spark: SparkSession, path: str, *columns: str) -> list[tuple[Any, ...]]:
    frame = spark.read.format("delta").load(path)
    return sorted(tuple(r) for r in frame.select(*columns).collect())


def dtypes(spark: SparkSession, path: str) -> dict[str, str]:
    return dict(spark.read.format("delta").load(path).dtypes)


def widens_in_place(spark: SparkSession, path: str) -> bool:
    """Whether the table has Delta's type widening feature on (a reader feature)."""
    detail = DeltaTable.forPath(spark, path).detail().select("properties").first()
    assert detail is not None
    return bool(detail.properties.get(TYPE_WIDENING_PROPERTY) == "true")


def operations(spark: SparkSession, path: str) -> list[str]:
    history = DeltaTable.forPath(spark, path).history().select("version", "operation").collect()
    return [r.operation for r in sorted(history)]


def assert_verified(spark: SparkSession, warehouse: Warehouse, spec: TableSpec) -> None:
    """``lakehouse verify`` for one table: silver equals the reference fold of bronze."""
    bronze = warehouse.table("bronze", table_name_for_topic(spec.topic))
    check = check_table(spark, bronze, warehouse.table("silver", spec.name), spec)
    assert check.ok, check.differences
    assert check.expected_rows == check.actual_rows > 0


def expected_revenue(spark: SparkSession, silver: str) -> dict[Any, tuple[Decimal, int]]:
    """Revenue and order count per minute of order time, computed from silver itself."""
    totals: dict[Any, list[Any]] = defaultdict(lambda: [Decimal(0), 0])
    for row in spark.read.format("delta").load(silver).collect():
        window = row.created_at.replace(second=0, microsecond=0)
        totals[window][0] += row.total or 0
        totals[window][1] += 1
    return {k: (v[0], v[1]) for k, v in totals.items()}


def gold_revenue(spark: SparkSession, path: str) -> dict[Any, tuple[Decimal, int]]:
    rows = spark.read.format("delta").load(path).collect()
    return {r.window_start: (r.revenue, r.orders) for r in rows}


# --------------------------------------------------------------------------------------------
# A running pipeline
# --------------------------------------------------------------------------------------------


def test_schema_evolution_in_a_running_stream(spark: SparkSession, tmp_path: Path) -> None:
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    config = PipelineConfig(gold_tables=(REVENUE,))
    bronze = warehouse.table("bronze", table_name_for_topic(TOPIC))
    silver = warehouse.table("silver", "orders")
    trigger = Trigger(processing_time="1 second")
    running = RunningQueries()

    def land(records: list[Record], batch_id: int) -> None:
        """Append records to bronze, as the bronze job does."""
        bronze_frame(spark, records, batch_id).write.format("delta").mode("append").save(bronze)

    ensure_bronze_table(spark, bronze, TOPIC)
    land(
        [
            order(0, "c", 1, 10, V1, total="10.50", qty=1, created_at=BASE_US),
            order(1, "c", 2, 11, V1, total="20.00", qty=2, created_at=BASE_US + MINUTE),
        ],
        0,
    )
    try:
        start_ready(spark, warehouse, config, trigger, running)  # silver: bronze exists
        running.catch_up()
        start_ready(spark, warehouse, config, trigger, running)  # gold: silver exists now
        running.catch_up()
        silver_run = running.query("silver_orders").runId
        gold_run = running.query(REVENUE_QUERY).runId

        # A column is added in the source; an older record of the old schema arrives later.
        land(
            [
                order(2, "u", 1, 20, V2, total="11.00", qty=1, created_at=BASE_US, coupon="X"),
                order(3, "c", 3, 21, V2, total="5.25", qty=3, created_at=BASE_US, coupon="Y"),
                order(4, "c", 4, 12, V1, total="7.00", qty=1, created_at=BASE_US + 2 * MINUTE),
            ],
            1,
        )
        running.catch_up()

        assert "coupon" in dtypes(spark, silver)
        assert silver_rows(spark, silver, "id", "coupon", "total") == [
            (1, "X", Decimal("11.00")),
            (2, None, Decimal("20.00")),  # written before the column existed
            (3, "Y", Decimal("5.25")),
            (4, None, Decimal("7.00")),  # an older record: it has no such column
        ]
        assert running.query("silver_orders").runId == silver_run  # never restarted
        # Stopped by the schema change, continued from its checkpoint.
        assert running.query(REVENUE_QUERY).runId != gold_run
        assert gold_revenue(spark, warehouse.table("gold", REVENUE_TABLE)) == expected_revenue(
            spark, silver
        )
        assert all(running.query(name).isActive for name in running.names())
    finally:
        running.stop()


# --------------------------------------------------------------------------------------------
# Single micro-batches
# --------------------------------------------------------------------------------------------

W1 = [
    field("id", "int64"),
    decimal_field("total", 10, 2),
    field("qty", "int32"),
    field("points", "int32"),
    micros_field("created_at"),
]
W2 = [  # numeric(10,2) -> numeric(12,4), integer -> bigint, integer -> numeric(12,2), new column
    field("id", "int64"),
    decimal_field("total", 12, 4),
    field("qty", "int64"),
    decimal_field("points", 12, 2),
    micros_field("created_at"),
    field("coupon", "string"),
]
AS_TEXT = [field("id", "int64"), field("total", "string"), field("qty", "int32")]


class Lake:
    """A fresh warehouse; each batch is appended to bronze and applied to silver."""

    def __init__(self, spark: SparkSession, root: Path, spec: TableSpec = SPEC) -> None:
        self.spark = spark
        self.warehouse = Warehouse(str(root))
        self.bronze = self.warehouse.table("bronze", table_name_for_topic(TOPIC))
        self.silver = self.warehouse.table("silver", "orders")
        self.tables = entity_tables(self.warehouse, spec)
        self.state = QueryState()  # kept between batches, as the streaming query keeps it
        ensure_bronze_table(spark, self.bronze, TOPIC)

    def apply(
        self, records: list[Record], batch_id: int, spec: TableSpec = SPEC, land: bool = True
    ) -> int:
        """Apply a batch (appended to bronze first unless ``land`` is false); the number of
        records it quarantined."""
        frame = bronze_frame(self.spark, records, batch_id)
        if land:
            frame.write.format("delta").mode("append").save(self.bronze)
        report = apply_batch(frame, batch_id, spec, self.tables, "evolution-test", state=self.state)
        return report.quarantined


@pytest.fixture
def lake(spark: SparkSession, tmp_path: Path) -> Lake:
    return Lake(spark, tmp_path)


NEW = {"total": "2.1234", "qty": 2**40, "points": "7.25"}


@pytest.mark.parametrize("widening", TYPE_WIDENING_MODES)
def test_widening_with_old_and_new_records_in_one_batch(lake: Lake, widening: TypeWidening) -> None:
    spec = replace(SPEC, type_widening=widening)
    lake.apply(
        [
            order(0, "c", 1, 10, W1, total="1.50", qty=1, points=7, created_at=BASE_US),
            order(1, "c", 2, 11, W1, total="5.50", qty=2, points=8, created_at=BASE_US),
        ],
        0,
        spec,
    )
    # A table no type was widened in is open to every Delta reader.
    assert not widens_in_place(lake.spark, lake.silver)
    assert_delta_rs_reads_same_rows(lake.spark, lake.silver)
    # New-schema records first in bronze, an older record of the old schema after them.
    lake.apply(
        [
            order(2, "u", 1, 30, W2, **NEW, created_at=BASE_US, coupon="X"),
            order(3, "c", 3, 15, W1, total="3.00", qty=3, points=9, created_at=BASE_US + MINUTE),
        ],
        1,
        spec,
    )

    types = dtypes(lake.spark, lake.silver)
    assert (types["total"], types["qty"], types["points"], types["coupon"]) == (
        "decimal(12,4)",
        "bigint",
        "decimal(12,2)",
        "string",
    )
    assert silver_rows(lake.spark, lake.silver, "id", "total", "qty", "points", "coupon") == [
        (1, Decimal("2.1234"), 2**40, Decimal("7.25"), "X"),
        (2, Decimal("5.5000"), 2, Decimal("8.00"), None),
        (3, Decimal("3.0000"), 3, Decimal("9.00"), None),
    ]
    if widening == "in_place":
        # integer -> decimal needs ALTER TABLE; the rest came with the schema-merging write.
        assert operations(lake.spark, lake.silver)[-3:] == ["WRITE", "CHANGE COLUMN", "MERGE"]
        assert widens_in_place(lake.spark, lake.silver)
    else:
        # One overwrite in the wider types, and the table stays open to every Delta reader.
        assert operations(lake.spark, lake.silver)[-2:] == ["WRITE", "MERGE"]
        assert not widens_in_place(lake.spark, lake.silver)
        assert_delta_rs_reads_same_rows(lake.spark, lake.silver)
    assert_verified(lake.spark, lake.warehouse, spec)

    # The gold revenue job reads silver's change feed from the start, across the type changes:
    # each stops it once, and it continues from its checkpoint (``run --once`` does this).
    restarts: list[str] = []
    job = partial(start_gold, lake.spark, lake.warehouse, Trigger(), REVENUE)
    run_to_end(job, lambda query: restarts.append(str(query.name)))
    assert restarts and set(restarts) == {REVENUE_QUERY}
    gold = lake.warehouse.table("gold", REVENUE_TABLE)
    assert gold_revenue(lake.spark, gold) == expected_revenue(lake.spark, lake.silver)
    # Gold widens by rewriting, whatever silver does.
    assert not widens_in_place(lake.spark, gold)
    assert_delta_rs_reads_same_rows(lake.spark, gold)


def test_incompatible_type_fails_or_quarantines_as_configured(lake: Lake) -> None:
    lake.apply(
        [
            order(0, "c", 1, 10, W1, total="1.50", qty=1, points=7),
            order(1, "c", 2, 11, W1, total="2.50", qty=2, points=7),
            order(2, "c", 3, 12, W1, total="3.50", qty=3, points=7),
        ],
        0,
    )
    before = operations(lake.spark, lake.silver)
    incompatible = order(3, "u", 1, 20, AS_TEXT, total="a lot", qty=5)
    batch = [
        incompatible,
        order(4, "u", 2, 21, AS_TEXT, total=None, qty=6),  # no value there
        order(5, "d", 3, 22, AS_TEXT),  # a delete carries no row values
        order(6, "c", 4, 23, W1, total="4.00", qty=7, points=1),
    ]

    # on_incompatible_type = "fail": nothing of the batch is written.
    with pytest.raises(SchemaChangeError) as direct:
        lake.apply(batch, 1, FAILING)
    message = str(direct.value)
    for part in (
        "silver.orders",
        "column 'total'",
        "decimal(10,2) in the table",
        "but string in records of topic shop.public.orders",
        "partition 0, offset 3",
        'on_incompatible_type = "quarantine"',
        "replay",
    ):
        assert part in message
    assert "\n" not in message
    assert operations(lake.spark, lake.silver) == before
    assert not DeltaTable.isDeltaTable(lake.spark, lake.tables.quarantine)

    # The same error, raised inside the streaming job's foreachBatch, reaches the caller as
    # itself (the command line prints it as its one error line), not as a Spark trace.
    job = partial(start_silver, lake.spark, lake.warehouse, FAILING, Trigger())
    with pytest.raises(SchemaChangeError) as streamed:
        run_to_end(job)
    assert str(streamed.value) == message

    # on_incompatible_type = "quarantine" (the default): that record is quarantined, the
    # rest applied.
    assert SPEC.on_incompatible_type == "quarantine"
    assert lake.apply(batch, 1, SPEC, land=False) == 1
    quarantine = lake.spark.read.format("delta").load(lake.tables.quarantine)
    assert [tuple(r) for r in quarantine.select("offset", "reason", "key", "value").collect()] == [
        (
            3,
            "incompatible type for column total: table decimal(10,2), record string",
            incompatible.key_bytes,
            incompatible.value_bytes,
        )
    ]
    assert silver_rows(lake.spark, lake.silver, "id", "total", "qty", "_bronze_offset") == [
        (1, Decimal("1.50"), 1, 0),  # unchanged: its update is in quarantine
        (2, None, 6, 4),
        (4, Decimal("4.00"), 7, 6),
    ]
    assert dtypes(lake.spark, lake.silver)["total"] == "decimal(10,2)"
    assert_verified(lake.spark, lake.warehouse, QUARANTINING)


def test_a_key_of_another_type_is_quarantined_even_under_fail(lake: Lake) -> None:
    """One producer's key of the wrong type must not stop the entity (issue: poison pills)."""
    lake.apply([order(0, "c", 1, 10, V1, total="1.50", qty=1)], 0)
    text_key = order(1, "c", 2, 11, [field("id", "string"), *V1[1:]], total="2.50", qty=2)
    text_key.key["schema"]["fields"] = [field("id", "string")]
    text_key.key["payload"]["id"] = "two"
    text_key.value["payload"]["after"]["id"] = "two"
    batch = [text_key, order(2, "c", 3, 12, V1, total="3.50", qty=3)]

    assert lake.apply(batch, 1, FAILING) == 1
    quarantine = lake.spark.read.format("delta").load(lake.tables.quarantine)
    assert [tuple(r) for r in quarantine.select("offset", "reason").collect()] == [
        (1, "incompatible type for column id: table bigint, record string")
    ]
    assert silver_rows(lake.spark, lake.silver, "id", "total") == [
        (1, Decimal("1.50")),
        (3, Decimal("3.50")),
    ]
    assert_verified(lake.spark, lake.warehouse, FAILING)


# ALTER TABLE orders ADD COLUMN channel text DEFAULT 'web', ADD COLUMN fee numeric(10,2)
# DEFAULT 1.50, ADD COLUMN note text: Debezium's schema gives the defaults.
D2 = [
    *V1,
    field("channel", "string", default="web"),
    {**decimal_field("fee", 10, 2), "default": encode_decimal("1.50", 2)},
    field("note", "string"),
]


def test_rows_held_before_a_column_is_added_get_its_connect_default(lake: Lake) -> None:
    """Rows the table holds, and late records of the schema before the column, hold the
    column's Connect default, as PostgreSQL's rows do; a record that sends null holds null."""
    lake.apply(
        [
            order(0, "c", 1, 10, V1, total="1.00", qty=1),
            order(1, "c", 2, 11, V1, total="2.00", qty=2),
        ],
        0,
    )
    before = operations(lake.spark, lake.silver)
    lake.apply(
        [
            order(2, "u", 1, 30, D2, total="1.10", qty=1, channel="app", fee="0.10", note="n"),
            order(3, "c", 3, 12, V1, total="3.00", qty=3),  # late, of the schema before
            order(4, "c", 5, 31, D2, total="5.00", qty=5, channel=None, fee=None),
        ],
        1,
    )
    # One overwrite adds the columns with the defaults in every row held, then the MERGE.
    assert operations(lake.spark, lake.silver)[len(before) :] == ["WRITE", "MERGE"]
    lake.apply([order(5, "c", 4, 13, V1, total="4.00", qty=4)], 2)  # a later batch, still late
    columns = ("id", "channel", "fee", "note")
    assert silver_rows(lake.spark, lake.silver, *columns) == [
        (1, "app", Decimal("0.10"), "n"),
        (2, "web", Decimal("1.50"), None),  # held before the ALTER: the default
        (3, "web", Decimal("1.50"), None),
        (4, "web", Decimal("1.50"), None),
        (5, None, None, None),  # null sent: null
    ]
    assert not widens_in_place(lake.spark, lake.silver)
    assert_delta_rs_reads_same_rows(lake.spark, lake.silver)
    assert_verified(lake.spark, lake.warehouse, SPEC)


# ALTER TABLE orders ALTER COLUMN qty TYPE text, ALTER paid TYPE text, ALTER day TYPE text;
# later ALTER COLUMN qty TYPE bigint (text -> integer).
T1 = [
    field("id", "int64"),
    field("qty", "int32"),
    field("paid", "boolean"),
    field("day", "int32", name="io.debezium.time.Date"),
]
T2 = [field("id", "int64"), field("qty", "string"), field("paid", "string"), field("day", "string")]
T3 = [*T2[:1], field("qty", "int64"), *T2[2:]]


def test_integers_booleans_and_dates_that_become_text_rewrite_the_column(lake: Lake) -> None:
    """A lossless change to text rewrites the column (every reader still opens the table); the
    records of the old type, late ones too, are applied as their text; and a text column that
    becomes an integer again stays text, its integers written as text: nothing stops."""
    lake.apply(
        [
            order(0, "c", 1, 10, T1, qty=1, paid=True, day=19000),
            order(1, "c", 2, 11, T1, qty=2, paid=False, day=20000),
        ],
        0,
    )
    before = operations(lake.spark, lake.silver)
    lake.apply(
        [
            order(2, "u", 1, 30, T2, qty="a dozen", paid="yes", day="soon"),
            order(3, "c", 3, 12, T1, qty=-3, paid=True, day=0),  # late, of the old types
        ],
        1,
    )
    # One overwrite in the new types (no Delta widening, no reader feature), then the MERGE.
    assert operations(lake.spark, lake.silver)[len(before) :] == ["WRITE", "MERGE"]
    types = dtypes(lake.spark, lake.silver)
    assert (types["qty"], types["paid"], types["day"]) == ("string", "string", "string")
    assert silver_rows(lake.spark, lake.silver, "id", "qty", "paid", "day")[1:] == [
        (2, "2", "false", "2024-10-04"),  # held before: rewritten as its text
        (3, "-3", "true", "1970-01-01"),
    ]
    assert lake.apply([order(4, "u", 2, 40, T3, qty=7, paid="no", day="today")], 2) == 0
    assert dtypes(lake.spark, lake.silver)["qty"] == "string"
    assert silver_rows(lake.spark, lake.silver, "id", "qty", "paid", "day") == [
        (1, "a dozen", "yes", "soon"),
        (2, "7", "no", "today"),
        (3, "-3", "true", "1970-01-01"),
    ]
    assert not DeltaTable.isDeltaTable(lake.spark, lake.tables.quarantine)
    assert not widens_in_place(lake.spark, lake.silver)
    assert_delta_rs_reads_same_rows(lake.spark, lake.silver)
    assert_verified(lake.spark, lake.warehouse, SPEC)


def test_the_history_of_a_type_2_table_holds_an_added_columns_connect_default(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Every version of the history, those closed before the column was added too, holds the
    default, as the silver rows do; the history agrees with the reference history."""
    spec = replace(SPEC, stored_as_scd_type=2)
    lake = Lake(spark, tmp_path, spec)
    lake.apply(
        [
            order(0, "c", 1, 10, V1, total="1.00", qty=1),
            order(1, "u", 1, 11, V1, total="1.50", qty=1),
            order(2, "c", 2, 12, V1, total="2.00", qty=2),
        ],
        0,
        spec,
    )
    lake.apply(
        [
            order(3, "u", 2, 30, D2, total="2.50", qty=2, channel="app", fee="0.10"),
            order(4, "c", 3, 13, V1, total="3.00", qty=3),  # late, of the schema before
        ],
        1,
        spec,
    )
    assert lake.tables.history is not None
    history = lake.tables.history.history
    assert silver_rows(spark, history, "id", "total", "channel", "fee") == [
        (1, Decimal("1.00"), "web", Decimal("1.50")),
        (1, Decimal("1.50"), "web", Decimal("1.50")),
        (2, Decimal("2.00"), "web", Decimal("1.50")),
        (2, Decimal("2.50"), "app", Decimal("0.10")),
        (3, Decimal("3.00"), "web", Decimal("1.50")),
    ]
    check = check_history(spark, lake.bronze, history, spec)
    assert check.ok, check.differences
    assert_verified(spark, lake.warehouse, spec)
