"""Expressions over a gold table's aggregates: a measure ``{ name = "drop", expr =
"max(battery) - min(battery)" }`` (docs/gold.md) is split into its aggregates, each a plain
measure of a hidden column, and the expression over those columns, a checked tree of
:mod:`lakehouse_core.conditions` that the engine and the reference models evaluate per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from lakehouse_core.conditions import Expr, parse_expression
from lakehouse_core.errors import ConfigError

#: The aggregates an expression may use, by sqlglot node.
AGGREGATES: dict[type[exp.Expr], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}
#: Functions of a row's neighbours in its group, which a gold measure does not have.
_NEIGHBOURS = (exp.Lag, exp.Lead, exp.Window, exp.FirstValue, exp.LastValue, exp.RowNumber)


@dataclass(frozen=True)
class Aggregate:
    """One aggregate of an expression: ``fn`` of ``column`` (None: ``count(*)``), held in
    the hidden column ``name``."""

    name: str
    fn: str
    column: str | None


def split(text: str, measure: str) -> tuple[tuple[Aggregate, ...], Expr]:
    """The aggregates of expression ``text`` (of measure ``measure``) and the checked
    expression over their hidden columns (``_<measure>_<n>``), equal aggregates sharing one.

    Raises:
        ConfigError: ``text`` is not an expression, has no aggregate, reads a column outside
            one, nests them, aggregates something other than a column, uses an aggregate
            other than count, sum, avg, min and max, or reads a neighbouring row (``lag``).
    """
    owner = f"Measure {measure!r}"
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except SqlglotError as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"{owner}: expr {text!r} is not an expression ({first}).") from None
    neighbour = next(tree.find_all(*_NEIGHBOURS), None)
    if neighbour is not None:
        function = neighbour.this if isinstance(neighbour, exp.Window) else neighbour
        name = function.sql_name().lower() if isinstance(function, exp.Func) else "OVER"
        raise ConfigError(
            f"{owner}: {name} reads other rows of the group (the row before, a window), which "
            "a gold measure cannot: write it in a SQL model ([[models]], docs/models.md)."
        )
    found: dict[tuple[str, str | None], Aggregate] = {}

    def hidden(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.AggFunc):
            return node
        fn = AGGREGATES.get(type(node))
        if fn is None:
            raise ConfigError(
                f"{owner}: {node.sql(dialect='spark')!r} is not one of the aggregates an expr "
                f"may use ({', '.join(AGGREGATES.values())}): declare it as a measure of its "
                "own."
            )
        argument = node.this
        if isinstance(argument, exp.Distinct):
            raise ConfigError(
                f"{owner}: {node.sql(dialect='spark')!r} is not one of the aggregates an expr "
                'may use: declare it as a measure of its own (fn = "count_distinct").'
            )
        if isinstance(argument, exp.Star) and fn == "count":
            column = None
        elif isinstance(argument, exp.Column) and not argument.table:
            column = argument.name
        else:
            raise ConfigError(
                f"{owner}: {node.sql(dialect='spark')!r} aggregates an expression: aggregate a "
                "column (declare the expression in the table's columns and aggregate that)."
            )
        key = (fn, column)
        if key not in found:
            found[key] = Aggregate(f"_{measure}_{len(found)}", fn, column)
        return exp.column(found[key].name)

    nested = [node for node in tree.find_all(exp.AggFunc) if node.find_ancestor(exp.AggFunc)]
    if nested:
        raise ConfigError(
            f"{owner}: {nested[0].sql(dialect='spark')!r} is an aggregate inside an aggregate: "
            "aggregate columns only."
        )
    outer = tree.transform(hidden, copy=True)
    names = {a.name for a in found.values()}
    stray = [c.name for c in outer.find_all(exp.Column) if c.name not in names]
    if not found:
        raise ConfigError(
            f"{owner}: expr {text!r} has no aggregate ({', '.join(AGGREGATES.values())}): for "
            "a value per row declare it in the table's columns."
        )
    if stray:
        raise ConfigError(
            f"{owner}: expr {text!r} reads column {stray[0]!r} outside an aggregate: wrap it "
            f"in one, e.g. max({stray[0]})."
        )
    expression = parse_expression(outer.sql(dialect="spark"), f"expr of {owner}")
    return tuple(found.values()), expression
