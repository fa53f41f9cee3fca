"""Connect schemas and payload values of any JSON shape stop nothing.

Schema discovery (``cdc.debezium.check_schema``, ``silver.parse.discover_versions``) takes any
JSON in a record's ``schema``: a schema it cannot read quarantines the records that carry it
with the reason, and the reference fold (``silver.reference``) quarantines the same records
with the same reason. A payload value of an unexpected shape is read as null or quarantines
its record; under ANSI mode (Spark 4's default) no value fails the batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from pyspark.errors import PySparkValueError
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc.debezium import SchemaProblem, check_schema, envelope_row_schema, key_struct, row_codecs
from cdc.records import Record
from lakehouse_core.config import TableSpec
from silver.decode import read_batch
from silver.parse import as_text, discover_versions
from silver.reference import FoldSpec, fold
from tests.helpers import (
    CUSTOMER_FIELDS,
    bronze_frame,
    bronze_record,
    connect_field,
    pg_envelope,
    pg_key,
)

pytestmark = pytest.mark.unit

TOPIC = "pg.public.customers"
SPEC = TableSpec(name="customers", topic=TOPIC, on_incompatible_type="quarantine")
INVALID = "invalid Connect schema: "
MICROS = "io.debezium.time.MicroTimestamp"
FIELDS = [
    *CUSTOMER_FIELDS,
    connect_field(
        "amount", "bytes", "org.apache.kafka.connect.data.Decimal", parameters={"scale": "2"}
    ),
    connect_field("tags", "array", items={"type": "string"}),
    connect_field("seen", "int64", MICROS),
]
#: The envelope schema of a record of :data:`FIELDS`, changed by a test.
Change = Callable[[dict[str, Any]], None]


def value(offset: int, change: Change | None = None, **after: Any) -> dict[str, Any]:
    """A wrapped Postgres insert of row ``offset`` whose envelope schema ``change`` alters."""
    row = {"id": offset, "name": "n", "notes": None, "amount": "AQ==", "tags": ["a"], "seen": 7}
    built = pg_envelope("c", (1, 10 + offset), {**row, **after}, fields=FIELDS)
    document: dict[str, Any] = json.loads(json.dumps(built))  # before, after: schemas of their own
    if change is not None:
        change(document["schema"])
    return document


def record(offset: int, document: Any, key: Any = None) -> Record:
    return Record(TOPIC, 0, offset, 1_000, pg_key(offset) if key is None else key, document)


def after(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``after`` field schema of an envelope schema (the row schema)."""
    side: dict[str, Any] = next(f for f in schema["fields"] if f["field"] == "after")
    return side


def column(schema: dict[str, Any], name: str) -> dict[str, Any]:
    field: dict[str, Any] = next(f for f in after(schema)["fields"] if f["field"] == name)
    return field


def nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


ROW = "value schema > field 'after'"
#: (what, change of the envelope schema, the reason of the records carrying it)
SCHEMA_SHAPES: list[tuple[str, Change, str]] = [
    (
        "fields holding a string (the issue)",
        lambda s: s["fields"].append("x"),
        'value schema > field 4 is not an object: "x"',
    ),
    (
        "row fields not a list",
        lambda s: after(s).update(fields="x"),
        f'{ROW}: fields "x" are not a list',
    ),
    (
        "field name not a string",
        lambda s: column(s, "name").update(field=5),
        f"{ROW} > field 1: name 5 is not a string",
    ),
    (
        "type an object",
        lambda s: column(s, "name").update(type={"a": 1}),
        f"{ROW} > field 'name': type {{\"a\": 1}} is not a Connect type",
    ),
    (
        "type an array",
        lambda s: column(s, "name").update(type=["string"]),
        f"{ROW} > field 'name': type [\"string\"] is not a Connect type",
    ),
    (
        "type a number",
        lambda s: column(s, "id").update(type=32),
        f"{ROW} > field 'id': type 32 is not a Connect type",
    ),
    (
        "type unknown",
        lambda s: column(s, "id").update(type="wat"),
        f"{ROW} > field 'id': type \"wat\" is not a Connect type",
    ),
    (
        "type missing",
        lambda s: column(s, "id").pop("type"),
        f"{ROW} > field 'id': type null is not a Connect type",
    ),
    (
        "name not a string",
        lambda s: column(s, "seen").update(name=7),
        f"{ROW} > field 'seen': name 7 is not a string",
    ),
    (
        "parameters not an object",
        lambda s: column(s, "amount").update(parameters="x"),
        f"{ROW} > field 'amount': parameters \"x\" are not an object",
    ),
    (
        "parameter not a string",
        lambda s: column(s, "amount").update(parameters={"scale": 2}),
        f"{ROW} > field 'amount': parameter 'scale' 2 is not a string",
    ),
    (
        "decimal scale not a number",
        lambda s: column(s, "amount").update(parameters={"scale": "x"}),
        f"{ROW} > field 'amount': decimal parameter 'scale' \"x\" is not a whole number",
    ),
    (
        "decimal scale missing",
        lambda s: column(s, "amount").update(parameters=None),
        f"{ROW} > field 'amount': decimal parameter 'scale' null is not a whole number",
    ),
    (
        "decimal scale huge",
        lambda s: column(s, "amount").update(parameters={"scale": "9" * 40}),
        f"{ROW} > field 'amount': decimal parameter 'scale' \"{'9' * 36}... is not a whole number",
    ),
    (
        "decimal scale beyond its precision",
        lambda s: column(s, "amount").update(
            parameters={"scale": "5", "connect.decimal.precision": "4"}
        ),
        f"{ROW} > field 'amount': decimal scale 5 does not fit precision 4",
    ),
    (
        "decimal precision zero",
        lambda s: column(s, "amount").update(
            parameters={"scale": "0", "connect.decimal.precision": "0"}
        ),
        f"{ROW} > field 'amount': decimal scale 0 does not fit precision 0",
    ),
    (
        "array without items",
        lambda s: column(s, "tags").pop("items"),
        f"{ROW} > field 'tags' > items is not an object: null",
    ),
    (
        "map values not a schema",
        lambda s: column(s, "tags").update(type="map", keys={"type": "string"}, values=5),
        f"{ROW} > field 'tags' > values is not an object: 5",
    ),
    (
        "nested too deep",
        lambda s: column(s, "tags").update(items=nested(40)),
        f"{ROW} > field 'tags'{' > items' * 30} nests deeper than 32 schemas",
    ),
    (
        "repeated name",
        lambda s: after(s)["fields"].append({"type": "string", "field": "NAME"}),
        f"{ROW}: field 'NAME' is repeated (letter case aside)",
    ),
    (
        "row not a struct",
        lambda s: after(s).update(type="string"),
        f'{ROW}: type "string" is not struct',
    ),
    (
        "envelope not a struct",
        lambda s: s.update(type="string"),
        'value schema: type "string" is not struct',
    ),
]


