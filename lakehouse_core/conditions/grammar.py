"""Row expressions: conditions (``apply_as_deletes`` / ``apply_as_truncates``, gold filters)
and computed columns (gold ``columns``).

An expression is Spark SQL, written as Databricks and Spark write it (``operation =
"DELETE"``, ``lower(op) IN ('d', 'delete')``, ``price * 0.908``, ``hour(dateTime)``). It is
parsed with sqlglot (Spark dialect), checked against an allow-list and turned into a tree of
frozen dataclasses. No expression text ever reaches Spark: the two evaluators beside this
module read the checked tree on their own, :mod:`lakehouse_core.conditions.spark` building the
job's Spark Column node by node, :mod:`lakehouse_core.conditions.python` computing the value in
plain Python (for the reference models and the pattern matcher).

Two steps, because column types are known only when a batch is read:

* :func:`parse_condition` / :func:`parse_expression` (at load): one expression of the allowed
  forms (a condition: a boolean one), at most :data:`MAX_OPERATORS` operators and
  :data:`MAX_DEPTH` levels deep, whose literals fit together (``'abc' = 1``, ``lower(5)`` and
  ``TIMESTAMP '2026-02-30 00:00:00'`` are refused here already);
* :func:`typed_condition` / :func:`typed_expression` (with the column types): every column
  exists and every operator gets operands of types it takes. Each implicit conversion becomes
  an explicit :class:`Cast` and each arithmetic node and function its result type, so the two
  evaluators follow one set of rules.

The rules (docs/silver-semantics.md, "Conditions"): SQL's three-valued logic; numbers compare
with numbers (as DOUBLE when one side is DOUBLE or FLOAT, else exactly), strings with strings
(by code point), booleans with booleans, timestamps and dates with timestamps and dates (a date
as the timestamp of its midnight UTC; a string literal met by one is read as a time at load);
other types only take ``IS [NOT] NULL``. Times are Spark's in the session time zone UTC (the
project's sessions set it). Nothing in an accepted expression can fail at run time (Spark runs
with ANSI mode on, where a bad cast or an overflow would stop the stream): arithmetic that
overflows or divides by zero, a CAST that does not convert, and a date or timestamp function
whose result leaves years 1 to 9999 give NULL, as Spark's ``try_`` functions do; what Spark
would refuse at run time (``split_part`` at index 0, ``round`` of an integer to tens) is
refused at load.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal
from functools import lru_cache
from typing import Any, NoReturn

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.tokenizer_core import Token, TokenType

from lakehouse_core.errors import ConfigError

__all__ = [
    "DAYS_RANGE",
    "FUNCTIONS",
    "FUNCTION_NAMES",
    "INTEGER_BOUNDS",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "MAX_NESTING",
    "MAX_OPERATORS",
    "MAX_PAD",
    "SECONDS_RANGE",
    "SUPPORTED",
    "TIME_PARTS",
    "TRUNC_UNITS",
    "TYPE_RULES",
    "UNKNOWN",
    "UNKNOWN_NUMBER",
    "VOID",
    "And",
    "Arith",
    "Case",
    "Cast",
    "Column",
    "Compare",
    "Condition",
    "Expr",
    "Func",
    "In",
    "IsBool",
    "IsNull",
    "Like",
    "Literal",
    "Negate",
    "Not",
    "Or",
    "UnknownQualifier",
    "Value",
    "children",
    "condition_columns",
    "decimal_precision",
    "decimal_result",
    "format_time",
    "parse_condition",
    "parse_expression",
    "to_sql",
    "type_kind",
    "typed_condition",
    "typed_expression",
]

#: A literal's value: NULL, a boolean, an integer, a DOUBLE, a DECIMAL, a string, a TIMESTAMP
#: (a naive ``datetime`` in UTC) or a DATE.
Value = None | bool | int | float | Decimal | str | dt.datetime | dt.date

#: The parts of a date (the first six) or a timestamp (the last three) a function extracts.
TIME_PARTS = (
    "year",
    "month",
    "day",
    "dayofweek",
    "dayofyear",
    "weekofyear",
    "hour",
    "minute",
    "second",
)
#: The units of ``date_trunc``, and Spark's other names for them.
TRUNC_UNITS = ("year", "quarter", "month", "week", "day", "hour", "minute", "second")
_TRUNC_ALIASES = {"yyyy": "year", "yy": "year", "mm": "month", "mon": "month", "dd": "day"}
#: The functions an expression may call (each also has a plain-Python twin: ``python.py``).
FUNCTIONS = (
    "lower",
    "upper",
    "trim",
    "ltrim",
    "rtrim",
    "length",
    "substring",
    "concat",
    "coalesce",
    "abs",
    "startswith",
    "endswith",
    "contains",
    "floor",
    "ceil",
    "round",
    "greatest",
    "least",
    "split_part",
    "instr",
    "replace",
    "lpad",
    "rpad",
    *TIME_PARTS,
    "to_date",
    "date_trunc",
    "unix_seconds",
    "unix_millis",
    "unix_micros",
    "timestamp_seconds",
    "date_add",
    "date_sub",
    "datediff",
)
#: Names a function may be called by (Spark's aliases of the allowed functions included).
FUNCTION_NAMES = frozenset(
    {
        *FUNCTIONS,
        *("lcase", "ucase", "len", "char_length", "character_length", "substr", "nvl"),
        *("ifnull", "isnull", "isnotnull", "if", "mod", "like", "ilike", "cast", "try_cast"),
        *("string", "int", "double", "boolean", "date", "timestamp"),
        *("ceiling", "dayofmonth", "dateadd"),
    }
)

SUPPORTED = (
    "write a Spark SQL expression over the row's columns: comparisons (= == <> != < <= > >= "
    "<=>), [NOT] IN (...), [NOT] BETWEEN, [NOT] LIKE / ILIKE with a literal pattern, "
    "IS [NOT] NULL / TRUE / FALSE, CASE WHEN, IF, CAST(x AS STRING / BOOLEAN / INT / BIGINT / "
    "DOUBLE / DECIMAL(p,s) / TIMESTAMP / DATE), + - * / %, AND, OR, NOT, literals ('text', "
    "\"text\", numbers, TRUE, FALSE, NULL, TIMESTAMP 'yyyy-mm-dd hh:mm:ss', DATE 'yyyy-mm-dd'), "
    f"`quoted names` and the functions {', '.join(FUNCTIONS)} (and their aliases), isnull, "
    "isnotnull, nvl, ifnull"
)
TYPE_RULES = (
    "compare numbers with numbers, strings with strings, booleans with booleans and "
    "timestamps and dates with timestamps, dates or a time literal (CAST one side to change "
    "its type); columns of other types take only IS [NOT] NULL"
)

#: Bounds that keep parsing and every evaluation (here, in Spark and in the reference models,
#: all recursive) far from Python's recursion limit.
MAX_OPERATORS = 300
MAX_NESTING = 16
MAX_DEPTH = 40
MAX_LENGTH = 20_000

UNKNOWN = "?"  # the type of a column before the column types are known
UNKNOWN_NUMBER = "?number"  # the type of arithmetic on such a column
VOID = "void"  # the type of NULL
_INTEGER_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}
INTEGER_BOUNDS = {"tinyint": 2**7, "smallint": 2**15, "int": 2**31, "bigint": 2**63}
_DECIMAL_TYPE = re.compile(r"decimal\((\d+),(\d+)\)")
_MAX_PRECISION = 38
#: The longest text lpad / rpad may make.
MAX_PAD = 10_000
#: The seconds since 1970 (UTC) of 0001-01-01 00:00:00 and 9999-12-31 23:59:59, and the days
#: of 0001-01-01 and 9999-12-31: a time function whose result leaves them gives NULL.
SECONDS_RANGE = (-62_135_596_800, 253_402_300_799)
DAYS_RANGE = (-719_162, 2_932_896)
_NUMBER = re.compile(r"[0-9]*\.?[0-9]*(?:[eE][+-]?[0-9]+)?")
_DECIMAL_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXACT = Context(prec=100, rounding=ROUND_HALF_UP)


# --------------------------------------------------------------------------------------------
# The tree
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """The value of column ``name`` (any name; Spark reads it as one name, never a path)."""

    name: str


@dataclass(frozen=True)
class Literal:
    """A constant of Spark type ``type`` (``string``, ``boolean``, ``bigint``, ``double``,
    ``decimal(p,s)`` or ``void`` for NULL)."""

    value: Value
    type: str


@dataclass(frozen=True)
class Not:
    operand: Expr


@dataclass(frozen=True)
class And:
    operands: tuple[Expr, ...]


@dataclass(frozen=True)
class Or:
    operands: tuple[Expr, ...]


@dataclass(frozen=True)
class Compare:
    """``left op right``; ``op`` is one of ``= <> < <= > >= <=>`` (null-safe equality)."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class In:
    """``operand [NOT] IN (items)``."""

    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False


