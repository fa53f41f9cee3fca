"""The type rules of schema evolution (lakehouse_core/widening.py, silver/evolution.py plan_schema),
the reference fold's own copy of them, and the ``on_incompatible_type`` setting. Pure Python:
no Spark job runs."""

from __future__ import annotations

import base64
import itertools
import json
from functools import reduce
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from lakehouse_core.config import TableSpec, load_config
from lakehouse_core.errors import ConfigError
from lakehouse_core.widening import fits, needs_alter, table_changes, widened
from silver.evolution import TypeConflict, VersionColumns, incompatible_message, plan_schema
from silver.reference import BronzeRecord, FoldSpec, fold
from silver.reference import _fits as reference_fits

pytestmark = pytest.mark.unit

TYPES: list[DataType] = [
    ByteType(),
    ShortType(),
    IntegerType(),
    LongType(),
    FloatType(),
    DoubleType(),
    DecimalType(3, 0),
    DecimalType(10, 0),
    DecimalType(10, 2),
    DecimalType(12, 1),
    DecimalType(12, 2),
    DecimalType(13, 2),
    DecimalType(20, 0),
    DecimalType(22, 2),
    DecimalType(38, 2),
    DecimalType(38, 37),
    StringType(),
    BooleanType(),
    DateType(),
    TimestampType(),
    TimestampNTZType(),
    ArrayType(IntegerType()),
    ArrayType(LongType()),
]


@pytest.mark.parametrize(
    ("table", "incoming", "expected"),
    [
        (IntegerType(), LongType(), LongType()),  # int32 -> int64 after ALTER ... TYPE bigint
        (LongType(), IntegerType(), LongType()),  # an older record after the change
        (ByteType(), ShortType(), ShortType()),
        (DecimalType(10, 2), DecimalType(12, 2), DecimalType(12, 2)),
        (DecimalType(10, 2), DecimalType(12, 4), DecimalType(12, 4)),
        (DecimalType(10, 2), DecimalType(12, 1), DecimalType(13, 2)),  # neither holds the other
        (IntegerType(), DecimalType(12, 2), DecimalType(12, 2)),
        (IntegerType(), DecimalType(5, 2), DecimalType(12, 2)),  # int needs 10 integer digits
        (LongType(), DecimalType(10, 2), DecimalType(22, 2)),
        (FloatType(), DoubleType(), DoubleType()),
        (IntegerType(), DoubleType(), DoubleType()),
        (FloatType(), IntegerType(), DoubleType()),
        (DateType(), TimestampNTZType(), TimestampNTZType()),
        # Text holds integers, booleans and dates as their text (a rewrite, no Delta widening).
        (StringType(), LongType(), StringType()),
        (LongType(), StringType(), StringType()),
        (BooleanType(), StringType(), StringType()),
        (DateType(), StringType(), StringType()),
        (IntegerType(), BooleanType(), StringType()),  # only text holds both
        (DecimalType(10, 2), StringType(), None),  # its text depends on the scale
        (DoubleType(), StringType(), None),  # its text depends on the printing
        (LongType(), DoubleType(), None),  # Delta does not widen bigint to double
        (DecimalType(10, 2), DoubleType(), None),
        (TimestampType(), StringType(), None),
        (DateType(), TimestampType(), None),
        (DecimalType(38, 2), DecimalType(38, 3), None),  # beyond 38 digits
        (ArrayType(IntegerType()), ArrayType(LongType()), None),
    ],
)
def test_widened_is_the_narrowest_type_holding_both(
    table: DataType, incoming: DataType, expected: DataType | None
) -> None:
    assert widened(table, incoming) == expected
    assert widened(incoming, table) == expected


def test_text_only_where_asked() -> None:
    """Key columns and inferred JSON types take Delta's widenings only."""
    assert widened(StringType(), IntegerType(), text=False) is None
    assert widened(IntegerType(), StringType(), text=False) is None
    assert widened(IntegerType(), LongType(), text=False) == LongType()


def test_json_numbers_let_a_double_column_take_integers() -> None:
    assert widened(DoubleType(), LongType()) is None
    assert widened(DoubleType(), LongType(), json_numbers=True) == DoubleType()
    assert widened(LongType(), DoubleType(), json_numbers=True) is None