@pytest.mark.parametrize(
    ("change", "reason"), [s[1:] for s in SCHEMA_SHAPES], ids=[s[0] for s in SCHEMA_SHAPES]
)
def test_a_schema_that_cannot_be_read_is_a_schema_problem_in_both_implementations(
    change: Change, reason: str
) -> None:
    document = value(1, change)
    with pytest.raises(SchemaProblem) as raised:
        envelope_row_schema(document["schema"])
    assert str(raised.value) == INVALID + reason
    target = bronze_record(record(1, document))
    assert fold([target], FoldSpec()).quarantined == [(target, INVALID + reason)]


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (None, "key schema is not an object: null"),
        ("x", 'key schema is not an object: "x"'),
        ({"type": 5}, "key schema: type 5 is not a Connect type"),
        ({"type": "struct", "fields": [1]}, "key schema > field 0 is not an object: 1"),
    ],
)
def test_a_key_schema_that_cannot_be_read_quarantines_too(schema: Any, reason: str) -> None:
    key = {"schema": schema, "payload": {"id": 1}}
    target = bronze_record(record(1, value(1), key))
    assert fold([target], FoldSpec()).quarantined == [(target, INVALID + reason)]
    with pytest.raises(SchemaProblem) as raised:
        key_struct(schema)
    assert str(raised.value) == INVALID + reason


def test_check_schema_accepts_what_debezium_writes() -> None:
    document = value(1)
    assert check_schema(document["schema"], "value schema") is document["schema"]
    # Members it does not read may hold anything; null is no name, no parameters, no fields.
    loose = {"type": "struct", "name": None, "parameters": None, "fields": None, "doc": [1]}
    assert check_schema(loose, "key schema") is loose


def test_schemas_that_cannot_be_read_stop_nothing(spark: SparkSession) -> None:
    """One batch: good records and a record of each schema shape. Discovery gives one version
    for all the broken schemas; each of their records is quarantined with its schema's reason,
    the good records are parsed, and the fold agrees record by record."""
    records = [record(0, value(0)), record(1, value(1))]
    records += [
        record(2 + n, value(2 + n, change)) for n, (_, change, _) in enumerate(SCHEMA_SHAPES)
    ]
    texts = as_text(bronze_frame(spark, records))
    versions = discover_versions(texts, SPEC)
    assert [v.problem is None for v in versions] == [True, False]
    _, events = read_batch(texts, SPEC, None, versions)
    reasons = {
        r._bronze_offset: r._reason for r in events.select("_bronze_offset", "_reason").collect()
    }
    assert reasons == {
        0: None,
        1: None,
        **{2 + n: INVALID + reason for n, (_, _, reason) in enumerate(SCHEMA_SHAPES)},
    }
    expected = fold([bronze_record(r) for r in records], FoldSpec())
    assert {r.offset: why for r, why in expected.quarantined} == {
        offset: why for offset, why in reasons.items() if why is not None
    }
    good = events.where(F.col("_reason").isNull()).select("id", "name", "amount", "tags")
    assert sorted(tuple(r) for r in good.collect()) == [
        (0, "n", Decimal("0.01"), ["a"]),
        (1, "n", Decimal("0.01"), ["a"]),
    ]


