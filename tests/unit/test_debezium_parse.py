"""Reading bronze records: Debezium/events parsing, type decoding, sequences, quarantine reasons.

Also the file-source line parser (``cdc.files.parse_line``), the pipeline settings
(``lakehouse_core.config``) and the identifier checks (``lakehouse_core.identifiers``).

Spark-side values are compared in the contract's canonical form where the Python form would
depend on the machine (timestamps as epoch microseconds, dates as epoch days).
"""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.files import UNREADABLE_TOPIC, parse_line
from cdc.records import CREATE_TIME, Record
from lakehouse_core.config import PipelineConfig, TableSpec, load_config
from lakehouse_core.errors import ConfigError
from lakehouse_core.identifiers import (
    entity_name_for_topic,
    quote_identifier,
    require_identifier,
    table_name_for_topic,
)
from lakehouse_demo.settings import SHOP_CONFIG, ShopGoldSpec
from silver.parse import RowLayout, as_text, discover_layout, parse_changes
from silver.reference import FoldSpec, fold
from silver.verify import canonical_rows
from tests.helpers import (
    CUSTOMER_FIELDS,
    DEBEZIUM_TYPES,
    DECIMAL_FIELDS,
    DECIMAL_FITS,
    bronze_frame,
    bronze_record,
    connect_field,
    pg_envelope,
    pg_key,
)

pytestmark = pytest.mark.unit

TOPIC = "pg.public.customers"
SPEC = TableSpec(name="customers", topic=TOPIC)
PLACEHOLDER = "__debezium_unavailable_value"
SOURCE_TS_MS = 1_767_225_600_000  # pg_envelope's default source.ts_ms (2026-01-01T00:00:00Z)


# --------------------------------------------------------------------------------------------
# Builders
# --------------------------------------------------------------------------------------------


def parse(
    spark: SparkSession, records: list[Record], spec: TableSpec = SPEC
) -> tuple[RowLayout, DataFrame]:
    """Layout and parsed change events of ``records`` (as one bronze micro-batch)."""
    texts = as_text(bronze_frame(spark, records))
    layout = discover_layout(texts, spec)
    return layout, parse_changes(texts, spec, layout)


def by_offset(frame: DataFrame, *columns: str) -> dict[int, tuple[Any, ...]]:
    """``{bronze offset: (columns...)}`` of a parsed frame."""
    rows = frame.select("_bronze_offset", *columns).collect()
    return {row[0]: tuple(row[1:]) for row in rows}


def record(offset: int, key: Any, value: Any, topic: str = TOPIC, partition: int = 0) -> Record:
    return Record(topic, partition, offset, 1_000 + offset, key, value)


def customer(id_: int, name: str | None = "ann", notes: str | None = None) -> dict[str, Any]:
    return {"id": id_, "name": name, "notes": notes}


def decimal_b64(unscaled: int, width: int | None = None) -> str:
    """Connect Decimal encoding: base64 of the big-endian two's-complement unscaled value."""
    width = width or max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(width, "big", signed=True)).decode()


def without_sequence(envelope: dict[str, Any]) -> dict[str, Any]:
    """A copy of a wrapped envelope whose ``source`` has no ``sequence``."""
    copy = json.loads(json.dumps(envelope))
    del copy["payload"]["source"]["sequence"]
    return copy


def source_event(source: dict[str, Any], id_: int = 1) -> dict[str, Any]:
    """An unwrapped change event with a hand-made ``source`` block."""
    return {"before": None, "after": {"id": id_}, "op": "c", "ts_ms": 9, "source": source}


def seq(commit: int | None, lsn: int) -> str:
    return f"{commit or 0:020d}/{lsn:020d}"


