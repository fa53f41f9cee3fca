"""Expectations declared beside a table, as Databricks pipelines declare them
(``@dlt.expect``, ``expect_or_drop``, ``expect_or_fail``, ``expect_all``...): a name and a
condition that a good row satisfies, with an action (``warn``, ``drop`` to quarantine, ``fail``).

In a pipeline TOML they are tables of name = condition on a ``[[tables]]`` or ``[[gold]]``
entry::

    [tables.expect]                 # warn
    total_not_negative = "total >= 0"
    [tables.expect_or_drop]         # drop the row to quarantine
    has_customer = "customer_id IS NOT NULL"
    [tables.expect_or_fail]         # fail the micro-batch, commit nothing
    known_status = "status IN ('new', 'paid', 'shipped')"

Each compiles to one row-level Great Expectations expectation of the table's suite
(``<layer>.<table>``, beside the expectations of its JSON file if there is one), so the
streams, ``lakehouse validate`` and the Data Docs see it as they see a suite's own. A condition
is parsed by the checked grammar (:mod:`lakehouse_core.conditions`), never passed on as SQL
text, and must be one column compared with constants (the forms GX checks row by row):

========================================  =================================================
condition                                 GX expectation
========================================  =================================================
``c IS NOT NULL``                         ``expect_column_values_to_not_be_null``
``c >= 0``, ``c < 10``, ``c BETWEEN a AND b``,  ``expect_column_values_to_be_between``
``c > a AND c <= b``
``c = v``, ``c IN (v, ...)``              ``expect_column_values_to_be_in_set``
``c <> v``, ``c NOT IN (v, ...)``         ``expect_column_values_to_not_be_in_set``
``c LIKE 'A%'``                           ``expect_column_values_to_match_regex``
``length(c) <= 40`` (and the above bounds)  ``expect_column_value_lengths_to_be_between``
========================================  =================================================

``NOT`` of a comparison, ``IN`` or ``IS NULL`` is read as its opposite. As in GX, a row whose
column is null satisfies every expectation but ``IS NOT NULL`` (declare that one too to
require a value). Anything else is refused at declaration time in one line that names the
table, the expectation and the forms above.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from lakehouse_core.conditions import And as AndNode
from lakehouse_core.conditions import (
    Column,
    Compare,
    Condition,
    Expr,
    Func,
    In,
    IsNull,
    Like,
    Not,
    parse_condition,
)
from lakehouse_core.conditions import Literal as LiteralNode
from lakehouse_core.errors import ConfigError
from lakehouse_core.identifiers import is_plain_identifier

QualityAction = Literal["warn", "drop", "fail"]
QUALITY_ACTIONS: tuple[QualityAction, ...] = ("warn", "drop", "fail")

#: The TOML table (and Python keyword) of each action, as Databricks names them.
ACTION_SETTINGS: dict[QualityAction, str] = {
    "warn": "expect",
    "drop": "expect_or_drop",
    "fail": "expect_or_fail",
}

#: What a refused condition is told to write instead.
FORMS = (
    "write one column compared with constants: 'c IS NOT NULL', 'c >= 0', "
    "'c BETWEEN 1 AND 9', 'c > 0 AND c <= 9', 'c IN (1, 2)', 'c NOT IN (1, 2)', "
    "\"c LIKE 'A%'\" or 'length(c) <= 40', one condition per expectation"
)

_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "<>": "<>"}
_OPPOSITE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "=": "<>", "<>": "="}


def require_action(action: object, where: str) -> QualityAction:
    """``action`` if it is one of :data:`QUALITY_ACTIONS`.

    Raises:
        ConfigError: any other value, naming ``where`` it was found.
    """
    for known in QUALITY_ACTIONS:
        if action == known:
            return known
    raise ConfigError(
        f"Unknown action {action!r} for {where}. Must be one of {', '.join(QUALITY_ACTIONS)}."
    )


@dataclass(frozen=True)
class Expectation:
    """One declared expectation: rows of its table should satisfy ``condition``; ``action``
    says what a row that does not gets (``warn``: counted and logged; ``drop``: sent to
    quarantine; ``fail``: the micro-batch fails and commits nothing). Checked against its
    table by :func:`check_expectations` (the table's spec does so on construction)."""

    name: str
    condition: str
    action: QualityAction = "warn"

    def __post_init__(self) -> None:
        require_action(self.action, f"expectation {self.name!r}")

    @property
    def setting(self) -> str:
        """``expect``, ``expect_or_drop`` or ``expect_or_fail``."""
        return ACTION_SETTINGS[self.action]


@dataclass(frozen=True)
class DeclaredSuite:
    """The expectations declared beside table ``<layer>.<table>``."""

    layer: str
    table: str
    expectations: tuple[Expectation, ...]

    @property
    def name(self) -> str:
        """``<layer>.<table>``, as its GX suite is named."""
        return f"{self.layer}.{self.table}"

    def configurations(self) -> list[dict[str, Any]]:
        """The expectations as entries of a GX suite's JSON ``expectations`` list."""
        owner = f"{self.layer} table {self.table!r}"
        compiled = check_expectations(self.expectations, owner, self.layer)
        return [gx.configuration(e) for gx, e in zip(compiled, self.expectations, strict=True)]


@dataclass(frozen=True)
class GxExpectation:
    """The row-level GX expectation a declared one compiles to: its type and kwargs."""

    type: str
    column: str
    kwargs: tuple[tuple[str, Any], ...]

    def configuration(self, expectation: Expectation) -> dict[str, Any]:
        """The expectation as an entry of a GX suite's JSON ``expectations`` list, its name,
        action and condition in ``meta`` (as a suite file names its own)."""
        return {
            "type": self.type,
            "kwargs": {"column": self.column, **dict(self.kwargs)},
            "meta": {
                "name": expectation.name,
                "action": expectation.action,
                "condition": expectation.condition,
            },
        }


def expectations_from(settings: Mapping[str, Any], owner: str) -> tuple[Expectation, ...]:
    """The expectations of a table entry's ``expect``, ``expect_or_drop`` and
    ``expect_or_fail`` tables (name -> condition), in that order.

    Raises:
        ConfigError: a table that is not of name = condition text (``owner`` names the table:
            ``silver table 'orders'``).
    """
    found: list[Expectation] = []
    for action, setting in ACTION_SETTINGS.items():
        given = settings.get(setting)
        if given is None:
            continue
        if not isinstance(given, Mapping):
            raise ConfigError(
                f"{_capital(owner)}: {setting} must be a table of name = condition, e.g. "
                f'{setting} = {{ total_not_negative = "total >= 0" }}; not {given!r}.'
            )
        for name, condition in given.items():
            if not isinstance(condition, str):
                raise ConfigError(
                    f"{_capital(owner)}: {setting} {name!r} must be a condition as text, e.g. "
                    f'"total >= 0"; not {condition!r}.'
                )
            found.append(Expectation(str(name), condition, action))
    return tuple(found)


def expectations_to_mapping(expectations: Iterable[Expectation]) -> dict[str, dict[str, str]]:
    """The ``expect``, ``expect_or_drop`` and ``expect_or_fail`` tables of ``expectations``
    (the inverse of :func:`expectations_from`); tables without an entry are left out."""
    tables: dict[str, dict[str, str]] = {}
    for expectation in expectations:
        tables.setdefault(expectation.setting, {})[expectation.name] = expectation.condition
    return {s: tables[s] for s in ACTION_SETTINGS.values() if s in tables}


def check_expectations(
    expectations: Sequence[Expectation], owner: str, layer: str
) -> tuple[GxExpectation, ...]:
    """The GX form of each of ``expectations`` of one table (``owner``: ``silver table
    'orders'``, of ``layer``).

    Raises:
        ConfigError: one line naming the table, the expectation and the fix: a name that is
            not a plain name or is taken twice, a condition the grammar refuses or that has no
            GX form, or a ``drop`` on a gold table.
    """
    seen: set[str] = set()
    compiled = []
    for expectation in expectations:
        if not isinstance(expectation, Expectation):
            raise ConfigError(
                f"{_capital(owner)}: expectations= takes expect(...), expect_or_drop(...), "
                f"expect_or_fail(...) or expect_all(...) declarations, not {expectation!r}."
            )
        name = expectation.name
        if not isinstance(name, str) or not is_plain_identifier(name):
            raise ConfigError(
                f"{_capital(owner)}: expectation name {name!r} is not a plain name; use "
                "letters, digits and underscores, not starting with a digit, e.g. "
                "'total_not_negative'."
            )
        if name in seen:
            raise ConfigError(
                f"{_capital(owner)}: two expectations are named {name!r}; give each its own name."
            )
        seen.add(name)
        if layer == "gold" and expectation.action == "drop":
            raise ConfigError(
                f"{_capital(owner)}: expectation {name!r} is expect_or_drop, which a gold table "
                "cannot take (its rows are derived from silver, and withholding one would make "
                "gold differ from its declaration): use expect or expect_or_fail, or drop the "
                "rows at silver with an expect_or_drop on the gold table's source."
            )
        compiled.append(compile_expectation(expectation, owner))
    return tuple(compiled)


def compile_expectation(expectation: Expectation, owner: str) -> GxExpectation:
    """The row-level GX expectation of ``expectation``'s condition (see the module's table).

    Raises:
        ConfigError: the condition is outside the grammar, or has no GX form (one line naming
            ``owner``, the expectation and the forms that have one).
    """
    where = f"expectation {expectation.name!r} of {owner}"
    if not isinstance(expectation.condition, str):
        raise ConfigError(
            f"{_capital(where)}: the condition must be text such as 'total >= 0', not "
            f"{expectation.condition!r}."
        )
    tree = parse_condition(expectation.condition, where)
    compiled = _gx_form(tree)
    if compiled is None:
        raise ConfigError(
            f"{_capital(where)}: condition {expectation.condition!r} has no Great Expectations "
            f"form; {FORMS}."
        )
    if not is_plain_identifier(compiled.column):
        raise ConfigError(
            f"{_capital(where)}: column {compiled.column!r} is not a plain name (letters, "
            "digits and underscores), which a Great Expectations suite needs."
        )
    return compiled


def _gx_form(tree: Condition) -> GxExpectation | None:
    """The GX expectation ``tree`` is one of, or None."""
    match tree:
        case Not(operand):
            opposite = _opposite(operand)
            return None if opposite is None else _gx_form(opposite)
        case IsNull(Column(column), negated=True):
            return GxExpectation("expect_column_values_to_not_be_null", column, ())
        case In(Column(column), items, negated):
            values = [_value(item) for item in items]
            if any(v is _NO_VALUE or v is None for v in values):
                return None
            kind = "not_be_in_set" if negated else "be_in_set"
            return GxExpectation(
                f"expect_column_values_to_{kind}", column, (("value_set", values),)
            )
        case Like(Column(column), pattern, escape, negated=False, case_insensitive=False):
            regex = like_regex(pattern, escape)
            return GxExpectation("expect_column_values_to_match_regex", column, (("regex", regex),))
        case Compare() | AndNode():
            return _bounds(tree)
    return None


def _opposite(node: Expr) -> Expr | None:
    match node:
        case Compare(op, left, right) if op in _OPPOSITE:
            return Compare(_OPPOSITE[op], left, right)
        case In(operand, items, negated):
            return In(operand, items, not negated)
        case IsNull(operand, negated):
            return IsNull(operand, not negated)
    return None


class _NoValue:
    pass


_NO_VALUE = _NoValue()


def _value(node: Expr) -> Any:
    """The JSON value of a literal (a decimal as an integer when whole, else a float; a time
    as its ISO text), or :data:`_NO_VALUE` for any other node."""
    if not isinstance(node, LiteralNode):
        return _NO_VALUE
    value = node.value
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def _bounds(tree: Condition) -> GxExpectation | None:
    """A comparison of one column (or its ``length``) with constants, or two joined by AND
    (a lower and an upper bound), as a between expectation; ``=``/``<>`` as a set."""
    parts = tree.operands if isinstance(tree, AndNode) else (tree,)
    if not 1 <= len(parts) <= 2:
        return None
    subject: Expr | None = None
    kwargs: dict[str, Any] = {}
    for part in parts:
        if not isinstance(part, Compare):
            return None
        op, left, right = part.op, part.left, part.right
        if isinstance(left, LiteralNode) and op in _FLIPPED:
            op, left, right = _FLIPPED[op], right, left
        value = _value(right)
        if value is _NO_VALUE or value is None or op not in _FLIPPED:
            return None
        if subject is not None and left != subject:
            return None
        subject = left
        if op in ("=", "<>"):
            if len(parts) != 1 or not isinstance(left, Column):
                return None
            kind = "be_in_set" if op == "=" else "not_be_in_set"
            return GxExpectation(
                f"expect_column_values_to_{kind}", left.name, (("value_set", [value]),)
            )
        bound = "min_value" if op in (">", ">=") else "max_value"
        if bound in kwargs:
            return None
        kwargs[bound] = value
        if op in (">", "<"):
            kwargs["strict_min" if bound == "min_value" else "strict_max"] = True
    match subject:
        case Column(column):
            kind = "expect_column_values_to_be_between"
        case Func("length", (Column(column),)):
            kind = "expect_column_value_lengths_to_be_between"
        case _:
            return None
    return GxExpectation(kind, column, tuple(kwargs.items()))


def like_regex(pattern: str, escape: str = "\\") -> str:
    """The Java regular expression of a LIKE ``pattern``, anchored at both ends (``%``: any
    text, ``_``: one character, ``escape`` before either: itself)."""
    out = ["^"]
    escaped = False
    for char in pattern:
        if escaped:
            out.append(re.escape(char))
            escaped = False
        elif char == escape:
            escaped = True
        elif char == "%":
            out.append("(?s:.*)")
        elif char == "_":
            out.append("(?s:.)")
        else:
            out.append(re.escape(char))
    out.append("$")
    return "".join(out)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
