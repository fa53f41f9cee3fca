"""Row conditions of the table settings ``apply_as_deletes`` / ``apply_as_truncates``.

A condition is a small subset of Spark SQL, parsed here into a tree of frozen dataclasses so
that the Spark job (``silver.settings``) and the plain-Python model (``silver.reference``) each
evaluate the same tree on their own, and no SQL text from the config is handed to Spark. The
accepted grammar (keywords in any case)::

    condition  := term (OR term)*
    term       := factor (AND factor)*
    factor     := NOT factor | '(' condition ')' | comparison
    comparison := column ('=' | '<>' | '!=') literal | column IS [NOT] NULL
    literal    := 'text' (a quote doubled inside) | integer | TRUE | FALSE

Comparisons follow SQL's three-valued logic: a null column makes ``=`` and ``<>`` unknown, and
only a condition that is true makes an event a delete or a truncate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

from core.errors import ConfigError

Literal = str | int | bool

SUPPORTED = (
    "write column = literal, column <> literal, column IS NULL or column IS NOT NULL "
    "(literal: 'text', an integer, TRUE or FALSE), combined with AND, OR, NOT and parentheses"
)

_KEYWORDS = ("AND", "OR", "NOT", "IS", "NULL", "TRUE", "FALSE")
_INT64 = 2**63
_TOKEN = re.compile(
    r"\s*(?:(?P<text>'(?:[^']|'')*')|(?P<int>-?[0-9]+)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<symbol><>|!=|=|\(|\)))"
)


@dataclass(frozen=True)
class Compare:
    """``column = value``, or ``column <> value`` when ``negated``."""

    column: str
    value: Literal
    negated: bool = False


@dataclass(frozen=True)
class IsNull:
    """``column IS NULL``, or ``column IS NOT NULL`` when ``negated``."""

    column: str
    negated: bool = False


@dataclass(frozen=True)
class Not:
    operand: Condition


@dataclass(frozen=True)
class And:
    left: Condition
    right: Condition


@dataclass(frozen=True)
class Or:
    left: Condition
    right: Condition


Condition = Compare | IsNull | Not | And | Or


def parse_condition(text: str, where: str) -> Condition:
    """Parse ``text``; ``where`` names the setting in error messages (e.g. ``table 'x'
    apply_as_deletes``).

    Raises:
        ConfigError: the text is not in the grammar above; the message says what is supported.
    """
    return _Parser(text, where).parse()


def condition_columns(condition: Condition) -> tuple[str, ...]:
    """The columns a condition reads, in order of first appearance."""
    if isinstance(condition, Compare | IsNull):
        return (condition.column,)
    if isinstance(condition, Not):
        return condition_columns(condition.operand)
    return tuple(
        dict.fromkeys((*condition_columns(condition.left), *condition_columns(condition.right)))
    )


#: Conditions are evaluated recursively (here, in Spark and in the reference fold): a bound on
#: their operators keeps every evaluation far from Python's recursion limit.
MAX_OPERATORS = 200
_OPERATOR_TOKENS = frozenset({"AND", "OR", "NOT", "("})


class _Parser:
    """Recursive descent over the tokens of one condition."""

    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.where = where
        self.tokens = self._tokenize(text)
        self.position = 0

    def parse(self) -> Condition:
        if not self.tokens:
            self._fail("it is empty")
        operators = sum(
            1 for kind, text in self.tokens if kind != "text" and text.upper() in _OPERATOR_TOKENS
        )
        if operators > MAX_OPERATORS:
            self._fail(f"it has {operators} operators and parentheses; at most {MAX_OPERATORS}")
        condition = self._condition()
        if self.position < len(self.tokens):
            self._fail(f"unexpected {self.tokens[self.position][1]!r}")
        return condition

    def _condition(self) -> Condition:
        condition = self._term()
        while self._accept_keyword("OR"):
            condition = Or(condition, self._term())
        return condition

    def _term(self) -> Condition:
        condition = self._factor()
        while self._accept_keyword("AND"):
            condition = And(condition, self._factor())
        return condition

    def _factor(self) -> Condition:
        if self._accept_keyword("NOT"):
            return Not(self._factor())
        if self._accept("symbol", "("):
            condition = self._condition()
            if not self._accept("symbol", ")"):
                self._fail("a '(' is not closed")
            return condition
        return self._comparison()

    def _comparison(self) -> Condition:
        kind, column = self._next("a column name")
        if kind != "word" or column.upper() in _KEYWORDS:
            self._fail(f"expected a column name, found {column!r}")
        if self._accept_keyword("IS"):
            negated = self._accept_keyword("NOT")
            if not self._accept_keyword("NULL"):
                self._fail(f"expected NULL after {column} IS")
            return IsNull(column, negated)
        kind, operator = self._next(f"'=' or '<>' after {column}")
        if kind != "symbol" or operator not in ("=", "<>", "!="):
            self._fail(f"expected '=' or '<>' after {column}, found {operator!r}")
        return Compare(column, self._literal(), negated=operator != "=")

    def _literal(self) -> Literal:
        kind, token = self._next("a literal")
        if kind == "text":
            return token[1:-1].replace("''", "'")
        if kind == "int" and -_INT64 <= int(token) < _INT64:
            return int(token)
        if kind == "word" and token.upper() in ("TRUE", "FALSE"):
            return token.upper() == "TRUE"
        self._fail(f"expected a literal, found {token!r}")

    def _tokenize(self, text: str) -> list[tuple[str, str]]:
        tokens: list[tuple[str, str]] = []
        position = 0
        while text[position:].strip():
            match = _TOKEN.match(text, position)
            if match is None or match.lastgroup is None:
                rest = text[position:].strip()
                self._fail(f"cannot read {rest[:20]!r}")
            tokens.append((match.lastgroup, match.group(match.lastgroup)))
            position = match.end()
        return tokens

    def _next(self, expected: str) -> tuple[str, str]:
        if self.position >= len(self.tokens):
            self._fail(f"it ends where {expected} is expected")
        token = self.tokens[self.position]
        self.position += 1
        return token

    def _accept(self, kind: str, value: str) -> bool:
        if self.position < len(self.tokens) and self.tokens[self.position] == (kind, value):
            self.position += 1
            return True
        return False

    def _accept_keyword(self, keyword: str) -> bool:
        if self.position < len(self.tokens):
            kind, token = self.tokens[self.position]
            if kind == "word" and token.upper() == keyword:
                self.position += 1
                return True
        return False

    def _fail(self, problem: str) -> NoReturn:
        shown = self.text if len(self.text) <= 200 else self.text[:200] + "..."
        raise ConfigError(
            f"Unsupported condition {shown!r} for {self.where}: {problem}; {SUPPORTED}."
        )
