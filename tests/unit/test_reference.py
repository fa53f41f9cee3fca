"""Tests of the plain-Python reference fold (silver/reference.py), on hand-made records."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest

from silver.reference import (
    METADATA_COLUMNS,
    TOAST_PLACEHOLDER,
    BronzeRecord,
    FoldResult,
    FoldSpec,
    canonical_key,
    fold,
)
from tests.helpers import DEBEZIUM_TYPES, DECIMAL_FIELDS, DECIMAL_FITS, connect_field

pytestmark = pytest.mark.unit

TOPIC = "pg.public.customers"
PG = FoldSpec()

# --------------------------------------------------------------------------------------------
# Record builders
# --------------------------------------------------------------------------------------------

#: Connect schema of the ``after``/``before`` struct of the test table.
FIELDS: list[dict[str, Any]] = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "string", "optional": True, "field": "name"},
    {
        "type": "bytes",
        "optional": True,
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "12"},
        "field": "amount",
    },
    {
        "type": "int64",
        "optional": True,
        "name": "io.debezium.time.MicroTimestamp",
        "version": 1,
        "field": "updated_at",
    },
    {
        "type": "string",
        "optional": True,
        "name": "io.debezium.time.ZonedTimestamp",
        "version": 1,
        "field": "seen_at",
    },
    {
        "type": "int32",
        "optional": True,
        "name": "io.debezium.time.Date",
        "version": 1,
        "field": "born",
    },
    {"type": "string", "optional": True, "field": "notes"},
    {"type": "bytes", "optional": True, "field": "blob"},
    {
        "type": "string",
        "optional": True,
        "name": "io.debezium.data.Json",
        "version": 1,
        "field": "doc",
    },
]
DATA_COLUMNS = [f["field"] for f in FIELDS]
KEY_FIELDS: list[dict[str, Any]] = [{"type": "int32", "optional": False, "field": "id"}]


def to_bytes(document: Any) -> bytes | None:
    """Same rule as the bronze file format: null -> None, str -> UTF-8, else compact JSON."""
    if document is None:
        return None
    if isinstance(document, str):
        return document.encode("utf-8")
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def record(
    key: Any, value: Any, offset: int, partition: int = 0, topic: str = TOPIC
) -> BronzeRecord:
    return BronzeRecord(topic, partition, offset, to_bytes(key), to_bytes(value))


def struct(fields: list[dict[str, Any]], name: str, field: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "struct", "fields": fields, "optional": True, "name": name}
    if field is not None:
        schema["field"] = field
    return schema


def pg_source(lsn: int, commit: int | None, ts_ms: int) -> dict[str, Any]:
    return {
        "version": "3.0.0.Final",
        "connector": "postgresql",
        "name": "pg",
        "ts_ms": ts_ms,
        "snapshot": "false",
        "db": "shop",
        "sequence": json.dumps([None if commit is None else str(commit), str(lsn)]),
        "schema": "public",
        "table": "customers",
        "txId": 1000,
        "lsn": lsn,
        "xmin": None,
    }


def row(id_: int, **columns: Any) -> dict[str, Any]:
    """An ``after`` image in the connector's JSON form, every column present."""
    image = dict.fromkeys(DATA_COLUMNS)
    image["id"] = id_
    image.update(columns)
    return image