def test_widened_is_a_least_upper_bound() -> None:
    """For every pair: both types fit the result, and the result fits every type both fit, so
    a column's final type does not depend on the order in which compatible types arrive."""
    for a, b in itertools.product(TYPES, TYPES):
        bound = widened(a, b)
        holders = [t for t in TYPES if fits(a, t) and fits(b, t)]
        if bound is None:
            assert holders == [], (a, b)
        else:
            assert fits(a, bound) and fits(b, bound), (a, b)
            assert all(fits(bound, t) for t in holders), (a, b)


def test_reference_fold_holds_the_same_types() -> None:
    """The reference fold's own rule (on type names) agrees with silver's, for every pair."""
    disagree = [
        (record.simpleString(), table.simpleString())
        for record, table in itertools.product(TYPES, TYPES)
        if reference_fits(record.simpleString(), table.simpleString()) != fits(record, table)
    ]
    assert disagree == []


def test_the_widest_type_does_not_depend_on_order() -> None:
    def fold_types(order: tuple[DataType, ...]) -> DataType | None:
        return reduce(lambda t, n: None if t is None else widened(t, n), order[1:], order[0])

    for types in itertools.combinations_with_replacement(TYPES[:16], 3):
        results = {str(fold_types(order)) for order in itertools.permutations(types)}
        assert len(results) == 1, types


def test_needs_alter_for_integers_to_decimal_or_double_only() -> None:
    assert needs_alter(IntegerType(), DecimalType(12, 2))
    assert needs_alter(ShortType(), DoubleType())
    assert not needs_alter(IntegerType(), LongType())
    assert not needs_alter(DecimalType(10, 2), DecimalType(12, 2))
    assert not needs_alter(FloatType(), DoubleType())


def test_table_changes_add_widen_alter_and_leave_the_rest() -> None:
    table = StructType(
        [
            StructField("id", IntegerType()),
            StructField("total", DecimalType(10, 2)),
            StructField("points", IntegerType()),
            StructField("name", StringType()),
            StructField("big", LongType()),
            StructField("flag", BooleanType()),
            StructField("ratio", DoubleType()),
        ]
    )
    rows = StructType(
        [
            StructField("id", LongType()),
            StructField("total", DecimalType(12, 2)),
            StructField("points", DecimalType(12, 2)),
            StructField("name", LongType()),  # text holds it: the table keeps text
            StructField("big", IntegerType()),  # narrower: the table keeps bigint
            StructField("coupon", StringType()),
            StructField("flag", StringType()),  # boolean -> text: a rewrite
            StructField("ratio", StringType()),  # incompatible: not the table's business here
        ]
    )
    changes = table_changes(table, rows)
    assert [f.name for f in changes.added] == ["coupon"]
    assert [(f.name, f.dataType) for f in changes.widened] == [
        ("id", LongType()),
        ("total", DecimalType(12, 2)),
    ]
    assert [(f.name, f.dataType) for f in changes.altered] == [("points", DecimalType(12, 2))]
    assert [(f.name, f.dataType) for f in changes.retyped] == [("flag", StringType())]
    assert not table_changes(table, table)


def schema(**columns: DataType) -> StructType:
    return StructType([StructField(n, t) for n, t in columns.items()])


def test_plan_adds_widens_and_reports_conflicts_per_version() -> None:
    table = schema(id=LongType(), total=DecimalType(10, 2), name=StringType())
    plan = plan_schema(
        table,
        [
            VersionColumns(schema(id=LongType(), total=DecimalType(12, 2), coupon=StringType())),
            VersionColumns(schema(id=LongType(), total=StringType(), name=LongType())),
            VersionColumns(schema(id=IntegerType(), coupon=IntegerType())),
            VersionColumns(schema(id=StringType(), coupon=IntegerType()), inferred=True),
        ],
        keys={"id"},
    )
    assert [(f.name, f.dataType) for f in plan.target.fields] == [
        ("id", LongType()),
        ("total", DecimalType(12, 2)),
        ("name", StringType()),  # text holds the integers
        ("coupon", StringType()),  # so it does here
    ]
    assert plan.conflicts == (
        (),
        (TypeConflict("total", DecimalType(12, 2), StringType()),),
        (),
        (  # a key, and JSON-inferred types, take no text
            TypeConflict("id", LongType(), StringType()),
            TypeConflict("coupon", StringType(), IntegerType()),
        ),
    )
    assert plan.conflicts[1][0].reason == (
        "incompatible type for column total: table decimal(12,2), record string"
    )