@dataclass(frozen=True)
class Like:
    """``operand [NOT] LIKE pattern ESCAPE escape`` (``ILIKE`` when ``case_insensitive``: both
    sides lowered first). ``%`` is any text, ``_`` one character."""

    operand: Expr
    pattern: str
    escape: str = "\\"
    negated: bool = False
    case_insensitive: bool = False


@dataclass(frozen=True)
class IsNull:
    """``operand IS NULL``, or ``IS NOT NULL`` when ``negated``."""

    operand: Expr
    negated: bool = False


@dataclass(frozen=True)
class IsBool:
    """``operand IS [NOT] TRUE / FALSE``: never unknown (a null operand is neither)."""

    operand: Expr
    value: bool
    negated: bool = False


@dataclass(frozen=True)
class Case:
    """``CASE WHEN condition THEN value ... ELSE default END`` (no default: NULL)."""

    branches: tuple[tuple[Expr, Expr], ...]
    default: Expr | None = None


@dataclass(frozen=True)
class Cast:
    """``CAST(operand AS to)``; NULL where the value does not convert (as ``TRY_CAST``)."""

    operand: Expr
    to: str


@dataclass(frozen=True)
class Arith:
    """``left op right`` for ``op`` in ``+ - * / %``; ``type`` is the result type, set by
    :func:`typed_condition` (both operands then have one numeric type, or are decimals)."""

    op: str
    left: Expr
    right: Expr
    type: str = UNKNOWN


@dataclass(frozen=True)
class Negate:
    """``-operand``; ``type`` as for :class:`Arith`."""

    operand: Expr
    type: str = UNKNOWN


@dataclass(frozen=True)
class Func:
    """A call of one of :data:`FUNCTIONS`. ``substring`` has the text, then the start and the
    length as integer literals; ``type`` (the result type) is set by :func:`typed_condition`."""

    name: str
    args: tuple[Expr, ...]
    type: str = UNKNOWN


Expr = (
    Column
    | Literal
    | Not
    | And
    | Or
    | Compare
    | In
    | Like
    | IsNull
    | IsBool
    | Case
    | Cast
    | Arith
    | Negate
    | Func
)
#: A parsed condition: the root of its tree.
Condition = Expr


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct operands of a node, in order."""
    match expr:
        case Column() | Literal():
            return ()
        case Not(operand) | Like(operand) | IsNull(operand) | IsBool(operand):
            return (operand,)
        case Cast(operand) | Negate(operand):
            return (operand,)
        case And(operands) | Or(operands):
            return operands
        case Compare(_, left, right) | Arith(_, left, right):
            return (left, right)
        case In(operand, items):
            return (operand, *items)
        case Case(branches, default):
            flat = tuple(part for branch in branches for part in branch)
            return flat if default is None else (*flat, default)
        case Func(_, args):
            return args


def condition_columns(condition: Condition) -> tuple[str, ...]:
    """The columns a condition reads, in order of first appearance."""
    found: dict[str, None] = {}
    stack = [condition]
    while stack:
        node = stack.pop()
        if isinstance(node, Column):
            found[node.name] = None
        stack.extend(reversed(children(node)))
    return tuple(found)


# --------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------


def type_kind(type_name: str) -> str:
    """``unknown``, ``void``, ``boolean``, ``string``, ``integral``, ``decimal``, ``double``
    (DOUBLE and FLOAT), ``timestamp``, ``date`` or ``other`` (any other Spark type, e.g.
    ``binary``, ``timestamp_ntz``)."""
    if type_name.startswith(UNKNOWN):
        return "unknown"
    if type_name in (VOID, "boolean", "string", "timestamp", "date"):
        return type_name
    if type_name in _INTEGER_DIGITS:
        return "integral"
    if type_name in ("double", "float"):
        return "double"
    return "decimal" if _DECIMAL_TYPE.fullmatch(type_name) else "other"


def decimal_precision(type_name: str) -> tuple[int, int]:
    """``(precision, scale)`` of a ``decimal(p,s)`` type name."""
    match = _DECIMAL_TYPE.fullmatch(type_name)
    assert match is not None, type_name
    return int(match.group(1)), int(match.group(2))


def _decimal(precision: int, scale: int) -> str:
    return f"decimal({precision},{scale})"


def _bounded(precision: int, scale: int) -> str:
    """Spark's result decimal type when ``precision`` exceeds 38: the integer digits are kept
    and the scale shrinks, to no less than 6 (``DecimalType.adjustPrecisionScale``)."""
    if precision <= _MAX_PRECISION:
        return _decimal(precision, scale)
    integer_digits = precision - scale
    return _decimal(_MAX_PRECISION, max(_MAX_PRECISION - integer_digits, min(scale, 6)))


def decimal_result(op: str, left: str, right: str) -> str:
    """Spark's result type of ``left op right`` for two decimal types."""
    p1, s1 = decimal_precision(left)
    p2, s2 = decimal_precision(right)
    if op in ("+", "-"):
        scale = max(s1, s2)
        return _bounded(max(p1 - s1, p2 - s2) + scale + 1, scale)
    if op == "*":
        return _bounded(p1 + p2 + 1, s1 + s2)
    if op == "/":
        scale = max(6, s1 + p2 + 1)
        return _bounded(p1 - s1 + s2 + scale, scale)
    scale = max(s1, s2)
    return _decimal(min(p1 - s1, p2 - s2) + scale, scale)


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


