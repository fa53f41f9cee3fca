"""Property: Spark and the plain-Python evaluator agree on every accepted condition.

Hypothesis draws conditions from the grammar of ``core.conditions`` (comparisons, IN, BETWEEN,
LIKE, IS, CASE, IF, CAST, arithmetic, the functions; typed so that most are accepted) and rows
of a table with integer, BIGINT, DOUBLE, FLOAT, DECIMAL, string, boolean and timestamp columns
(with nulls, NaN, infinities, negative zero, extreme integers and awkward text). Each condition
that the checks accept is built as a Spark column (``silver.settings.condition_column``) and
evaluated by ``silver.reference.holds``; all conditions run over all rows in one Spark job, and
every (condition, row) must give the same TRUE, FALSE or NULL.

Reproduce a failure with the seed in its message: ``CONDITION_PROPERTY_SEED=<seed>``.
"""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

import pytest
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from core.conditions import Condition, parse_condition
from core.errors import ConfigError
from silver.reference import holds
from silver.settings import condition_column
from tests.draws import draw_examples, example_count, property_seed

pytestmark = pytest.mark.unit

SCHEMA = (
    "i int, l bigint, d double, f float, m decimal(10,2), w decimal(38,10), s string, "
    "t string, b boolean, ts timestamp, `we ird` string, `a.b` int"
)
NUMBERS = ("i", "l", "d", "f", "m", "w", "`a.b`")
EXACT_NUMBERS = ("i", "l", "m", "`a.b`")  # those CAST(... AS STRING) takes
STRINGS = ("s", "t", "`we ird`")
ALPHABET = "aAbzZ %_\\'\"\n\t01-+.é߃Σ\u03c3İK😀"
TEXTS = ("DELETE", "delete", " 12 ", "+3", "-0", "1.0", "\t7\n", "9999999999", "true", " N ", "")

CONDITIONS = example_count(80)
ROWS = 40
CHUNK = 40


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _rows() -> st.SearchStrategy[tuple[Any, ...]]:
    def maybe(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(st.none(), values)

    int32 = st.one_of(
        st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, 1, -1, 2**31 - 1, -(2**31)])
    )
    int64 = st.one_of(
        st.integers(-(2**63), 2**63 - 1),
        st.integers(-1000, 1000),
        st.sampled_from([0, 2**63 - 1, -(2**63), 2**53 + 1]),
    )
    doubles = st.one_of(
        st.floats(), st.sampled_from([0.0, -0.0, 1.5, 0.1, float("nan"), 1e308, 2.0**63])
    )
    floats = st.floats(width=32).map(_float32)
    money = st.decimals(min_value="-99999999.99", max_value="99999999.99", places=2)
    wide = st.decimals(min_value="-1e27", max_value="1e27", places=10)
    texts = st.one_of(st.text(ALPHABET, max_size=6), st.sampled_from(TEXTS))
    times = st.datetimes(dt.datetime(1990, 1, 1), dt.datetime(2030, 1, 1))
    return st.tuples(
        maybe(int32),
        maybe(int64),
        maybe(doubles),
        maybe(floats),
        maybe(money),
        maybe(wide),
        maybe(texts),
        maybe(texts),
        maybe(st.booleans()),
        maybe(times),
        maybe(texts),
        maybe(st.integers(-5, 5)),
    )


def _string_literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def _expr(kind: str, depth: int) -> st.SearchStrategy[str]:
    """SQL text of an expression of ``kind`` (``bool``, ``number`` or ``string``)."""
    return {"bool": _condition, "number": _number, "string": _text}[kind](depth)


def _operands(depth: int) -> tuple[st.SearchStrategy[str], ...]:
    return _expr("number", depth - 1), _expr("string", depth - 1), _expr("bool", depth - 1)


@st.composite
def _number(draw: st.DrawFn, depth: int) -> str:
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        return draw(
            st.one_of(
                st.sampled_from(NUMBERS),
                st.integers(-3, 1000).map(str),
                st.sampled_from(["0", "2147483647", "9223372036854775807", "-1", "NULL"]),
                st.sampled_from(["1.5", "0.01", "-2.50", "12.5", "1e3", "2.5E-1", "0.1D"]),
            )
        )
    number, text, condition = _operands(depth)
    choice = draw(st.integers(0, 9))
    if choice <= 2:
        op = draw(st.sampled_from(["+", "-", "*", "/", "%"]))
        return f"({draw(number)} {op} {draw(number)})"
    if choice == 3:
        return f"-({draw(number)})"
    if choice == 4:
        function = draw(st.sampled_from(["abs", "length", "coalesce"]))
        if function == "coalesce":
            return f"coalesce({draw(number)}, {draw(number)})"
        return f"{function}({draw(number if function == 'abs' else text)})"
    if choice == 5:
        target = draw(st.sampled_from(["INT", "BIGINT", "TINYINT", "SMALLINT"]))
        return f"CAST({draw(st.one_of(number, text, condition))} AS {target})"
    if choice == 6:
        target = draw(st.sampled_from(["DOUBLE", "DECIMAL(6,1)", "DECIMAL(20,4)"]))
        source = draw(number) if target == "DOUBLE" else draw(st.sampled_from(EXACT_NUMBERS))
        return f"CAST({source} AS {target})"
    if choice == 7:
        return f"CASE WHEN {draw(condition)} THEN {draw(number)} ELSE {draw(number)} END"
    if choice == 8:
        return f"if({draw(condition)}, {draw(number)}, {draw(number)})"
    return f"CAST({draw(condition)} AS DOUBLE)"


