"""Row-level GX expectations as Spark column predicates (pure: no I/O, no Spark job).

One definition: each predicate is built from the expectation's GX type and kwargs, and agrees
with GX's own verdict on the same rows (``tests/unit/test_expectation_predicates.py``). As in
GX, a null value neither breaks nor counts toward an expectation other than not-null.

Semantics where GX leaves a choice to the engine:

* ``expect_column_values_to_match_regex``: Spark's ``rlike`` (Java regular expressions, a
  match anywhere in the value, like Python's ``re.search``).
* ``expect_column_value_lengths_to_be_between``: characters of a string column.
* ``expect_column_values_to_be_of_type``: as GX on Spark, about the column, not its values:
  ``type_`` names a class of ``pyspark.sql.types`` (``LongType``, ``DecimalType``); if the
  column's type is not one, every row breaks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.types import StringType, StructType

from expectations.suites import Rule
from lakehouse_core.errors import ConfigError

#: The expectations that count every row in scope, a null value too (the others count only
#: rows whose value is not null).
EVERY_ROW_TYPES = frozenset(
    {"expect_column_values_to_not_be_null", "expect_column_values_to_be_of_type"}
)


@dataclass(frozen=True)
class Check:
    """A compiled rule: ``failed`` is true for a row that breaks it, ``counted`` for a row
    that counts toward its ``mostly`` (a non-null value; every row for not-null)."""

    rule: Rule
    failed: Column
    counted: Column


def compile_rule(rule: Rule, schema: StructType) -> Check:
    """The predicates of ``rule`` over rows of ``schema``.

    Raises:
        ConfigError: the rule's column is not in ``schema``, or its type does not suit the
            expectation (a length of a non-string column, an unknown ``type_``).
    """
    if rule.column not in schema.fieldNames():
        raise ConfigError(
            f"Expectation {rule.qualified} reads column {rule.column!r}, which {rule.suite} "
            f"does not have. Columns: {', '.join(schema.fieldNames())}."
        )
    value = F.col(rule.column)
    present = value.isNotNull()
    kwargs = rule.kwargs
    if rule.type == "expect_column_values_to_not_be_null":
        return Check(rule, value.isNull(), F.lit(True))
    if rule.type == "expect_column_values_to_be_of_type":
        matches = _is_of_type(schema[rule.column].dataType, str(kwargs["type_"]), rule)
        return Check(rule, F.lit(not matches), F.lit(True))
    if rule.type == "expect_column_values_to_be_between":
        broken = _outside(value, kwargs)
    elif rule.type == "expect_column_value_lengths_to_be_between":
        if not isinstance(schema[rule.column].dataType, StringType):
            raise ConfigError(
                f"Expectation {rule.qualified} checks lengths, but {rule.column!r} is a "
                f"{schema[rule.column].dataType.simpleString()} column, not a string."
            )
        broken = _outside(F.length(value), kwargs)
    elif rule.type == "expect_column_values_to_be_in_set":
        broken = ~value.isin(*_values(kwargs["value_set"]))
    elif rule.type == "expect_column_values_to_not_be_in_set":
        broken = value.isin(*_values(kwargs["value_set"]))
    elif rule.type == "expect_column_values_to_match_regex":
        broken = ~value.rlike(str(kwargs["regex"]))
    else:
        raise ConfigError(f"Expectation {rule.qualified}: type {rule.type!r} is not row-level.")
    return Check(rule, present & F.coalesce(broken, F.lit(False)), present)


def holds(rule: Rule, counted: int, failed: int) -> bool:
    """GX's verdict from the counts: no counted row, or a share of good rows >= ``mostly``."""
    return counted == 0 or (counted - failed) / counted >= rule.mostly


def _outside(value: Column, kwargs: dict[str, Any]) -> Column:
    """Below ``min_value`` or above ``max_value`` (either may be missing), strictly or not."""
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    below = (
        None
        if low is None
        else (value <= F.lit(low) if kwargs.get("strict_min") else value < F.lit(low))
    )
    above = (
        None
        if high is None
        else (value >= F.lit(high) if kwargs.get("strict_max") else value > F.lit(high))
    )
    if below is None and above is None:  # GX refuses this too
        raise ConfigError("An expectation of bounds needs min_value, max_value or both.")
    if below is None:
        assert above is not None
        return above
    return below if above is None else below | above


def _values(value_set: Any) -> list[Any]:
    return list(value_set or [])


def _is_of_type(data_type: T.DataType, type_name: str, rule: Rule) -> bool:
    expected = getattr(T, type_name, None)
    if not (isinstance(expected, type) and issubclass(expected, T.DataType)):
        raise ConfigError(
            f"Expectation {rule.qualified}: type_ {type_name!r} is not a Spark type; use a "
            "class name of pyspark.sql.types such as LongType, StringType or DecimalType."
        )
    return isinstance(data_type, expected)