class _Refused(Exception):
    """A condition outside the rules; ``problem`` says why (a phrase, no final period)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class _Unqualified(_Refused):
    """A column ``qualifier.name`` (as ``column``) whose qualifier may not qualify one here."""

    def __init__(self, column: str, qualifier: str, qualifiers: frozenset[str]) -> None:
        super().__init__(
            f"{column!r} reads {qualifier!r}, which is not one of the names that may qualify a "
            f"column here ({', '.join(sorted(qualifiers))})"
        )
        self.column = column
        self.qualifier = qualifier


class UnknownQualifier(ConfigError):
    """A condition reads ``column`` (``qualifier.name``) where ``qualifier`` is not among the
    names that may qualify a column (a pattern's steps), so its caller can name what it is."""

    def __init__(self, message: str, column: str, qualifier: str) -> None:
        super().__init__(message)
        self.column = column
        self.qualifier = qualifier


@lru_cache(maxsize=256)
def parse_condition(text: str, where: str, qualifiers: frozenset[str] = frozenset()) -> Condition:
    """Parse and check ``text``; ``where`` names the setting in messages (e.g. ``apply_as_deletes
    of table 'x'``). ``qualifiers``: names that may qualify a column (a pattern's earlier
    steps): ``step.column`` reads as the column named ``"step.column"``.

    Raises:
        UnknownQualifier: with ``qualifiers``, a column ``name.column`` whose ``name`` is not
            one of them.
        ConfigError: one line naming the setting, the offending construct and what is allowed.
    """
    try:
        return _parse(text, qualifiers=qualifiers)
    except _Unqualified as unknown:
        shown = text if len(text) <= 200 else text[:200] + "..."
        raise UnknownQualifier(
            f"Unsupported condition {shown!r} for {where}: {unknown.problem}.",
            unknown.column,
            unknown.qualifier,
        ) from None
    except _Refused as refused:
        shown = text if len(text) <= 200 else text[:200] + "..."
        raise ConfigError(
            f"Unsupported condition {shown!r} for {where}: {refused.problem}; {SUPPORTED}."
        ) from None


@lru_cache(maxsize=256)
def parse_expression(text: str, where: str) -> Expr:
    """Parse and check ``text``, one expression of the allowed forms whose value may have any
    allowed type (a computed column); ``where`` names the setting in messages.

    Raises:
        ConfigError: one line naming the setting, the offending construct and what is allowed.
    """
    try:
        return _parse(text, boolean=False)
    except _Refused as refused:
        shown = text if len(text) <= 200 else text[:200] + "..."
        raise ConfigError(
            f"Unsupported expression {shown!r} for {where}: {refused.problem}; {SUPPORTED}."
        ) from None


def _parse(text: str, boolean: bool = True, qualifiers: frozenset[str] = frozenset()) -> Expr:
    if not text.strip():
        raise _Refused("it is empty")
    if len(text) > MAX_LENGTH:
        raise _Refused(f"it has {len(text)} characters; at most {MAX_LENGTH}")
    dialect = Spark()
    try:
        tokens = list(dialect.tokenize(text))
    except SqlglotError as error:
        raise _Refused(f"it cannot be read ({_first_line(error)})") from None
    _check_tokens(tokens)
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        trees = [tree for tree in dialect.parse(text) if tree is not None]
    except ParseError as error:
        raise _Refused(f"it is not a Spark SQL expression ({_parse_problem(error)})") from None
    except RecursionError:
        raise _Refused("it is nested too deeply") from None
    except SqlglotError as error:
        raise _Refused(f"it is not a Spark SQL expression ({_first_line(error)})") from None
    finally:
        logger.setLevel(level)
    if not trees:
        raise _Refused("it is empty")
    if len(trees) > 1:
        raise _Refused("it holds more than one statement (';')")
    depth = _depth(trees[0])
    if depth > MAX_DEPTH:
        raise _Refused(f"it nests {depth} levels deep; at most {MAX_DEPTH}")
    condition = _Converter(qualifiers).convert(trees[0])
    try:  # what can be checked before the column types are known
        if boolean:
            _Typer(None).condition(condition)
        else:
            _Typer(None).expr(condition)
    except _Refused as refused:
        raise _Refused(f"it {refused.problem}") from None
    return condition


#: Tokens that are operands, separators or closing brackets (everything else counts as an
#: operator towards :data:`MAX_OPERATORS`).
_OPERAND_TOKENS = frozenset(
    {
        TokenType.VAR,
        TokenType.IDENTIFIER,
        TokenType.STRING,
        TokenType.NUMBER,
        TokenType.RAW_STRING,
        TokenType.COMMA,
        TokenType.R_PAREN,
        TokenType.NULL,
        TokenType.TRUE,
        TokenType.FALSE,
    }
)
#: Keywords that may stand before an opening parenthesis without being a function.
_KEYWORDS_BEFORE_PAREN = frozenset(
    {
        TokenType.IN,
        TokenType.NOT,
        TokenType.AND,
        TokenType.OR,
        TokenType.CASE,
        TokenType.WHEN,
        TokenType.THEN,
        TokenType.ELSE,
        TokenType.END,
        TokenType.IS,
        TokenType.BETWEEN,
        TokenType.ESCAPE,
        TokenType.ALIAS,
        TokenType.DISTINCT,
        TokenType.FROM,
    }
)


def _check_tokens(tokens: Sequence[Token]) -> None:
    """Refuse what the parser must not see: too many operators, deep nesting, a function
    outside the allow-list, adjacent strings."""
    operators = sum(1 for token in tokens if token.token_type not in _OPERAND_TOKENS)
    if operators > MAX_OPERATORS:
        raise _Refused(f"it has {operators} operators and parentheses; at most {MAX_OPERATORS}")
    depth = deepest = negations = 0
    for index, token in enumerate(tokens):
        kind = token.token_type
        negations = negations + 1 if kind == TokenType.NOT else 0
        if kind in (TokenType.L_PAREN, TokenType.CASE):
            depth += 1
        elif kind in (TokenType.R_PAREN, TokenType.END):
            depth -= 1
        deepest = max(deepest, depth + negations)
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        previous = tokens[index - 1] if index > 0 else None
        if (
            following is not None
            and following.token_type == TokenType.L_PAREN
            and kind not in _KEYWORDS_BEFORE_PAREN
            and _PLAIN_NAME.fullmatch(token.text)
            and (previous is None or previous.token_type != TokenType.ALIAS)  # CAST(x AS t(
            and token.text.lower() not in FUNCTION_NAMES
        ):
            raise _Refused(
                f"function {token.text!r} is not allowed (only deterministic built-ins, no "
                "UDFs, aggregates, window functions, table or file reads)"
            )
        if kind == TokenType.STRING and following and following.token_type == TokenType.STRING:
            raise _Refused(
                "two strings follow each other (Spark joins them: 'it''s' is 'its'); write a "
                "quote inside a string as \\' ('it\\'s') or use the other quotes (\"it's\")"
            )
    if deepest > MAX_NESTING:
        raise _Refused(f"it nests parentheses, CASE or NOT {deepest} deep; at most {MAX_NESTING}")


def _depth(root: exp.Expr) -> int:
    """The depth of a sqlglot tree, without recursion; a chain of AND (or of OR) counts once,
    as :class:`And` and :class:`Or` hold all their operands."""
    deepest = 0
    stack: list[tuple[exp.Expr, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        for child in node.iter_expressions():
            chained = isinstance(node, exp.And | exp.Or) and type(child) is type(node)
            flat = chained or isinstance(node, exp.Paren)
            stack.append((child, depth if flat else depth + 1))
    return deepest


def _parse_problem(error: ParseError) -> str:
    first = error.errors[0] if error.errors else {}
    description = str(first.get("description") or "")
    place = f"at column {first.get('col')}" if first.get("col") is not None else ""
    if not description or "<class" in description:
        return place or _first_line(error)
    return f"{description} {place}".strip()


def _first_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


_COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.NullSafeEQ: "<=>",
}
_ARITHMETIC: dict[type[exp.Expr], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
}
_SIMPLE_FUNCTIONS: dict[type[exp.Expr], str] = {
    exp.Lower: "lower",
    exp.Upper: "upper",
    exp.Length: "length",
    exp.Abs: "abs",
}
_TWO_STRING_FUNCTIONS: dict[type[exp.Expr], str] = {
    exp.StartsWith: "startswith",
    exp.EndsWith: "endswith",
    exp.Contains: "contains",
}
_CAST_TARGETS = {
    exp.DataType.Type.TIMESTAMP: "timestamp",  # timestamp(x) reads so
    exp.DataType.Type.TIMESTAMPTZ: "timestamp",  # Spark's TIMESTAMP (with local time zone)
    exp.DataType.Type.TIMESTAMPLTZ: "timestamp",
    exp.DataType.Type.DATE: "date",
    exp.DataType.Type.TEXT: "string",
    exp.DataType.Type.VARCHAR: "string",
    exp.DataType.Type.CHAR: "string",
    exp.DataType.Type.BOOLEAN: "boolean",
    exp.DataType.Type.TINYINT: "tinyint",
    exp.DataType.Type.SMALLINT: "smallint",
    exp.DataType.Type.INT: "int",
    exp.DataType.Type.BIGINT: "bigint",
    exp.DataType.Type.DOUBLE: "double",
}


class _Converter:
    """sqlglot's tree of an allowed expression to ours; anything else is refused.
    ``qualifiers``: the names allowed before a column's dot (see :func:`parse_condition`)."""

    def __init__(self, qualifiers: frozenset[str] = frozenset()) -> None:
        self.qualifiers = qualifiers

    def convert(self, node: exp.Expr) -> Expr:
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.And | exp.Or):
            return self._connective(node)
        if type(node) in _COMPARISONS:
            return Compare(_COMPARISONS[type(node)], self.convert(node.this), self._right(node))
        if isinstance(node, exp.NullSafeNEQ):
            return Not(Compare("<=>", self.convert(node.this), self._right(node)))
        if type(node) in _ARITHMETIC:
            return Arith(_ARITHMETIC[type(node)], self.convert(node.this), self._right(node))
        handler = _HANDLERS.get(type(node))
        if handler is not None:
            return handler(self, node)
        if type(node) in _SIMPLE_FUNCTIONS:
            return Func(_SIMPLE_FUNCTIONS[type(node)], (self.convert(node.this),))
        if type(node) in _TWO_STRING_FUNCTIONS:
            name = _TWO_STRING_FUNCTIONS[type(node)]
            return Func(name, (self.convert(node.this), self._right(node)))
        self._refuse(node)

    def _right(self, node: exp.Expr) -> Expr:
        return self.convert(node.expression)

    def _connective(self, node: exp.And | exp.Or) -> Expr:
        operands: list[exp.Expr] = []
        stack: list[exp.Expr] = [node]
        while stack:  # the chain's operands, left to right, without recursion
            current = stack.pop()
            if type(current) is type(node):
                stack += [current.expression, current.this]
            else:
                operands.append(current)
        converted = tuple(self.convert(operand) for operand in operands)
        return And(converted) if isinstance(node, exp.And) else Or(converted)

    def _not(self, node: exp.Not) -> Expr:
        inner = self.convert(node.this)
        if isinstance(inner, In | IsNull | IsBool) and not isinstance(node.this, exp.Paren):
            return _negated(inner)
        return Not(inner)

    def _literal(self, node: exp.Literal) -> Expr:
        if node.is_string:
            return Literal(node.this, "string")
        return _number(node.this)

    def _rawstring(self, node: exp.RawString) -> Expr:
        return Literal(node.this, "string")

    def _boolean(self, node: exp.Boolean) -> Expr:
        return Literal(bool(node.this), "boolean")

    def _null(self, _node: exp.Null) -> Expr:
        return Literal(None, VOID)

    def _neg(self, node: exp.Neg) -> Expr:
        operand = self.convert(node.this)
        value = operand.value if isinstance(operand, Literal) else None
        if isinstance(value, float):
            return Literal(-value, "double")
        if isinstance(value, Decimal) or (isinstance(value, int) and not isinstance(value, bool)):
            return _number(format(-value, "f") if isinstance(value, Decimal) else str(-value))
        return Negate(operand)

    def _column(self, node: exp.Column) -> Expr:
        qualifier = node.args.get("table")
        if (
            isinstance(qualifier, exp.Identifier)
            and qualifier.this in self.qualifiers
            and isinstance(node.this, exp.Identifier)
            and not any(node.args.get(part) for part in ("db", "catalog"))
        ):
            return Column(f"{qualifier.this}.{node.this.this}")
        if (
            self.qualifiers
            and isinstance(qualifier, exp.Identifier)
            and isinstance(node.this, exp.Identifier)
            and not any(node.args.get(part) for part in ("db", "catalog"))
        ):
            column = f"{qualifier.this}.{node.this.this}"
            raise _Unqualified(column, str(qualifier.this), self.qualifiers)
        if not isinstance(node.this, exp.Identifier) or any(
            node.args.get(part) for part in ("table", "db", "catalog")
        ):
            raise _Refused(
                f"{node.sql(dialect='spark')!r} is not a column name: qualified names and struct "
                "fields are not supported (write a name with a dot in backquotes: `a.b`)"
            )
        return Column(str(node.this.this))

    def _in(self, node: exp.In) -> Expr:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise _Refused("IN takes a list of values, not a subquery or a table")
        if not node.expressions:
            raise _Refused("IN () has no values")
        return In(self.convert(node.this), tuple(self.convert(e) for e in node.expressions))

    def _between(self, node: exp.Between) -> Expr:
        if node.args.get("symmetric"):
            raise _Refused("BETWEEN SYMMETRIC is not supported")
        operand = self.convert(node.this)
        low, high = self.convert(node.args["low"]), self.convert(node.args["high"])
        return And((Compare(">=", operand, low), Compare("<=", operand, high)))

    def _like(self, node: exp.Like | exp.ILike, escape: str = "\\") -> Expr:
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string) and not isinstance(
            pattern, exp.RawString
        ):
            raise _Refused(
                f"{node.sql(dialect='spark')!r}: the pattern of LIKE must be one string literal"
            )
        insensitive = isinstance(node, exp.ILike)
        text = str(pattern.this)
        _check_pattern(text.lower() if insensitive else text, escape)
        return Like(
            self.convert(node.this), text, escape, bool(node.args.get("negate")), insensitive
        )

    def _escape(self, node: exp.Escape) -> Expr:
        escape = node.expression
        if not isinstance(node.this, exp.Like | exp.ILike) or not (
            isinstance(escape, exp.Literal) and escape.is_string
        ):
            self._refuse(node)
        character = str(escape.this)
        if len(character) != 1 or character in "%_" or ord(character) > 0xFFFF:
            raise _Refused(
                f"ESCAPE {escape.sql(dialect='spark')}: the escape must be one character, not "
                "% or _"
            )
        return self._like(node.this, character)

    def _is(self, node: exp.Is) -> Expr:
        operand = self.convert(node.this)
        if isinstance(node.expression, exp.Null):
            return IsNull(operand)
        if isinstance(node.expression, exp.Boolean):
            return IsBool(operand, bool(node.expression.this))
        self._refuse(node)

    def _case(self, node: exp.Case) -> Expr:
        subject = self.convert(node.this) if node.this is not None else None
        branches = []
        for branch in node.args.get("ifs") or ():
            when, then = self.convert(branch.this), self.convert(branch.args["true"])
            branches.append((when if subject is None else Compare("=", subject, when), then))
        default = node.args.get("default")
        return Case(tuple(branches), None if default is None else self.convert(default))

    def _if(self, node: exp.If) -> Expr:
        if node.args.get("false") is None:
            raise _Refused("if(condition, then, else) takes three arguments")
        then, otherwise = self.convert(node.args["true"]), self.convert(node.args["false"])
        return Case(((self.convert(node.this), then),), otherwise)

    def _cast(self, node: exp.Cast | exp.TryCast) -> Expr:
        target = node.to
        if target.this == exp.DataType.Type.DECIMAL:
            params = [p.this for p in target.expressions]
            if not all(isinstance(p, exp.Literal) and p.is_int for p in params) or len(params) > 2:
                self._refuse(node)
            values = [int(p.this) for p in params]
            precision = values[0] if values else 10  # Spark's DECIMAL is DECIMAL(10,0)
            scale = values[1] if len(values) > 1 else 0
            if not 1 <= precision <= _MAX_PRECISION or scale > precision:
                raise _Refused(f"{target.sql(dialect='spark')} is not a valid DECIMAL type")
            to = _decimal(precision, scale)
            if isinstance(node.this, exp.Literal) and node.this.is_string:
                return _decimal_literal_from_text(str(node.this.this), to)  # 1.5BD
        elif target.this in _CAST_TARGETS and (
            not target.expressions or _CAST_TARGETS[target.this] == "string"
        ):
            to = _CAST_TARGETS[target.this]
        else:
            raise _Refused(
                f"CAST to {target.sql(dialect='spark')} is not supported (CAST to STRING, "
                "BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, DOUBLE, DECIMAL(p,s), TIMESTAMP or "
                "DATE)"
            )
        if to in ("timestamp", "date") and isinstance(node.this, exp.Literal | exp.RawString):
            if isinstance(node.this, exp.Literal) and not node.this.is_string:
                raise _Refused(
                    f"CAST of the number {node.this.this} to {to.upper()} is not supported "
                    "(timestamp_seconds(n) reads seconds since 1970)"
                )
            return _time_literal(str(node.this.this), to)  # TIMESTAMP '...', DATE '...'
        return Cast(self.convert(node.this), to)

    def _trim(self, node: exp.Trim) -> Expr:
        if node.expression is not None or node.args.get("collation"):
            raise _Refused("trim takes one argument (trimming other characters is not supported)")
        position = str(node.args.get("position") or "BOTH").upper()
        name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "trim")
        return Func(name, (self.convert(node.this),))

    def _substring(self, node: exp.Substring) -> Expr:
        start, length = node.args.get("start"), node.args.get("length")
        if start is None:
            raise _Refused("substring takes the text, a start and an optional length")
        bounds = [self.convert(start), self.convert(length) if length is not None else None]
        for bound in bounds:
            if bound is not None and not (
                isinstance(bound, Literal)
                and type(bound.value) is int
                and -(2**31) <= bound.value < 2**31
            ):
                raise _Refused("the start and length of substring must be integer literals")
        length_literal = bounds[1] or Literal(2**31 - 1, "bigint")
        assert bounds[0] is not None
        return Func("substring", (self.convert(node.this), bounds[0], length_literal))

    def _concat(self, node: exp.Concat) -> Expr:
        if not node.expressions:
            raise _Refused("concat() takes at least one argument")
        return Func("concat", tuple(self.convert(e) for e in node.expressions))

    def _dpipe(self, node: exp.DPipe) -> Expr:
        return Func("concat", (self.convert(node.this), self._right(node)))

    def _coalesce(self, node: exp.Coalesce) -> Expr:
        parts = [node.this, *node.expressions]
        return Func("coalesce", tuple(self.convert(e) for e in parts))

    def _anonymous(self, node: exp.Anonymous) -> Expr:
        name = str(node.name).lower()
        if name in ("isnull", "isnotnull") and len(node.expressions) == 1:
            return IsNull(self.convert(node.expressions[0]), negated=name == "isnotnull")
        if name == "timestamp_seconds" and len(node.expressions) == 1:
            return Func(name, (self.convert(node.expressions[0]),))
        raise _Refused(f"function {node.name!r} is not allowed")

    def _one(self, node: exp.Func) -> Expr:
        """A function of one argument (``round`` and ``floor`` without a scale)."""
        name = _ONE_ARGUMENT[type(node)]
        if any(value for key, value in node.args.items() if key != "this"):
            raise _Refused(f"{name} takes one argument")
        operand = node.this
        if (  # year(x) reads as year(TsOrDsToDate(x))
            name in TIME_PARTS[:6]
            and isinstance(operand, exp.TsOrDsToDate)
            and not operand.args.get("safe")
            and operand.this is not None
        ):
            operand = operand.this
        if operand is None:
            raise _Refused(f"{name} takes one argument")
        return Func(name, (self.convert(operand),))

    def _to_date(self, node: exp.TsOrDsToDate) -> Expr:
        if node.args.get("format") is not None or node.this is None:
            raise _Refused("to_date takes one argument (a format is not supported)")
        return Func("to_date", (self.convert(node.this),))

    def _date_trunc(self, node: exp.TimestampTrunc) -> Expr:
        unit = node.args.get("unit")
        text = str(unit.this).lower() if isinstance(unit, exp.Var) else ""
        text = _TRUNC_ALIASES.get(text, text)
        if text not in TRUNC_UNITS:
            raise _Refused(
                f"date_trunc takes a unit as a string literal, one of {', '.join(TRUNC_UNITS)}"
            )
        return Func("date_trunc", (Literal(text, "string"), self.convert(node.this)))

    def _date_add(self, node: exp.TsOrDsAdd) -> Expr:
        unit = node.args.get("unit")
        if not isinstance(unit, exp.Var) or str(unit.this).upper() != "DAY":
            self._refuse(node)
        days = node.expression
        if (  # date_sub(d, n) reads as date_add(d, n * -1)
            isinstance(days, exp.Mul)
            and isinstance(days.expression, exp.Neg)
            and isinstance(days.expression.this, exp.Literal)
            and days.expression.this.this == "1"
        ):
            return Func("date_sub", (self.convert(node.this), self.convert(days.this)))
        return Func("date_add", (self.convert(node.this), self.convert(days)))

    def _datediff(self, node: exp.DateDiff) -> Expr:
        parts = [node.this, node.expression]
        parts = [p.this if isinstance(p, exp.TsOrDsToDate) else p for p in parts]
        if any(p is None for p in parts) or node.args.get("unit") is not None:
            raise _Refused("datediff takes two arguments (the end date and the start date)")
        return Func("datediff", tuple(self.convert(p) for p in parts))

    def _round(self, node: exp.Round | exp.Floor | exp.Ceil) -> Expr:
        name = {exp.Round: "round", exp.Floor: "floor", exp.Ceil: "ceil"}[type(node)]
        scale = node.args.get("decimals")
        extra = [k for k, v in node.args.items() if v is not None and k not in ("this", "decimals")]
        if (name != "round" and scale is not None) or extra:
            raise _Refused(f"{name} takes one argument" + (" or two" if name == "round" else ""))
        if name != "round":
            return Func(name, (self.convert(node.this),))
        digits = Literal(0, "bigint") if scale is None else self.convert(scale)
        if not _int_literal(digits, -_MAX_PRECISION, _MAX_PRECISION):
            raise _Refused(
                f"the scale of round must be an integer literal from -{_MAX_PRECISION} to "
                f"{_MAX_PRECISION}"
            )
        return Func("round", (self.convert(node.this), digits))

    def _extremum(self, node: exp.Greatest | exp.Least) -> Expr:
        name = "greatest" if isinstance(node, exp.Greatest) else "least"
        parts = [node.this, *node.expressions]
        if len(parts) < 2:
            raise _Refused(f"{name} takes at least two arguments")
        return Func(name, tuple(self.convert(p) for p in parts))

    def _split_part(self, node: exp.SplitPart) -> Expr:
        parts = [node.this, node.args.get("delimiter"), node.args.get("part_index")]
        if any(p is None for p in parts):
            raise _Refused("split_part takes the text, the delimiter and a part number")
        text, delimiter, index = (self.convert(p) for p in parts)
        if not _int_literal(index, -(2**31), 2**31 - 1) or index == Literal(0, "bigint"):
            raise _Refused(
                "the part number of split_part must be an integer literal other than 0 (1 is "
                "the first part, -1 the last)"
            )
        return Func("split_part", (text, delimiter, index))

    def _instr(self, node: exp.StrPosition) -> Expr:
        extra = [k for k, v in node.args.items() if v is not None and k not in ("this", "substr")]
        if extra or node.args.get("substr") is None:
            raise _Refused("instr takes two arguments (the text and the text to find)")
        return Func("instr", (self.convert(node.this), self.convert(node.args["substr"])))

    def _replace(self, node: exp.Replace) -> Expr:
        replacement = node.args.get("replacement")
        with_nothing = Literal("", "string") if replacement is None else self.convert(replacement)
        parts = (self.convert(node.this), self.convert(node.expression), with_nothing)
        return Func("replace", parts)

    def _pad(self, node: exp.Pad) -> Expr:
        name = "lpad" if node.args.get("is_left") else "rpad"
        length = self.convert(node.expression)
        if not _int_literal(length, -(2**31), MAX_PAD):
            raise _Refused(f"the length of {name} must be an integer literal of at most {MAX_PAD}")
        fill = node.args.get("fill_pattern")
        pad = Literal(" ", "string") if fill is None else self.convert(fill)
        return Func(name, (self.convert(node.this), length, pad))

    def _refuse(self, node: exp.Expr) -> NoReturn:
        shown = node.sql(dialect="spark")
        shown = shown if len(shown) <= 60 else shown[:60] + "..."
        if isinstance(node, exp.Query | exp.Subquery | exp.Exists):
            raise _Refused(f"{shown!r}: subqueries and table reads are not allowed")
        if isinstance(node, exp.Window | exp.AggFunc):
            raise _Refused(f"{shown!r}: aggregate and window functions are not allowed")
        if isinstance(node, exp.Lambda):
            raise _Refused(f"{shown!r}: lambda functions are not allowed")
        if isinstance(node, exp.Func):
            raise _Refused(f"function {node.sql_name().lower()!r} is not allowed")
        raise _Refused(f"{shown!r} is not allowed")