@st.composite
def _text(draw: st.DrawFn, depth: int) -> str:
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        return draw(
            st.one_of(
                st.sampled_from(STRINGS),
                st.text(ALPHABET, max_size=4).map(_string_literal),
                st.sampled_from(['"DELETE"', "'it\\'s'", "NULL"]),
            )
        )
    _, text, condition = _operands(depth)
    choice = draw(st.integers(0, 6))
    if choice == 0:
        function = draw(st.sampled_from(["lower", "upper", "trim", "ltrim", "rtrim"]))
        return f"{function}({draw(text)})"
    if choice == 1:
        start, length = draw(st.integers(-4, 4)), draw(st.integers(-1, 4))
        return f"substring({draw(text)}, {start}, {length})"
    if choice == 2:
        joined = (draw(text), draw(text))
        return draw(
            st.sampled_from([f"concat({joined[0]}, {joined[1]})", f"({joined[0]} || {joined[1]})"])
        )
    if choice == 3:
        return f"coalesce({draw(text)}, {draw(text)})"
    if choice == 4:
        return f"CAST({draw(st.one_of(st.sampled_from(EXACT_NUMBERS), condition))} AS STRING)"
    if choice == 5:
        return f"CASE WHEN {draw(condition)} THEN {draw(text)} END"
    return f"if({draw(condition)}, {draw(text)}, {draw(text)})"


@st.composite
def _condition(draw: st.DrawFn, depth: int) -> str:
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        return draw(
            st.one_of(
                st.just("b"),
                st.sampled_from(["TRUE", "FALSE", "NULL"]),
                st.sampled_from([*NUMBERS, *STRINGS, "b", "ts"]).map(lambda c: f"{c} IS NULL"),
            )
        )
    number, text, condition = _operands(depth)
    choice = draw(st.integers(0, 11))
    comparison = draw(st.sampled_from(["=", "==", "<>", "!=", "<", "<=", ">", ">=", "<=>"]))
    negated = draw(st.sampled_from(["", "NOT "]))
    if choice <= 1:
        return f"({draw(number)} {comparison} {draw(number)})"
    if choice == 2:
        return f"({draw(text)} {comparison} {draw(text)})"
    if choice == 3:
        operand = draw(st.sampled_from([number, text]))
        items = ", ".join(draw(st.lists(operand, min_size=1, max_size=3)))
        return f"({draw(operand)} {negated}IN ({items}))"
    if choice == 4:
        return f"({draw(number)} {negated}BETWEEN {draw(number)} AND {draw(number)})"
    if choice == 5:
        word = negated + draw(st.sampled_from(["LIKE", "ILIKE"]))
        pieces = ["%", "_", "a", "A", "\\%", "\\_", "\\\\", "é", "\n", " ", "1"]
        pattern = "".join(draw(st.lists(st.sampled_from(pieces), max_size=4)))
        return f"({draw(text)} {word} {_string_literal(pattern)})"
    if choice == 6:
        suffix = draw(st.sampled_from(["TRUE", "FALSE"]))
        return f"({draw(condition)} IS {negated}{suffix})"
    if choice == 7:
        return f"NOT ({draw(condition)})"
    if choice == 8:
        joiner = draw(st.sampled_from([" AND ", " OR "]))
        return "(" + joiner.join(draw(st.lists(condition, min_size=2, max_size=3))) + ")"
    if choice == 9:
        function = draw(st.sampled_from(["startswith", "endswith", "contains"]))
        return f"{function}({draw(text)}, {draw(text)})"
    if choice == 10:
        return f"CAST({draw(st.one_of(text, number))} AS BOOLEAN)"
    return f"(b {comparison} {draw(condition)})"


def test_spark_and_the_reference_evaluator_agree(spark: SparkSession) -> None:
    seed = property_seed("CONDITION_PROPERTY_SEED")
    texts = draw_examples(_expr("bool", 3), seed, CONDITIONS)
    rows = draw_examples(_rows(), seed + 1, ROWS)
    frame = spark.createDataFrame(rows, SCHEMA)
    spark_types = {f.name: f.dataType for f in frame.schema.fields}
    type_names = {name: t.simpleString() for name, t in spark_types.items()}

    accepted: list[tuple[str, Condition]] = []
    columns = []
    for text in texts:
        try:
            condition = parse_condition(text, "the test")
            column = condition_column(condition, spark_types, "the test")
        except ConfigError:
            continue
        columns.append(column.alias(f"c{len(accepted)}"))
        accepted.append((text, condition))
    assert len(accepted) >= 0.6 * len(texts), f"only {len(accepted)} of {len(texts)} accepted"
    # A few jobs over all rows (Spark's optimizer takes superlinear time on one projection of
    # hundreds of large expressions).
    mismatches = []
    for start in range(0, len(columns), CHUNK):
        for result in frame.select("*", *columns[start : start + CHUNK]).collect():
            row = {name: result[name] for name in frame.columns}
            for index in range(start, min(start + CHUNK, len(columns))):
                text, condition = accepted[index]
                expected, found = holds(condition, row, type_names), result[f"c{index}"]
                if found is not expected:
                    mismatches.append(f"{text}: Spark {found}, Python {expected}, {row}")
    assert not mismatches, (
        f"seed {seed}: {len(mismatches)} of {len(rows) * len(accepted)} disagree, e.g.\n"
        + "\n".join(mismatches[:10])
    )