def pg(
    op: str,
    id_: int | None,
    *,
    lsn: int,
    commit: int | None = None,
    after: dict[str, Any] | None = None,
    before: dict[str, Any] | None = None,
    ts_ms: int = 1_767_225_600_000,
    wrapper: bool = True,
    fields: list[dict[str, Any]] = FIELDS,
) -> tuple[Any, Any]:
    """(key document, value document) of a Debezium Postgres change event."""
    if op == "d" and before is None and id_ is not None:
        before = {name: (id_ if name == "id" else None) for name in DATA_COLUMNS}
    payload = {
        "before": before,
        "after": after,
        "source": pg_source(lsn, commit, ts_ms),
        "transaction": None,
        "op": op,
        "ts_ms": 1_800_000_000_000 - lsn,  # processing time: never used for ordering
    }
    key_payload = None if id_ is None else {"id": id_}
    if not wrapper:
        return key_payload, payload
    envelope_schema = {
        "type": "struct",
        "fields": [
            struct(fields, "pg.public.customers.Value", "before"),
            struct(fields, "pg.public.customers.Value", "after"),
            {"type": "struct", "fields": [], "optional": False, "field": "source"},
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
        "optional": False,
        "name": "pg.public.customers.Envelope",
    }
    key = (
        None
        if key_payload is None
        else {"schema": struct(KEY_FIELDS, "pg.public.customers.Key"), "payload": key_payload}
    )
    return key, {"schema": envelope_schema, "payload": payload}


def rec(event: tuple[Any, Any], offset: int, partition: int = 0) -> BronzeRecord:
    key, value = event
    return record(key, value, offset, partition)


def seq(commit: int | None, lsn: int) -> str:
    return f"{commit or 0:020d}/{lsn:020d}"


def names(result: FoldResult) -> dict[Any, Any]:
    return {key[0]: data["name"] for key, data in result.rows.items()}


def decimal_b64(unscaled: int) -> str:
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


# --------------------------------------------------------------------------------------------
# Upserts, deletes, truncates, ordering
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("wrapper", [True, False])
def test_insert_update_delete(wrapper: bool) -> None:
    records = [
        rec(pg("c", 1, lsn=10, after=row(1, name="a"), wrapper=wrapper), 0),
        rec(pg("c", 2, lsn=20, after=row(2, name="b"), wrapper=wrapper), 1),
        rec(pg("u", 1, lsn=30, after=row(1, name="a2"), wrapper=wrapper), 2),
        rec(pg("d", 2, lsn=40, wrapper=wrapper), 3),
        record({"id": 2}, None, 4),  # the delete's tombstone
    ]
    result = fold(records, PG)
    assert names(result) == {1: "a2"}
    assert result.quarantined == []
    assert result.skipped_tombstones == 1
    data = result.rows[(1,)]
    assert list(data) == DATA_COLUMNS + list(METADATA_COLUMNS)
    assert data["_op"] == "u"
    assert data["_sequence"] == seq(None, 30)
    assert data["_source_ts"] == 1_767_225_600_000 * 1000
    assert (data["_bronze_topic"], data["_bronze_partition"], data["_bronze_offset"]) == (
        TOPIC,
        0,
        2,
    )


def test_rows_have_all_canonical_columns() -> None:
    result = fold([rec(pg("r", 7, lsn=5, after=row(7, name="x")), 0)], PG)
    assert result.rows == {
        (7,): {
            "id": 7,
            "name": "x",
            "amount": None,
            "updated_at": None,
            "seen_at": None,
            "born": None,
            "notes": None,
            "blob": None,
            "doc": None,
            "_sequence": seq(None, 5),
            "_op": "r",
            "_source_ts": 1_767_225_600_000_000,
            "_bronze_topic": TOPIC,
            "_bronze_partition": 0,
            "_bronze_offset": 0,
        }
    }


def test_delete_then_late_older_insert_stays_deleted() -> None:
    records = [
        rec(pg("c", 1, lsn=10, after=row(1, name="a")), 0),
        rec(pg("d", 1, lsn=30), 1),
        rec(pg("u", 1, lsn=20, after=row(1, name="late")), 2),  # older, arrives last
        rec(pg("r", 1, lsn=5, after=row(1, name="resnapshot")), 3),
    ]
    assert fold(records, PG).rows == {}


def test_reinsert_after_delete_with_higher_sequence() -> None:
    records = [
        rec(pg("c", 1, lsn=50, after=row(1, name="again")), 0),  # arrives first
        rec(pg("c", 1, lsn=10, after=row(1, name="a")), 1),
        rec(pg("d", 1, lsn=30), 2),
    ]
    result = fold(records, PG)
    assert names(result) == {1: "again"}
    assert result.rows[(1,)]["_bronze_offset"] == 0


def test_truncate_removes_older_rows_keeps_newer_arriving_earlier() -> None:
    truncate = pg("t", None, lsn=100, after=None)
    records = [
        rec(pg("c", 3, lsn=150, after=row(3, name="newer")), 0),  # newer, arrives early
        rec(pg("c", 1, lsn=10, after=row(1, name="a")), 1),
        rec(pg("c", 2, lsn=20, after=row(2, name="b")), 2),
        rec(truncate, 3),
        rec(pg("u", 2, lsn=90, after=row(2, name="late")), 4),  # older, arrives late
        rec(pg("u", 1, lsn=120, after=row(1, name="after")), 5),
    ]
    result = fold(records, PG)
    assert names(result) == {1: "after", 3: "newer"}
    assert result.quarantined == []


def test_truncate_without_wrapper() -> None:
    records = [
        rec(pg("c", 1, lsn=10, after=row(1, name="a"), wrapper=False), 0),
        rec(pg("t", None, lsn=20, wrapper=False), 1),
    ]
    result = fold(records, PG)
    assert result.rows == {}
    assert result.quarantined == []


def test_duplicates_give_one_row_from_the_highest_copy() -> None:
    event = pg("c", 1, lsn=10, after=row(1, name="a"))
    records = [rec(event, 7), rec(event, 3), rec(event, 5, partition=1), rec(event, 2)]
    result = fold(records, PG)
    assert names(result) == {1: "a"}
    # Equal sequences: the order continues with (partition, offset).
    data = result.rows[(1,)]
    assert (data["_bronze_partition"], data["_bronze_offset"]) == (1, 5)


def test_equal_sequence_ties_are_broken_by_partition_then_offset() -> None:
    upsert = pg("u", 1, lsn=10, after=row(1, name="a"))
    delete = pg("d", 1, lsn=10)
    assert fold([rec(upsert, 3), rec(delete, 5)], PG).rows == {}
    assert names(fold([rec(delete, 3), rec(upsert, 5)], PG)) == {1: "a"}
    assert fold([rec(upsert, 9, partition=0), rec(delete, 1, partition=1)], PG).rows == {}
    truncate = pg("t", None, lsn=10)
    assert fold([rec(truncate, 4), rec(upsert, 2)], PG).rows == {}
    assert names(fold([rec(upsert, 4), rec(truncate, 2)], PG)) == {1: "a"}


def test_primary_key_change_is_delete_plus_create() -> None:
    records = [
        rec(pg("c", 1, lsn=10, after=row(1, name="a")), 0),
        rec(pg("d", 1, lsn=20), 1),
        record({"schema": struct(KEY_FIELDS, "k"), "payload": {"id": 1}}, None, 2),
        rec(pg("c", 2, lsn=20, after=row(2, name="a")), 3),
    ]
    result = fold(records, PG)
    assert names(result) == {2: "a"}
    assert result.skipped_tombstones == 1


def test_postgres_lsn_going_backwards_orders_by_commit_then_lsn() -> None:
    # Interleaved transactions: the second commit carries a lower LSN than the first.
    first = pg("u", 1, commit=500, lsn=620, after=row(1, name="first"))
    second = pg("u", 1, commit=700, lsn=610, after=row(1, name="second"))
    for records in ([rec(first, 0), rec(second, 1)], [rec(second, 0), rec(first, 1)]):
        result = fold(records, PG)
        assert names(result) == {1: "second"}
        assert result.rows[(1,)]["_sequence"] == seq(700, 610)
    # A null last-commit LSN (snapshot, first transaction) sorts before any commit.
    snapshot = pg("r", 1, commit=None, lsn=900, after=row(1, name="snapshot"))
    streamed = pg("u", 1, commit=0, lsn=1, after=row(1, name="streamed"))
    assert names(fold([rec(streamed, 0), rec(snapshot, 1)], PG)) == {1: "streamed"}


def test_top_level_ts_ms_is_not_used_for_ordering() -> None:
    older = pg("u", 1, lsn=10, after=row(1, name="older"))
    newer = pg("u", 1, lsn=20, after=row(1, name="newer"))
    older[1]["payload"]["ts_ms"] = 9_999_999_999_999
    assert names(fold([rec(newer, 0), rec(older, 1)], PG)) == {1: "newer"}


def mysql(
    op: str, id_: int, file: str, pos: int, row_: int, name: str | None = None
) -> tuple[Any, Any]:
    source = {
        "connector": "mysql",
        "ts_ms": 1_700_000_000_000,
        "file": file,
        "pos": pos,
        "row": row_,
    }
    after = None if op == "d" else {"id": id_, "name": name}
    before = {"id": id_, "name": None} if op == "d" else None
    return {"id": id_}, {"before": before, "after": after, "source": source, "op": op}


def test_mysql_orders_by_file_pos_row() -> None:
    events = [
        mysql("c", 1, "mysql-bin.000001", 900, 0, "a"),
        mysql("u", 1, "mysql-bin.000002", 100, 0, "b"),  # next file, lower pos
        mysql("u", 1, "mysql-bin.000002", 100, 1, "c"),  # same event, next row
        mysql("u", 2, "mysql-bin.000002", 100, 2, "x"),
        mysql("d", 2, "mysql-bin.000001", 950, 0),  # older delete: ignored
    ]
    for seed in range(5):
        shuffled = list(enumerate(events))
        random.Random(seed).shuffle(shuffled)
        result = fold([record(k, v, offset) for offset, (k, v) in shuffled], PG)
        assert names(result) == {1: "c", 2: "x"}
        assert result.rows[(1,)]["_sequence"] == (f"mysql-bin.000002/{100:020d}/{1:010d}")
        assert result.rows[(1,)]["_source_ts"] == 1_700_000_000_000_000


# --------------------------------------------------------------------------------------------
# Permutation invariance
# --------------------------------------------------------------------------------------------


def workload(seed: int) -> list[BronzeRecord]:
    """A random history over a few keys: upserts, deletes + tombstones, truncates, TOAST,
    duplicate deliveries, a few broken records; spread over two partitions."""
    rng = random.Random(seed)
    events: list[tuple[Any, Any]] = []
    lsn = 0
    commit: int | None = None
    for _ in range(120):
        lsn += rng.randint(1, 5)
        if rng.random() < 0.2:
            commit = lsn
        id_ = rng.randint(1, 6)
        wrapper = rng.random() < 0.7
        kind = rng.random()
        if kind < 0.55:
            notes = TOAST_PLACEHOLDER if rng.random() < 0.3 else f"n{lsn}"
            image = row(id_, name=f"v{lsn}", notes=notes, amount=decimal_b64(lsn * 7))
            op = rng.choice("cur")
            events.append(pg(op, id_, lsn=lsn, commit=commit, after=image, wrapper=wrapper))
        elif kind < 0.8:
            events.append(pg("d", id_, lsn=lsn, commit=commit, wrapper=wrapper))
            events.append(({"id": id_}, None))
        elif kind < 0.85:
            events.append(pg("t", None, lsn=lsn, commit=commit, wrapper=wrapper))
        elif kind < 0.9:
            events.append(({"id": id_}, "{not json"))
        else:
            # Same source position as an earlier event (e.g. PK change in one statement).
            events.append(pg("c", id_ + 10, lsn=lsn - 1, commit=commit, after=row(id_ + 10)))
    # Redeliveries.
    events += [rng.choice(events) for _ in range(30)]
    return [
        record(key, value, offset, partition=rng.randint(0, 1))
        for offset, (key, value) in enumerate(events)
    ]


def summary(result: FoldResult) -> tuple[Any, ...]:
    quarantined = sorted(
        (r.partition, r.offset, r.key or b"", r.value or b"", reason)
        for r, reason in result.quarantined
    )
    return result.rows, quarantined, result.skipped_tombstones


@pytest.mark.parametrize("history", [1, 2, 3, 4])
def test_permutation_invariance(history: int) -> None:
    records = workload(history)
    expected = summary(fold(records, PG))
    assert expected[0], "the workload should leave some rows"
    for seed in range(8):
        shuffled = list(records)
        random.Random(seed).shuffle(shuffled)
        assert summary(fold(shuffled, PG)) == expected
    # Delivering everything twice changes nothing either (apart from the counts).
    doubled = fold(records + records, PG)
    assert doubled.rows == expected[0]


# --------------------------------------------------------------------------------------------
# TOAST
# --------------------------------------------------------------------------------------------


def test_toast_placeholder_keeps_previous_value() -> None:
    records = [
        rec(pg("c", 1, lsn=10, after=row(1, name="a", notes="long text")), 0),
        rec(pg("u", 1, lsn=20, after=row(1, name="b", notes=TOAST_PLACEHOLDER)), 1),
        rec(pg("u", 1, lsn=30, after=row(1, name="c", notes=TOAST_PLACEHOLDER)), 2),
    ]
    for order in (records, records[::-1]):
        data = fold(order, PG).rows[(1,)]
        assert (data["name"], data["notes"]) == ("c", "long text")


def test_toast_without_wrapper() -> None:
    records = [
        rec(pg("c", 1, lsn=10, after=row(1, notes="long"), wrapper=False), 1),
        rec(pg("u", 1, lsn=20, after=row(1, notes=TOAST_PLACEHOLDER), wrapper=False), 0),
    ]
    assert fold(records, PG).rows[(1,)]["notes"] == "long"


def test_toast_placeholder_stays_without_previous_version() -> None:
    toasted = row(1, notes=TOAST_PLACEHOLDER)
    assert (
        fold([rec(pg("u", 1, lsn=20, after=toasted), 0)], PG).rows[(1,)]["notes"]
        == TOAST_PLACEHOLDER
    )
    # After a delete (or a truncate) there is no previous version either.
    records = [
        rec(pg("c", 1, lsn=10, after=row(1, notes="long")), 0),
        rec(pg("d", 1, lsn=15), 1),
        rec(pg("u", 1, lsn=20, after=toasted), 2),
    ]
    assert fold(records, PG).rows[(1,)]["notes"] == TOAST_PLACEHOLDER
    records[1] = rec(pg("t", None, lsn=15), 1)
    assert fold(records, PG).rows[(1,)]["notes"] == TOAST_PLACEHOLDER


def test_toast_takes_the_row_it_replaces_not_a_later_one() -> None:
    records = [
        rec(pg("c", 1, lsn=10, after=row(1, notes="v1")), 0),
        rec(pg("u", 1, lsn=30, after=row(1, notes="v3")), 1),
        rec(pg("u", 1, lsn=20, after=row(1, notes=TOAST_PLACEHOLDER)), 2),
        rec(pg("u", 1, lsn=40, after=row(1, name="x", notes=TOAST_PLACEHOLDER)), 3),
    ]
    assert fold(records, PG).rows[(1,)]["notes"] == "v3"


def test_toast_only_applies_to_string_columns() -> None:
    # A Json column is a string column too; a ZonedTimestamp column is not.
    records = [
        rec(pg("c", 1, lsn=10, after=row(1, doc='{"a":1}')), 0),
        rec(pg("u", 1, lsn=20, after=row(1, doc=TOAST_PLACEHOLDER)), 1),
    ]
    assert fold(records, PG).rows[(1,)]["doc"] == '{"a":1}'
    # The placeholder is no timestamp: a value of another type, never read as null.
    records.append(rec(pg("u", 1, lsn=30, after=row(1, seen_at=TOAST_PLACEHOLDER)), 2))
    result = fold(records, PG)
    assert result.rows[(1,)]["_sequence"] == seq(None, 20)
    reason = "value of column seen_at does not fit timestamp"
    assert [why for _, why in result.quarantined] == [reason]


# --------------------------------------------------------------------------------------------
# Value decoding
# --------------------------------------------------------------------------------------------


def decoded(**columns: Any) -> dict[str, Any]:
    return fold([rec(pg("c", 1, lsn=10, after=row(1, **columns)), 0)], PG).rows[(1,)]


@pytest.mark.parametrize(
    ("unscaled", "expected"),
    [
        (12345, "123.45"),
        (-5, "-0.05"),
        (-12345, "-123.45"),
        (0, "0.00"),
        (100, "1.00"),
        (-128, "-1.28"),  # one byte 0x80
        (-129, "-1.29"),  # two bytes ff 7f
        (255, "2.55"),  # two bytes 00 ff
        (2**70 + 1, "11805916207174113034.25"),
        (-(10**37) - 7, "-" + "1" + "0" * 32 + "000.07"),
    ],
)
def test_decimal(unscaled: int, expected: str) -> None:
    fields = [dict(f) for f in FIELDS]
    fields[2] = {**fields[2], "parameters": {"scale": "2", "connect.decimal.precision": "38"}}
    event = pg("c", 1, lsn=10, after=row(1, amount=decimal_b64(unscaled)), fields=fields)
    assert fold([rec(event, 0)], PG).rows[(1,)]["amount"] == expected


def test_decimal_bytes_and_scales() -> None:
    # ff 7f = -129 as two's complement; 0x0186a0 = 100000.
    assert decoded(amount=base64.b64encode(b"\xff\x7f").decode())["amount"] == "-1.29"
    fields = [dict(f) for f in FIELDS]
    fields[2] = {**fields[2], "parameters": {"scale": "0"}}
    value = base64.b64encode(b"\x01\x86\xa0").decode()
    event = pg("c", 1, lsn=10, after=row(1, amount=value), fields=fields)
    assert fold([rec(event, 0)], PG).rows[(1,)]["amount"] == "100000"
    fields[2] = {**fields[2], "parameters": {"scale": "7"}}
    event = pg("c", 1, lsn=10, after=row(1, amount=value), fields=fields)
    assert fold([rec(event, 0)], PG).rows[(1,)]["amount"] == "0.0100000"


def test_timestamps_and_dates() -> None:
    data = decoded(
        updated_at=1_767_225_792_345_678,
        seen_at="2026-01-01T02:03:12.345678+02:00",
        born=-1,
    )
    assert data["updated_at"] == 1_767_225_792_345_678
    assert data["seen_at"] == 1_767_225_792_345_678  # 2026-01-01T00:03:12.345678Z
    assert data["born"] == -1
    assert decoded(seen_at="2026-01-01T00:03:12Z")["seen_at"] == 1_767_225_792_000_000
    assert decoded(seen_at="1969-12-31T23:59:59.5-00:30")["seen_at"] == 1_799_500_000
    assert decoded(seen_at="2026-01-01T00:00:00.123456789Z")["seen_at"] == (1_767_225_600_123_456)


def test_other_debezium_time_types() -> None:
    fields: list[dict[str, Any]] = [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "int64", "name": "io.debezium.time.Timestamp", "field": "ms"},
        {"type": "int64", "name": "io.debezium.time.NanoTimestamp", "field": "ns"},
        {"type": "int64", "name": "io.debezium.time.MicroTime", "field": "t"},
    ]
    after = {"id": 1, "ms": 1_500, "ns": -1_500, "t": 3_600_000_000}
    event = pg("c", 1, lsn=10, after=after, fields=fields)
    data = fold([rec(event, 0)], PG).rows[(1,)]
    assert (data["ms"], data["ns"], data["t"]) == (1_500_000, -2, 3_600_000_000)


