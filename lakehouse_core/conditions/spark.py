"""The Spark evaluator of checked conditions and expressions: a Column built node by node.

The tree comes from :mod:`lakehouse_core.conditions.grammar` once the batch's column types are
known (never from the config text); each node becomes the Spark function that computes it, so
nothing that reaches Spark can fail at run time (arithmetic through Spark's ``try_`` functions).
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Callable, Mapping
from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from lakehouse_core.conditions import grammar as sql
from lakehouse_core.conditions.grammar import Condition
from lakehouse_core.errors import ConfigError


def condition_column(
    condition: Condition, types: Mapping[str, DataType], where: str, table_format: str = "debezium"
) -> Column:
    """The Spark column for ``condition`` over columns with the given types, built node by node
    from the checked tree (:func:`lakehouse_core.conditions.typed_condition`), never from SQL text.

    Raises:
        ConfigError: naming ``where`` and the unknown column, or the operands whose types do
            not fit the operator (e.g. a string column compared with a number).
    """
    names = _type_names(condition, types, where, table_format)
    return _spark(sql.typed_condition(condition, names, where))


def expression_column(expr: sql.Expr, types: Mapping[str, DataType], where: str) -> Column:
    """The Spark column for an expression of any allowed type (a computed column, from
    :func:`lakehouse_core.conditions.parse_expression`) over columns with the given types, built
    node by
    node from the checked tree (:func:`lakehouse_core.conditions.typed_expression`); its Spark type
    is the one ``typed_expression`` returns.

    Raises:
        ConfigError: naming ``where`` and the unknown column, or the operands whose types do
            not fit the operator.
    """
    names = _type_names(expr, types, where)
    typed, _ = sql.typed_expression(expr, names, where)
    return _spark(typed)


def _type_names(
    expr: sql.Expr, types: Mapping[str, DataType], where: str, table_format: str = "debezium"
) -> dict[str, str]:
    """The Spark type names of ``types``, once every column ``expr`` reads is among them."""
    for name in sql.condition_columns(expr):
        if name not in types:
            hint = (
                " (declare it in 'schema' if the source omits it)"
                if table_format == "events"
                else ""
            )
            raise ConfigError(
                f"{where} reads column {name!r}, which is not a column of the table{hint}. "
                f"Columns: {', '.join(types) or 'none'}."
            )
    return {name: data_type.simpleString() for name, data_type in types.items()}


_COMPARISONS: dict[str, Callable[[Column, Column], Column]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<=>": lambda a, b: a.eqNullSafe(b),
}
#: Arithmetic as Spark's ``try_`` functions: NULL on overflow or a zero divisor, never an
#: error (ANSI mode would stop the stream).
_ARITHMETIC: dict[str, Callable[[Column, Column], Column]] = {
    "+": F.try_add,
    "-": F.try_subtract,
    "*": F.try_multiply,
    "/": F.try_divide,
    "%": F.try_mod,
}
_FUNCTIONS: dict[str, Callable[..., Column]] = {
    "lower": F.lower,
    "upper": F.upper,
    "trim": F.trim,
    "ltrim": F.ltrim,
    "rtrim": F.rtrim,
    "length": F.length,
    "concat": F.concat,
    "coalesce": F.coalesce,
    "startswith": F.startswith,
    "endswith": F.endswith,
    "contains": F.contains,
    "floor": F.floor,
    "ceil": F.ceil,
    "greatest": F.greatest,
    "least": F.least,
    "split_part": F.split_part,
    "instr": F.instr,
    "replace": F.replace,
    "lpad": F.lpad,
    "rpad": F.rpad,
    "year": F.year,
    "month": F.month,
    "day": F.dayofmonth,
    "dayofweek": F.dayofweek,
    "dayofyear": F.dayofyear,
    "weekofyear": F.weekofyear,
    "hour": F.hour,
    "minute": F.minute,
    "second": F.second,
    "unix_seconds": F.unix_seconds,
    "unix_millis": F.unix_millis,
    "unix_micros": F.unix_micros,
    "datediff": F.datediff,
}
_EPOCH = dt.datetime(1970, 1, 1)
_MICROSECOND = dt.timedelta(microseconds=1)


def _spark(node: sql.Expr) -> Column:
    """The Spark column of a typed node (its conversions are explicit casts)."""
    match node:
        case sql.Column(name):
            return F.col("`" + name.replace("`", "``") + "`")  # one name, never a path
        case sql.Literal(value, type_name):
            if type_name in ("string", "boolean", "double", "void"):
                return F.lit(value)
            if isinstance(value, dt.datetime):  # from its epoch micros: no time zone involved
                return F.timestamp_micros(F.lit((value - _EPOCH) // _MICROSECOND).cast("bigint"))
            if isinstance(value, dt.date):
                return F.date_from_unix_date(F.lit((value - _EPOCH.date()).days).cast("int"))
            return F.lit(value).cast(type_name)  # an integer as BIGINT, a decimal as typed
        case sql.Not(operand):
            return ~_spark(operand)
        case sql.And(operands):
            return reduce(operator.and_, (_spark(o) for o in operands))
        case sql.Or(operands):
            return reduce(operator.or_, (_spark(o) for o in operands))
        case sql.Compare(op, left, right):
            return _COMPARISONS[op](_spark(left), _spark(right))
        case sql.In(operand, items, negated):
            found = _spark(operand).isin(*(_spark(item) for item in items))
            return ~found if negated else found
        case sql.Like(operand, pattern, escape, negated, insensitive):
            like = F.ilike if insensitive else F.like
            matched = like(_spark(operand), F.lit(pattern), F.lit(escape))
            return ~matched if negated else matched
        case sql.IsNull(operand, negated):
            column = _spark(operand)
            return column.isNotNull() if negated else column.isNull()
        case sql.IsBool(operand, value, negated):
            known = F.coalesce(_spark(operand) == F.lit(value), F.lit(False))
            return ~known if negated else known
        case sql.Case(branches, default):
            (first_when, first_then), *rest = branches
            case = F.when(_spark(first_when), _spark(first_then))
            for when, then in rest:
                case = case.when(_spark(when), _spark(then))
            return case if default is None else case.otherwise(_spark(default))
        case sql.Cast(operand, to):
            return _spark(operand).try_cast(to)
        case sql.Arith(op, left, right):
            return _ARITHMETIC[op](_spark(left), _spark(right))
        case sql.Negate(operand, type_name):
            column = _spark(operand)
            return _minus_bigint(column) if type_name == "bigint" else -column
        case sql.Func("abs", (operand,), "bigint"):
            column = _spark(operand)
            return F.when(column < 0, _minus_bigint(column)).otherwise(column)
        case sql.Func("abs", (operand,)):
            return F.abs(_spark(operand))
        case sql.Func("substring", (text, sql.Literal(start), sql.Literal(length))):
            assert isinstance(start, int) and isinstance(length, int)
            return F.substring(_spark(text), start, length)
        case sql.Func("lpad" | "rpad" as name, (text, sql.Literal(length), pad)):
            assert isinstance(length, int)
            return _FUNCTIONS[name](_spark(text), length, _spark(pad))
        case sql.Func("split_part", (text, delimiter, sql.Literal(index))):
            return F.split_part(_spark(text), _spark(delimiter), F.lit(index))  # an INT
        case sql.Func("round", (operand, sql.Literal(digits))):
            assert isinstance(digits, int)
            return F.round(_spark(operand), digits)
        case sql.Func("date_trunc", (sql.Literal(unit), operand)):
            return F.date_trunc(str(unit), _spark(operand))
        case sql.Func("timestamp_seconds", (operand,)):
            seconds = _spark(operand)
            low, high = sql.SECONDS_RANGE
            return F.when(seconds.between(low, high), F.timestamp_seconds(seconds))
        case sql.Func("date_add" | "date_sub" as name, (date, days)):
            shift = F.try_add if name == "date_add" else F.try_subtract
            unix_days = shift(F.unix_date(_spark(date)).cast("bigint"), _spark(days))
            low, high = sql.DAYS_RANGE
            within = unix_days.between(low, high)
            return F.when(within, F.date_from_unix_date(unix_days.cast("int")))
        case sql.Func(name, args):
            return _FUNCTIONS[name](*(_spark(arg) for arg in args))
    raise AssertionError(node)


def _minus_bigint(column: Column) -> Column:
    """``-column`` of a BIGINT; NULL for the least BIGINT, whose negation overflows."""
    return F.try_subtract(F.lit(0).cast("bigint"), column)