_HANDLERS: dict[type[exp.Expr], Callable[[_Converter, Any], Expr]] = {
    exp.Not: _Converter._not,
    exp.Literal: _Converter._literal,
    exp.RawString: _Converter._rawstring,
    exp.Boolean: _Converter._boolean,
    exp.Null: _Converter._null,
    exp.Neg: _Converter._neg,
    exp.Column: _Converter._column,
    exp.In: _Converter._in,
    exp.Between: _Converter._between,
    exp.Like: _Converter._like,
    exp.ILike: _Converter._like,
    exp.Escape: _Converter._escape,
    exp.Is: _Converter._is,
    exp.Case: _Converter._case,
    exp.If: _Converter._if,
    exp.Cast: _Converter._cast,
    exp.TryCast: _Converter._cast,
    exp.Trim: _Converter._trim,
    exp.Substring: _Converter._substring,
    exp.Concat: _Converter._concat,
    exp.DPipe: _Converter._dpipe,
    exp.Coalesce: _Converter._coalesce,
    exp.Anonymous: _Converter._anonymous,
    exp.TsOrDsToDate: _Converter._to_date,
    exp.TimestampTrunc: _Converter._date_trunc,
    exp.TsOrDsAdd: _Converter._date_add,
    exp.DateDiff: _Converter._datediff,
    exp.Round: _Converter._round,
    exp.Floor: _Converter._round,
    exp.Ceil: _Converter._round,
    exp.Greatest: _Converter._extremum,
    exp.Least: _Converter._extremum,
    exp.SplitPart: _Converter._split_part,
    exp.StrPosition: _Converter._instr,
    exp.Replace: _Converter._replace,
    exp.Pad: _Converter._pad,
}
_ONE_ARGUMENT: dict[type[exp.Expr], str] = {
    exp.Year: "year",
    exp.Month: "month",
    exp.Day: "day",
    exp.DayOfMonth: "day",
    exp.DayOfWeek: "dayofweek",
    exp.DayOfYear: "dayofyear",
    exp.WeekOfYear: "weekofyear",
    exp.Hour: "hour",
    exp.Minute: "minute",
    exp.Second: "second",
    exp.UnixSeconds: "unix_seconds",
    exp.UnixMillis: "unix_millis",
    exp.UnixMicros: "unix_micros",
}
_HANDLERS.update(dict.fromkeys(_ONE_ARGUMENT, _Converter._one))