def test_binary_json_and_plain_values() -> None:
    data = decoded(blob="AAEC/w==", doc='{"a": [1, 2]}', name="x  ")
    assert data["blob"] == "AAEC/w=="
    assert data["doc"] == '{"a": [1, 2]}'
    assert data["name"] == "x  "  # char(n) padding is kept


@pytest.mark.parametrize("family", sorted(DEBEZIUM_TYPES))
def test_every_debezium_type_is_decoded(family: str) -> None:
    """One record with a column of each type of the family, as the JsonConverter writes it:
    each value in canonical form, and a table of the Spark types silver gives holds them."""
    columns = DEBEZIUM_TYPES[family]
    after = {"id": 1, **{field["field"]: value for field, value, *_ in columns}}
    event = pg("c", 1, lsn=10, after=after, fields=[FIELDS[0], *(f for f, *_ in columns)])
    expected = {field["field"]: value for field, _, _, value in columns}
    table_types = {"id": "int", **{field["field"]: kind for field, _, kind, _ in columns}}
    for spec in (PG, FoldSpec(table_types=table_types)):
        result = fold([rec(event, 0)], spec)
        assert result.quarantined == []
        assert {name: result.rows[(1,)][name] for name in expected} == expected


def test_zoned_time_offsets_wrap_around_midnight() -> None:
    fields = [FIELDS[0], connect_field("zt", "string", "io.debezium.time.ZonedTime")]
    for text, micros in [
        ("23:30:00.5-02:00", 5_400_500_000),  # 01:30:00.5 UTC, the next day
        ("00:15+0100", 83_700_000_000),  # 23:15 UTC, the day before
        ("12:00:00.123456789Z", 43_200_123_456),  # nanoseconds truncated
    ]:
        event = pg("c", 1, lsn=10, after={"id": 1, "zt": text}, fields=fields)
        assert fold([rec(event, 0)], PG).rows[(1,)]["zt"] == micros


