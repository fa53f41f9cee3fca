"""Values of the wrong type are never silently nulled (issue 63, item 5).

A value its column's type does not hold (a string in a number column, a number beyond an
integer's range, text that is no timestamp or date, an object where a flat value is due) in an
``events`` table of a declared schema or in a Debezium record with a Connect schema: under
``on_type_mismatch = "quarantine"`` (the default) the record is quarantined with ``value of
column <c> does not fit <type>``; under ``"rescue"`` it is applied with that column null and
the value, as sent, in ``_rescued_data``. Silver, the quarantine table, the reference fold and
``verify`` agree on it. And ``verify`` counts the lines of ``bronze.unreadable_lines``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bronze.table import with_ingestion_metadata
from cdc.files import UNREADABLE_TOPIC, lines_to_records
from cdc.records import Record
from lakehouse.ops.audit import check_bronze_coordinates
from lakehouse.ops.status import _rescued_rows
from lakehouse_core.columns import RESCUED
from lakehouse_core.config import TableSpec
from lakehouse_core.delta_io import table_exists
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import Warehouse
from lakehouse_core.specs import TypeMismatchPolicy
from silver.job import QueryState, apply_batch, entity_tables
from silver.reference import BronzeRecord, fold
from silver.verify import canonical_rows, check_table, fold_spec
from tests.draws import draw_examples, example_count, property_seed
from tests.helpers import b64_int, bronze_frame, connect_field, pg_envelope, pg_key

pytestmark = pytest.mark.integration

READINGS = TableSpec(
    name="readings",
    topic="sensors.readings",
    format="events",
    keys=("id",),
    sequence_by=("v",),
    schema=(
        "id string, v bigint, temp double, n int, ok boolean, at timestamp, day date, label string"
    ),
)
CUSTOMERS = TableSpec(name="customers", topic="shop.public.customers")

#: Per column of ``READINGS``: values its type holds, and values it does not.
EVENT_VALUES: dict[str, tuple[list[Any], list[Any]]] = {
    "temp": ([1.5, -2, 0.25], ["hot", "1.5", "NaN", True, {"c": 1}, [1.5]]),
    "n": ([7, -(2**31), 2**31 - 1], [2**31, -(2**31) - 1, 1.5, "7", {"a": 1}, [7]]),
    "ok": ([True, False], ["true", 1, {"a": True}]),
    "at": (
        ["2026-01-02T03:04:05Z", "2026-01-02T03:04:05.123+02:00"],
        ["yesterday", 1_767_225_600, "2026-13-01T00:00:00Z", {"t": 1}],
    ),
    "day": (["2026-01-02"], ["2026-02-30", 20_000, "2026/01/02", "soon"]),
    "label": (["x", ""], [5, {"a": "b"}, ["x"], True, 1.5]),
}

#: Debezium columns: (Connect field, values their type holds, values it does not).
CDC_COLUMNS: list[tuple[dict[str, Any], list[Any], list[Any]]] = [
    (connect_field("i32", "int32"), [5, -7], ["5", 2**31, 1.5, {"a": 1}, True]),
    (connect_field("i64", "int64"), [2**40], [2**63, "x", [1]]),
    (connect_field("dbl", "double"), [1.25, 3], ["hot", {"a": 1}, True]),
    (connect_field("flag", "boolean"), [True], ["true", 0]),
    (connect_field("txt", "string"), ["a", 5], []),  # text holds any value (its JSON text)
    (
        connect_field("ts", "int64", "io.debezium.time.MicroTimestamp"),
        [1_700_000_000_000_000],
        ["2024-01-01", 1.5],
    ),
    (connect_field("d", "int32", "io.debezium.time.Date"), [19_723], ["2024-01-01", 2**40]),
    (
        connect_field("zt", "string", "io.debezium.time.ZonedTimestamp"),
        ["2024-01-01T00:00:00Z"],
        ["yesterday", 5],
    ),
    (connect_field("raw", "bytes"), ["AQID"], ["!!", 5]),
    (
        connect_field(
            "amt",
            "bytes",
            "org.apache.kafka.connect.data.Decimal",
            parameters={"scale": "2", "connect.decimal.precision": "10"},
        ),
        [b64_int(12_345)],
        ["!!", b64_int(10**12)],
    ),
    (connect_field("tags", "array", items={"type": "int32"}), [[1, 2]], [["a"], {"a": 1}]),
]
CDC_FIELDS = [connect_field("id", "int32"), *(field for field, _, _ in CDC_COLUMNS)]


def _value(draw: st.DrawFn, good: Sequence[Any], bad: Sequence[Any]) -> tuple[bool, Any]:
    """(whether it is absent, the value): absent, null, one the type holds, or one it does not."""
    kind = draw(st.sampled_from(("absent", "null", "good", "bad") if bad else ("null", "good")))
    if kind == "absent":
        return True, None
    if kind == "null":
        return False, None
    return False, draw(st.sampled_from(list(good if kind == "good" else bad)))


@st.composite
def event_records(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A few readings of a few ids, each column absent, null, fitting or not."""
    readings = []
    for _ in range(draw(st.integers(1, 4))):
        reading: dict[str, Any] = {
            "id": f"r{draw(st.integers(0, 2))}",
            "v": draw(st.integers(0, 3)),
        }
        for column, (good, bad) in EVENT_VALUES.items():
            absent, value = _value(draw, good, bad)
            if not absent:
                reading[column] = value
        readings.append(reading)
    return readings