def _int_literal(node: Expr, low: int, high: int) -> bool:
    """Whether ``node`` is an integer literal from ``low`` to ``high``."""
    return isinstance(node, Literal) and type(node.value) is int and low <= node.value <= high


#: The time literals read: ``yyyy-mm-dd``, optionally `` hh:mm:ss`` (or ``T``) and up to six
#: fraction digits (Spark reads more forms; these are the ones read the same everywhere).
_TIME_TEXT = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[ T]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?)?"
)


def _time_literal(text: str, to: str, typing: bool = False) -> Literal:
    """A string read as a TIMESTAMP (``to`` ``timestamp``, in UTC) or a DATE (its date part),
    as Spark casts it.

    Raises:
        _Refused: the text is not a time of years 1 to 9999 in the form yyyy-mm-dd[ hh:mm:ss[.f]].
    """
    match = _TIME_TEXT.fullmatch(text)
    try:
        if match is None:
            raise ValueError(text)
        year, month, day, hour, minute, second = (int(p) for p in match.groups("0")[:6])
        fraction = int((match.group(7) or "").ljust(6, "0"))
        value = dt.datetime(year, month, day, hour, minute, second, fraction)
    except ValueError:
        kind = "date" if to == "date" else "timestamp"
        problem = f"reads the string {text!r} as a {kind}" if typing else f"the string {text!r}"
        raise _Refused(
            f"{problem}, which is not a {kind} (write yyyy-mm-dd or yyyy-mm-dd "
            "hh:mm:ss[.ffffff], years 1 to 9999)"
        ) from None
    return Literal(value.date(), "date") if to == "date" else Literal(value, "timestamp")