def test_decimals_that_do_not_fit_are_quarantined_with_column_and_fix() -> None:
    """A decimal its silver type cannot hold exactly (digits before the point beyond the
    precision, nonzero digits after the scale, more than 38 digits) quarantines its record;
    the others keep every digit. The Spark side is checked on the same table."""
    fields = [FIELDS[0], *DECIMAL_FIELDS]
    records = [
        rec(pg("c", i, lsn=10 + i, after={"id": i, column: value}, fields=fields), i)
        for i, (column, value, _, _) in enumerate(DECIMAL_FITS)
    ]
    result = fold(records, PG)
    reasons = {record.offset: reason for record, reason in result.quarantined}
    for i, (column, _, expected, reason) in enumerate(DECIMAL_FITS):
        assert reasons.get(i) == reason, (column, i)
        if reason is None:
            assert result.rows[(i,)][column] == expected, (column, i)
        else:
            assert (i,) not in result.rows


def test_decimal_misfit_comes_after_the_record_reasons_and_in_column_order() -> None:
    """Same order as the Spark side: missing key first; of two misfits, the first column by
    name; a key that does not fit is a missing key; a delete's ``before`` is not checked."""
    fields = [FIELDS[0], *DECIMAL_FIELDS]
    both = {"id": 1, "n": {"scale": 19, "value": decimal_b64(1)}, "small": decimal_b64(10**12)}
    records = [
        rec(pg("c", 1, lsn=10, after=both, fields=fields), 0),
        rec((None, pg("c", 2, lsn=11, after={**both, "id": 2}, fields=fields)[1]), 1),
        rec(pg("d", 3, lsn=12, before={**both, "id": 3}, fields=fields), 2),
    ]
    quarantined = [(r.offset, reason) for r, reason in fold(records, PG).quarantined]
    assert quarantined == [(0, DECIMAL_FITS[7][3]), (1, "missing key")]
    keyed = FoldSpec(keys=("n",))
    too_big = {"id": 4, "n": {"scale": 0, "value": decimal_b64(10**20)}}
    event = rec(pg("c", 4, lsn=13, after=too_big, fields=fields), 3)
    assert fold([event], keyed).quarantined[0][1] == "missing key"