TYPED_FIELDS: list[dict[str, Any]] = [
    {"field": "id", "type": "int32", "optional": False},
    {"field": "micro", "type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    {"field": "millis", "type": "int64", "name": "io.debezium.time.Timestamp"},
    {"field": "zoned", "type": "string", "name": "io.debezium.time.ZonedTimestamp"},
    {"field": "day", "type": "int32", "name": "io.debezium.time.Date"},
    {
        "field": "amount",
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2", "connect.decimal.precision": "38"},
    },
    {"field": "blob", "type": "bytes"},
    {"field": "doc", "type": "string", "name": "io.debezium.data.Json"},
    {"field": "notes", "type": "string"},
]


# --------------------------------------------------------------------------------------------
# Ops, with and without the schema/payload wrapper
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("wrapped", [True, False], ids=["wrapped", "unwrapped"])
def test_every_op_is_parsed(spark: SparkSession, wrapped: bool) -> None:
    records = [
        record(0, pg_key(1, wrapped), pg_envelope("r", (None, 10), customer(1), wrapped=wrapped)),
        record(1, pg_key(2, wrapped), pg_envelope("c", (10, 20), customer(2), wrapped=wrapped)),
        record(
            2,
            pg_key(1, wrapped),
            pg_envelope("u", (20, 30), customer(1, "bob", "x"), wrapped=wrapped),
        ),
        record(
            3,
            pg_key(2, wrapped),
            pg_envelope("d", (30, 40), before={"id": 2, "name": None}, wrapped=wrapped),
        ),
        record(4, None, pg_envelope("t", (40, 50), wrapped=wrapped)),
    ]
    layout, events = parse(spark, records)

    assert layout.key_names == ("id",)
    assert [c.name for c in layout.columns] == ["id", "name", "notes"]
    assert by_offset(
        events, "_reason", "_tombstone", "_op", "_sequence", "id", "name", "notes"
    ) == {
        0: (None, False, "r", seq(None, 10), 1, "ann", None),
        1: (None, False, "c", seq(10, 20), 2, "ann", None),
        2: (None, False, "u", seq(20, 30), 1, "bob", "x"),
        3: (None, False, "d", seq(30, 40), 2, None, None),
        4: (None, False, "t", seq(40, 50), None, None, None),
    }
    source_ts = events.select(F.unix_millis("_source_ts")).distinct().collect()
    assert [row[0] for row in source_ts] == [SOURCE_TS_MS]


def test_wrapped_and_unwrapped_events_parse_alike(spark: SparkSession) -> None:
    """The same change with and without the wrapper gives the same event (whole-frame check)."""
    records = [
        record(0, pg_key(1), pg_envelope("c", (5, 6), customer(1, "ann", "n"))),
        record(
            1,
            pg_key(1, wrapped=False),
            pg_envelope("c", (5, 6), customer(1, "ann", "n"), wrapped=False),
        ),
    ]
    _, events = parse(spark, records)
    columns = ["_reason", "_tombstone", "_op", "_sequence", "_unavailable", "id", "name", "notes"]
    first = events.where("_bronze_offset = 0").select(*columns)
    second = events.where("_bronze_offset = 1").select(*columns)
    assert_df_equality(first, second, ignore_nullable=True)
    assert first.count() == 1


# --------------------------------------------------------------------------------------------
# Tombstones and quarantine reasons
# --------------------------------------------------------------------------------------------


def test_tombstone_is_flagged_and_not_quarantined(spark: SparkSession) -> None:
    records = [
        record(0, pg_key(7), pg_envelope("d", (1, 2), before={"id": 7})),
        record(1, pg_key(7), None),
    ]
    _, events = parse(spark, records)
    assert by_offset(events, "_tombstone", "_reason", "_op") == {
        0: (False, None, "d"),
        1: (True, None, None),
    }


def test_quarantine_reasons(spark: SparkSession) -> None:
    good = pg_envelope("c", (1, 2), customer(1))
    no_op = json.loads(json.dumps(good))
    del no_op["payload"]["op"]
    bad_op = json.loads(json.dumps(good))
    bad_op["payload"]["op"] = "x"
    records = [
        record(0, pg_key(1), good),
        record(1, pg_key(2), "this is not JSON {"),
        record(2, pg_key(3), [good["payload"]]),
        record(3, pg_key(4), no_op),
        record(4, pg_key(5), bad_op),
        record(5, None, pg_envelope("u", (1, 3), customer(6))),
        record(6, pg_key(7), without_sequence(pg_envelope("c", (1, 4), customer(7)))),
        record(7, pg_key(8), None),
    ]
    _, events = parse(spark, records)
    assert by_offset(events, "_reason", "_tombstone") == {
        0: (None, False),
        1: ("unparseable", False),
        2: ("unparseable", False),
        3: ("missing op", False),
        4: ("unknown op", False),
        5: ("missing key", False),
        6: ("missing sequence", False),
        7: (None, True),
    }


def envelope_with(envelope: dict[str, Any], **parts: Any) -> dict[str, Any]:
    """A copy of an envelope (wrapped or not) with some of its payload's parts replaced."""
    copy = json.loads(json.dumps(envelope))
    copy.get("payload", copy).update(parts)
    return copy


@pytest.mark.parametrize("wrapped", [True, False], ids=["wrapped", "unwrapped"])
def test_envelope_parts_that_are_not_objects(spark: SparkSession, wrapped: bool) -> None:
    """An ``after``/``before``/``source``/``payload`` that is not a JSON object is quarantined
    with a reason naming it (before: for a delete only), as the reference fold says; the other
    records of the batch keep their columns."""
    upsert = pg_envelope("c", (1, 2), customer(1, "ann", "n"), wrapped=wrapped)
    delete = pg_envelope("d", (1, 3), before={"id": 1}, wrapped=wrapped)
    truncate = pg_envelope("t", (1, 4), wrapped=wrapped)
    values: list[Any] = [
        upsert,
        envelope_with(upsert, after="x"),
        envelope_with(upsert, after=5),
        envelope_with(upsert, after=[customer(1)]),
        envelope_with(upsert, after=False),
        envelope_with(upsert, source="pg"),
        envelope_with(upsert, after="x", source=7),
        envelope_with(delete, before="x"),
        envelope_with(delete, after="x"),
        envelope_with(truncate, after=1),
        envelope_with(truncate, before="x"),
        envelope_with(upsert, before="x"),
        envelope_with(upsert, op="x", after="x"),
        {"schema": {"type": "struct"}, "payload": [upsert]},
        {"schema": {"type": "struct"}, "payload": None},
    ]
    records = [record(i, pg_key(1, wrapped), value) for i, value in enumerate(values)]
    _, events = parse(spark, records)

    not_object = "{} is not an object".format
    reasons = {offset: row[0] for offset, row in by_offset(events, "_reason").items()}
    assert reasons == {
        0: None,
        1: not_object("after"),
        2: not_object("after"),
        3: not_object("after"),
        4: not_object("after"),
        5: not_object("source"),
        6: not_object("source"),
        7: not_object("before"),
        8: not_object("after"),
        9: not_object("after"),
        10: None,
        11: None,
        12: "unknown op",
        13: not_object("payload"),
        14: not_object("payload"),
    }
    expected = fold([bronze_record(r) for r in records], FoldSpec())
    assert {r.offset: why for r, why in expected.quarantined} == {
        offset: why for offset, why in reasons.items() if why is not None
    }
    assert by_offset(events.where("_bronze_offset = 0"), "id", "name", "notes") == {
        0: (1, "ann", "n")
    }


def test_quarantined_rows_keep_raw_key_and_value(spark: SparkSession) -> None:
    records = [record(0, pg_key(1, wrapped=False), "not json")]
    _, events = parse(spark, records)
    row = events.select("_reason", "_bronze_key", "_bronze_value").first()
    assert row is not None
    assert (row._reason, bytes(row._bronze_key), bytes(row._bronze_value)) == (
        "unparseable",
        b'{"id":1}',
        b"not json",
    )


@pytest.mark.parametrize("fmt", ["debezium", "events"])
def test_configured_key_absent_from_batch_is_missing_key(spark: SparkSession, fmt: str) -> None:
    if fmt == "debezium":
        spec = TableSpec(name="customers", topic=TOPIC, keys=("customer_id",))
        value: dict[str, Any] = pg_envelope("c", (1, 2), customer(1))
    else:
        spec = TableSpec(
            name="clicks", topic=TOPIC, format="events", keys=("event_id",), sequence_by=("ts",)
        )
        value = {"ts": 5, "page": "/"}
    _, events = parse(spark, [record(0, None, value)], spec)
    assert by_offset(events, "_reason") == {0: ("missing key",)}


# --------------------------------------------------------------------------------------------
# Type decoding
# --------------------------------------------------------------------------------------------


def test_debezium_types_are_decoded(spark: SparkSession) -> None:
    after = {
        "id": 1,
        "micro": 1_700_000_000_123_456,
        "millis": 1_700_000_000_123,
        "zoned": "2024-01-01T10:00:00.123456Z",
        "day": 19_723,
        "amount": decimal_b64(12_345),
        "blob": base64.b64encode(b"\x00\xffhi").decode(),
        "doc": '{"a": [1, 2], "b": null}',
        "notes": "plain",
    }
    zoned_offset = {**after, "id": 2, "zoned": "2024-01-01T10:00:00+02:00"}
    records = [
        record(0, pg_key(1), pg_envelope("c", (1, 2), after, fields=TYPED_FIELDS)),
        record(1, pg_key(2), pg_envelope("c", (1, 3), zoned_offset, fields=TYPED_FIELDS)),
    ]
    _, events = parse(spark, records)

    types = dict(events.dtypes)
    assert {name: types[name] for name in [f["field"] for f in TYPED_FIELDS]} == {
        "id": "int",
        "micro": "timestamp",
        "millis": "timestamp",
        "zoned": "timestamp",
        "day": "date",
        "amount": "decimal(38,2)",
        "blob": "binary",
        "doc": "string",
        "notes": "string",
    }
    canonical = events.select(
        "_bronze_offset",
        F.unix_micros("micro"),
        F.unix_micros("millis"),
        F.unix_micros("zoned"),
        F.unix_date("day"),
        F.col("amount").cast("string"),
        F.base64("blob"),
        "doc",
        "notes",
    ).collect()
    zoned_z = 1_704_103_200_123_456  # 2024-01-01T10:00:00.123456Z
    zoned_plus2 = 1_704_096_000_000_000  # 2024-01-01T08:00:00Z
    assert {row[0]: tuple(row[1:]) for row in canonical} == {
        0: (
            1_700_000_000_123_456,
            1_700_000_000_123_000,
            zoned_z,
            19_723,
            "123.45",
            "AP9oaQ==",
            '{"a": [1, 2], "b": null}',
            "plain",
        ),
        1: (
            1_700_000_000_123_456,
            1_700_000_000_123_000,
            zoned_plus2,
            19_723,
            "123.45",
            "AP9oaQ==",
            '{"a": [1, 2], "b": null}',
            "plain",
        ),
    }


DECIMALS = [
    (0, "0.00"),
    (1, "0.01"),
    (-1, "-0.01"),
    (127, "1.27"),
    (128, "1.28"),  # needs a leading zero byte: 0x0080
    (-128, "-1.28"),  # 0x80, one byte
    (-129, "-1.29"),  # 0xFF7F
    (12_345, "123.45"),
    (-12_345, "-123.45"),
    (2**63, "92233720368547758.08"),  # nine bytes: crosses the 64-bit half
    (-(2**63) - 1, "-92233720368547758.09"),
    (10**35 + 7, "1000000000000000000000000000000000.07"),  # 15 bytes
    (-(10**35) - 7, "-1000000000000000000000000000000000.07"),
    (10**37, "100000000000000000000000000000000000.00"),  # 16 bytes, positive
]


def test_decimal_decoding(spark: SparkSession) -> None:
    """Positive, negative, single- and multi-byte unscaled values, scale 2."""
    fields = [TYPED_FIELDS[0], TYPED_FIELDS[5]]
    records = [
        record(i, pg_key(i), pg_envelope("c", (1, i + 1), {"id": i, "amount": enc}, fields=fields))
        for i, enc in enumerate(decimal_b64(unscaled) for unscaled, _ in DECIMALS)
    ]
    _, events = parse(spark, records)
    decoded = by_offset(events, "amount")
    assert {i: str(decoded[i][0]) for i in decoded} == {
        i: text for i, (_, text) in enumerate(DECIMALS)
    }
    assert all(decoded[i][0] == Decimal(text) for i, (_, text) in enumerate(DECIMALS))


def test_decimal_with_redundant_sign_bytes(spark: SparkSession) -> None:
    """Encoders may use more bytes than needed (sign-extended); the value is the same."""
    fields = [TYPED_FIELDS[0], TYPED_FIELDS[5]]
    records = [
        record(i, pg_key(i), pg_envelope("c", (1, i + 1), {"id": i, "amount": enc}, fields=fields))
        for i, enc in enumerate([decimal_b64(-5, 4), decimal_b64(5, 4), decimal_b64(-5, 1)])
    ]
    _, events = parse(spark, records)
    assert {k: str(v[0]) for k, v in by_offset(events, "amount").items()} == {
        0: "-0.05",
        1: "0.05",
        2: "-0.05",
    }


def test_decimal_decoding_sixteen_byte_negative(spark: SparkSession) -> None:
    fields = [TYPED_FIELDS[0], TYPED_FIELDS[5]]
    value = pg_envelope("c", (1, 2), {"id": 1, "amount": decimal_b64(-(10**37))}, fields=fields)
    _, events = parse(spark, [record(0, pg_key(1), value)])
    row = events.select(F.col("amount").cast("string")).first()
    assert row is not None
    assert row[0] == "-100000000000000000000000000000000000.00"


def test_decimals_that_do_not_fit_are_quarantined_with_column_and_fix(spark: SparkSession) -> None:
    """The boundary table the reference fold is checked on: a value silver's decimal type
    cannot hold exactly gets the fold's reason; the others keep every digit."""
    fields = [TYPED_FIELDS[0], *DECIMAL_FIELDS]
    records = [
        record(i, pg_key(i), pg_envelope("c", (1, i + 1), {"id": i, col: value}, fields=fields))
        for i, (col, value, _, _) in enumerate(DECIMAL_FITS)
    ]
    _, events = parse(spark, records)

    types = dict(events.dtypes)
    assert (types["n"], types["wide"], types["small"]) == (
        "decimal(38,18)",
        "decimal(38,2)",
        "decimal(12,4)",
    )
    decoded = {
        row["_bronze_offset"]: row
        for row in canonical_rows(events.select("_bronze_offset", "_reason", "n", "wide", "small"))
    }
    assert {i: (row["_reason"], row[DECIMAL_FITS[i][0]]) for i, row in decoded.items()} == {
        i: (reason, expected) for i, (_, _, expected, reason) in enumerate(DECIMAL_FITS)
    }


def test_decimal_misfit_comes_after_the_record_reasons_and_in_column_order(
    spark: SparkSession,
) -> None:
    fields = [TYPED_FIELDS[0], *DECIMAL_FIELDS]
    both = {"id": 1, "n": {"scale": 19, "value": decimal_b64(1)}, "small": decimal_b64(10**12)}
    records = [
        record(0, pg_key(1), pg_envelope("c", (1, 2), both, fields=fields)),
        record(1, None, pg_envelope("c", (1, 3), {**both, "id": 2}, fields=fields)),
        record(2, pg_key(3), pg_envelope("d", (1, 4), before={**both, "id": 3}, fields=fields)),
    ]
    _, events = parse(spark, records)
    assert by_offset(events, "_reason") == {
        0: (DECIMAL_FITS[7][3],),
        1: ("missing key",),
        2: (None,),
    }
    keyed = TableSpec(name="customers", topic=TOPIC, keys=("n",))
    too_big = {"id": 4, "n": {"scale": 0, "value": decimal_b64(10**20)}}
    event = record(0, pg_key(4), pg_envelope("c", (1, 5), too_big, fields=fields))
    assert by_offset(parse(spark, [event], keyed)[1], "_reason") == {0: ("missing key",)}


@pytest.mark.parametrize("family", sorted(DEBEZIUM_TYPES))
def test_every_debezium_type_is_decoded_to_its_spark_type(spark: SparkSession, family: str) -> None:
    """One record with a column of each type of the family, as the JsonConverter writes it:
    each column gets its Spark type and its value (compared in canonical form, as verify)."""
    columns = DEBEZIUM_TYPES[family]
    names = [field["field"] for field, *_ in columns]
    after = {"id": 1, **{field["field"]: value for field, value, *_ in columns}}
    fields = [TYPED_FIELDS[0], *(field for field, *_ in columns)]
    _, events = parse(spark, [record(0, pg_key(1), pg_envelope("c", (1, 2), after, fields=fields))])

    types = dict(events.dtypes)
    assert {name: types[name] for name in names} == {
        field["field"]: spark_type for field, _, spark_type, _ in columns
    }
    assert list(canonical_rows(events.select("_reason", *names))) == [
        {"_reason": None, **{field["field"]: value for field, _, _, value in columns}}
    ]


def test_zoned_time_offsets_wrap_around_midnight(spark: SparkSession) -> None:
    fields = [TYPED_FIELDS[0], connect_field("zt", "string", "io.debezium.time.ZonedTime")]
    texts = ["23:30:00.5-02:00", "00:15+0100", "12:00:00.123456789Z", "not a time"]
    records = [
        record(i, pg_key(i), pg_envelope("c", (1, i + 1), {"id": i, "zt": t}, fields=fields))
        for i, t in enumerate(texts)
    ]
    _, events = parse(spark, records)
    assert by_offset(events, "zt") == {
        0: (5_400_500_000,),  # 01:30:00.5 UTC, the next day
        1: (83_700_000_000,),  # 23:15 UTC, the day before
        2: (43_200_123_456,),  # nanoseconds truncated
        3: (None,),
    }


def test_toast_placeholder_only_in_columns_read_as_text(spark: SparkSession) -> None:
    """Text logical types can carry the placeholder; a ``ZonedTime`` (read as a number) not."""
    fields = [
        TYPED_FIELDS[0],
        connect_field("xml", "string", "io.debezium.data.Xml"),
        connect_field("iv", "string", "io.debezium.time.Interval"),
        connect_field("zt", "string", "io.debezium.time.ZonedTime"),
        connect_field("raw", "bytes"),
    ]
    after = {"id": 1, "xml": PLACEHOLDER, "iv": PLACEHOLDER, "zt": PLACEHOLDER, "raw": None}
    _, events = parse(spark, [record(0, pg_key(1), pg_envelope("u", (1, 2), after, fields=fields))])
    assert {k: sorted(v[0]) for k, v in by_offset(events, "_unavailable").items()} == {
        0: ["iv", "xml"]
    }


def test_unwrapped_values_keep_inferred_json_types(spark: SparkSession) -> None:
    value = pg_envelope(
        "c", (1, 2), {"id": 1, "name": "ann", "score": 1.5, "vip": True}, wrapped=False
    )
    layout, events = parse(spark, [record(0, pg_key(1, wrapped=False), value)])
    types = dict(events.dtypes)
    assert layout.key_names == ("id",)
    assert (types["id"], types["name"], types["score"], types["vip"]) == (
        "bigint",
        "string",
        "double",
        "boolean",
    )
    assert by_offset(events, "id", "name", "score", "vip") == {0: (1, "ann", 1.5, True)}


# --------------------------------------------------------------------------------------------
# TOAST placeholder
# --------------------------------------------------------------------------------------------


def test_toast_placeholder_is_listed_in_unavailable(spark: SparkSession) -> None:
    fields = [*CUSTOMER_FIELDS, TYPED_FIELDS[7]]
    records = [
        record(
            0, pg_key(1), pg_envelope("u", (1, 2), customer(1, "ann", PLACEHOLDER), fields=fields)
        ),
        record(
            1,
            pg_key(2),
            pg_envelope(
                "u",
                (1, 3),
                {"id": 2, "name": PLACEHOLDER, "notes": PLACEHOLDER, "doc": PLACEHOLDER},
                fields=fields,
            ),
        ),
        record(2, pg_key(3), pg_envelope("u", (1, 4), customer(3, "cy", "real"), fields=fields)),
    ]
    _, events = parse(spark, records)
    unavailable = {k: sorted(v[0]) for k, v in by_offset(events, "_unavailable").items()}
    assert unavailable == {0: ["notes"], 1: ["doc", "name", "notes"], 2: []}
    assert by_offset(events, "notes")[0] == (PLACEHOLDER,)


def test_toast_placeholder_is_plain_text_in_events_table(spark: SparkSession) -> None:
    """TOAST is a Debezium notion: in a plain event stream the string is just a value."""
    spec = TableSpec(
        name="clicks", topic=TOPIC, format="events", keys=("event_id",), sequence_by=("ts",)
    )
    value = {"event_id": "e1", "ts": 5, "page": PLACEHOLDER}
    _, events = parse(spark, [record(0, None, value)], spec)
    assert by_offset(events, "_unavailable", "page") == {0: ([], PLACEHOLDER)}


# --------------------------------------------------------------------------------------------
# Sequences
# --------------------------------------------------------------------------------------------


def test_postgres_sequence_is_zero_padded_text(spark: SparkSession) -> None:
    records = [
        record(0, pg_key(1), pg_envelope("c", (123, 456), customer(1))),
        record(1, pg_key(2), pg_envelope("r", (None, 456), customer(2))),
    ]
    _, events = parse(spark, records)
    assert by_offset(events, "_sequence") == {
        0: ("00000000000000000123/00000000000000000456",),
        1: ("00000000000000000000/00000000000000000456",),
    }


def test_postgres_sequence_orders_by_commit_then_lsn(spark: SparkSession) -> None:
    """``lsn`` alone goes backwards across interleaved transactions; (commit, lsn) does not."""
    history = [(None, 900), (99, 100), (100, 5_000), (200, 300), (200, 301), (1_000, 10)]
    records = [
        record(i, pg_key(i), pg_envelope("u", commit_lsn, customer(i)))
        for i, commit_lsn in enumerate(reversed(history))
    ]
    _, events = parse(spark, records)
    ordered = [row.id for row in events.orderBy("_sequence").select("id").collect()]
    assert ordered == [len(history) - 1 - i for i in range(len(history))]
    sequences = [row[0] for row in events.select("_sequence").collect()]
    assert sorted(sequences) == [seq(c, lsn) for c, lsn in history]


UNUSABLE_SEQUENCES = [
    '["abc","1"]',
    '["1"]',
    '["1","2","3"]',
    "[null,null]",
    '["1",null]',
    "not json",
    '["1","-2"]',
    '["1","123456789012345678901"]',  # more than 20 digits
]


def test_postgres_unusable_sequence_is_missing(spark: SparkSession) -> None:
    records = []
    for offset, sequence in enumerate(UNUSABLE_SEQUENCES):
        value = pg_envelope("c", (1, 2), customer(offset))
        value["payload"]["source"]["sequence"] = sequence
        records.append(record(offset, pg_key(offset), value))
    _, events = parse(spark, records)
    assert by_offset(events, "_reason", "_sequence") == {
        offset: ("missing sequence", None) for offset in range(len(UNUSABLE_SEQUENCES))
    }


def test_mysql_sequence_is_file_position_row(spark: SparkSession) -> None:
    def mysql(**position: Any) -> dict[str, Any]:
        return source_event({"connector": "mysql", "ts_ms": 1_000, **position})

    records = [
        record(0, {"id": 1}, mysql(file="mysql-bin.000003", pos=154, row=2)),
        record(1, {"id": 1}, mysql(file="mysql-bin.000003", pos=154)),
        record(2, {"id": 1}, mysql(file="mysql-bin.000010", pos=4)),
        record(3, {"id": 1}, mysql(pos=154)),
    ]
    _, events = parse(spark, records)
    assert by_offset(events, "_reason", "_sequence") == {
        0: (None, "mysql-bin.000003/00000000000000000154/0000000002"),
        1: (None, "mysql-bin.000003/00000000000000000154/0000000000"),
        2: (None, "mysql-bin.000010/00000000000000000004/0000000000"),
        3: ("missing sequence", None),
    }


def test_other_connector_without_sequence_by_is_missing_sequence(spark: SparkSession) -> None:
    value = source_event({"connector": "sqlserver", "ts_ms": 1, "lsn": 5})
    _, events = parse(spark, [record(0, {"id": 1}, value)])
    assert by_offset(events, "_reason") == {0: ("missing sequence",)}


def test_top_level_ts_ms_is_not_the_sequence(spark: SparkSession) -> None:
    """Two events differing only in the envelope's ``ts_ms`` get the same sequence."""
    early = pg_envelope("u", (7, 8), customer(1), ts_ms=1)
    late = pg_envelope("u", (7, 8), customer(1), ts_ms=2)
    late["payload"]["source"]["ts_ms"] = early["payload"]["source"]["ts_ms"]
    _, events = parse(spark, [record(0, pg_key(1), early), record(1, pg_key(1), late)])
    assert by_offset(events, "_sequence") == {0: (seq(7, 8),), 1: (seq(7, 8),)}


def test_configured_sequence_by_gives_a_struct(spark: SparkSession) -> None:
    """Other connectors: ``sequence_by`` columns (decoded, from ``after`` else ``before``)."""
    fields = [
        *CUSTOMER_FIELDS,
        {"field": "updated_at", "type": "int64", "name": "io.debezium.time.MicroTimestamp"},
        {"field": "version", "type": "int32"},
    ]
    spec = TableSpec(
        name="customers", topic=TOPIC, keys=("id",), sequence_by=("updated_at", "version")
    )

    def event(offset: int, op: str, **images: dict[str, Any]) -> Record:
        value = pg_envelope(op, (1, 1), fields=fields, **images)
        value["payload"]["source"] = {"connector": "sqlserver", "ts_ms": 1}
        return record(offset, None, value)

    records = [
        event(0, "c", after={"id": 1, "name": "a", "updated_at": 1_000_000, "version": 3}),
        event(1, "d", before={"id": 2, "updated_at": 2_000_000, "version": 1}),
        event(2, "u", after={"id": 3, "name": "c", "updated_at": None, "version": 1}),
        event(3, "u", after={"name": "no key", "updated_at": 3_000_000, "version": 1}),
    ]
    layout, events = parse(spark, records, spec)
    assert layout.key_names == ("id",)
    assert dict(events.dtypes)["_sequence"] == "struct<updated_at:timestamp,version:int>"
    canonical = events.select(
        "_bronze_offset",
        "_reason",
        "id",
        F.unix_micros("_sequence.updated_at"),
        "_sequence.version",
    ).collect()
    assert {row[0]: tuple(row[1:]) for row in canonical} == {
        0: (None, 1, 1_000_000, 3),
        1: (None, 2, 2_000_000, 1),
        2: ("missing sequence", 3, None, None),
        3: ("missing key", None, 3_000_000, 1),
    }


# --------------------------------------------------------------------------------------------
# events format
# --------------------------------------------------------------------------------------------


def test_events_format_with_ddl_schema(spark: SparkSession) -> None:
    spec = TableSpec(
        name="clicks",
        topic="shop.clickstream",
        format="events",
        keys=("event_id",),
        sequence_by=("ts",),
        schema="event_id string, user_id bigint, page string, ts timestamp",
    )
    records = [
        record(
            0, None, {"event_id": "e1", "user_id": 7, "page": "/a", "ts": "2024-01-01T00:00:00Z"}
        ),
        record(1, None, {"event_id": None, "user_id": 7, "ts": "2024-01-01T00:00:00Z"}),
        record(2, None, {"event_id": "e3", "user_id": 7}),
        record(3, None, "garbage"),
        record(4, {"k": 1}, None),
        record(5, None, {"event_id": "e5", "ts": "2024-01-01T00:00:01Z", "extra": True}),
    ]
    layout, events = parse(spark, records, spec)

    assert layout.key_names == ("event_id",)
    assert [c.name for c in layout.columns] == ["event_id", "user_id", "page", "ts"]
    types = dict(events.dtypes)
    assert (types["user_id"], types["ts"], types["_sequence"]) == (
        "bigint",
        "timestamp",
        "struct<ts:timestamp>",
    )
    assert "extra" not in types
    canonical = events.select(
        "_bronze_offset",
        "_reason",
        "_tombstone",
        "_op",
        "event_id",
        "user_id",
        "page",
        F.unix_micros("_sequence.ts"),
    ).collect()
    assert {row[0]: tuple(row[1:]) for row in canonical} == {
        0: (None, False, "c", "e1", 7, "/a", 1_704_067_200_000_000),
        1: ("missing key", False, "c", None, 7, None, 1_704_067_200_000_000),
        2: ("missing sequence", False, "c", "e3", 7, None, None),
        3: ("unparseable", False, "c", None, None, None, None),
        4: (None, True, "c", None, None, None, None),
        5: (None, False, "c", "e5", None, None, 1_704_067_201_000_000),
    }


def test_events_format_infers_columns_without_schema(spark: SparkSession) -> None:
    spec = TableSpec(
        name="clicks", topic=TOPIC, format="events", keys=("event_id",), sequence_by=("ts",)
    )
    records = [
        record(0, None, {"event_id": "e1", "ts": 10, "page": "/a"}),
        record(1, None, {"event_id": "e2", "ts": 11}),
    ]
    layout, events = parse(spark, records, spec)
    assert layout.key_names == ("event_id",)
    assert dict(events.dtypes)["_sequence"] == "struct<ts:bigint>"
    assert by_offset(events, "_reason", "_op", "event_id", "page", "_sequence.ts") == {
        0: (None, "c", "e1", "/a", 10),
        1: (None, "c", "e2", None, 11),
    }


def test_events_key_missing_from_ddl_schema_is_a_config_error(spark: SparkSession) -> None:
    spec = TableSpec(
        name="clicks",
        topic=TOPIC,
        format="events",
        keys=("event_id",),
        sequence_by=("ts",),
        schema="id string, ts bigint",
    )
    with pytest.raises(ConfigError, match="key column\\(s\\) event_id are not in its schema"):
        parse(spark, [record(0, None, {"id": "e", "ts": 1})], spec)


# --------------------------------------------------------------------------------------------
# cdc.files.parse_line
# --------------------------------------------------------------------------------------------


def unreadable(line: bytes, source: str = "f.jsonl") -> tuple[Any, ...]:
    return (None, line, UNREADABLE_TOPIC, None, None, None, None, None, source)


def test_parse_line_valid_record() -> None:
    line = Record(
        "shop.orders", 2, 41, 1_700_000_000_123, {"id": 1}, {"op": "c", "n": "é"}
    ).to_line()
    assert parse_line(line.encode(), "f.jsonl") == (
        b'{"id":1}',
        '{"op":"c","n":"é"}'.encode(),
        "shop.orders",
        2,
        41,
        1_700_000_000_123_000,
        CREATE_TIME,
        None,
        "f.jsonl",
    )


def test_parse_line_null_key_and_value() -> None:
    line = b'{"topic":"t","partition":0,"offset":1,"timestamp":5,"key":null,"value":null}\r'
    assert parse_line(line, "s") == (None, None, "t", 0, 1, 5_000, CREATE_TIME, None, "s")


def test_parse_line_after_a_byte_order_mark() -> None:
    """Editors on Windows start UTF-8 files with a BOM; the first line is still a record."""
    line = b'\xef\xbb\xbf{"topic":"t","partition":0,"offset":1,"timestamp":5,"key":null}'
    assert parse_line(line, "s") == (None, None, "t", 0, 1, 5_000, CREATE_TIME, None, "s")


def test_parse_line_headers() -> None:
    line = Record("t", 0, 0, 0, None, {"a": 1}, headers={"trace": "abc", "n": "5"}).to_line()
    parsed = parse_line(line.encode(), "s")
    assert parsed[7] == [{"key": "trace", "value": b"abc"}, {"key": "n", "value": b"5"}]


def test_parse_line_string_value_is_raw_bytes() -> None:
    line = Record("t", 0, 0, 0, "plain-key", "not json {").to_line()
    parsed = parse_line(line.encode(), "s")
    assert (parsed[0], parsed[1]) == (b"plain-key", b"not json {")


@pytest.mark.parametrize(
    "line",
    [
        b"not json at all",
        b"",
        b"[1, 2]",
        b"null",
        b'"a string"',
        b'{"topic":"t","partition":0,"offset":1}',
        b'{"topic":"","partition":0,"offset":1,"timestamp":5}',
        b'{"topic":7,"partition":0,"offset":1,"timestamp":5}',
        b'{"topic":"t","partition":"0","offset":1,"timestamp":5}',
        b'{"topic":"t","partition":0,"offset":1.5,"timestamp":5}',
        b'{"topic":"t","partition":0,"offset":1,"timestamp":5,"headers":["h"]}',
    ],
)
def test_parse_line_invalid_line_is_unreadable(line: bytes) -> None:
    assert parse_line(line, "f.jsonl") == unreadable(line)


@pytest.mark.parametrize(
    "line",
    [
        b'{"topic":"t","partition":0,"offset":1,"timestamp":5,"value":"\xff"}',
        b"\xed\xa0\x80",
        b'{"topic":"t","partition":0,\x00"offset":1,"timestamp":5}',
        b'{"topic":"\\ud800","partition":0,"offset":1,"timestamp":5}',
        b'{"topic":"t","partition":0,"offset":1,"timestamp":5,"key":"\\udfff"}',
        b'{"topic":"t","partition":0,"offset":1,"timestamp":5,"headers":{"\\ud800":"x"}}',
        b"[" * 100_000,
        b'{"topic":"t","partition":0,"offset":1,"timestamp":5,"value":' + b"[" * 100_000,
    ],
    ids=[
        "invalid-utf8",
        "encoded-surrogate",
        "nul",
        "surrogate-topic",
        "surrogate-key",
        "surrogate-header",
        "deep",
        "deep-value",
    ],
)
def test_parse_line_keeps_the_exact_bytes_of_a_line_it_cannot_read(line: bytes) -> None:
    assert parse_line(line, "f.jsonl") == unreadable(line)


@pytest.mark.parametrize(
    "line",
    [
        b'{"topic":"t","partition":true,"offset":1,"timestamp":5}',
        b'{"topic":"t","partition":3000000000,"offset":1,"timestamp":5}',
        b'{"topic":"t","partition":0,"offset":9223372036854775808,"timestamp":5}',
    ],
    ids=["bool-partition", "partition-over-int32", "offset-over-int64"],
)
def test_parse_line_rejects_values_the_schema_cannot_hold(line: bytes) -> None:
    assert parse_line(line, "f.jsonl") == unreadable(line)


# --------------------------------------------------------------------------------------------
# lakehouse_core.config
# --------------------------------------------------------------------------------------------


def test_table_spec_bad_format() -> None:
    with pytest.raises(
        ConfigError,
        match=r"^Invalid format 'avro' for table 'orders'\. Must be one of debezium, events\.$",
    ):
        TableSpec(name="orders", topic="t", format="avro")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("keys", "sequence_by"), [(None, ("ts",)), (("id",), None), (None, None), ((), ("ts",))]
)
def test_events_table_needs_keys_and_sequence_by(
    keys: tuple[str, ...] | None, sequence_by: tuple[str, ...] | None
) -> None:
    with pytest.raises(
        ConfigError,
        match=r"Table 'clicks' has format 'events': set both 'keys' and 'sequence_by'",
    ):
        TableSpec(name="clicks", topic="t", format="events", keys=keys, sequence_by=sequence_by)