def _negated(node: In | IsNull | IsBool) -> Expr:
    if isinstance(node, In):
        return In(node.operand, node.items, not node.negated)
    if isinstance(node, IsNull):
        return IsNull(node.operand, not node.negated)
    return IsBool(node.operand, node.value, not node.negated)


def _number(text: str | float) -> Literal:
    """A numeric literal as Spark types it: an integer is BIGINT (a wider one DECIMAL(n,0)), a
    number with a point DECIMAL(p,s), one with an exponent DOUBLE."""
    if isinstance(text, float):
        return Literal(text, "double")
    if "e" in text.lower():
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise _Refused(f"the number {text} is out of range")
        return Literal(value, "double")
    if not _NUMBER.fullmatch(text.lstrip("-")):
        raise _Refused(f"{text!r} is not a number")
    number = Decimal(text)
    if "." not in text and -(2**63) <= number < 2**63:
        return Literal(int(number), "bigint")
    digits, exponent = number.as_tuple().digits, int(number.as_tuple().exponent)
    scale = max(0, -exponent)
    precision = max(len(digits), scale, 1)
    if precision > _MAX_PRECISION:
        raise _Refused(f"the number {text} has more than {_MAX_PRECISION} digits")
    return Literal(number, _decimal(precision, scale))


def _decimal_literal_from_text(text: str, to: str) -> Literal:
    """A string literal cast to DECIMAL (``1.5BD`` reads so): a decimal literal, if the text
    is a plain number."""
    if not _DECIMAL_TEXT.fullmatch(text.strip()):
        raise _Refused(f"CAST of {text!r} to DECIMAL: not a number")
    number = Decimal(text.strip())
    precision, scale = decimal_precision(to)
    rounded = _EXACT.quantize(number, Decimal(1).scaleb(-scale))
    if rounded.adjusted() >= precision - scale and rounded != 0:
        raise _Refused(f"the number {text} does not fit {to}")
    return Literal(rounded, to)


def _check_pattern(pattern: str, escape: str) -> None:
    """Refuse a LIKE pattern Spark refuses: its escape must precede ``_``, ``%`` or itself."""
    characters = iter(pattern)
    for character in characters:
        if character == escape:
            following = next(characters, None)
            if following is None:
                raise _Refused(f"the LIKE pattern {pattern!r} ends with its escape character")
            if following not in ("_", "%", escape):
                raise _Refused(
                    f"in the LIKE pattern {pattern!r} the escape character {escape!r} precedes "
                    f"{following!r}; it may only precede _, % or itself"
                )


# --------------------------------------------------------------------------------------------
# Types of a condition's nodes
# --------------------------------------------------------------------------------------------


def typed_condition(condition: Condition, types: Mapping[str, str], where: str) -> Condition:
    """The condition with explicit conversions for columns of ``types`` (Spark type names as
    ``DataType.simpleString()`` writes them: ``int``, ``decimal(12,2)``, ``timestamp``, ...).

    In the result every :class:`Compare`, :class:`In`, ``CASE`` and ``coalesce`` has operands
    of one type, every :class:`Arith`, :class:`Negate` and :class:`Func` its result type, and
    every operator gets operands it takes (a FLOAT column is read as DOUBLE).

    Raises:
        ConfigError: ``where`` followed by what is wrong, e.g. ``Table 'x': apply_as_deletes
            compares column 'id' of type int with the string 'a'; ...``.
    """
    try:
        return _Typer(types).condition(condition)
    except _Refused as refused:
        raise ConfigError(f"{where} {refused.problem}.") from None


def typed_expression(expr: Expr, types: Mapping[str, str], where: str) -> tuple[Expr, str]:
    """The expression with explicit conversions for columns of ``types`` (as
    :func:`typed_condition`), and the Spark type of its value (``DataType.simpleString()``:
    ``bigint``, ``double``, ``decimal(p,s)``, ``string``, ``boolean``, ``timestamp``, ``date``,
    ``int``; ``void`` for a bare NULL).

    Raises:
        ConfigError: ``where`` followed by what is wrong (an unknown column, operands of types
            the operator does not take).
    """
    try:
        return _Typer(types).expr(expr)
    except _Refused as refused:
        raise ConfigError(f"{where} {refused.problem}.") from None


