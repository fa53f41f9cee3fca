"""Property: Spark and the plain-Python evaluator agree on every accepted expression.

Hypothesis draws conditions and expressions of every type from the grammar of
``lakehouse_core.conditions`` (comparisons, IN, BETWEEN, LIKE, IS, CASE, IF, CAST, arithmetic, every
function, time literals; typed so that most are accepted) and rows of a table with integer,
BIGINT, DOUBLE, FLOAT, DECIMAL, string, boolean, timestamp and date columns (with nulls, NaN,
infinities, negative zero, extreme integers, awkward text, and times on hour and day
boundaries, one microsecond either side, before 1970, on leap days and at the ends of years 1
and 9999). Each condition the checks accept is built as a Spark column
(``lakehouse_core.conditions.spark.condition_column``) and evaluated by
``lakehouse_core.conditions.python.holds``; each expression is built by ``expression_column``
and evaluated by ``value_of``, and its Spark type must be the one ``typed_expression`` gives.
All of them run over all rows in a few Spark jobs, and every (expression, row) must give the
same value (NULL included; doubles bit for bit, with NaN equal to NaN; decimals with their
scale).

Examples from Spark's documentation of the functions are checked on both evaluators too.

Reproduce a failure with the seed in its message: ``CONDITION_PROPERTY_SEED=<seed>``.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import strategies as st
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from lakehouse_core.conditions import (
    TIME_PARTS,
    Condition,
    Expr,
    parse_condition,
    parse_expression,
    typed_expression,
)
from lakehouse_core.conditions.python import holds, value_of
from lakehouse_core.conditions.spark import condition_column, expression_column
from lakehouse_core.errors import ConfigError
from tests.draws import draw_examples, example_count, property_seed

pytestmark = pytest.mark.unit

SCHEMA = (
    "i int, l bigint, d double, f float, m decimal(10,2), w decimal(38,10), s string, "
    "t string, b boolean, ts timestamp, `we ird` string, `a.b` int, day date, ts2 timestamp"
)
NUMBERS = ("i", "l", "d", "f", "m", "w", "`a.b`")
EXACT_NUMBERS = ("i", "l", "m", "`a.b`")  # those CAST(... AS STRING) takes
STRINGS = ("s", "t", "`we ird`")
ALPHABET = "aAbzZ %_\\'\"\n\t01-+.é߃Σ\u03c3İK😀"
TEXTS = ("DELETE", "delete", " 12 ", "+3", "-0", "1.0", "\t7\n", "9999999999", "true", " N ", "")

TIMESTAMPS = ("ts", "ts2")
DATES = ("day",)
INTEGERS = ("i", "l", "`a.b`")
#: Days that catch errors: the epoch and the day before, leap days, a century that is not a
#: leap year, a Monday, New Year's Eve of an ISO week 53, the first and last days of Spark's range.
DAYS = (
    dt.date(1970, 1, 1),
    dt.date(1969, 12, 31),
    dt.date(2024, 2, 29),
    dt.date(2000, 2, 29),
    dt.date(1900, 3, 1),
    dt.date(2025, 12, 29),
    dt.date(2020, 12, 31),
    dt.date(2021, 1, 3),
    dt.date(1582, 10, 4),
    dt.date(1, 1, 1),
    dt.date(9999, 12, 31),
)
TIME_LITERALS = (
    "TIMESTAMP '2026-01-01 00:00:00'",
    "TIMESTAMP '1969-12-31 23:59:59.999999'",
    "TIMESTAMP '2024-02-29 12:00:00.5'",
    "'2024-02-29'",
    "'1970-01-01 00:00:00.000001'",
    "DATE '2024-02-29'",
    "DATE '1969-12-31'",
)
UNITS = ("year", "quarter", "month", "week", "day", "hour", "minute", "second")
INTEGER_LITERALS = ("0", "1", "-1", "365", "-40000", "2147483647", "9223372036854775807")

CONDITIONS = example_count(80)
EXPRESSIONS = example_count(120)
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
        st.floats(),
        # with ties for round (HALF_UP of the shortest decimal text: 2.675 rounds to 2.68)
        st.sampled_from([0.0, -0.0, 1.5, 0.1, float("nan"), 1e308, 2.0**63, 2.5, -2.5, 2.675]),
        st.sampled_from([0.125, -0.5, 1.005, 0.045, 5e-324, -1e-300, 123.45, 9.5]),
    )
    floats = st.floats(width=32).map(_float32)
    money = st.decimals(min_value="-99999999.99", max_value="99999999.99", places=2)
    wide = st.decimals(min_value="-1e27", max_value="1e27", places=10)
    texts = st.one_of(st.text(ALPHABET, max_size=6), st.sampled_from(TEXTS))
    times = _times()
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
        maybe(_days()),
        maybe(times),
    )


def _days() -> st.SearchStrategy[dt.date]:
    near = st.tuples(st.sampled_from(DAYS), st.integers(-2, 2)).map(_shifted_day)
    return st.one_of(near, st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)))


def _shifted_day(pair: tuple[dt.date, int]) -> dt.date:
    day, shift = pair
    try:
        return day + dt.timedelta(days=shift)
    except OverflowError:
        return day


def _times() -> st.SearchStrategy[dt.datetime]:
    """UTC timestamps (aware, so that PySpark reads them in UTC whatever the local zone)."""
    on_boundary = st.tuples(
        _days(),
        st.sampled_from([(0, 0, 0), (23, 59, 59), (12, 0, 0), (0, 59, 59), (1, 0, 0)]),
        st.sampled_from([-1, 0, 1, 500_000, 999_999]),
    ).map(_boundary_time)
    anywhere = st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30))
    return st.one_of(on_boundary, anywhere).map(lambda t: t.replace(tzinfo=dt.UTC))


def _boundary_time(parts: tuple[dt.date, tuple[int, int, int], int]) -> dt.datetime:
    day, (hour, minute, second), micros = parts
    start = dt.datetime(day.year, day.month, day.day, hour, minute, second)
    try:
        return start + dt.timedelta(microseconds=micros)
    except OverflowError:
        return start


def _string_literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def _expr(kind: str, depth: int) -> st.SearchStrategy[str]:
    """SQL text of an expression of ``kind`` (``bool``, ``number``, ``string``, ``timestamp``,
    ``date``)."""
    strategies = {
        "bool": _condition,
        "number": _number,
        "string": _text,
        "timestamp": _timestamp,
        "date": _date,
    }
    return strategies[kind](depth)


def _time(depth: int) -> st.SearchStrategy[str]:
    return st.one_of(_expr("timestamp", depth), _expr("date", depth))


def _integer(depth: int) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(INTEGERS),
        st.sampled_from(INTEGER_LITERALS),
        st.integers(-800, 800).map(str),
        _expr("number", depth),
    )


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
                st.sampled_from(["2.5D", "-2.5D", "2.675D", "0.125D", "1.005D", "-0.5D"]),
            )
        )
    number, text, condition = _operands(depth)
    choice = draw(st.integers(0, 15))
    if choice == 10:
        function = draw(st.sampled_from(["floor", "ceil", "ceiling", "round"]))
        if function == "round" and draw(st.booleans()):
            return f"round({draw(number)}, {draw(st.integers(-3, 3))})"
        return f"{function}({draw(number)})"
    if choice == 11:
        function = draw(st.sampled_from(["greatest", "least"]))
        return f"{function}({', '.join(draw(st.lists(number, min_size=2, max_size=3)))})"
    if choice == 12:
        part = draw(st.sampled_from([*TIME_PARTS, "dayofmonth"]))
        return f"{part}({draw(_time(depth - 1))})"
    if choice == 13:
        function = draw(st.sampled_from(["unix_seconds", "unix_millis", "unix_micros"]))
        return f"{function}({draw(_time(depth - 1))})"
    if choice == 14:
        return f"datediff({draw(_time(depth - 1))}, {draw(_time(depth - 1))})"
    if choice == 15:
        return f"instr({draw(text)}, {draw(text)})"
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
    choice = draw(st.integers(0, 11))
    if choice == 7:
        return (
            f"split_part({draw(text)}, {draw(text)}, {draw(st.sampled_from([1, 2, 3, -1, -2, 5]))})"
        )
    if choice == 8:
        if draw(st.booleans()):
            return f"replace({draw(text)}, {draw(text)})"
        return f"replace({draw(text)}, {draw(text)}, {draw(text)})"
    if choice == 9:
        function = draw(st.sampled_from(["lpad", "rpad"]))
        length = draw(st.integers(-1, 7))
        if draw(st.booleans()):
            return f"{function}({draw(text)}, {length})"
        return f"{function}({draw(text)}, {length}, {draw(text)})"
    if choice == 10:
        return f"CAST({draw(_time(depth - 1))} AS STRING)"
    if choice == 11:
        function = draw(st.sampled_from(["greatest", "least"]))
        return f"{function}({draw(text)}, {draw(text)})"
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
                st.sampled_from([*NUMBERS, *STRINGS, "b", "ts", "day"]).map(
                    lambda c: f"{c} IS NULL"
                ),
            )
        )
    number, text, condition = _operands(depth)
    choice = draw(st.integers(0, 14))
    comparison = draw(st.sampled_from(["=", "==", "<>", "!=", "<", "<=", ">", ">=", "<=>"]))
    negated = draw(st.sampled_from(["", "NOT "]))
    time = _time(depth - 1)
    time_or_literal = st.one_of(time, st.sampled_from(TIME_LITERALS))
    if choice == 12:
        return f"({draw(time)} {comparison} {draw(time_or_literal)})"
    if choice == 13:
        low, high = draw(time_or_literal), draw(time_or_literal)
        return f"({draw(time)} {negated}BETWEEN {low} AND {high})"
    if choice == 14:
        items = ", ".join(draw(st.lists(time_or_literal, min_size=1, max_size=3)))
        return f"({draw(time)} {negated}IN ({items}))"
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


@st.composite
def _timestamp(draw: st.DrawFn, depth: int) -> str:
    leaves = st.one_of(
        st.sampled_from(TIMESTAMPS),
        st.sampled_from([t for t in TIME_LITERALS if t.startswith("TIMESTAMP")]),
        st.just("CAST(NULL AS TIMESTAMP)"),
    )
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        return draw(leaves)
    timestamp, time, condition = _timestamp(depth - 1), _time(depth - 1), _condition(depth - 1)
    choice = draw(st.integers(0, 6))
    if choice == 0:
        return f"date_trunc('{draw(st.sampled_from(UNITS))}', {draw(time)})"
    if choice == 1:
        return f"timestamp_seconds({draw(_integer(depth - 1))})"
    if choice == 2:
        return f"CAST({draw(_expr('date', depth - 1))} AS TIMESTAMP)"
    if choice == 3:
        return f"CASE WHEN {draw(condition)} THEN {draw(timestamp)} ELSE {draw(time)} END"
    if choice == 4:
        return f"if({draw(condition)}, {draw(time)}, {draw(timestamp)})"
    if choice == 5:
        return f"coalesce({draw(timestamp)}, {draw(time)})"
    function = draw(st.sampled_from(["greatest", "least"]))
    return f"{function}({draw(timestamp)}, {draw(time)})"


@st.composite
def _date(draw: st.DrawFn, depth: int) -> str:
    leaves = st.one_of(
        st.sampled_from(DATES),
        st.sampled_from([t for t in TIME_LITERALS if t.startswith("DATE")]),
    )
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        return draw(leaves)
    date, time, condition = _date(depth - 1), _time(depth - 1), _condition(depth - 1)
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return f"to_date({draw(time)})"
    if choice == 1:
        function = draw(st.sampled_from(["date_add", "date_sub"]))
        return f"{function}({draw(time)}, {draw(_integer(depth - 1))})"
    if choice == 2:
        return f"CAST({draw(time)} AS DATE)"
    if choice == 3:
        return f"CASE WHEN {draw(condition)} THEN {draw(date)} END"
    if choice == 4:
        return f"coalesce({draw(date)}, {draw(date)})"
    function = draw(st.sampled_from(["greatest", "least"]))
    return f"{function}({draw(date)}, {draw(date)})"


#: One template per function and time form, so that each is drawn (``{n}`` a number, ``{s}`` a
#: string, ``{t}`` a timestamp or date, ``{T}`` a timestamp, ``{D}`` a date, ``{l}`` a time
#: or a time literal, ``{i}`` an integer, ``{c}`` a condition, ``{k}`` a scale, ``{p}`` a part
#: number, ``{L}`` a length, ``{u}`` a unit, ``{o}`` a comparison).
TEMPLATES = (
    "floor({n})",
    "ceil({n})",
    "ceiling({n})",
    "round({n})",
    "round({n}, {k})",
    "round(d, {k})",
    "round(d)",
    "round(f, {k})",
    "round(m, {k})",
    "round(w, {k})",
    "floor(d)",
    "ceil(f)",
    "floor(w)",
    "greatest({n}, {n}, {n})",
    "least({n}, {n})",
    "greatest({s}, {s})",
    "least({T}, {t})",
    "greatest({D}, {D}, {D})",
    "split_part({s}, {s}, {p})",
    "instr({s}, {s})",
    "replace({s}, {s})",
    "replace({s}, {s}, {s})",
    "lpad({s}, {L}, {s})",
    "rpad({s}, {L}, {s})",
    "lpad({s}, {L})",
    "rpad({s}, {L})",
    "year({t})",
    "month({t})",
    "day({t})",
    "dayofmonth({t})",
    "dayofweek({t})",
    "dayofyear({t})",
    "weekofyear({t})",
    "hour({t})",
    "minute({t})",
    "second({t})",
    "to_date({t})",
    "date_trunc('{u}', {t})",
    "unix_seconds({t})",
    "unix_millis({t})",
    "unix_micros({t})",
    "timestamp_seconds({i})",
    "date_add({t}, {i})",
    "date_sub({t}, {i})",
    "datediff({t}, {t})",
    "CAST({t} AS STRING)",
    "CAST({t} AS DATE)",
    "CAST({t} AS TIMESTAMP)",
    "{t} {o} {l}",
    "{l} {o} {t}",
    "{t} BETWEEN {l} AND {l}",
    "{t} NOT IN ({l}, {l})",
    "CASE WHEN {c} THEN {T} ELSE {D} END",
    "coalesce({D}, {T})",
    "if({c}, {D}, {D})",
)
PER_TEMPLATE = example_count(4)


def _template(template: str) -> st.SearchStrategy[str]:
    """SQL text of ``template`` with each placeholder drawn on its own."""
    depth = 2
    fillers = {
        "n": _expr("number", depth),
        "s": _expr("string", depth),
        "t": _time(depth),
        "T": _expr("timestamp", depth),
        "D": _expr("date", depth),
        "l": st.one_of(_time(depth), st.sampled_from(TIME_LITERALS)),
        "i": _integer(depth),
        "c": _expr("bool", depth),
        "k": st.integers(-3, 3).map(str),
        "p": st.sampled_from(["1", "2", "3", "-1", "-2", "4"]),
        "L": st.integers(-1, 7).map(str),
        "u": st.sampled_from([*UNITS, "YYYY", "MM", "DD", "mon"]),
        "o": st.sampled_from(["=", "<>", "<", "<=", ">", ">=", "<=>"]),
    }
    pieces = re.split(r"\{(\w)\}", template)  # text, name, text, name, ..., text
    parts = [st.just(p) if i % 2 == 0 else fillers[p] for i, p in enumerate(pieces)]
    return st.tuples(*parts).map("".join)


def _frame(spark: SparkSession, rows: list[tuple[Any, ...]]) -> Any:
    """The rows as a DataFrame with a leading ``_n`` (the row's index)."""
    return spark.createDataFrame([(n, *row) for n, row in enumerate(rows)], "_n int, " + SCHEMA)


def _results(frame: Any, columns: list[Column]) -> dict[tuple[int, int], Any]:
    """``(expression index, row index) -> value`` of every column on every row, a few columns
    per job (Spark's optimizer takes superlinear time on one projection of hundreds of large
    expressions)."""
    found = {}
    for start in range(0, len(columns), CHUNK):
        chunk = columns[start : start + CHUNK]
        for result in frame.select("_n", *chunk).collect():
            for offset in range(len(chunk)):
                found[start + offset, result["_n"]] = result[offset + 1]
    return found


def _named(frame: Any, row: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(frame.columns[1:], row, strict=True))


def test_spark_and_the_reference_evaluator_agree(spark: SparkSession) -> None:
    seed = property_seed("CONDITION_PROPERTY_SEED")
    texts = draw_examples(_expr("bool", 3), seed, CONDITIONS)
    rows = draw_examples(_rows(), seed + 1, ROWS)
    frame = _frame(spark, rows)
    spark_types = {f.name: f.dataType for f in frame.schema.fields[1:]}
    type_names = {name: t.simpleString() for name, t in spark_types.items()}

    accepted: list[tuple[str, Condition]] = []
    columns = []
    for text in texts:
        try:
            condition = parse_condition(text, "the test")
            column = condition_column(condition, spark_types, "the test")
        except ConfigError:
            continue
        columns.append(column)
        accepted.append((text, condition))
    assert len(accepted) >= 0.6 * len(texts), f"only {len(accepted)} of {len(texts)} accepted"
    found = _results(frame, columns)
    mismatches = []
    for index, (text, condition) in enumerate(accepted):
        for n, row in enumerate(rows):
            expected = holds(condition, _named(frame, row), type_names)
            if found[index, n] is not expected:
                mismatches.append(f"{text}: Spark {found[index, n]}, Python {expected}, {row}")
    assert not mismatches, (
        f"seed {seed}: {len(mismatches)} of {len(rows) * len(accepted)} disagree, e.g.\n"
        + "\n".join(mismatches[:10])
    )


def _comparable_column(column: Column, type_name: str) -> Column:
    """A time as its epoch microseconds or days (collect would read it in the local zone)."""
    if type_name == "timestamp":
        return F.unix_micros(column)
    return F.unix_date(column) if type_name == "date" else column


def _comparable(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return (value - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    return value


def _same(a: Any, b: Any) -> bool:
    """Equal values of one type: doubles bit for bit (NaN equal to NaN, -0.0 not 0.0),
    decimals with their scale."""
    if a is None or b is None:
        return a is b
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        both_nan = math.isnan(a) and math.isnan(b)
        return both_nan or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, Decimal):
        return a == b and a.as_tuple().exponent == b.as_tuple().exponent
    return bool(a == b)


def test_spark_and_the_reference_evaluator_agree_on_expressions(spark: SparkSession) -> None:
    """Every type and every function: Spark's value, and its type, equal the reference's."""
    seed = property_seed("CONDITION_PROPERTY_SEED")
    kinds = st.sampled_from(["number", "string", "timestamp", "date", "bool", "number"])
    texts = draw_examples(kinds.flatmap(lambda kind: _expr(kind, 3)), seed + 2, EXPRESSIONS)
    for number, template in enumerate(TEMPLATES):
        texts += draw_examples(_template(template), seed + 3 + number, PER_TEMPLATE)
    rows = draw_examples(_rows(), seed + 1, ROWS)
    frame = _frame(spark, rows)
    spark_types = {f.name: f.dataType for f in frame.schema.fields[1:]}
    type_names = {name: t.simpleString() for name, t in spark_types.items()}

    accepted: list[tuple[str, Expr, str]] = []
    columns = []
    for text in texts:
        try:
            expression = parse_expression(text, "the test")
            _, type_name = typed_expression(expression, type_names, "the test")
            column = expression_column(expression, spark_types, "the test")
        except ConfigError:
            continue
        columns.append(_comparable_column(column, type_name))
        accepted.append((text, expression, type_name))
        # The type the grammar promises is the type Spark computes.
        assert frame.select(column).schema[0].dataType.simpleString() == type_name, text
    assert len(accepted) >= 0.6 * len(texts), f"only {len(accepted)} of {len(texts)} accepted"
    found = _results(frame, columns)
    mismatches = []
    for index, (text, expression, _) in enumerate(accepted):
        for n, row in enumerate(rows):
            expected = _comparable(value_of(expression, _named(frame, row), type_names))
            if not _same(found[index, n], expected):
                mismatches.append(f"{text}: Spark {found[index, n]!r}, Python {expected!r}, {row}")
                break  # one row per expression, so that the message shows several
    assert not mismatches, (
        f"seed {seed}: {len(mismatches)} of {len(rows) * len(accepted)} disagree, e.g.\n"
        + "\n".join(mismatches[:10])
    )


#: Examples from Spark's SQL function reference (spark.apache.org/docs/latest/api/sql/), with
#: the values it documents (timestamp_seconds: the documented 07:30:00 is in the docs'
#: America/Los_Angeles session zone, 15:30:00 in UTC); a literal string stands for the
#: documented string argument.
DOCUMENTED = [
    ("date_trunc('YEAR', '2015-03-05T09:32:05.359')", dt.datetime(2015, 1, 1)),
    ("date_trunc('MM', '2015-03-05T09:32:05.359')", dt.datetime(2015, 3, 1)),
    ("date_trunc('DD', '2015-03-05T09:32:05.359')", dt.datetime(2015, 3, 5)),
    ("date_trunc('HOUR', '2015-03-05T09:32:05.359')", dt.datetime(2015, 3, 5, 9)),
    ("dayofweek('2009-07-30')", 5),
    ("dayofyear('2016-04-09')", 100),
    ("weekofyear('2008-02-20')", 8),
    ("datediff('2009-07-31', '2009-07-30')", 1),
    ("datediff('2009-07-30', '2009-07-31')", -1),
    ("date_add('2016-07-30', 1)", dt.date(2016, 7, 31)),
    ("date_sub('2016-07-30', 1)", dt.date(2016, 7, 29)),
    ("hour('2009-07-30 12:58:59')", 12),
    ("minute('2009-07-30 12:58:59')", 58),
    ("second('2009-07-30 12:58:59')", 59),
    ("year('2016-07-30')", 2016),
    ("month('2016-07-30')", 7),
    ("day('2009-07-30')", 30),
    ("dayofmonth('2009-07-30')", 30),
    ("to_date('2009-07-30 04:17:52')", dt.date(2009, 7, 30)),
    ("unix_seconds(TIMESTAMP '1970-01-01 00:00:01')", 1),
    ("unix_millis(TIMESTAMP '1970-01-01 00:00:01')", 1000),
    ("unix_micros(TIMESTAMP '1970-01-01 00:00:01')", 1000000),
    ("timestamp_seconds(1230219000)", dt.datetime(2008, 12, 25, 15, 30)),
    ("floor(-0.1)", Decimal(-1)),
    ("floor(5)", 5),
    ("ceil(-0.1)", Decimal(0)),
    ("ceil(5)", 5),
    ("round(2.5, 0)", Decimal(3)),
    ("greatest(10, 9, 2, 4, 3)", 10),
    ("least(10, 9, 2, 4, 3)", 2),
    ("split_part('11.12.13', '.', 3)", "13"),
    ("instr('SparkSQL', 'SQL')", 6),
    ("replace('ABCabc', 'abc', 'DEF')", "ABCDEF"),
    ("lpad('hi', 5, '??')", "???hi"),
    ("lpad('hi', 1, '??')", "h"),
    ("lpad('hi', 5)", "   hi"),
    ("rpad('hi', 5, '??')", "hi???"),
    ("rpad('hi', 1, '??')", "h"),
]


def test_documented_examples_on_both_evaluators(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(0,)], "_n int")
    parsed = [(text, parse_expression(text, "the test"), value) for text, value in DOCUMENTED]
    columns = []
    for _, expression, _ in parsed:
        _, type_name = typed_expression(expression, {}, "the test")
        columns.append(_comparable_column(expression_column(expression, {}, "the test"), type_name))
    (result,) = frame.select(*columns).collect()
    for index, (text, expression, documented) in enumerate(parsed):
        assert _same(value_of(expression, {}), documented), text
        assert _same(result[index], _comparable(documented)), text