def test_quarantine_name_is_reserved() -> None:
    with pytest.raises(ConfigError, match="'quarantine' is reserved for the quarantine table"):
        TableSpec(name="quarantine", topic="t")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "bad-name"}, r"Invalid table name 'bad-name': use letters, digits"),
        ({"keys": ("id", "1x")}, r"Table 'orders': column name '1x' is not a plain name"),
        ({"sequence_by": ("a b",)}, r"Table 'orders': column name 'a b' is not a plain name"),
        ({"tombstone_retention_days": -1}, r"tombstone_retention_days must be 0 or more"),
    ],
)
def test_table_spec_invalid_values(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TableSpec(**{"name": "orders", "topic": "t", **kwargs})


def test_duplicate_table_names() -> None:
    with pytest.raises(ConfigError, match=r"Table names must be unique; repeated: a\."):
        PipelineConfig(tables=(TableSpec("a", "t1"), TableSpec("a", "t2"), TableSpec("b", "t3")))


def test_spec_for_topic_defaults_to_debezium() -> None:
    assert SHOP_CONFIG.spec_for_topic("shop.public.orders") == TableSpec(
        name="orders", topic="shop.public.orders"
    )
    assert SHOP_CONFIG.spec_for_topic("shop.clickstream").format == "events"


@pytest.mark.parametrize(
    "value", ["5 minz", "ten minutes", "10", "10 weeks", "-1 minute", "", "10  minutes"]
)
def test_gold_bad_duration(value: str) -> None:
    with pytest.raises(
        ConfigError, match=r"^Shop gold settings: session_gap .* is not a duration: write a number"
    ):
        ShopGoldSpec(session_gap=value)


@pytest.mark.parametrize("value", ["1 second", "10 minutes", "2 hours", "1 day"])
def test_gold_good_duration(value: str) -> None:
    assert ShopGoldSpec(revenue_window=value).revenue_window == value


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipeline.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_load_config_reads_tables_and_gold(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        """
[[tables]]
name = "clicks"
topic = "web.clicks"
format = "events"
keys = ["event_id"]
sequence_by = ["ts"]
schema = "event_id string, ts timestamp"
""",
    )
    config = load_config(path)
    assert config.tables == (
        TableSpec(
            name="clicks",
            topic="web.clicks",
            format="events",
            keys=("event_id",),
            sequence_by=("ts",),
            schema="event_id string, ts timestamp",
        ),
    )
    assert config.gold_tables == ()
    assert load_config(None) == PipelineConfig()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "colour = 1\n",
            r"Unknown setting\(s\) colour in the config file\. Allowed: alerts, catalog, "
            r"debezium, fresh, gold, maintenance, models, patterns, quality, tables\.",
        ),
        (
            '[[tables]]\nname = "a"\ntopic = "t"\nkey = ["id"]\n',
            r"Unknown setting\(s\) key in \[\[tables\]\]\. Allowed: (\w+, )*format, (\w+, )*keys, ",
        ),
        ("[gold]\nwindow = 1\n", r"The older \[gold\] table .* is gone: declare each gold "),
        ('[[tables]]\nname = "a"\n', r"Each \[\[tables\]\] entry needs 'name' and 'topic'\."),
        (
            '[[gold]]\nname = "g"\nsource = "s"\nevent_time = "t"\n'
            'window = { kind = "tumbling", size = "soon" }\n'
            'measures = [{ name = "n", fn = "count" }]\n',
            r"^Gold table 'g': window\.size 'soon' is not a duration: ",
        ),
        ("[[tables]\n", r"is not valid TOML"),
    ],
    ids=["top-level", "tables", "gold", "no-topic", "duration", "not-toml"],
)
def test_load_config_rejects(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(write_toml(tmp_path, text))


def test_load_config_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"Config file .*nope\.toml not found\."):
        load_config(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    "text",
    [
        '[[tables]]\nname = "orders"\ntopic = "t"\nkeys = 5\n',
        '[[tables]]\nname = "orders"\ntopic = "t"\ntombstone_retention_days = "seven"\n',
        "[gold]\nrevenue_window = 5\n",
    ],
    ids=["keys-number", "retention-string", "window-number"],
)
def test_load_config_rejects_wrong_value_types(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError):
        load_config(write_toml(tmp_path, text))