class _Typer:
    """Types a tree; with ``types`` None every column has the unknown type (load time)."""

    def __init__(self, types: Mapping[str, str] | None) -> None:
        self.types = types

    def condition(self, condition: Expr) -> Expr:
        typed, type_name = self.expr(condition)
        return self.boolean(typed, type_name, condition)

    def expr(self, node: Expr) -> tuple[Expr, str]:
        match node:
            case Column(name):
                if self.types is None:
                    return node, UNKNOWN
                if name not in self.types:
                    columns = ", ".join(self.types) or "none"
                    raise _Refused(
                        f"reads column {name!r}, which is not a column of the table. "
                        f"Columns: {columns}"
                    )
                return node, self.types[name]
            case Literal(_, type_name):
                return node, type_name
            case Not(operand):
                return Not(self.boolean(*self.expr(operand), operand)), "boolean"
            case And(operands) | Or(operands):
                each = tuple(self.boolean(*self.expr(o), o) for o in operands)
                return (And(each) if isinstance(node, And) else Or(each)), "boolean"
            case Compare(op, left, right):
                (left_typed, right_typed), _ = self.same([left, right], "compares", True)
                return Compare(op, left_typed, right_typed), "boolean"
            case In(operand, items, negated):
                (operand_typed, *items_typed), _ = self.same([operand, *items], "compares", True)
                return In(operand_typed, tuple(items_typed), negated), "boolean"
            case Like(operand, pattern, escape, negated, insensitive):
                typed = self.string(*self.expr(operand), operand, "LIKE")
                return Like(typed, pattern, escape, negated, insensitive), "boolean"
            case IsNull(operand, negated):
                return IsNull(self.expr(operand)[0], negated), "boolean"
            case IsBool(operand, value, negated):
                return IsBool(self.boolean(*self.expr(operand), operand), value, negated), "boolean"
            case Case(branches, default):
                return self.case(branches, default)
            case Cast(operand, to):
                typed, type_name = self.expr(operand)
                self.check_cast(operand, type_name, to)
                return Cast(typed, to), to
            case Arith(op, left, right):
                return self.arith(op, left, right)
            case Negate(operand):
                typed, type_name = self.number(operand, "-")
                result = _promoted(type_name)
                return Negate(_convert(typed, type_name, result), result), result
            case Func(name, args):
                return self.function(name, args)
        raise AssertionError(node)

    # -- operands -------------------------------------------------------------------------

    def boolean(self, typed: Expr, type_name: str, original: Expr) -> Expr:
        kind = _family(type_name)
        if kind in ("boolean", "unknown"):
            return typed
        if kind == VOID:
            return Cast(typed, "boolean")
        raise _Refused(
            f"uses {_describe(original, type_name)} as a condition, which is not true or false "
            "(compare it, e.g. x = 'DELETE', or test it with IS NULL)"
        )

    def string(self, typed: Expr, type_name: str, original: Expr, where: str) -> Expr:
        kind = _family(type_name)
        if kind in ("string", "unknown"):
            return typed
        if kind == VOID:
            return Cast(typed, "string")
        raise _Refused(
            f"applies {where} to {_describe(original, type_name)}; {where} takes strings "
            "(CAST(x AS STRING) converts a number or boolean)"
        )

    def number(self, node: Expr, what: str) -> tuple[Expr, str]:
        typed, type_name = self.expr(node)
        kind = type_kind(type_name)
        if kind in ("integral", "decimal", "double", "unknown"):
            return typed, type_name
        if kind == VOID:
            return Cast(typed, "bigint"), "bigint"
        raise _Refused(f"applies {what} to {_describe(node, type_name)}; {what} takes numbers")

    def same(
        self, nodes: Sequence[Expr], verb: str, comparing: bool = False
    ) -> tuple[list[Expr], str]:
        """The nodes converted to their common type (comparisons, IN, CASE, coalesce,
        greatest, least); when ``comparing``, a string literal met by a time is read as one."""
        typed = [self.expr(node) for node in nodes]
        times = [t for _, t in typed if _family(t) == "time"]
        if comparing and times:
            target = "timestamp" if "timestamp" in times else "date"
            typed = [
                (_time_literal(str(e.value), target, typing=True), target)
                if isinstance(e, Literal) and e.type == "string"
                else (e, t)
                for e, t in typed
            ]
        for node, (_, type_name) in zip(nodes, typed, strict=True):
            if type_kind(type_name) == "other":
                raise _Refused(
                    f"{verb} {_describe(node, type_name)}, which takes only IS [NOT] NULL; "
                    f"{TYPE_RULES}"
                )
        known = [(n, t) for n, (_, t) in zip(nodes, typed, strict=True) if t not in (UNKNOWN, VOID)]
        kinds = {_family(t) for _, t in known}
        if len(kinds) > 1:
            first = known[0]
            other = next(item for item in known if _family(item[1]) != _family(first[1]))
            raise _Refused(
                f"{verb} {_describe(first[0], first[1])} with {_describe(*other)}; {TYPE_RULES}"
            )
        if any(type_kind(t) == "unknown" for _, t in typed):
            return [e for e, _ in typed], UNKNOWN_NUMBER if kinds == {"number"} else UNKNOWN
        if not known:
            return [e for e, _ in typed], VOID
        target = _common([t for _, t in known], [n for n, _ in known], verb)
        return [_convert(e, t, target) for e, t in typed], target

    # -- operators ------------------------------------------------------------------------

    def case(
        self, branches: tuple[tuple[Expr, Expr], ...], default: Expr | None
    ) -> tuple[Expr, str]:
        conditions = tuple(self.boolean(*self.expr(when), when) for when, _ in branches)
        values = [then for _, then in branches] + ([default] if default is not None else [])
        typed, type_name = self.same(values, "mixes in its results")
        new_default = typed.pop() if default is not None else None
        return Case(tuple(zip(conditions, typed, strict=True)), new_default), type_name

    def check_cast(self, operand: Expr, type_name: str, to: str) -> None:
        source = type_kind(type_name)
        target = type_kind(to)
        allowed = {
            "string": ("string", "boolean", "integral", "decimal", "timestamp", "date"),
            "boolean": ("boolean", "string", "integral", "decimal", "double"),
            "integral": ("integral", "decimal", "double", "boolean", "string"),
            "double": ("integral", "decimal", "double", "boolean"),
            "decimal": ("integral", "decimal", "boolean"),
            "timestamp": ("timestamp", "date"),
            "date": ("timestamp", "date"),
        }[target]
        if source not in (*allowed, "unknown", VOID):
            raise _Refused(
                f"casts {_describe(operand, type_name)} to {to.upper()}, which is not supported "
                "(a DOUBLE converts to numbers and BOOLEAN only, a string to STRING, BOOLEAN "
                "and the integer types only, a TIMESTAMP or DATE to TIMESTAMP, DATE and STRING; "
                "a string literal is read as a TIMESTAMP or DATE: TIMESTAMP '2026-01-01 "
                "10:00:00'; other types not at all)"
            )

    def arith(self, op: str, left: Expr, right: Expr) -> tuple[Expr, str]:
        (left_typed, left_type), (right_typed, right_type) = (
            self.number(left, op),
            self.number(right, op),
        )
        if "unknown" in (type_kind(left_type), type_kind(right_type)):
            return Arith(op, left_typed, right_typed), UNKNOWN_NUMBER
        kinds = {type_kind(left_type), type_kind(right_type)}
        if "double" in kinds or ("integral" in kinds and len(kinds) == 1 and op == "/"):
            result = "double"
            return Arith(
                op,
                _convert(left_typed, left_type, result),
                _convert(right_typed, right_type, result),
                result,
            ), result
        if "decimal" in kinds:
            left_decimal, right_decimal = (
                _as_decimal(left, left_type),
                _as_decimal(right, right_type),
            )
            if op == "%":
                p1, s1 = decimal_precision(left_decimal)
                if p1 - s1 + decimal_precision(right_decimal)[1] > _MAX_PRECISION:
                    raise _Refused(
                        f"computes {_describe(left, left_type)} % {_describe(right, right_type)}, "
                        f"whose quotient can exceed {_MAX_PRECISION} digits"
                    )
            result = decimal_result(op, left_decimal, right_decimal)
            return Arith(
                op,
                _convert(left_typed, left_type, left_decimal),
                _convert(right_typed, right_type, right_decimal),
                result,
            ), result
        result = "bigint"
        return Arith(
            op,
            _convert(left_typed, left_type, result),
            _convert(right_typed, right_type, result),
            result,
        ), result

    def function(self, name: str, args: tuple[Expr, ...]) -> tuple[Expr, str]:
        if name in ("coalesce", "greatest", "least"):
            typed, type_name = self.same(args, f"mixes in {name}")
            return Func(name, tuple(typed), type_name), type_name
        if name == "abs":
            typed_arg, type_name = self.number(args[0], "abs")
            result = _promoted(type_name)
            return Func(name, (_convert(typed_arg, type_name, result),), result), result
        if name in ("floor", "ceil", "round"):
            return self.rounding(name, args)
        if name in _TIME_FUNCTIONS:
            takes, result = _TIME_FUNCTIONS[name]
            typed_args = [
                self.time(arg, kind, name) if kind in ("timestamp", "date") else arg
                for arg, kind in zip(args, takes, strict=True)
            ]
            typed_args = [
                self.integral(arg, name) if kind == "bigint" else arg
                for arg, kind in zip(typed_args, takes, strict=True)
            ]
            if name == "to_date":  # the value as a DATE: a cast
                return typed_args[0], result
            return Func(name, tuple(typed_args), result), result
        literal_positions = _LITERAL_ARGUMENTS.get(name, ())
        converted = [
            arg if index in literal_positions else self.string(*self.expr(arg), arg, f"{name}()")
            for index, arg in enumerate(args)
        ]
        result = _FUNCTION_RESULTS.get(name, "string")
        return Func(name, tuple(converted), result), result

    def time(self, node: Expr, target: str, what: str) -> Expr:
        """``node`` as a ``target`` (TIMESTAMP or DATE): a time converted, a string literal
        read as a time."""
        typed, type_name = self.expr(node)
        kind = type_kind(type_name)
        if kind in ("timestamp", "date"):
            return _convert(typed, type_name, target)
        if kind == "unknown":
            return typed
        if kind == VOID:
            return Cast(typed, target)
        if isinstance(typed, Literal) and typed.type == "string":
            value = _time_literal(str(typed.value), "timestamp", typing=True)
            return _convert(value, "timestamp", target)
        raise _Refused(
            f"applies {what} to {_describe(node, type_name)}; {what} takes timestamps and dates "
            "(or a string literal of one)"
        )

    def integral(self, node: Expr, what: str) -> Expr:
        """``node`` as a BIGINT; it must be of an integer type."""
        typed, type_name = self.number(node, what)
        kind = type_kind(type_name)
        if kind not in ("integral", "unknown"):
            raise _Refused(
                f"applies {what} to {_describe(node, type_name)}; {what} takes integers here"
            )
        return _convert(typed, type_name, "bigint")

    def rounding(self, name: str, args: tuple[Expr, ...]) -> tuple[Expr, str]:
        """``floor`` / ``ceil`` (to BIGINT; a decimal to its integer digits plus one, unless it
        has no fraction) and
        ``round(x, d)`` HALF_UP (an integer stays a BIGINT and takes no negative ``d``, a
        FLOAT is read as DOUBLE, a decimal gets Spark's result type)."""
        typed_arg, type_name = self.number(args[0], name)
        kind = type_kind(type_name)
        if kind == "unknown":
            return Func(name, (typed_arg, *args[1:]), UNKNOWN_NUMBER), UNKNOWN_NUMBER
        digits = args[1].value if name == "round" and isinstance(args[1], Literal) else 0
        assert isinstance(digits, int)
        if kind == "decimal":
            precision, scale = decimal_precision(type_name)
            if digits < 0 and precision - scale + 1 > _MAX_PRECISION:
                raise _Refused(
                    f"rounds {_describe(args[0], type_name)} to {digits}, which can exceed "
                    f"{_MAX_PRECISION} digits (CAST it to a narrower DECIMAL first)"
                )
            kept = 0 if name != "round" else max(0, min(scale, digits))
            result = _decimal(min(precision - scale + 1 + kept, _MAX_PRECISION), kept)
            if name != "round" and scale == 0:  # nothing to round: the type stays
                result = type_name
            return Func(name, (typed_arg, *args[1:]), result), result
        if kind == "integral" and digits < 0:
            raise _Refused(
                f"rounds {_describe(args[0], type_name)} to {digits}, which can overflow (CAST "
                "it to DECIMAL(p,0) first)"
            )
        source = "double" if kind == "double" else "bigint"
        result = "double" if name == "round" and kind == "double" else "bigint"
        return Func(name, (_convert(typed_arg, type_name, source), *args[1:]), result), result


