"""Conditions (``lakehouse_core.conditions``): what is accepted and into which tree, what is refused
and with which message, the checks against column types, and the plain-Python evaluator
(``lakehouse_core.conditions.python.holds``) on the semantics Spark has
(tests/unit/test_condition_agreement.py checks the two evaluators against each other on
random conditions)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import pytest

from lakehouse_core.conditions import (
    MAX_DEPTH,
    MAX_LENGTH,
    MAX_NESTING,
    MAX_OPERATORS,
    SUPPORTED,
    TYPE_RULES,
    And,
    Arith,
    Case,
    Cast,
    Column,
    Compare,
    Condition,
    Func,
    In,
    IsBool,
    IsNull,
    Like,
    Literal,
    Negate,
    Not,
    Or,
    UnknownQualifier,
    condition_columns,
    parse_condition,
    parse_expression,
    to_sql,
    typed_condition,
    typed_expression,
)
from lakehouse_core.conditions.python import holds, value_of
from lakehouse_core.errors import ConfigError

pytestmark = pytest.mark.unit

WHERE = "apply_as_deletes of table 'users'"
op, a, b = Column("operation"), Column("a"), Column("b")


def text(value: str) -> Literal:
    return Literal(value, "string")


def number(value: int) -> Literal:
    return Literal(value, "bigint")


# --------------------------------------------------------------------------------------------
# Accepted, and the tree they become
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "tree"),
    [
        ('operation = "DELETE"', Compare("=", op, text("DELETE"))),  # Spark: "..." is a string
        ("operation = 'DELETE'", Compare("=", op, text("DELETE"))),
        ("operation == 'D'", Compare("=", op, text("D"))),
        ("operation IN ('DELETE', 'D')", In(op, (text("DELETE"), text("D")))),
        ("operation NOT IN ('x')", In(op, (text("x"),), negated=True)),
        ("lower(operation) = 'delete'", Compare("=", Func("lower", (op,)), text("delete"))),
        ("upper(operation) <> 'X'", Compare("<>", Func("upper", (op,)), text("X"))),
        ("is_delete", Column("is_delete")),
        ("NOT is_delete", Not(Column("is_delete"))),
        ("!is_delete", Not(Column("is_delete"))),
        ("a != 1", Compare("<>", a, number(1))),
        ("a <=> NULL", Compare("<=>", a, Literal(None, "void"))),
        ("a IS DISTINCT FROM b", Not(Compare("<=>", a, b))),
        ("a IS NOT DISTINCT FROM b", Compare("<=>", a, b)),
        ("a BETWEEN 1 AND 2", And((Compare(">=", a, number(1)), Compare("<=", a, number(2))))),
        (
            "a NOT BETWEEN 1 AND 2",
            Not(And((Compare(">=", a, number(1)), Compare("<=", a, number(2))))),
        ),
        ("a LIKE 'x%'", Like(a, "x%")),
        ("a NOT ILIKE 'x_'", Like(a, "x_", negated=True, case_insensitive=True)),
        ("a LIKE 'x!%' ESCAPE '!'", Like(a, "x!%", escape="!")),
        ("a IS NULL", IsNull(a)),
        ("a IS NOT NULL", IsNull(a, negated=True)),
        ("isnotnull(a)", IsNull(a, negated=True)),
        ("a IS TRUE", IsBool(a, True)),
        ("a IS NOT FALSE", IsBool(a, False, negated=True)),
        (
            "a = 1 OR b = 2 AND a = 3",
            Or(
                (
                    Compare("=", a, number(1)),
                    And((Compare("=", b, number(2)), Compare("=", a, number(3)))),
                )
            ),
        ),
        ("a AND b AND a", And((a, b, a))),  # a chain is one node
        ("CASE WHEN a THEN 'x' END = 'x'", Compare("=", Case(((a, text("x")),)), text("x"))),
        (
            "CASE a WHEN 1 THEN TRUE ELSE FALSE END",
            Case(
                ((Compare("=", a, number(1)), Literal(True, "boolean")),),
                Literal(False, "boolean"),
            ),
        ),
        ("if(a, b, NULL)", Case(((a, b),), Literal(None, "void"))),
        ("CAST(a AS INT) = 1", Compare("=", Cast(a, "int"), number(1))),
        ("a::bigint = 1", Compare("=", Cast(a, "bigint"), number(1))),
        ("a + 1 > 2 * b", Compare(">", Arith("+", a, number(1)), Arith("*", number(2), b))),
        ("-a < -5", Compare("<", Negate(a), number(-5))),
        ("a = 1.50", Compare("=", a, Literal(Decimal("1.50"), "decimal(3,2)"))),
        ("a = 1e3", Compare("=", a, Literal(1000.0, "double"))),
        ("a = 9223372036854775808", Compare("=", a, Literal(Decimal(2**63), "decimal(19,0)"))),
        ("a = -9223372036854775808", Compare("=", a, number(-(2**63)))),
        ("`weird col` = 'x'", Compare("=", Column("weird col"), text("x"))),
        ("`a.b` = 1", Compare("=", Column("a.b"), number(1))),
        ("`a``b` = 1", Compare("=", Column("a`b"), number(1))),
        (
            "value = 'v' AND key = 'k'",
            And((Compare("=", Column("value"), text("v")), Compare("=", Column("key"), text("k")))),
        ),
        ("'it\\'s' = a", Compare("=", text("it's"), a)),
        ("a = 'tab\\there'", Compare("=", a, text("tab\there"))),
        (
            "substr(a, 2) = 'x'",
            Compare("=", Func("substring", (a, number(2), number(2**31 - 1))), text("x")),
        ),
        ("a || b = 'x'", Compare("=", Func("concat", (a, b)), text("x"))),
        ("nvl(a, 0) = 0", Compare("=", Func("coalesce", (a, number(0))), number(0))),
        ("ifnull(a, 0) = 0", Compare("=", Func("coalesce", (a, number(0))), number(0))),
        ("char_length(a) = 1", Compare("=", Func("length", (a,)), number(1))),
        ("ltrim(a) = 'x'", Compare("=", Func("ltrim", (a,)), text("x"))),
        ("contains(a, 'x')", Func("contains", (a, text("x")))),
        ("a = 1 -- a comment", Compare("=", a, number(1))),
    ],
)
def test_accepted_conditions_and_their_trees(condition: str, tree: Condition) -> None:
    assert parse_condition(condition, WHERE) == tree


@pytest.mark.parametrize(
    "condition",
    [
        "a <> 1 AND b < 2 AND a <= 3 AND b > 4 AND a >= 5",
        "trim(a) = '' OR rtrim(a) = 'x' OR length(a) > 3 OR ucase(a) = 'X' OR lcase(a) = 'x'",
        "substring(a, 1, 2) = 'ab' AND concat(a, 'x', b) = 'axb'",
        "coalesce(a, b, 'x') = 'x' AND abs(a) > 1 AND a % 2 = 1 AND a / 2 > 1 AND a - 1 > 0",
        "startswith(a, 'x') OR endswith(a, 'y') OR isnull(b)",
        "CAST(a AS STRING) = '1' AND CAST(a AS DECIMAL(10, 2)) > 1.5 AND CAST(a AS DOUBLE) > 1",
        "CAST(a AS BOOLEAN) AND CAST(a AS TINYINT) = 1 AND CAST(a AS SMALLINT) = 1",
        "try_cast(a AS INT) = 1 AND string(a) = '1' AND int(a) = 1 AND double(a) = 1",
        "a = 1.5BD OR a = 5Y OR a = 1.5D OR a = 10L",
        "a LIKE 'a\\\\%' AND a ILIKE '%x_' AND like(a, 'x') AND ilike(a, 'y')",
        "NULL",
        "TRUE",
        "a = NULL",
        "x IS UNKNOWN",
        "mod(a, 2) = 0",
        "NOT (NOT (a))",
    ],
)
def test_more_accepted_forms(condition: str) -> None:
    parse_condition(condition, WHERE)


def test_condition_columns_in_order_of_first_appearance() -> None:
    condition = parse_condition("a = 1 AND (`b c` IS NULL OR NOT a = 2) OR lower(d) IN (e)", WHERE)
    assert condition_columns(condition) == ("a", "b c", "d", "e")


def test_a_tree_reads_back_as_sql() -> None:
    condition = parse_condition("lower(`a b`) NOT IN ('x', 'it\\'s') OR c BETWEEN 1 AND 2", WHERE)
    assert to_sql(condition) == "(lower(`a b`) NOT IN ('x', 'it\\'s')) OR ((c >= 1) AND (c <= 2))"


# --------------------------------------------------------------------------------------------
# Refused, with a message that names the setting, the construct and what is allowed
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "problem"),
    [
        ("", "it is empty"),
        ("   ", "it is empty"),
        ("-- only a comment", "it is empty"),
        ("a = 1; DROP TABLE t", "it holds more than one statement (';')"),
        ("a IN (SELECT a FROM t)", "IN takes a list of values, not a subquery or a table"),
        ("(SELECT max(a) FROM t) = 1", "function 'max' is not allowed"),
        ("EXISTS (SELECT 1)", "function 'EXISTS' is not allowed"),
        ("read_files('/etc') IS NULL", "function 'read_files' is not allowed"),
        ("input_file_name() = 'x'", "function 'input_file_name' is not allowed"),
        ("reflect('java.lang.System', 'exit') IS NULL", "function 'reflect' is not allowed"),
        ("java_method('a', 'b') IS NULL", "function 'java_method' is not allowed"),
        ("my_udf(a)", "function 'my_udf' is not allowed"),
        ("rand() > 0.5", "function 'rand' is not allowed"),
        ("uuid() = a", "function 'uuid' is not allowed"),
        ("now() > a", "function 'now' is not allowed"),
        ("current_timestamp() > a", "function 'current_timestamp' is not allowed"),
        ("current_timestamp > a", "function 'current_timestamp' is not allowed"),
        ("count(a) > 1", "function 'count' is not allowed"),
        ("sum(a) OVER () > 1", "function 'sum' is not allowed"),
        ("exists(a, x -> x > 1)", "function 'exists' is not allowed"),
        ("a RLIKE 'x'", "function 'regexp_like' is not allowed"),
        ("a = x'00'", "\"X'00'\" is not allowed"),
        ("a = ?", "'?' is not allowed"),
        ("a & 1 = 1", "'a & 1' is not allowed"),
        ("a.b = 1", "'a.b' is not a column name: qualified names and struct fields"),
        ("a LIKE b", "'a LIKE b': the pattern of LIKE must be one string literal"),
        ("a LIKE 'x\\\\'", "the LIKE pattern 'x\\\\' ends with its escape character"),
        ("a LIKE 'a!b' ESCAPE '!'", "in the LIKE pattern 'a!b' the escape character '!' precedes"),
        ("a LIKE 'a' ESCAPE '%'", "ESCAPE '%': the escape must be one character, not % or _"),
        ("a = 'it''s'", "two strings follow each other (Spark joins them: 'it''s' is 'its')"),
        ("a = DATE '2024-02-30'", "the string '2024-02-30', which is not a date (write yyyy"),
        ("a = TIMESTAMP '2024-01-01 24:00:00'", "the string '2024-01-01 24:00:00', which is"),
        ("a = TIMESTAMP '2024-01-01T10:00:00Z'", "the string '2024-01-01T10:00:00Z', which"),
        ("a = TIMESTAMP '0000-01-01'", "the string '0000-01-01', which is not a timestamp"),
        ("a = TIMESTAMP '2024-01-01 10:00:00.1234567'", "the string '2024-01-01 10:00:00.12"),
        ("CAST(1 AS TIMESTAMP) = a", "CAST of the number 1 to TIMESTAMP is not supported"),
        ("CAST(a AS TIMESTAMP_NTZ) = a", "CAST to TIMESTAMP_NTZ is not supported"),
        ("DATE '2024-01-01' = 1", "it compares DATE '2024-01-01' with the number 1"),
        ("TIMESTAMP '2024-01-01 00:00:00' = 'x'", "it reads the string 'x' as a timestamp, which"),
        ("to_date(a) = '2024-13-01'", "it reads the string '2024-13-01' as a date, which is not"),
        ("hour('noon') = 1", "it reads the string 'noon' as a timestamp, which is not a"),
        ("hour(5) = 1", "it applies hour to the number 5; hour takes timestamps and dates"),
        ("to_date(a, 'yyyy') = a", "to_date takes one argument (a format is not supported)"),
        ("date_trunc('fortnight', a) = a", "date_trunc takes a unit as a string literal, one of"),
        ("date_trunc(b, a) = a", "date_trunc takes a unit as a string literal"),
        ("trunc(a, 'MM') = a", "function 'trunc' is not allowed"),
        ("date_add(DAY, 1, a) = a", "function 'timestamp_add' is not allowed"),
        ("date_add(a, 1.5) = a", "it applies date_add to the number 1.5; date_add takes integer"),
        ("timestamp_seconds(1.5) = a", "it applies timestamp_seconds to the number 1.5"),
        ("datediff(a) = 1", "datediff takes two arguments"),
        ("round(a, b) = 1", "the scale of round must be an integer literal from -38 to 38"),
        ("round(a, 39) = 1", "the scale of round must be an integer literal from -38 to 38"),
        ("round(25, -1) = 30", "it rounds the number 25 to -1, which can overflow"),
        ("floor(a, 1) = 1", "floor takes one argument"),
        ("greatest(a) = 1", "greatest takes at least two arguments"),
        ("greatest(1, 'x') = 1", "it mixes in greatest the number 1 with the string 'x'"),
        ("split_part(a, ',', 0) = 'x'", "the part number of split_part must be an integer literal"),
        ("split_part(a, ',', b) = 'x'", "the part number of split_part must be an integer"),
        ("lpad(a, 10001, 'x') = 'x'", "the length of lpad must be an integer literal of at most"),
        ("rpad(a, b) = 'x'", "the length of rpad must be an integer literal"),
        ("instr(a, 'x', 2) = 1", "instr takes two arguments"),
        ("lower(hour(a)) = 'x'", "it applies lower() to hour(a) (of type int); lower() takes"),
        ("now() > a", "function 'now' is not allowed"),
        ("current_date() = a", "function 'current_date' is not allowed"),
        ("current_date = a", "function 'current_date' is not allowed"),
        ("unix_timestamp() > 1", "function 'unix_timestamp' is not allowed"),
        ("from_unixtime(a) = 'x'", "function 'from_unixtime' is not allowed"),
        ("regexp_replace(a, 'x', 'y') = 'z'", "function 'regexp_replace' is not allowed"),
        ("date_format(a, 'yyyy') = 'x'", "function 'date_format' is not allowed"),
        ("CAST(a AS FLOAT) > 1", "CAST to FLOAT is not supported"),
        ("a = 1e400", "the number 1e400 is out of range"),
        ("a = 1" + "0" * 40, f"the number 1{'0' * 40} has more than 38 digits"),
        ("substring(a, b) = 'x'", "the start and length of substring must be integer literals"),
        ("if(a, 1) = 1", "if(condition, then, else) takes three arguments"),
        ("trim(BOTH 'x' FROM a) = ''", "trim takes one argument"),
        ("a BETWEEN SYMMETRIC 1 AND 2", "BETWEEN SYMMETRIC is not supported"),
        ("a = 1 AND", "it is not a Spark SQL expression"),
        ("a = 'open", "it cannot be read"),
        ("'abc' = 1", f"it compares the string 'abc' with the number 1; {TYPE_RULES}"),
        ("lower(5) = 'x'", "it applies lower() to the number 5; lower() takes strings"),
        ("TRUE + 1 = 2", "it applies + to TRUE; + takes numbers"),
        ("CASE WHEN a THEN 'x' ELSE 1 END = 'x'", "it mixes in its results the string 'x' with"),
        ("'abc'", "it uses the string 'abc' as a condition, which is not true or false"),
        ("a + 1", "it uses a + 1 as a condition, which is not true or false"),
        ("lower(a)", "it uses lower(a) (of type string) as a condition"),
        ("1 = 1 = 1", "it compares 1 = 1 (of type boolean) with the number 1"),
    ],
)
def test_refused_conditions(condition: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_condition(condition, WHERE)
    message = str(raised.value)
    assert message.startswith(f"Unsupported condition {condition!r} for {WHERE}: {problem}")
    assert message.endswith(f"; {SUPPORTED}.")
    assert "\n" not in message


def test_an_unknown_qualifier_is_named_only_where_names_may_qualify() -> None:
    """Outside a pattern a qualified name is refused as before; in one (``qualifiers``: its
    steps) a name that is not a step is named, so the pattern can say which steps it has."""
    with pytest.raises(ConfigError) as plain:
        parse_condition("warm.temp > 1", WHERE)
    assert "'warm.temp' is not a column name: qualified names and struct fields" in str(plain.value)
    assert not isinstance(plain.value, UnknownQualifier)
    with pytest.raises(UnknownQualifier) as unknown:
        parse_condition("warm.temp > 1", WHERE, frozenset({"cold", "hot"}))
    assert (unknown.value.column, unknown.value.qualifier) == ("warm.temp", "warm")
    assert str(unknown.value) == (
        f"Unsupported condition 'warm.temp > 1' for {WHERE}: 'warm.temp' reads 'warm', which is "
        "not one of the names that may qualify a column here (cold, hot)."
    )
    assert parse_condition("hot.temp > 1", WHERE, frozenset({"cold", "hot"})) is not None


def test_size_and_nesting_are_bounded() -> None:
    """Every evaluation is recursive, so a condition cannot be arbitrarily large or deep."""
    chain = " AND ".join(["a = 1"] * 1000)
    with pytest.raises(
        ConfigError, match=f"1999 operators and parentheses; at most {MAX_OPERATORS}"
    ):
        parse_condition(chain, WHERE)
    with pytest.raises(ConfigError, match=f"30009 characters; at most {MAX_LENGTH}"):
        parse_condition("a IN ('" + "x" * 30000 + "')", WHERE)
    with pytest.raises(ConfigError, match="5000 operators and parentheses") as raised:
        parse_condition("(" * 5000 + "a" + ")" * 5000, WHERE)
    with pytest.raises(
        ConfigError, match=f"nests parentheses, CASE or NOT 30 deep; at most {MAX_NESTING}"
    ):
        parse_condition("(" * 30 + "a" + ")" * 30, WHERE)
    assert len(str(raised.value)) < 400 + len(SUPPORTED)  # the condition is shown cut
    with pytest.raises(ConfigError, match=f"40 deep; at most {MAX_NESTING}"):
        parse_condition("NOT " * 40 + "a", WHERE)
    with pytest.raises(ConfigError, match=f"levels deep; at most {MAX_DEPTH}"):
        parse_condition(" + ".join(["a"] * 60) + " > 1", WHERE)
    # A long flat chain is fine; parentheses inside a string are not operators.
    parse_condition(" OR ".join(["a = '(((('"] * 100), WHERE)


# --------------------------------------------------------------------------------------------
# Checked against the column types
# --------------------------------------------------------------------------------------------

TYPES = {
    "i": "int",
    "l": "bigint",
    "d": "double",
    "f": "float",
    "m": "decimal(10,2)",
    "s": "string",
    "b": "boolean",
    "ts": "timestamp",
    "wide": "decimal(38,0)",
    "day": "date",
    "bin": "binary",
}


def typed(condition: str) -> Condition:
    return typed_condition(parse_condition(condition, WHERE), TYPES, "Table 'users': filter")


@pytest.mark.parametrize(
    ("condition", "tree"),
    [
        # Numbers compare exactly (integers and decimals) or as DOUBLE.
        ("i = l", Compare("=", Cast(Column("i"), "bigint"), Column("l"))),
        ("i = 1", Compare("=", Cast(Column("i"), "bigint"), number(1))),
        (
            "m = 1",
            Compare("=", Column("m"), Literal(Decimal(1), "decimal(10,2)")),
        ),
        (
            "i = 1.5",
            Compare(
                "=",
                Cast(Column("i"), "decimal(11,1)"),
                Cast(Literal(Decimal("1.5"), "decimal(2,1)"), "decimal(11,1)"),
            ),
        ),
        (
            "f = 0.1",
            Compare(
                "=",
                Cast(Column("f"), "double"),
                Cast(Literal(Decimal("0.1"), "decimal(1,1)"), "double"),
            ),
        ),
        # Integer arithmetic in BIGINT, integer division in DOUBLE, decimals as Spark types them.
        (
            "i + 1 > 0",
            Compare(">", Arith("+", Cast(Column("i"), "bigint"), number(1), "bigint"), number(0)),
        ),
        (
            "i / 2 > 0",
            Compare(
                ">",
                Arith("/", Cast(Column("i"), "double"), Cast(number(2), "double"), "double"),
                Cast(number(0), "double"),
            ),
        ),
        (
            "m * 2 > 0",
            Compare(
                ">",
                Arith("*", Column("m"), Literal(Decimal(2), "decimal(1,0)"), "decimal(12,2)"),
                Literal(Decimal(0), "decimal(12,2)"),
            ),
        ),
        ("ts IS NULL", IsNull(Column("ts"))),
        ("NULL", Cast(Literal(None, "void"), "boolean")),
    ],
)
def test_typed_trees_make_every_conversion_explicit(condition: str, tree: Condition) -> None:
    assert typed(condition) == tree


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ("s = 1", f"compares column 's' of type string with the number 1; {TYPE_RULES}."),
        ("i = 'x'", "compares column 'i' of type int with the string 'x'"),
        ("b = 1", "compares column 'b' of type boolean with the number 1"),
        ("i IN (1, s)", "compares column 'i' of type int with column 's' of type string"),
        ("ts > 1", "compares column 'ts' of type timestamp with the number 1; compare numbers"),
        ("bin = bin", "compares column 'bin' of type binary, which takes only IS [NOT] NULL"),
        ("ts = s", "compares column 'ts' of type timestamp with column 's' of type string"),
        ("ts > '2026-01-01 10:00'", "reads the string '2026-01-01 10:00' as a timestamp, which"),
        ("day = '2026-02-29'", "reads the string '2026-02-29' as a date, which is not a date"),
        ("coalesce(ts, '2026-01-01') = ts", "mixes in coalesce column 'ts' of type timestamp with"),
        ("CAST(s AS TIMESTAMP) = ts", "casts column 's' of type string to TIMESTAMP, which is not"),
        ("CAST(ts AS BIGINT) = 1", "casts column 'ts' of type timestamp to BIGINT, which is not"),
        ("hour(s) = 1", "applies hour to column 's' of type string; hour takes timestamps and"),
        (
            "date_add(day, l * 1.5) = day",
            "applies date_add to l * 1.5 (of type decimal(23,1)); date_add takes integers",
        ),
        ("year(i) = 1", "applies year to column 'i' of type int; year takes timestamps and dates"),
        ("floor(s) = 1", "applies floor to column 's' of type string; floor takes numbers"),
        ("round(i, -1) = 10", "rounds column 'i' of type int to -1, which can overflow"),
        ("round(wide, -2) = 1", "rounds column 'wide' of type decimal(38,0) to -2, which can"),
        ("instr(i, 'x') = 1", "applies instr() to column 'i' of type int; instr() takes strings"),
        ("lpad(s, 3, i) = 'x'", "applies lpad() to column 'i' of type int; lpad() takes"),
        ("s + 1 > 1", "applies + to column 's' of type string; + takes numbers"),
        ("i LIKE 'x'", "applies LIKE to column 'i' of type int; LIKE takes strings"),
        ("i", "uses column 'i' of type int as a condition, which is not true or false"),
        ("CAST(d AS STRING) = 'x'", "casts column 'd' of type double to STRING, which is not"),
        ("CAST(s AS DOUBLE) > 1", "casts column 's' of type string to DOUBLE"),
        (
            "wide = 1.5",
            "compares column 'wide' of type decimal(38,0) with the number 1.5, which needs a "
            "decimal of 39 digits; at most 38",
        ),
        ("ghost = 1", "reads column 'ghost', which is not a column of the table. Columns: i, l"),
    ],
)
def test_type_mismatches_are_refused_with_the_column_and_its_type(
    condition: str, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        typed(condition)
    assert str(raised.value).startswith(f"Table 'users': filter {message}")
    assert "\n" not in str(raised.value)


# --------------------------------------------------------------------------------------------
# The plain-Python evaluator: SQL semantics as Spark has them
# --------------------------------------------------------------------------------------------

ROW: dict[str, Any] = {
    "i": 7,
    "n": None,
    "s": "DELETE",
    "t": "a%b_c\nd",
    "b": True,
    "d": math.nan,
    "m": "12.50",  # the fold's canonical decimal
}
ROW_TYPES = {"m": "decimal(10,2)", "n": "int"}


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        # Three-valued logic: only TRUE counts; NULL propagates.
        ("n = 1", None),
        ("NOT n = 1", None),
        ("n = 1 AND i = 8", False),
        ("n = 1 AND i = 7", None),
        ("n = 1 OR i = 7", True),
        ("n <=> NULL", True),
        ("i <=> NULL", False),
        ("(n = 1) IS TRUE", False),
        ("(n = 1) IS NOT FALSE", True),
        ("i IN (1, NULL)", None),
        ("i IN (7, NULL)", True),
        ("i NOT IN (1, NULL)", None),
        ("n IN (1)", None),
        ("i BETWEEN 7 AND 7", True),
        ("i BETWEEN 8 AND n", False),
        ("i BETWEEN 1 AND n", None),
        # LIKE: % any text, _ one character (a newline too), escapes.
        ("t LIKE 'a\\\\%b\\\\_c_d'", True),
        ("t LIKE 'a%d'", True),
        ("t LIKE 'A%'", False),
        ("t ILIKE 'A%'", True),
        ("t LIKE 'a!%b%' ESCAPE '!'", True),
        ("s NOT LIKE 'DEL%'", False),
        # Strings, numbers, casts.
        ("s = \"DELETE\" AND lower(s) = 'delete' AND length(s) = 6", True),
        ("substring(s, -3, 2) = 'ET' AND substring(s, 0, 2) = 'DE'", True),
        ("m > 12.4 AND m = 12.5 AND m * 2 = 25", True),
        ("CAST(m AS STRING) = '12.50'", True),
        ("CAST(' 12 ' AS INT) = 12 AND CAST('1.0' AS INT) IS NULL", True),
        ("CAST('yes' AS BOOLEAN) AND NOT CAST('0' AS BOOLEAN)", True),
        ("CAST(2.7D AS INT) = 2 AND CAST(-2.7D AS INT) = -2", True),
        ("CAST(1.45 AS DECIMAL(2,1)) = 1.5", True),
        ("i / 0 IS NULL AND i % 0 IS NULL", True),
        ("i / 2 = 3.5 AND -7 % 2 = -1", True),
        ("9223372036854775807 + i IS NULL", True),  # overflow: NULL, not an error
        ("d = d AND d > 1e308", True),  # NaN equals NaN and is above every number
        ("CASE WHEN n = 1 THEN 'a' WHEN i = 7 THEN 'b' END = 'b'", True),
        ("coalesce(n, i) = 7", True),
        ("'abc' < 'abd' AND 'é' > 'z'", True),
    ],
)
def test_python_evaluator(condition: str, expected: bool | None) -> None:
    assert holds(parse_condition(condition, WHERE), ROW, ROW_TYPES) is expected


def test_a_condition_that_does_not_type_check_holds_nowhere() -> None:
    """The job refuses it with a ConfigError; the model never deletes by it."""
    assert holds(parse_condition("s = 1", WHERE), ROW) is None


def test_a_value_not_of_its_columns_type_reads_as_null() -> None:
    assert holds(parse_condition("i = 1", WHERE), {"i": "1"}, {"i": "int"}) is None
    assert holds(parse_condition("i IS NULL", WHERE), {"i": "1"}, {"i": "int"}) is True


# --------------------------------------------------------------------------------------------
# Expressions of any type (computed columns), timestamps and dates
# --------------------------------------------------------------------------------------------

ts, day, x = Column("ts"), Column("day"), Column("x")
NOON = dt.datetime(2026, 1, 1, 12, 0)


@pytest.mark.parametrize(
    ("expression", "tree"),
    [
        ("price * 0.908", Arith("*", Column("price"), Literal(Decimal("0.908"), "decimal(3,3)"))),
        ("hour(ts)", Func("hour", (ts,))),
        ("to_date(ts)", Func("to_date", (ts,))),
        ("dayofmonth(ts)", Func("day", (ts,))),
        ("year(ts)", Func("year", (ts,))),
        ("TIMESTAMP '2026-01-01 12:00:00'", Literal(NOON, "timestamp")),
        ("TIMESTAMP '2026-01-01T12:00:00'", Literal(NOON, "timestamp")),
        (
            "TIMESTAMP '2026-01-01 00:00:00.000001'",
            Literal(dt.datetime(2026, 1, 1, 0, 0, 0, 1), "timestamp"),
        ),
        ("DATE '2024-02-29'", Literal(dt.date(2024, 2, 29), "date")),
        ("CAST('2026-01-01' AS TIMESTAMP)", Literal(dt.datetime(2026, 1, 1), "timestamp")),
        ("CAST(ts AS DATE)", Cast(ts, "date")),
        ("date_trunc('Hour', ts)", Func("date_trunc", (text("hour"), ts))),
        ("date_add(day, 2)", Func("date_add", (day, number(2)))),
        ("date_sub(day, x)", Func("date_sub", (day, x))),
        ("datediff(day, ts)", Func("datediff", (day, ts))),
        ("timestamp_seconds(x)", Func("timestamp_seconds", (x,))),
        ("unix_millis(ts)", Func("unix_millis", (ts,))),
        ("ceiling(x)", Func("ceil", (x,))),
        ("round(x)", Func("round", (x, number(0)))),
        ("round(x, -2)", Func("round", (x, number(-2)))),
        ("greatest(x, 1, NULL)", Func("greatest", (x, number(1), Literal(None, "void")))),
        ("split_part(a, ',', -1)", Func("split_part", (a, text(","), number(-1)))),
        ("replace(a, 'x')", Func("replace", (a, text("x"), text("")))),
        ("lpad(a, 3)", Func("lpad", (a, number(3), text(" ")))),
        ("instr(a, 'x')", Func("instr", (a, text("x")))),
        ("lower(a)", Func("lower", (a,))),  # not a condition: fine as an expression
        ("NULL", Literal(None, "void")),
    ],
)
def test_accepted_expressions_and_their_trees(expression: str, tree: Condition) -> None:
    assert parse_expression(expression, WHERE) == tree


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("", "it is empty"),
        ("a = 1; SELECT 1", "it holds more than one statement (';')"),
        ("now()", "function 'now' is not allowed"),
        ("rand()", "function 'rand' is not allowed"),
        ("current_timestamp", "function 'current_timestamp' is not allowed"),
        ("(SELECT 1)", "'(SELECT 1)': subqueries and table reads are not allowed"),
        ("read_files('/etc')", "function 'read_files' is not allowed"),
        ("my_udf(a)", "function 'my_udf' is not allowed"),
        ("regexp_extract(a, 'x', 1)", "function 'regexp_extract' is not allowed"),
        ("'abc' + 1", "it applies + to the string 'abc'; + takes numbers"),
        ("DATE '2026-02-29'", "the string '2026-02-29', which is not a date"),
        ("hour('x')", "it reads the string 'x' as a timestamp, which is not a timestamp"),
        ("sum(a)", "function 'sum' is not allowed"),
    ],
)
def test_refused_expressions(expression: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_expression(expression, WHERE)
    message = str(raised.value)
    assert message.startswith(f"Unsupported expression {expression!r} for {WHERE}: {problem}")
    assert message.endswith(f"; {SUPPORTED}.") and "\n" not in message


def test_a_condition_is_still_refused_where_an_expression_is_fine() -> None:
    with pytest.raises(ConfigError, match="uses hour\\(ts\\) \\(of type int\\) as a condition"):
        parse_condition("hour(ts)", WHERE)


EXPRESSION_TYPES = {**TYPES, "x": "bigint", "tiny": "tinyint", "w": "decimal(38,10)"}


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("l * 0.908", "decimal(24,3)"),
        ("d * 0.908", "double"),
        ("i + 1", "bigint"),
        ("length(s)", "int"),
        ("hour(ts)", "int"),
        ("year(day)", "int"),
        ("to_date(ts)", "date"),
        ("CAST(day AS TIMESTAMP)", "timestamp"),
        ("date_trunc('week', day)", "timestamp"),
        ("date_add(day, tiny)", "date"),
        ("datediff(day, ts)", "int"),
        ("unix_seconds(ts)", "bigint"),
        ("timestamp_seconds(i)", "timestamp"),
        ("greatest(day, ts)", "timestamp"),
        ("least(i, tiny)", "bigint"),  # integers meet as BIGINT
        ("coalesce(day, DATE '2026-01-01')", "date"),
        ("CASE WHEN b THEN ts END", "timestamp"),
        ("if(b, day, NULL)", "date"),
        ("floor(d)", "bigint"),
        ("ceil(f)", "bigint"),
        ("floor(m)", "decimal(9,0)"),
        ("round(m, 1)", "decimal(10,1)"),
        ("round(m, 5)", "decimal(11,2)"),
        ("round(m, -1)", "decimal(9,0)"),
        ("round(w, 2)", "decimal(31,2)"),
        ("round(i)", "bigint"),
        ("round(f, 1)", "double"),
        ("CAST(ts AS STRING)", "string"),
        ("split_part(s, ',', 1)", "string"),
        ("instr(s, 'x')", "int"),
        ("b AND s = 'x'", "boolean"),
        ("NULL", "void"),
    ],
)
def test_typed_expressions_have_spark_result_types(expression: str, result: str) -> None:
    typed_tree, found = typed_expression(
        parse_expression(expression, WHERE), EXPRESSION_TYPES, "Table 'users': column"
    )
    assert found == result, typed_tree


def test_typed_expressions_make_time_conversions_explicit() -> None:
    def typed_tree(expression: str) -> Condition:
        return typed_expression(parse_expression(expression, WHERE), EXPRESSION_TYPES, "x")[0]

    midnight = Literal(dt.datetime(2026, 1, 1), "timestamp")
    assert typed_tree("ts >= '2026-01-01'") == Compare(">=", ts, midnight)
    assert typed_tree("day < ts") == Compare("<", Cast(day, "timestamp"), ts)
    assert typed_tree("day = '2026-01-01 10:00:00'") == Compare(
        "=",
        day,
        Literal(dt.date(2026, 1, 1), "date"),  # Spark reads the date part
    )
    assert typed_tree("hour(day)") == Func("hour", (Cast(day, "timestamp"),), "int")
    assert typed_tree("to_date(ts)") == Cast(ts, "date")
    assert typed_tree("date_add(day, i)") == Func(
        "date_add", (day, Cast(Column("i"), "bigint")), "date"
    )


def test_expression_columns_in_order_and_sql_text() -> None:
    expression = parse_expression(
        "date_add(to_date(`a b`), c) > DATE '2026-01-01' OR ts IS NULL", WHERE
    )
    assert condition_columns(expression) == ("a b", "c", "ts")
    assert to_sql(expression) == (
        "(date_add(to_date(`a b`), c) > DATE '2026-01-01') OR (ts IS NULL)"
    )
    assert to_sql(parse_expression("TIMESTAMP '0999-01-01 10:00:00.5'", WHERE)) == (
        "TIMESTAMP '0999-01-01 10:00:00.5'"
    )


TIME_ROW: dict[str, Any] = {
    "ts": dt.datetime(1969, 12, 31, 23, 59, 59, 999_999),  # 1 µs before the epoch
    "micros": 86_400_000_000,  # a TIMESTAMP as the fold holds it: 1970-01-02 00:00:00
    "day": dt.date(2024, 2, 29),  # a leap day, a Thursday
    "days": -1,  # a DATE as the fold holds it: 1969-12-31
    "d": 2.675,
    "m": "125.25",
    "s": "a,b,,c",
    "n": None,
    "l": 9_223_372_036_854_775_807,
}
TIME_ROW_TYPES = {
    "ts": "timestamp",
    "micros": "timestamp",
    "day": "date",
    "days": "date",
    "m": "decimal(10,2)",
    "n": "int",
}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("hour(ts)", 23),
        ("second(ts)", 59),
        ("unix_micros(ts)", -1),
        ("unix_millis(ts)", -1),  # floor, not truncation
        ("unix_seconds(ts)", -1),
        ("to_date(ts)", dt.date(1969, 12, 31)),
        ("micros", dt.datetime(1970, 1, 2)),
        ("days", dt.date(1969, 12, 31)),
        ("date_trunc('week', ts)", dt.datetime(1969, 12, 29)),  # a Monday
        ("date_trunc('quarter', ts)", dt.datetime(1969, 10, 1)),
        ("date_trunc('second', ts)", dt.datetime(1969, 12, 31, 23, 59, 59)),
        ("dayofweek(day)", 5),  # 1 is Sunday
        ("dayofyear(day)", 60),
        ("weekofyear(DATE '2021-01-03')", 53),  # ISO weeks: still 2020's last week
        ("date_add(day, 365)", dt.date(2025, 2, 28)),
        ("date_sub(day, -1)", dt.date(2024, 3, 1)),
        ("date_add(DATE '9999-12-31', 1)", None),  # beyond year 9999: NULL
        ("date_add(day, l)", None),
        ("date_add(day, n)", None),
        ("datediff(day, ts)", 19783),
        ("timestamp_seconds(253402300800)", None),
        ("timestamp_seconds(-1)", dt.datetime(1969, 12, 31, 23, 59, 59)),
        ("CAST(ts AS STRING)", "1969-12-31 23:59:59.999999"),
        ("CAST(TIMESTAMP '2026-01-01 10:00:00.5' AS STRING)", "2026-01-01 10:00:00.5"),
        ("CAST(day AS TIMESTAMP)", dt.datetime(2024, 2, 29)),
        ("ts < DATE '1970-01-01'", True),
        ("micros = '1970-01-02'", True),
        ("day BETWEEN '2024-02-01' AND '2024-02-29'", True),
        ("ts IN (TIMESTAMP '1969-12-31 23:59:59.999999')", True),
        ("greatest(day, ts, NULL)", dt.datetime(2024, 2, 29)),
        ("least(day, ts)", dt.datetime(1969, 12, 31, 23, 59, 59, 999_999)),
        ("round(d, 2)", 2.68),  # HALF_UP of the shortest decimal text, as Spark
        ("round(-2.5D)", -3.0),
        ("round(m, -1)", Decimal("130")),
        ("round(m, 1)", Decimal("125.3")),
        ("floor(-d)", -3),
        ("ceil(m)", Decimal("126")),
        ("floor(1e300)", 2**63 - 1),  # saturates, as Spark
        ("split_part(s, ',', 3)", ""),
        ("split_part(s, ',', -1)", "c"),
        ("split_part(s, ',', 9)", ""),
        ("split_part(s, '', 1)", "a,b,,c"),
        ("instr(s, ',,')", 4),
        ("instr(s, '')", 1),
        ("replace(s, ',')", "abc"),
        ("replace(s, '', 'x')", "a,b,,c"),
        ("lpad(s, 8, 'xy')", "xya,b,,c"),
        ("rpad(s, 2, 'xy')", "a,"),
        ("lpad(s, -1, 'x')", ""),
        ("lpad(s, 9, '')", "a,b,,c"),
    ],
)
def test_python_evaluator_of_expressions(expression: str, expected: Any) -> None:
    found = value_of(parse_expression(expression, WHERE), TIME_ROW, TIME_ROW_TYPES)
    assert found == expected and type(found) is type(expected)


def test_value_of_refuses_what_the_types_make_invalid() -> None:
    with pytest.raises(ConfigError, match="applies hour to column 's' of type string"):
        value_of(parse_expression("hour(s)", WHERE), TIME_ROW, TIME_ROW_TYPES)