def test_an_unexpected_error_reading_a_schema_quarantines_its_records(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A last resort: an error reading a schema that no check foresaw quarantines the records
    of that schema with the error; an error of Spark's own is not the schema's, and is
    raised."""

    def failing(struct: Any) -> Any:
        if any(f["field"] == "notes" and f["type"] == "bytes" for f in struct["fields"]):
            raise ZeroDivisionError("a bug")
        return row_codecs(struct)

    monkeypatch.setattr("silver.parse.row_codecs", failing)
    odd = value(1, lambda s: column(s, "notes").update(type="bytes"))
    texts = as_text(bronze_frame(spark, [record(0, value(0)), record(1, odd)]))
    _, events = read_batch(texts, SPEC, None)
    reasons = {
        r._bronze_offset: r._reason for r in events.select("_bronze_offset", "_reason").collect()
    }
    assert reasons == {0: None, 1: "schema cannot be decoded: ZeroDivisionError: a bug"}

    def broken_session(struct: Any) -> Any:
        raise PySparkValueError("a session failure")

    monkeypatch.setattr("silver.parse.row_codecs", broken_session)
    with pytest.raises(PySparkValueError):
        discover_versions(texts, SPEC)


def test_payload_values_of_any_shape_stop_nothing(spark: SparkSession) -> None:
    """Values of unexpected shapes in one batch, under ANSI mode: each record is either read
    or quarantined, as the fold says; a value its column's type does not hold is never read as
    null: its record is quarantined with the column and the type."""
    fields = [
        *FIELDS,
        connect_field("at_ms", "int64", "io.debezium.time.Timestamp"),
        connect_field("zoned", "string", "io.debezium.time.ZonedTimestamp"),
        connect_field("raw", "bytes"),
    ]

    def insert(
        offset: int,
        row: dict[str, Any] | None = None,
        in_source: dict[str, Any] | None = None,
        **payload: Any,
    ) -> Record:
        image = {"id": offset, "name": "n", "amount": "AQ==", "seen": 7, "at_ms": 5, **(row or {})}
        document = pg_envelope("c", (1, 10 + offset), image, fields=fields)
        document["payload"]["source"].update(in_source or {})
        document["payload"].update(payload)
        return record(offset, document)

    records = [
        insert(0),
        insert(1, row={"seen": "2024-01-01"}),  # a MicroTimestamp as text
        insert(2, row={"amount": "!!"}),  # a decimal that is no base64: unparseable
        insert(3, row={"amount": 5}),  # a number read as text, no base64 either
        insert(4, row={"at_ms": 2**63 - 1}),  # milliseconds beyond the timestamps
        insert(5, in_source={"ts_ms": 2**63 - 1}),  # a source time beyond them: null
        insert(6, row={"zoned": "12:00"}),  # a time without a date, not today's
        insert(7, row={"raw": "AQ"}),  # base64 without its padding
        insert(8, row={"id": 1.5, "name": {"a": [1]}, "tags": [1, "b"]}),
        insert(9, after=["x"]),
        insert(10, source="pg"),
        insert(11, op=5),
        insert(12, in_source={"sequence": [1, 2]}),  # the text of an array, but of numbers
        insert(13, in_source={"sequence": '["1"]'}),  # one element
        insert(14, ts_ms={"a": 1}),
        insert(15, row={"tags": {"a": 1}, "name": 1e20}),
    ]
    texts = as_text(bronze_frame(spark, records))
    _, events = read_batch(texts, SPEC, None)
    reasons = {
        r._bronze_offset: r._reason for r in events.select("_bronze_offset", "_reason").collect()
    }
    assert reasons == {
        **dict.fromkeys(range(16)),
        1: "value of column seen does not fit timestamp",
        2: "unparseable",
        3: "unparseable",
        4: "value of column at_ms does not fit timestamp",
        6: "value of column zoned does not fit timestamp",
        7: "value of column raw does not fit binary",
        15: "value of column tags does not fit array<string>",
        9: "after is not an object",
        10: "source is not an object",
        11: "unknown op",
        12: "missing sequence",
        13: "missing sequence",
    }
    expected = fold([bronze_record(r) for r in records], FoldSpec())
    assert {r.offset: why for r, why in expected.quarantined} == {
        offset: why for offset, why in reasons.items() if why is not None
    }
    rows = events.where(F.col("_reason").isNull()).select(
        "_bronze_offset",
        F.unix_micros("seen").alias("seen"),
        F.unix_micros("at_ms").alias("at_ms"),
        F.unix_micros("zoned").alias("zoned"),
        F.unix_micros("_source_ts").alias("source_ts"),
        F.base64("raw").alias("raw"),
        "name",
        "tags",
    )
    got = {r._bronze_offset: r for r in rows.collect()}
    assert got[0].seen == 7 and got[0].at_ms == 5_000
    assert got[5].source_ts is None and got[0].source_ts is not None
    assert (got[8].name, got[8].tags) == ('{"a":[1]}', ["1", "b"])
    folded = {k[0]: row for k, row in expected.rows.items()}
    assert (folded[8]["name"], folded[8]["tags"]) == ('{"a":[1]}', ["1", "b"])