# --------------------------------------------------------------------------------------------
# lakehouse_core.identifiers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "_x", "Orders_2024", "A" * 128])
def test_require_identifier_accepts_plain_names(name: str) -> None:
    assert require_identifier(name) == name
    assert quote_identifier(name) == f"`{name}`"


@pytest.mark.parametrize(
    "name", ["", "1abc", "a-b", "a b", "a.b", "x`; drop table y", "é", "A" * 129, None, 5]
)
def test_require_identifier_rejects(name: Any) -> None:
    with pytest.raises(ConfigError, match=r"Invalid column \S.* use letters, digits and under"):
        require_identifier(name, "column")
    with pytest.raises(ConfigError):
        quote_identifier(name)


@pytest.mark.parametrize(
    ("topic", "table"),
    [
        ("shop.public.orders", "shop_public_orders"),
        ("Shop-Orders", "shop_orders"),
        ("__consumer_offsets", "consumer_offsets"),
        ("9lives", "t_9lives"),
        ("...", "t_"),
        ("a..b", "a_b"),
    ],
)
def test_table_name_for_topic(topic: str, table: str) -> None:
    assert table_name_for_topic(topic) == table


def test_long_topics_get_tables_of_their_own() -> None:
    """Kafka allows 249 characters; a table name at most 128 (it stopped ingestion before)."""
    topics = ["t" * 249, "t" * 248 + "u", "t" * 248 + "U", "x." + "t" * 247]
    names = [table_name_for_topic(topic) for topic in topics]
    assert len(set(names)) == len(topics)
    assert all(len(name) == 128 and name.startswith("t" * 100) for name in names[:3])
    assert entity_name_for_topic(topics[3]) == table_name_for_topic("t" * 247)


@pytest.mark.parametrize(
    ("topic", "entity"),
    [("shop.public.orders", "orders"), ("orders", "orders"), ("db.Order-Items", "order_items")],
)
def test_entity_name_for_topic(topic: str, entity: str) -> None:
    assert entity_name_for_topic(topic) == entity