def test_plan_reads_a_dropped_column_as_text_where_its_types_conflict() -> None:
    table = schema(id=LongType())
    plan = plan_schema(
        table,
        [
            VersionColumns(schema(id=LongType(), note=DecimalType(10, 2), qty=DoubleType())),
            VersionColumns(schema(id=LongType(), note=BooleanType(), qty=StringType())),
            VersionColumns(schema(id=LongType(), note=LongType())),
        ],
        dropped={"note"},
    )
    assert plan.target == schema(id=LongType(), note=StringType(), qty=DoubleType())
    assert plan.conflicts == ((), (TypeConflict("qty", DoubleType(), StringType()),), ())


def test_plan_of_a_new_table_takes_the_first_versions_columns_in_order() -> None:
    plan = plan_schema(
        None,
        [
            VersionColumns(schema(id=IntegerType(), a=StringType())),
            VersionColumns(schema(b=DoubleType(), id=LongType())),
        ],
    )
    assert plan.target == schema(id=LongType(), a=StringType(), b=DoubleType())
    assert plan.conflicts == ((), ())


def test_incompatible_message_is_one_line_naming_table_column_types_and_remedies() -> None:
    spec = TableSpec(name="orders", topic="shop.public.orders")
    message = incompatible_message(spec, TypeConflict("total", LongType(), StringType()), (2, 41))
    assert "\n" not in message
    assert message.startswith(
        "Incompatible type change in silver.orders: column 'total' is bigint in the table but "
        "string in records of topic shop.public.orders (first at partition 2, offset 41)"
    )
    assert "Set on_incompatible_type = \"quarantine\" for table 'orders'" in message
    assert "rebuild it from bronze (replay)" in message


def test_on_incompatible_type_setting(tmp_path: Path) -> None:
    # The default stops nothing: only the records that cannot be represented are held back.
    assert TableSpec(name="a", topic="t").on_incompatible_type == "quarantine"
    path = tmp_path / "pipeline.toml"
    path.write_text(
        '[[tables]]\nname = "orders"\ntopic = "shop.public.orders"\n'
        'on_incompatible_type = "fail"\n',
        encoding="utf-8",
    )
    assert load_config(path).tables[0].on_incompatible_type == "fail"
    with pytest.raises(
        ConfigError, match=r"Invalid on_incompatible_type 'skip' .* fail, quarantine"
    ):
        TableSpec(name="a", topic="t", on_incompatible_type="skip")  # type: ignore[arg-type]
    path.write_text(
        '[[tables]]\nname = "a"\ntopic = "t"\non_incompatible_type = 1\n', encoding="utf-8"
    )
    with pytest.raises(
        ConfigError, match="'on_incompatible_type' in \\[\\[tables\\]\\] must be a string"
    ):
        load_config(path)


def test_type_widening_setting(tmp_path: Path) -> None:
    # The default keeps every Delta reader able to open the table; in place is asked for.
    assert TableSpec(name="a", topic="t").type_widening == "rewrite"
    path = tmp_path / "pipeline.toml"
    path.write_text(
        '[[tables]]\nname = "orders"\ntopic = "t"\ntype_widening = "in_place"\n', encoding="utf-8"
    )
    assert load_config(path).tables[0].type_widening == "in_place"
    with pytest.raises(ConfigError, match=r"Invalid type_widening 'always' .* in_place, rewrite"):
        TableSpec(name="a", topic="t", type_widening="always")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# The reference fold with the table's types
# --------------------------------------------------------------------------------------------


def decimal_field(name: str, precision: int, scale: int) -> dict[str, Any]:
    parameters = {"scale": str(scale), "connect.decimal.precision": str(precision)}
    return {
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": parameters,
        "field": name,
    }