def test_toast_placeholder_only_in_columns_read_as_text() -> None:
    fields = [
        FIELDS[0],
        connect_field("xml", "string", "io.debezium.data.Xml"),
        connect_field("iv", "string", "io.debezium.time.Interval"),
        connect_field("zt", "string", "io.debezium.time.ZonedTime"),
    ]
    first = {"id": 1, "xml": "<a/>", "iv": "P1D", "zt": "10:00:00Z"}
    toasted = {**first, "xml": TOAST_PLACEHOLDER, "iv": TOAST_PLACEHOLDER}
    records = [
        rec(pg("c", 1, lsn=10, after=first, fields=fields), 0),
        rec(pg("u", 1, lsn=20, after=toasted, fields=fields), 1),
    ]
    data = fold(records, PG).rows[(1,)]
    assert (data["xml"], data["iv"], data["_sequence"]) == ("<a/>", "P1D", seq(None, 20))
    # A ZonedTime is a number in silver: the placeholder is no time of day, a value of
    # another type, quarantined (never read as null).
    records.append(
        rec(pg("u", 1, lsn=30, after={**first, "zt": TOAST_PLACEHOLDER}, fields=fields), 2)
    )
    result = fold(records, PG)
    assert [why for _, why in result.quarantined] == ["value of column zt does not fit bigint"]
    assert (result.rows[(1,)]["zt"], result.rows[(1,)]["_sequence"]) == (36000000000, seq(None, 20))