_FUNCTION_RESULTS = {
    "length": "int",
    "startswith": "boolean",
    "endswith": "boolean",
    "contains": "boolean",
    "instr": "int",
}
#: The argument positions of a string function that hold an integer literal.
_LITERAL_ARGUMENTS = {"substring": (1, 2), "split_part": (2,), "lpad": (1,), "rpad": (1,)}
#: The argument types (``bigint``: any integer) and the result type of the time functions.
_TIME_FUNCTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    **{part: (("date",), "int") for part in TIME_PARTS[:6]},
    **{part: (("timestamp",), "int") for part in TIME_PARTS[6:]},
    "to_date": (("date",), "date"),
    "date_trunc": (("string", "timestamp"), "timestamp"),
    "unix_seconds": (("timestamp",), "bigint"),
    "unix_millis": (("timestamp",), "bigint"),
    "unix_micros": (("timestamp",), "bigint"),
    "timestamp_seconds": (("bigint",), "timestamp"),
    "date_add": (("date", "bigint"), "date"),
    "date_sub": (("date", "bigint"), "date"),
    "datediff": (("date", "date"), "int"),
}


def _family(type_name: str) -> str:
    """``number`` for any numeric type (also before the column types are known), else the
    kind."""
    if type_name == UNKNOWN_NUMBER:
        return "number"
    kind = type_kind(type_name)
    if kind in ("timestamp", "date"):
        return "time"
    return "number" if kind in ("integral", "decimal", "double") else kind


def _promoted(type_name: str) -> str:
    """The type unary arithmetic computes in: integers as BIGINT, FLOAT as DOUBLE."""
    kind = type_kind(type_name)
    promoted = {"integral": "bigint", "double": "double", "unknown": UNKNOWN_NUMBER}
    return promoted.get(kind, type_name)


def _as_decimal(node: Expr, type_name: str) -> str:
    """The decimal type an integer operand joins decimal arithmetic or comparison as: a literal
    with its own digits, a column with its type's (``int``: ``decimal(10,0)``)."""
    if type_kind(type_name) == "decimal":
        return type_name
    if isinstance(node, Literal) and isinstance(node.value, int):
        return _decimal(max(len(str(abs(node.value))), 1), 0)
    return _decimal(_INTEGER_DIGITS.get(type_name, 20), 0)


def _common(types: list[str], nodes: list[Expr], verb: str) -> str:
    """The common type of one family: DOUBLE if any is DOUBLE or FLOAT, else the narrowest
    decimal holding every decimal and integer exactly, else BIGINT (or the one type)."""
    if len(set(types)) == 1 and type_kind(types[0]) != "double":
        return types[0]
    kinds = {type_kind(t) for t in types}
    if kinds <= {"boolean", "string"}:
        return types[0]
    if kinds <= {"timestamp", "date"}:
        return "timestamp" if "timestamp" in kinds else "date"
    if "double" in kinds:
        return "double"
    if "decimal" in kinds:
        pairs = [decimal_precision(_as_decimal(n, t)) for n, t in zip(nodes, types, strict=True)]
        scale = max(s for _, s in pairs)
        integer_digits = max(p - s for p, s in pairs)
        if integer_digits + scale > _MAX_PRECISION:
            shown = " with ".join(_describe(n, t) for n, t in zip(nodes, types, strict=True))
            raise _Refused(
                f"{verb} {shown}, which needs a decimal of {integer_digits + scale} digits; "
                f"at most {_MAX_PRECISION} (CAST one side to a narrower DECIMAL or to DOUBLE)"
            )
        return _decimal(integer_digits + scale, scale)
    return "bigint"


def _convert(node: Expr, type_name: str, target: str) -> Expr:
    """``node`` (of ``type_name``) as ``target``: itself if the types are equal or unknown, an
    integer literal as a decimal literal, anything else through :class:`Cast`."""
    if type_name == target or "unknown" in (type_kind(type_name), type_kind(target)):
        return node
    if (
        isinstance(node, Literal)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
    ):
        if type_kind(target) == "decimal":
            return (
                Literal(Decimal(node.value), target)
                if _fits(node.value, target)
                else Cast(node, target)
            )
        if target == "bigint":
            return Literal(node.value, target)
    return Cast(node, target)


def _fits(value: int, decimal_type: str) -> bool:
    precision, scale = decimal_precision(decimal_type)
    return abs(value) < int(10 ** (precision - scale))


def _describe(node: Expr, type_name: str) -> str:
    """A node for a message: ``column 'id' of type int``, ``the string 'x'``, ``lower(a)``."""
    if isinstance(node, Column):
        known = type_kind(type_name) != "unknown"
        return f"column {node.name!r}" + (f" of type {type_name}" if known else "")
    if isinstance(node, Literal):
        word = {"string": "string ", "boolean": "", VOID: ""}.get(node.type, "number ")
        word = "" if node.type in ("timestamp", "date") else word
        return f"the {word}{to_sql(node)}" if word else to_sql(node)
    shown = to_sql(node)
    shown = shown if len(shown) <= 60 else shown[:60] + "..."
    return shown + (f" (of type {type_name})" if type_kind(type_name) != "unknown" else "")


# --------------------------------------------------------------------------------------------
# Back to SQL text (messages only)
# --------------------------------------------------------------------------------------------


def to_sql(node: Expr) -> str:
    """Spark SQL text of a node, for messages (never run)."""
    return "".join(_sql(node))


def _sql(node: Expr) -> Iterator[str]:
    def inner(child: Expr) -> str:
        text = to_sql(child)
        return text if isinstance(child, Column | Literal | Func | Cast) else f"({text})"

    match node:
        case Column(name):
            yield name if _PLAIN_NAME.fullmatch(name) else "`" + name.replace("`", "``") + "`"
        case Literal(value, _):
            if value is None:
                yield "NULL"
            elif isinstance(value, bool):
                yield "TRUE" if value else "FALSE"
            elif isinstance(value, str):
                yield "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
            elif isinstance(value, dt.datetime):
                yield f"TIMESTAMP '{format_time(value)}'"
            elif isinstance(value, dt.date):
                yield f"DATE '{format_time(value)}'"
            else:
                yield str(value)
        case Not(operand):
            yield f"NOT {inner(operand)}"
        case And(operands) | Or(operands):
            yield f" {type(node).__name__.upper()} ".join(inner(o) for o in operands)
        case Compare(op, left, right) | Arith(op, left, right):
            yield f"{inner(left)} {op} {inner(right)}"
        case In(operand, items, negated):
            listed = ", ".join(to_sql(i) for i in items)
            yield f"{inner(operand)} {'NOT IN' if negated else 'IN'} ({listed})"
        case Like(operand, pattern, escape, negated, insensitive):
            word = ("NOT " if negated else "") + ("ILIKE" if insensitive else "LIKE")
            yield f"{inner(operand)} {word} {to_sql(Literal(pattern, 'string'))}"
            if escape != "\\":
                yield f" ESCAPE {to_sql(Literal(escape, 'string'))}"
        case IsNull(operand, negated):
            yield f"{inner(operand)} IS {'NOT ' if negated else ''}NULL"
        case IsBool(operand, value, negated):
            yield f"{inner(operand)} IS {'NOT ' if negated else ''}{'TRUE' if value else 'FALSE'}"
        case Case(branches, default):
            yield "CASE"
            for when, then in branches:
                yield f" WHEN {to_sql(when)} THEN {to_sql(then)}"
            if default is not None:
                yield f" ELSE {to_sql(default)}"
            yield " END"
        case Cast(operand, to):
            yield f"CAST({to_sql(operand)} AS {to.upper()})"
        case Negate(operand):
            yield f"-{inner(operand)}"
        case Func(name, args):
            yield f"{name}({', '.join(to_sql(a) for a in args)})"


def format_time(value: dt.date) -> str:
    """A TIMESTAMP (``datetime``) or DATE as Spark's CAST to STRING writes it: ``yyyy-mm-dd``,
    then `` hh:mm:ss`` and the microseconds without their trailing zeros."""
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    if not isinstance(value, dt.datetime):
        return text
    text += f" {value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    return text + (f".{value.microsecond:06d}".rstrip("0") if value.microsecond else "")