@st.composite
def cdc_rows(draw: st.DrawFn) -> list[tuple[str, int, dict[str, Any]]]:
    """A few changes (op, key, after image) of a few keys."""
    changes = []
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.integers(0, 2))
        op = draw(st.sampled_from(("c", "u", "u", "r", "d")))
        image: dict[str, Any] = {"id": key}
        for field, good, bad in CDC_COLUMNS:
            absent, value = _value(draw, good, bad)
            if not absent:
                image[field["field"]] = value
        changes.append((op, key, image))
    return changes


def _apply(
    spark: SparkSession, warehouse: Path, spec: TableSpec, batches: list[list[Record]]
) -> None:
    """Apply the batches to a fresh silver table, and keep their records in bronze."""
    tables = entity_tables(Warehouse.from_path(warehouse), spec)
    state = QueryState()  # kept between batches, as the streaming query keeps it
    for batch_id, records in enumerate(batches):
        if records:
            apply_batch(
                bronze_frame(spark, records, batch_id), batch_id, spec, tables, "t", state=state
            )
    bronze = Warehouse.from_path(warehouse).table("bronze", table_name_for_topic(spec.topic))
    every = [record for batch in batches for record in batch]
    bronze_frame(spark, every).write.format("delta").save(bronze)


def _agree(spark: SparkSession, warehouse: Path, spec: TableSpec) -> dict[tuple[int, int], str]:
    """Check that silver, the quarantine table, the fold and ``verify`` agree on the records
    :func:`_apply` applied; return the quarantine's reasons by (partition, offset)."""
    root = Warehouse.from_path(warehouse)
    tables = entity_tables(root, spec)
    bronze = root.table("bronze", table_name_for_topic(spec.topic))
    silver = spark.read.format("delta").load(tables.silver)
    records = spark.read.format("delta").load(bronze).orderBy("partition", "offset").collect()
    expected = fold(
        [BronzeRecord(r.topic, r.partition, r.offset, r.key, r.value) for r in records],
        fold_spec(spec, silver.schema),
    )
    reasons: dict[tuple[int, int], str] = {}
    if table_exists(spark, tables.quarantine):
        quarantined = spark.read.format("delta").load(tables.quarantine)
        for row in quarantined.where(F.col("entity") == spec.name).collect():
            reasons[(row.partition, row.offset)] = row.reason
    assert reasons == {(r.partition, r.offset): why for r, why in expected.quarantined}
    width = len(spec.keys or ("id",))
    actual = {tuple(row.values())[:width]: row for row in canonical_rows(silver)}
    assert actual == expected.rows
    check = check_table(spark, bronze, tables.silver, spec, tables.quarantine)
    assert check.ok, check.differences[:5]
    return reasons


MODES: tuple[TypeMismatchPolicy, ...] = ("quarantine", "rescue")


@pytest.mark.parametrize("mode", MODES)
def test_a_reading_of_the_wrong_type_is_never_nulled(
    spark: SparkSession, tmp_path: Path, mode: TypeMismatchPolicy
) -> None:
    """The issue's trial: ``temp: "hot"`` where the schema says double."""
    spec = replace(READINGS, on_type_mismatch=mode)
    good = {"id": "r-good", "v": 1, "temp": 21.5}
    hot = {"id": "r-bad-hot", "v": 1, "temp": "hot", "n": 3}
    records = [
        Record(READINGS.topic, 0, offset, 1_000, {"id": value["id"]}, value)
        for offset, value in enumerate([good, hot])
    ]
    _apply(spark, tmp_path, spec, [records])
    reasons = _agree(spark, tmp_path, spec)
    silver = spark.read.format("delta").load(
        entity_tables(Warehouse.from_path(tmp_path), spec).silver
    )
    rows = {r.id: r for r in silver.collect()}
    if mode == "quarantine":
        assert reasons == {(0, 1): "value of column temp does not fit double"}
        assert set(rows) == {"r-good"} and RESCUED not in silver.columns
    else:
        assert reasons == {}
        assert (rows["r-bad-hot"].temp, rows["r-bad-hot"].n) == (None, 3)
        assert json.loads(rows["r-bad-hot"][RESCUED]) == {"temp": "hot"}
        assert rows["r-good"][RESCUED] is None
        path = entity_tables(Warehouse.from_path(tmp_path), spec).silver
        files = pa.table(DeltaTable(path).get_add_actions(flatten=True))
        assert _rescued_rows(files) == 1  # what status shows, read without Spark


