"""Schema versions of a micro-batch (silver.parse.discover_versions) and how silver.evolution
reads a batch of several: each version decoded by its own schema, then brought to one set of
columns. Tiny inline batches; the only Spark work is the discovery query and the parse."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import DecimalType, LongType, StructField, StructType

from cdc.records import Record
from lakehouse_core.config import TableSpec
from lakehouse_core.errors import SchemaChangeError
from silver.context import SchemaCache
from silver.decode import read_batch
from silver.parse import as_text, discover_versions
from tests.helpers import bronze_frame, pg_envelope, pg_key

pytestmark = pytest.mark.unit

TOPIC = "pg.public.customers"
SPEC = TableSpec(name="customers", topic=TOPIC)

ID = {"field": "id", "type": "int32", "optional": False}
NAME = {"field": "name", "type": "string", "optional": True}
NAME_REQUIRED = {"field": "name", "type": "string", "optional": False}
EMAIL = {"field": "email", "type": "string", "optional": True}


def amount(precision: int, scale: int) -> dict[str, Any]:
    parameters = {"scale": str(scale), "connect.decimal.precision": str(precision)}
    name = "org.apache.kafka.connect.data.Decimal"
    return {"field": "amount", "type": "bytes", "name": name, "parameters": parameters}


def record(offset: int, fields: list[dict[str, Any]], **after: Any) -> Record:
    value = pg_envelope("c", (1, 10 + offset), after={"id": offset, **after}, fields=fields)
    return Record(TOPIC, 0, offset, 1_000, pg_key(offset), value)


def versions(spark: SparkSession, records: list[Record]) -> list[tuple[Any, list[str]]]:
    found = discover_versions(as_text(bronze_frame(spark, records)), SPEC)
    return [(v.first, [c.name for c in v.layout.columns]) for v in found]


def test_a_nullability_change_keeps_one_version_an_added_column_makes_one(
    spark: SparkSession,
) -> None:
    """Schemas that decode the same columns alike make one version; a record is read with its
    own schema's columns only, so an added column's records make a version of their own, and
    so do the records without a schema (the first version also takes the tombstones)."""
    records = [
        record(0, [ID, NAME], name="a"),
        record(1, [ID, NAME, EMAIL], name="b", email="b@x"),
        record(2, [ID, NAME_REQUIRED], name="c"),
        Record(TOPIC, 0, 3, 1_000, pg_key(0), None),  # Kafka tombstone
        Record(TOPIC, 0, 4, 1_000, pg_key(9), "not json"),  # no schema, nothing to decode
    ]
    assert versions(spark, records) == [
        ((0, 0), ["id", "name"]),
        ((0, 1), ["id", "name", "email"]),
        ((0, 4), []),
    ]


def test_a_member_its_schema_lacks_is_not_read_whatever_the_batch_holds(
    spark: SparkSession,
) -> None:
    """A record whose JSON holds ``email`` while its schema has no such column reads none,
    also in a batch with records of a schema that has it."""
    records = [
        record(0, [ID, NAME, EMAIL], name="a", email="a@x"),
        record(1, [ID, NAME], name="b", email="b@x"),
    ]
    _, events = read_batch(as_text(bronze_frame(spark, records)), SPEC, None)
    assert sorted((r._bronze_offset, r.email) for r in events.collect()) == [(0, "a@x"), (1, None)]


def test_a_schema_whose_fields_hold_a_string_quarantines_its_records(
    spark: SparkSession,
) -> None:
    """The issue's case: an envelope schema whose ``fields`` list holds a string made schema
    discovery fail (``'str' object has no attribute 'get'``), the batch and every rerun. Its
    records are quarantined with the reason; the others are applied."""
    broken = record(1, [ID, NAME], name="b")
    broken.value["schema"]["fields"].append("x")
    records = [record(0, [ID, NAME], name="a"), broken, record(2, [ID, NAME], name="c")]
    _, events = read_batch(as_text(bronze_frame(spark, records)), SPEC, None)
    assert sorted((r._bronze_offset, r._reason) for r in events.collect()) == [
        (0, None),
        (1, 'invalid Connect schema: value schema > field 4 is not an object: "x"'),
        (2, None),
    ]


def test_the_cache_keeps_a_batch_version_of_one_declared_schema(spark: SparkSession) -> None:
    """A batch whose records all carry one Connect schema is kept for the next batches, which
    it stands for only when theirs carry exactly that schema; a batch of several schemas, or
    of none it can decode, is not kept."""
    one = discover_versions(as_text(bronze_frame(spark, [record(0, [ID, NAME], name="a")])), SPEC)
    several = [record(0, [ID, NAME], name="a"), record(1, [ID, NAME, EMAIL], email="b@x")]
    two = discover_versions(as_text(bronze_frame(spark, several)), SPEC)
    unreadable = [Record(TOPIC, 0, 0, 1_000, pg_key(0), "not json")]
    inferred = discover_versions(as_text(bronze_frame(spark, unreadable)), SPEC)
    cache = SchemaCache()
    cache.remember(one)
    assert cache.version == one[0] and len(one[0].hashes) == 1
    (own,) = one[0].hashes
    assert cache.covers([own])
    assert not cache.covers([own, own + 1]) and not cache.covers([own + 1])
    assert not cache.covers([]) and not cache.covers(None)  # only tombstones: discover
    for other in (two, inferred):
        cache.remember(one)
        cache.remember(other)
        assert cache.version is None and not cache.covers([own])


def test_a_type_change_makes_a_version_per_decoding(spark: SparkSession) -> None:
    records = [
        record(0, [ID, amount(12, 4)], amount="AQ=="),
        record(1, [ID, amount(10, 2)], amount="AQ=="),
        record(2, [ID, NAME, amount(12, 4)], name="c", amount="AQ=="),
    ]
    assert versions(spark, records) == [
        ((0, 0), ["id", "amount"]),
        ((0, 1), ["id", "amount"]),
        ((0, 2), ["id", "name", "amount"]),
    ]


def test_each_version_is_decoded_by_its_own_scale(spark: SparkSession) -> None:
    # Both encode the unscaled value 1 ("AQ=="): 0.0001 at scale 4, 0.01 at scale 2.
    records = [
        record(0, [ID, amount(12, 4)], amount="AQ=="),
        record(1, [ID, amount(10, 2)], amount="AQ=="),
        Record(TOPIC, 0, 2, 1_000, pg_key(1), None),
    ]
    table = StructType([StructField("id", LongType()), StructField("amount", DecimalType(10, 2))])

    layout, events = read_batch(as_text(bronze_frame(spark, records)), SPEC, table)

    assert [c.name for c in layout.columns] == ["id", "amount"]
    assert dict(events.dtypes)["amount"] == "decimal(12,4)"
    assert dict(events.dtypes)["id"] == "bigint"
    rows = sorted((r._bronze_offset, r.id, r.amount, r._tombstone) for r in events.collect())
    assert rows == [
        (0, 0, Decimal("0.0001"), False),
        (1, 1, Decimal("0.0100"), False),
        (2, 1, None, True),  # a tombstone: its key, nothing else
    ]


def test_conflict_between_versions_of_one_batch_fails_naming_both_types(
    spark: SparkSession,
) -> None:
    """A new table: the version first in bronze decides the type."""
    text_amount = {"field": "amount", "type": "string", "optional": True}
    records = [
        record(1, [ID, amount(10, 2)], amount="AQ=="),
        record(0, [ID, text_amount], amount="x"),
    ]
    failing = TableSpec(name="customers", topic=TOPIC, on_incompatible_type="fail")
    with pytest.raises(SchemaChangeError, match=r"column 'amount' is string in the table but "):
        read_batch(as_text(bronze_frame(spark, records)), failing, None)
    _, events = read_batch(as_text(bronze_frame(spark, records)), SPEC, None)  # quarantine
    assert dict(events.dtypes)["amount"] == "string"
    assert sorted((r._bronze_offset, r._reason) for r in events.collect()) == [
        (0, None),
        (1, "incompatible type for column amount: table string, record decimal(10,2)"),
    ]


def test_a_column_silver_drops_never_conflicts(spark: SparkSession) -> None:
    """``except_column_list``: the batch reads the dropped column (conditions may use it) as
    text where its versions disagree, and neither fails nor quarantines a record for it."""
    text_amount = {"field": "amount", "type": "string", "optional": True}
    records = [
        record(1, [ID, amount(10, 2)], amount="AQ=="),
        record(0, [ID, text_amount], amount="x"),
    ]
    dropping = TableSpec(name="customers", topic=TOPIC, except_column_list=("amount",))
    _, events = read_batch(as_text(bronze_frame(spark, records)), dropping, None)
    assert dict(events.dtypes)["amount"] == "string"
    assert sorted((r._bronze_offset, r.amount, r._reason) for r in events.collect()) == [
        (0, "x", None),
        (1, "0.01", None),
    ]
