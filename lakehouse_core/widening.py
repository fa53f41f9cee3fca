"""Which column type changes a Delta table can take: Delta Lake 4.0 type widening (pure).

Delta 4.0 (``delta.enableTypeWidening``) changes a column's type without rewriting data along:

* ``tinyint -> smallint -> int -> bigint``;
* ``tinyint``, ``smallint``, ``int -> double``; ``float -> double``;
* ``tinyint``, ``smallint``, ``int -> decimal(p, s)`` with ``p - s >= 10``; ``bigint ->
  decimal(p, s)`` with ``p - s >= 20``;
* ``decimal(p, s) -> decimal(p', s')`` with ``s' >= s`` and ``p' - s' >= p - s``;
* ``date -> timestamp_ntz``.

Beyond Delta's rules, a text column holds the values of integers, booleans and dates (as
their text, ``5``, ``true``, ``2026-01-01``: what PostgreSQL's ``::text`` gives), so a column
changing between such a type and text, or between two of them that no other type holds (an
integer and a boolean), becomes text: no value is lost. That change is no Delta widening: a
table takes it by a rewrite (:attr:`TableChanges.retyped`). Decimals and floating-point
numbers are not among them: their text depends on the scale or the printing of the writer,
so the same value could read differently in rows written before and after the change.

Delta applies the integer-to-decimal and integer-to-double changes only through ``ALTER TABLE
... ALTER COLUMN ... TYPE`` (:func:`needs_alter`); the others also through a ``mergeSchema``
write. Every other difference (a string becoming a number, a narrowing, a timestamp becoming
a string, a changed array element type, ...) is incompatible.

:func:`widened` is the least upper bound of two types under these rules: whenever some type
can hold values of both, it is the narrowest such type, so the type a column ends up with does
not depend on the order in which its compatible types were seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from pyspark.sql.types import (
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
)

#: How a table takes a wider column type: ``rewrite`` (the default) rewrites the table in the
#: new types in one commit, so any Delta reader keeps opening it; ``in_place`` turns on Delta's
#: type widening (no data rewritten, but a table feature readers must support: delta-rs, and
#: so Polars and DuckDB's delta reader, do not).
TypeWidening = Literal["in_place", "rewrite"]
TYPE_WIDENING_MODES: tuple[TypeWidening, ...] = get_args(TypeWidening)

MAX_PRECISION = 38

#: Integer types by width, and the integer digits a decimal needs to take each (Delta's rule).
_INTEGRAL_RANK: dict[type[DataType], int] = {ByteType: 0, ShortType: 1, IntegerType: 2, LongType: 3}
_INTEGRAL_BY_RANK: tuple[DataType, ...] = (ByteType(), ShortType(), IntegerType(), LongType())
_DECIMAL_DIGITS: dict[type[DataType], int] = {
    ByteType: 10,
    ShortType: 10,
    IntegerType: 10,
    LongType: 20,
}
#: Integer types Delta widens to double.
_TO_DOUBLE = (ByteType, ShortType, IntegerType)
#: Types whose values a text column holds as their text (not a Delta widening).
_AS_TEXT = (ByteType, ShortType, IntegerType, LongType, BooleanType, DateType)


def same_type(a: DataType, b: DataType) -> bool:
    """Equal types, ignoring nullability of nested fields and elements."""
    return a.simpleString() == b.simpleString()


def widened(
    table: DataType, incoming: DataType, json_numbers: bool = False, text: bool = True
) -> DataType | None:
    """The narrowest type that holds the values of both ``table`` and ``incoming``, or None if
    none does (an incompatible change).

    ``json_numbers``: ``incoming`` was inferred from JSON values, where a bigint is only a
    number without a fraction, so a double column also takes it. ``text``: a text column may
    hold integers, booleans and dates as their text (False: Delta's widenings only).
    """
    if same_type(table, incoming):
        return table
    if json_numbers and isinstance(table, DoubleType) and isinstance(incoming, LongType):
        return table
    for first, second in ((table, incoming), (incoming, table)):
        result = _upper_bound(first, second)
        if result is not None:
            return result
    textual = (*_AS_TEXT, StringType)
    if text and isinstance(table, textual) and isinstance(incoming, textual):
        return StringType()
    return None


def fits(incoming: DataType, table: DataType) -> bool:
    """Whether every value of ``incoming`` can be written to a ``table`` column unchanged."""
    result = widened(table, incoming)
    return result is not None and same_type(result, table)


def as_text(old: DataType, new: DataType) -> bool:
    """Whether a column of type ``old`` becoming ``new`` is a change to text (a rewrite)."""
    return isinstance(new, StringType) and not isinstance(old, StringType)


def needs_alter(old: DataType, new: DataType) -> bool:
    """Whether Delta applies the change only through ``ALTER TABLE ... ALTER COLUMN`` (integer
    to decimal or double), not through a ``mergeSchema`` write."""
    return type(old) in _INTEGRAL_RANK and isinstance(new, DecimalType | DoubleType)


def _upper_bound(a: DataType, b: DataType) -> DataType | None:
    """The least upper bound of ``a`` and ``b`` (tried in both orders by the caller)."""
    rank_a, rank_b = _INTEGRAL_RANK.get(type(a)), _INTEGRAL_RANK.get(type(b))
    if rank_a is not None and rank_b is not None:
        return _INTEGRAL_BY_RANK[max(rank_a, rank_b)]
    if isinstance(a, DecimalType) and isinstance(b, DecimalType):
        return _decimal(max(a.precision - a.scale, b.precision - b.scale), max(a.scale, b.scale))
    if rank_a is not None and isinstance(b, DecimalType):
        return _decimal(max(_DECIMAL_DIGITS[type(a)], b.precision - b.scale), b.scale)
    if isinstance(a, DoubleType) and isinstance(b, (*_TO_DOUBLE, FloatType)):
        return DoubleType()
    if isinstance(a, FloatType) and isinstance(b, _TO_DOUBLE):
        return DoubleType()  # neither holds the other; double holds both
    if isinstance(a, TimestampNTZType) and isinstance(b, DateType):
        return a
    return None


def _decimal(integer_digits: int, scale: int) -> DecimalType | None:
    if integer_digits + scale > MAX_PRECISION:
        return None
    return DecimalType(integer_digits + scale, scale)


@dataclass(frozen=True)
class TableChanges:
    """How a table's schema must change to take rows of another schema.

    ``added``: columns it lacks; ``widened``: columns whose type a ``mergeSchema`` write
    widens; ``altered``: columns whose type only ``ALTER TABLE`` widens (new types given);
    ``retyped``: columns that become text, which only a rewrite does.
    """

    added: tuple[StructField, ...] = ()
    widened: tuple[StructField, ...] = ()
    altered: tuple[StructField, ...] = ()
    retyped: tuple[StructField, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.widened or self.altered or self.retyped)


def table_changes(table: StructType, rows: StructType | Sequence[StructField]) -> TableChanges:
    """The changes that let ``table`` take rows of ``rows``: missing columns, and the columns
    whose type in ``rows`` is a Delta widening of the table's. Columns whose type is narrower
    or incompatible are not changed (the caller decides about those)."""
    current = {f.name: f.dataType for f in table.fields}
    added: list[StructField] = []
    widening: list[StructField] = []
    altering: list[StructField] = []
    retyping: list[StructField] = []
    for field in rows:
        old = current.get(field.name)
        if old is None:
            added.append(StructField(field.name, field.dataType, True, field.metadata))
        elif not same_type(old, field.dataType) and fits(old, field.dataType):
            if as_text(old, field.dataType):
                target = retyping
            else:
                target = altering if needs_alter(old, field.dataType) else widening
            target.append(StructField(field.name, field.dataType, True))
    return TableChanges(tuple(added), tuple(widening), tuple(altering), tuple(retyping))