def event(
    offset: int, lsn: int, fields: list[dict[str, Any]], after: dict[str, Any]
) -> BronzeRecord:
    row = {"type": "struct", "fields": fields}
    value = {
        "schema": {
            "type": "struct",
            "fields": [{**row, "field": "before"}, {**row, "field": "after"}],
        },
        "payload": {
            "before": None,
            "after": after,
            "op": "c",
            "source": {"connector": "postgresql", "sequence": json.dumps([None, str(lsn)])},
        },
    }
    key = {
        "schema": {"type": "struct", "fields": [{"type": "int64", "field": "id"}]},
        "payload": {"id": after["id"]},
    }
    return BronzeRecord("t", 0, offset, json.dumps(key).encode(), json.dumps(value).encode())


def unscaled(value: int) -> str:
    return base64.b64encode(value.to_bytes(8, "big", signed=True)).decode()


def test_reference_reads_values_in_the_tables_types_and_quarantines_the_rest() -> None:
    old = [
        {"type": "int64", "field": "id"},
        decimal_field("total", 10, 2),
        {"type": "int32", "field": "points"},
    ]
    new = [
        {"type": "int64", "field": "id"},
        decimal_field("total", 12, 4),
        decimal_field("points", 12, 2),
    ]
    text = [{"type": "int64", "field": "id"}, {"type": "string", "field": "total"}]
    records = [
        event(0, 10, old, {"id": 1, "total": unscaled(150), "points": 7}),
        event(1, 11, new, {"id": 2, "total": unscaled(21234), "points": unscaled(725)}),
        event(2, 12, text, {"id": 3, "total": "a lot"}),
        event(3, 13, text, {"id": 4, "total": None}),
    ]
    types = {"id": "bigint", "total": "decimal(12,4)", "points": "decimal(12,2)"}

    result = fold(records, FoldSpec(table_types=types))

    assert {k: (r["total"], r["points"]) for k, r in result.rows.items()} == {
        (1,): ("1.5000", "7.00"),
        (2,): ("2.1234", "7.25"),
        (4,): (None, None),
    }
    assert result.quarantined == [
        (records[2], "incompatible type for column total: table decimal(12,4), record string")
    ]
    # Without the table's types, each record keeps its own scale and nothing is type-checked.
    plain = fold(records, FoldSpec())
    assert plain.rows[(1,)]["total"] == "1.50"
    assert plain.quarantined == []


def test_reference_holds_debezium_type_changes_that_silver_widens() -> None:
    """``real -> double precision``, a ``time`` column under another ``time.precision.mode``
    and a ``numeric(12,2)`` that loses its precision (VariableScaleDecimal) keep their table
    types; a time of day becoming a timestamp is incompatible."""
    variable = {
        "type": "struct",
        "name": "io.debezium.data.VariableScaleDecimal",
        "fields": [{"type": "int32", "field": "scale"}, {"type": "bytes", "field": "value"}],
        "field": "price",
    }
    old = [
        {"type": "int64", "field": "id"},
        {"type": "float", "field": "ratio"},
        {"type": "int32", "name": "io.debezium.time.Time", "field": "at"},
        decimal_field("price", 12, 2),
    ]
    new = [
        {"type": "int64", "field": "id"},
        {"type": "double", "field": "ratio"},
        {"type": "int64", "name": "io.debezium.time.MicroTime", "field": "at"},
        variable,
    ]
    moved = [
        {"type": "int64", "field": "id"},
        {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "field": "at"},
    ]
    records = [
        event(0, 10, old, {"id": 1, "ratio": 0.5, "at": 1_000, "price": unscaled(150)}),
        event(
            1, 11, new, {"id": 2, "ratio": 0.25, "at": 7, "price": {"scale": 1, "value": "DA=="}}
        ),
        event(2, 12, moved, {"id": 3, "at": 5}),
    ]
    types = {"id": "bigint", "ratio": "double", "at": "bigint", "price": "decimal(38,18)"}
    assert reference_fits("decimal(12,2)", "decimal(38,18)")
    assert fits(FloatType(), DoubleType())

    result = fold(records, FoldSpec(table_types=types))

    assert {k: (r["ratio"], r["at"], r["price"]) for k, r in result.rows.items()} == {
        (1,): (0.5, 1_000_000, "1.500000000000000000"),
        (2,): (0.25, 7, "1.200000000000000000"),
    }
    assert result.quarantined == [
        (records[2], "incompatible type for column at: table bigint, record timestamp")
    ]