def test_without_wrapper_values_are_the_json_values() -> None:
    image = row(1, amount="MDk=", updated_at=5, seen_at="2026-01-01T00:00:00Z")
    data = fold([rec(pg("c", 1, lsn=10, after=image, wrapper=False), 0)], PG).rows[(1,)]
    assert (data["amount"], data["updated_at"], data["seen_at"]) == (
        "MDk=",
        5,
        "2026-01-01T00:00:00Z",
    )


def test_key_values_are_decoded_with_the_key_schema() -> None:
    key_fields: list[dict[str, Any]] = [
        {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "field": "at"},
        {
            "type": "bytes",
            "name": "org.apache.kafka.connect.data.Decimal",
            "parameters": {"scale": "1"},
            "field": "n",
        },
    ]
    fields = [*key_fields, {"type": "string", "optional": True, "field": "name"}]
    key = {"schema": struct(key_fields, "k"), "payload": {"at": 7, "n": decimal_b64(-15)}}
    _, value = pg(
        "c", 1, lsn=10, after={"at": 7, "n": decimal_b64(-15), "name": "a"}, fields=fields
    )
    result = fold([record(key, value, 0)], PG)
    assert list(result.rows) == [(7, "-1.5")]
    assert result.rows[(7, "-1.5")]["n"] == "-1.5"
    _, delete = pg("d", 1, lsn=20, before={"at": 7, "n": decimal_b64(-15), "name": None})
    assert fold([record(key, value, 0), record(key, delete, 1)], PG).rows == {}


def test_columns_are_the_union_of_all_events() -> None:
    old = {"id": 1, "name": "a"}
    new = {"id": 2, "name": "b", "added": True}
    records = [
        rec(pg("c", 2, lsn=20, after=new, wrapper=False), 0),
        rec(pg("c", 1, lsn=10, after=old, wrapper=False), 1),
    ]
    result = fold(records, PG)
    assert result.rows[(1,)]["added"] is None
    assert result.rows[(2,)]["added"] is True


# --------------------------------------------------------------------------------------------
# Quarantine and tombstones
# --------------------------------------------------------------------------------------------


def test_tombstones_are_skipped() -> None:
    records = [record({"id": 1}, None, 0), record(None, None, 1)]
    result = fold(records, PG)
    assert result == FoldResult(rows={}, quarantined=[], skipped_tombstones=2)


def with_source(event: tuple[Any, Any], **changes: Any) -> tuple[Any, Any]:
    key, value = event
    value = json.loads(json.dumps(value))
    payload = value.get("payload", value)
    for name, new in changes.items():
        if new is None:
            payload["source"].pop(name, None)
        else:
            payload["source"][name] = new
    return key, value


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ({"id": 1}, "{not json", "unparseable"),
        ({"id": 1}, "[1, 2]", "unparseable"),
        ({"id": 1}, '"a string"', "unparseable"),
        ({"id": 1}, "null", "unparseable"),
        ({"id": 1}, "NaN", "unparseable"),
        ({"id": 1}, {"schema": {"type": "struct"}, "payload": [1]}, "payload is not an object"),
        ({"id": 1}, {"schema": {"type": "struct"}, "payload": None}, "payload is not an object"),
        ({"id": 1}, {"op": "c", "after": "x", "source": {}}, "after is not an object"),
        ({"id": 1}, {"op": "u", "after": 5}, "after is not an object"),
        (None, {"op": "t", "after": [1]}, "after is not an object"),
        ({"id": 1}, {"op": "d", "before": "x"}, "before is not an object"),
        ({"id": 1}, {"op": "c", "after": {"id": 1}, "source": "pg"}, "source is not an object"),
        ({"id": 1}, {"op": "x", "after": "x"}, "unknown op"),
        ({"id": 1}, {"after": {"id": 1}, "source": {}}, "missing op"),
        ({"id": 1}, {"op": None, "after": {"id": 1}}, "missing op"),
        ({"id": 1}, {"op": "x", "after": {"id": 1}}, "unknown op"),
        ({"id": 1}, {"op": "C", "after": {"id": 1}}, "unknown op"),
    ],
)
def test_quarantine_value_problems(key: Any, value: Any, reason: str) -> None:
    target = record(key, value, 0)
    result = fold([target], PG)
    assert result.quarantined == [(target, reason)]
    assert result.rows == {}


def test_quarantine_invalid_utf8() -> None:
    target = BronzeRecord(TOPIC, 0, 0, b'{"id":1}', b'{"op":"c","x":"\xff"}')
    assert fold([target], PG).quarantined == [(target, "unparseable")]


def test_quarantine_missing_key() -> None:
    value = pg("c", 1, lsn=10, after=row(1))[1]
    cases = [
        record(None, value, 0),  # null record key
        record({"id": None}, value, 1),  # null key field
        record({}, value, 2),  # no key fields
        record({"schema": struct(KEY_FIELDS, "k"), "payload": {"id": None}}, value, 3),
        record("not json", value, 4),
        record(None, pg("d", None, lsn=11, before=row(1))[1], 5),
    ]
    result = fold(cases, PG)
    assert result.quarantined == [(r, "missing key") for r in cases]
    # Configured keys are read from after (before for deletes).
    by_name = FoldSpec(keys=("name",))
    named = record({"id": 1}, pg("c", 1, lsn=10, after=row(1, name=None))[1], 6)
    deleted = record({"id": 1}, pg("d", 1, lsn=11)[1], 7)  # before has only the id
    assert fold([named, deleted], by_name).quarantined == [
        (named, "missing key"),
        (deleted, "missing key"),
    ]