@pytest.mark.parametrize("mode", MODES)
def test_wrong_typed_values_in_events_agree(
    spark: SparkSession, tmp_path: Path, mode: TypeMismatchPolicy
) -> None:
    """Property: readings whose columns are absent, null, of their type or not; each example
    on ids of its own, delivered in two micro-batches."""
    spec = replace(READINGS, on_type_mismatch=mode)
    seed = property_seed("WRONG_TYPES_SEED")
    examples = draw_examples(event_records(), seed, example_count(30))
    batches: list[list[Record]] = [[], []]
    offset = 0
    for index, readings in enumerate(examples):
        for number, reading in enumerate(readings):
            value = {**reading, "id": f"e{index}-{reading['id']}"}
            record = Record(READINGS.topic, 0, offset, 1_000, {"id": value["id"]}, value)
            batches[number % 2].append(record)
            offset += 1
    _apply(spark, tmp_path, spec, batches)
    _misfits_seen(spark, tmp_path, spec, _agree(spark, tmp_path, spec), seed)


@pytest.mark.parametrize("mode", MODES)
def test_wrong_typed_values_in_cdc_records_agree(
    spark: SparkSession, tmp_path: Path, mode: TypeMismatchPolicy
) -> None:
    """Property: Debezium changes (Connect schema) whose columns are absent, null, of their
    type or not; each example on keys of its own, delivered in two micro-batches."""
    spec = replace(CUSTOMERS, on_type_mismatch=mode)
    seed = property_seed("WRONG_TYPES_SEED")
    examples = draw_examples(cdc_rows(), seed, example_count(30))
    batches: list[list[Record]] = [[], []]
    offset, lsn = 0, 1_000
    for index, changes in enumerate(examples):
        for number, (op, key, image) in enumerate(changes):
            key_id = index * 10 + key
            after = None if op == "d" else {**image, "id": key_id}
            before = {"id": key_id} if op == "d" else None
            value = pg_envelope(op, (None, lsn), after, before, fields=CDC_FIELDS)
            record = Record(CUSTOMERS.topic, 0, offset, 1_000, pg_key(key_id), value)
            batches[number % 2].append(record)
            offset, lsn = offset + 1, lsn + 10
    _apply(spark, tmp_path, spec, batches)
    _misfits_seen(spark, tmp_path, spec, _agree(spark, tmp_path, spec), seed)


def _misfits_seen(
    spark: SparkSession, warehouse: Path, spec: TableSpec, reasons: dict[Any, str], seed: int
) -> None:
    """The examples held values of the wrong type: quarantined, or rescued into silver."""
    if spec.on_type_mismatch == "quarantine":
        assert any("does not fit" in why for why in reasons.values()), f"seed {seed}"
        return
    assert not any("does not fit" in why for why in reasons.values()), f"seed {seed}"
    silver = spark.read.format("delta").load(
        entity_tables(Warehouse.from_path(warehouse), spec).silver
    )
    assert silver.where(F.col(RESCUED).isNotNull()).count() > 0, f"seed {seed}"


def test_verify_counts_the_unreadable_lines(spark: SparkSession, tmp_path: Path) -> None:
    """A line no record could be read from is a row held and expected, not left out."""
    warehouse = Warehouse.from_path(tmp_path)
    name = table_name_for_topic(UNREADABLE_TOPIC)
    good = Record("t", 0, 0, 1_000, {"id": 1}, {"id": 1}).to_line()
    lines = [(good, "f"), ("not json", "f"), ('{"topic": 1', "f")]
    frame = lines_to_records(spark.createDataFrame(lines, "value string, _source string"))
    with_ingestion_metadata(frame, 0).write.format("delta").save(warehouse.table("bronze", name))
    check = check_bronze_coordinates(spark, warehouse, name)
    assert (check.actual_rows, check.expected_rows, check.ok) == (3, 3, True)