@pytest.mark.parametrize(
    "sequence",
    [
        None,  # absent
        "not json",
        '["1"]',
        '["1", "2", "3"]',
        '["1", null]',
        '[null, "12a"]',
        '["-1", "2"]',
        "[1, 2]",
        '{"a": 1}',
        7,
    ],
)
def test_quarantine_missing_postgres_sequence(sequence: Any) -> None:
    event = with_source(pg("c", 1, lsn=10, after=row(1)), sequence=sequence)
    target = rec(event, 0)
    assert fold([target], PG).quarantined == [(target, "missing sequence")]


def test_postgres_sequence_as_a_json_array_is_accepted() -> None:
    event = with_source(pg("c", 1, lsn=10, after=row(1)), sequence=["3", "4"])
    assert fold([rec(event, 0)], PG).rows[(1,)]["_sequence"] == seq(3, 4)


def test_quarantine_missing_mysql_sequence() -> None:
    good = mysql("c", 1, "mysql-bin.000001", 4, 0, "a")
    cases: list[BronzeRecord] = []
    for change in ({"file": None}, {"pos": None}, {"row": None}, {"pos": "4"}, {"pos": -1}):
        key, value = json.loads(json.dumps(good))
        for name, new in change.items():
            if new is None:
                value["source"].pop(name)
            else:
                value["source"][name] = new
        cases.append(record(key, value, len(cases)))
    result = fold(cases, PG)
    assert result.quarantined == [(r, "missing sequence") for r in cases]


def test_other_connectors_need_sequence_by() -> None:
    key, value = pg("c", 1, lsn=10, after=row(1, updated_at=5), wrapper=False)
    value["source"] = {"connector": "sqlserver", "ts_ms": 1}
    target = record(key, value, 0)
    assert fold([target], PG).quarantined == [(target, "missing sequence")]

    spec = FoldSpec(sequence_by=("updated_at",))
    _, newer = pg("u", 1, lsn=0, after=row(1, name="newer", updated_at=9), wrapper=False)
    _, null_seq = pg("u", 1, lsn=0, after=row(1, name="null", updated_at=None), wrapper=False)
    _, delete = pg("d", 1, lsn=0, before=row(1, updated_at=7), wrapper=False)
    for doc in (newer, null_seq, delete):
        doc["source"] = {"connector": "sqlserver", "ts_ms": 1}
    records = [
        record(key, newer, 0),
        record(key, delete, 1),
        record(key, value, 2),
        record(key, null_seq, 3),
    ]
    result = fold(records, spec)
    assert names(result) == {1: "newer"}
    assert result.rows[(1,)]["_sequence"] == (9,)
    assert fold(records[1:], spec).rows == {}

    truncate = record(None, {"op": "t", "source": {"connector": "sqlserver"}}, 5)
    assert fold([truncate], spec).quarantined == [(truncate, "missing sequence")]
    missing = {"op": "c", "after": {"id": 1}, "source": {}}
    assert fold([record(key, missing, 6)], spec).quarantined[0][1] == "missing sequence"


def test_reason_precedence_follows_the_contract_steps() -> None:
    # op is checked before the key, the key before the sequence.
    no_op_no_key = record(None, {"after": {"id": 1}}, 0)
    no_key_no_sequence = record(None, {"op": "c", "after": {"id": 1}, "source": {}}, 1)
    result = fold([no_op_no_key, no_key_no_sequence], PG)
    assert [reason for _, reason in result.quarantined] == ["missing op", "missing key"]


# --------------------------------------------------------------------------------------------
# Events format
# --------------------------------------------------------------------------------------------

EVENTS = FoldSpec(
    format="events",
    keys=("order_id",),
    sequence_by=("updated_at", "version"),
    column_types={
        "order_id": "bigint",
        "status": "string",
        "amount": "double",
        "paid": "boolean",
        "updated_at": "timestamp",
        "version": "int",
        "day": "date",
    },
)


def order(offset: int, partition: int = 0, **value: Any) -> BronzeRecord:
    return record(str(value.get("order_id")), value, offset, partition)


def test_events_with_column_types_and_sequence_by() -> None:
    records = [
        order(0, order_id=1, status="paid", amount=3, paid=True, version=2,
              updated_at="2026-01-01T00:03:12.345Z", day="2026-01-01", extra="dropped"),
        order(1, order_id=1, status="new", amount=1.5, paid=False, version=1,
              updated_at="2026-01-01T00:03:12.345Z"),
        order(2, order_id=1, status="older", version=9, updated_at="2026-01-01T00:00:00Z"),
        order(3, order_id=2, status="nulls first", version=None, updated_at=None),
        order(4, order_id=2, status="x", version=1, updated_at="2025-12-31T23:00:00-02:00"),
    ]  # fmt: skip
    for seed in range(4):
        shuffled = list(records)
        random.Random(seed).shuffle(shuffled)
        result = fold(shuffled, EVENTS)
        assert result.quarantined == []
        assert result.rows[(1,)] == {
            "order_id": 1,
            "status": "paid",
            "amount": 3.0,
            "paid": True,
            "updated_at": 1_767_225_792_345_000,
            "version": 2,
            "day": 20454,
            "_sequence": (1_767_225_792_345_000, 2),
            "_op": "c",
            "_source_ts": None,
            "_bronze_topic": TOPIC,
            "_bronze_partition": 0,
            "_bronze_offset": 0,
        }
        assert result.rows[(2,)]["status"] == "x"
        assert result.rows[(2,)]["_sequence"] == (1_767_229_200_000_000, 1)


def test_events_quarantine() -> None:
    no_key = order(0, status="a", version=1, updated_at="2026-01-01T00:00:00Z")
    null_key = order(1, order_id=None, version=1, updated_at="2026-01-01T00:00:00Z")
    no_sequence = order(2, order_id=1, updated_at="2026-01-01T00:00:00Z")
    # A key or sequence value its type does not hold reads as none (as Spark reads it).
    wrong_type = order(3, order_id="1", version=1, updated_at="2026-01-01T00:00:00Z")
    bad_time = order(4, order_id=1, version=1, updated_at="yesterday")
    too_big = order(5, order_id=1, version=2**31, updated_at="2026-01-01T00:00:00Z")
    not_object = record("1", "[1]", 6)
    tombstone = record("1", None, 7)
    hot = order(8, order_id=1, version=1, updated_at="2026-01-01T00:00:00Z", amount="hot")
    nested = order(9, order_id=1, version=1, updated_at="2026-01-01T00:00:00Z", paid={"a": 1})
    records = [no_key, null_key, no_sequence, wrong_type, bad_time, too_big, not_object]
    result = fold([*records, tombstone, hot, nested], EVENTS)
    assert result.quarantined == [
        (no_key, "missing key"),
        (null_key, "missing key"),
        (no_sequence, "missing sequence"),
        (wrong_type, "missing key"),
        (bad_time, "missing sequence"),
        (too_big, "missing sequence"),
        (not_object, "unparseable"),
        (hot, "value of column amount does not fit double"),
        (nested, "value of column paid does not fit boolean"),
    ]
    assert result.skipped_tombstones == 1
    assert result.rows == {}


def test_events_without_column_types_keep_json_values() -> None:
    spec = FoldSpec(format="events", keys=("k1", "k2"), sequence_by=("seq",))
    records = [
        record(None, {"k1": "a", "k2": 1, "seq": 2, "v": [1, 2]}, 0),
        record(None, {"k1": "a", "k2": 1, "seq": 1, "v": "old", "w": "x"}, 1),
        record(None, {"k1": "b", "k2": 1, "seq": 1, "w": TOAST_PLACEHOLDER}, 2),
        record(None, {"k1": "b", "k2": 1, "seq": 0, "w": "full"}, 3),
    ]
    result = fold(records, spec)
    assert result.rows[("a", 1)] == {
        "k1": "a",
        "k2": 1,
        "seq": 2,
        "v": [1, 2],
        "w": None,
        "_sequence": (2,),
        "_op": "c",
        "_source_ts": None,
        "_bronze_topic": TOPIC,
        "_bronze_partition": 0,
        "_bronze_offset": 0,
    }
    # TOAST is a Debezium notion: in an event stream the placeholder is an ordinary string.
    assert result.rows[("b", 1)]["w"] == TOAST_PLACEHOLDER


def test_spec_validation() -> None:
    with pytest.raises(ValueError, match="keys"):
        fold([], FoldSpec(format="events", sequence_by=("s",)))
    with pytest.raises(ValueError, match="sequence_by"):
        fold([], FoldSpec(format="events", keys=("k",)))
    with pytest.raises(ValueError, match="unsupported type"):
        fold([], FoldSpec(format="events", keys=("k",), sequence_by=("s",),
                          column_types={"k": "varchar"}))  # fmt: skip
    with pytest.raises(ValueError, match="events tables only"):
        fold([], FoldSpec(column_types={"k": "string"}))


def test_canonical_key() -> None:
    assert canonical_key([1, "a", None]) == (1, "a", None)
    assert canonical_key([{"b": 1, "a": 2}, [1]]) == ('{"a":2,"b":1}', "[1]")


# --------------------------------------------------------------------------------------------
# Connect defaults of added columns
# --------------------------------------------------------------------------------------------

#: ALTER TABLE customers ADD COLUMN channel text DEFAULT 'web', ADD COLUMN tier int DEFAULT 3
WITH_DEFAULTS: list[dict[str, Any]] = [
    *FIELDS,
    {"type": "string", "optional": True, "field": "channel", "default": "web"},
    {"type": "int32", "optional": True, "field": "tier", "default": 3},
]


@pytest.mark.parametrize("seed", range(8))
def test_rows_of_a_schema_without_an_added_column_hold_its_connect_default(seed: int) -> None:
    """Whatever the arrival order: a row whose newest image is of the schema before the
    column holds the default; one that sends null holds null; one without a Connect schema
    holds null."""
    events = [
        pg("c", 1, lsn=10, after=row(1, name="a")),
        pg("c", 2, lsn=11, after=row(2, name="b")),
        pg("u", 2, lsn=30, after={**row(2), "channel": "app", "tier": 1}, fields=WITH_DEFAULTS),
        pg("c", 3, lsn=31, after={**row(3), "channel": None, "tier": None}, fields=WITH_DEFAULTS),
        pg("c", 4, lsn=12, after=row(4, name="late")),  # older than the ALTER
        pg("c", 5, lsn=13, after=row(5), wrapper=False),
    ]
    random.Random(seed).shuffle(events)
    result = fold([rec(e, offset) for offset, e in enumerate(events)], PG)
    found = {key[0]: (data["channel"], data["tier"]) for key, data in result.rows.items()}
    assert found == {
        1: ("web", 3),
        2: ("app", 1),
        3: (None, None),
        4: ("web", 3),
        5: (None, None),
    }


def test_dates_in_a_text_column_read_as_sparks_cast_writes_them(spark: Any) -> None:
    """A date column that became text: the fold's text of a date is Spark's, at and beyond
    the years 1 and 9999 (a Debezium date is any int32 of days)."""
    from pyspark.sql import functions as F

    from silver.reference import _date_text

    days = [0, 20_000, -719_162, -719_163, -800_000, 2_932_896, 2_932_897, 2**31 - 1, -(2**31)]
    frame = spark.createDataFrame([(d,) for d in days], "d int")
    texts = frame.select(F.date_from_unix_date("d").cast("string").alias("t")).collect()
    assert [_date_text(d) for d in days] == [r.t for r in texts]
