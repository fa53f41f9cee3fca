"""The plain-Python evaluator of checked conditions and expressions: SQL's value on a row.

It reads the tree of :mod:`lakehouse_core.conditions.grammar` on its own, independently of the
Spark column :mod:`lakehouse_core.conditions.spark` builds from the same tree, and computes what
Spark computes (three-valued logic, ``try_`` arithmetic, Spark's casts, rounding and time
functions), so the reference models can check the jobs and the pattern matcher can run without
Spark.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Mapping
from decimal import ROUND_CEILING, ROUND_DOWN, ROUND_FLOOR, ROUND_HALF_UP, Context, Decimal
from functools import lru_cache
from typing import Any

from lakehouse_core.conditions import grammar as sql
from lakehouse_core.conditions.grammar import Condition
from lakehouse_core.errors import ConfigError

__all__ = ["holds", "value_of", "value_type"]


def holds(
    condition: Condition, row: Mapping[str, Any], types: Mapping[str, str] | None = None
) -> bool | None:
    """SQL three-valued truth of a parsed condition on a row (None: unknown), in plain Python,
    independently of the Spark column the job builds from the same tree.

    ``types``: the Spark type of each column (``bigint``, ``decimal(12,2)``, ...); a column
    not in it has the type of its value (an int is ``bigint``, a float ``double``, a Decimal a
    decimal of its digits). A value that is not of its column's type reads as NULL, as Spark
    reads a JSON value of another type; a decimal column's canonical string is its number. A
    condition the types make invalid (the job refuses it with a ConfigError) holds nowhere.
    """
    names = sql.condition_columns(condition)
    resolved = {n: (types or {}).get(n) or value_type(row.get(n)) for n in names}
    try:
        typed = _typed(condition, tuple(sorted(resolved.items())))
    except ConfigError:
        return None
    values = {n: _sql_value(row.get(n), resolved[n]) for n in names}
    result = _evaluate(typed, values)
    assert result is None or isinstance(result, bool)
    return result


def value_of(expr: sql.Expr, row: Mapping[str, Any], types: Mapping[str, str] | None = None) -> Any:
    """The SQL value of a parsed expression (``lakehouse_core.conditions.parse_expression``) on a
    row, in
    plain Python, independently of the Spark column the job builds from the same tree: None for
    NULL, a bool, an int, a float, a Decimal, a str, a naive UTC ``datetime`` (TIMESTAMP) or a
    ``date`` (DATE).

    ``types`` and the row's values are read as by :func:`holds` (a TIMESTAMP column may also
    hold epoch microseconds, a DATE column days since the epoch, as the fold's rows do).

    Raises:
        ConfigError: the types make the expression invalid (the job refuses it too).
    """
    names = sql.condition_columns(expr)
    resolved = {n: (types or {}).get(n) or value_type(row.get(n)) for n in names}
    typed, _ = _typed_expression(expr, tuple(sorted(resolved.items())))
    return _evaluate(typed, {n: _sql_value(row.get(n), resolved[n]) for n in names})


@lru_cache(maxsize=1024)
def _typed_expression(expr: sql.Expr, types: tuple[tuple[str, str], ...]) -> tuple[sql.Expr, str]:
    return sql.typed_expression(expr, dict(types), "The reference's expression")


@lru_cache(maxsize=1024)
def _typed(condition: Condition, types: tuple[tuple[str, str], ...]) -> Condition:
    return sql.typed_condition(condition, dict(types), "The fold's condition")


def value_type(value: Any) -> str:
    """The Spark type a canonical value reads as without a schema."""
    if value is None:
        return sql.VOID
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Decimal) and value.is_finite():
        digits, exponent = value.as_tuple().digits, int(value.as_tuple().exponent)
        scale = max(0, -exponent)
        return f"decimal({min(max(len(digits) + max(exponent, 0), scale, 1), 38)},{scale})"
    if isinstance(value, dt.datetime):
        return "timestamp"
    return "date" if isinstance(value, dt.date) else "other"


def _sql_value(value: Any, type_name: str) -> Any:
    """A canonical value as a value of SQL type ``type_name`` (None if it is not one: out of
    the type's range, or of another JSON type). A TIMESTAMP is a naive UTC ``datetime`` (from
    one, an aware one, or int epoch microseconds), a DATE a ``date`` (or int days)."""
    kind = sql.type_kind(type_name)
    if value is None or kind in ("other", "unknown"):
        return value
    if kind in ("timestamp", "date"):
        return _time_value(value, kind)
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind == "string":
        return value if isinstance(value, str) else None
    if isinstance(value, bool):
        return None
    if kind == "integral":
        bound = sql.INTEGER_BOUNDS[type_name]
        return value if isinstance(value, int) and -bound <= value < bound else None
    if kind == "double" and isinstance(value, float):
        return value
    if kind == "double" and isinstance(value, int):
        return float(value) if abs(value) < 2**1024 else None
    if kind == "decimal" and isinstance(value, str | int | Decimal):
        try:
            number = Decimal(value)
        except ArithmeticError:
            return None
        return _fit(number, type_name) if number.is_finite() else None
    return None


def _time_value(value: Any, kind: str) -> dt.date | None:
    """A TIMESTAMP (``kind`` ``timestamp``) or DATE value read from a row."""
    try:
        if isinstance(value, bool):
            return None
        if kind == "timestamp" and isinstance(value, dt.datetime):
            if value.tzinfo is not None:
                return value.astimezone(dt.UTC).replace(tzinfo=None)
            return value
        if kind == "timestamp" and isinstance(value, int):
            return _EPOCH + dt.timedelta(microseconds=value)
        if kind == "date" and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return value
        if kind == "date" and isinstance(value, int):
            return _EPOCH.date() + dt.timedelta(days=value)
    except OverflowError:
        return None
    return None


_EPOCH = dt.datetime(1970, 1, 1)
_MICROSECOND = dt.timedelta(microseconds=1)
#: Doubles rounded as Spark rounds them: from their shortest decimal text, exactly.
_WIDE = Context(prec=1000, rounding=ROUND_HALF_UP)


#: What Spark trims around a string it reads as a number or a boolean (bytes up to space, DEL).
_CAST_BLANKS = "".join(map(chr, range(0x21))) + "\x7f"
_TRUE_TEXTS = frozenset({"t", "true", "y", "yes", "1"})
_FALSE_TEXTS = frozenset({"f", "false", "n", "no", "0"})
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_LONG = 2**63
#: Decimal arithmetic: exact for 38-digit operands, rounded half up (Spark's rounding); a
#: quotient truncated first, as Spark divides (to 39 places, rounding down) before rounding.
_EXACT = Context(prec=200, rounding=ROUND_HALF_UP)
_TRUNCATED = Context(prec=200, rounding=ROUND_DOWN)


def _evaluate(node: sql.Expr, row: Mapping[str, Any]) -> Any:
    """The SQL value of a typed node (None: NULL)."""
    match node:
        case sql.Column(name):
            return row.get(name)
        case sql.Literal(value, _):
            return value
        case sql.Not(operand):
            value = _evaluate(operand, row)
            return None if value is None else not value
        case sql.And(operands) | sql.Or(operands):
            decisive = isinstance(node, sql.Or)  # the value that decides: TRUE for OR
            result: bool | None = not decisive
            for operand in operands:
                value = _evaluate(operand, row)
                if value is decisive:
                    return decisive
                if value is None:
                    result = None
            return result
        case sql.Compare(op, left, right):
            return _compare(op, _evaluate(left, row), _evaluate(right, row))
        case sql.In(operand, items, negated):
            value = _evaluate(operand, row)
            if value is None:
                return None
            found: bool | None = False
            for item in items:
                candidate = _evaluate(item, row)
                if candidate is None:
                    found = None
                elif _order(value, candidate) == 0:
                    found = True
                    break
            return found if found is None else found is not negated
        case sql.Like(operand, pattern, escape, negated, insensitive):
            value = _evaluate(operand, row)
            if value is None:
                return None
            if insensitive:
                value, pattern = value.lower(), pattern.lower()
            return (_like_pattern(pattern, escape).fullmatch(value) is not None) is not negated
        case sql.IsNull(operand, negated):
            return (_evaluate(operand, row) is None) is not negated
        case sql.IsBool(operand, wanted, negated):
            return (_evaluate(operand, row) is wanted) is not negated
        case sql.Case(branches, default):
            for when, then in branches:
                if _evaluate(when, row) is True:
                    return _evaluate(then, row)
            return None if default is None else _evaluate(default, row)
        case sql.Cast(operand, to):
            return _cast(_evaluate(operand, row), to)
        case sql.Arith(op, left, right, type_name):
            a, b = _evaluate(left, row), _evaluate(right, row)
            return None if a is None or b is None else _arithmetic(op, a, b, type_name)
        case sql.Negate(operand, type_name):
            value = _evaluate(operand, row)
            if value is None or isinstance(value, float):
                return None if value is None else -value
            return _arithmetic("-", 0 if isinstance(value, int) else Decimal(0), value, type_name)
        case sql.Func(name, args, type_name):
            return _function(name, [_evaluate(arg, row) for arg in args], type_name)
    raise AssertionError(node)


def _order(a: Any, b: Any) -> int:
    """-1, 0 or 1 as Spark orders two values of one type: NaN equals NaN and is above every
    other DOUBLE; strings by code point (the order of their UTF-8 bytes)."""
    if isinstance(a, float) and isinstance(b, float) and (math.isnan(a) or math.isnan(b)):
        return int(math.isnan(a)) - int(math.isnan(b))
    return int(a > b) - int(a < b)


def _compare(op: str, a: Any, b: Any) -> bool | None:
    if op == "<=>":
        return a is None and b is None if a is None or b is None else _order(a, b) == 0
    if a is None or b is None:
        return None
    order = _order(a, b)
    return {
        "=": order == 0,
        "<>": order != 0,
        "<": order < 0,
        "<=": order <= 0,
        ">": order > 0,
        ">=": order >= 0,
    }[op]


@lru_cache(maxsize=256)
def _like_pattern(pattern: str, escape: str) -> re.Pattern[str]:
    """LIKE as a regular expression: ``%`` any text, ``_`` one character (newlines too), the
    escape character makes the next one literal (the pattern was checked when parsed)."""
    parts, characters = [], iter(pattern)
    for character in characters:
        if character == escape:
            parts.append(re.escape(next(characters)))
        else:
            parts.append({"%": ".*", "_": "."}.get(character) or re.escape(character))
    return re.compile("".join(parts), re.DOTALL)


def _cast(value: Any, to: str) -> Any:
    """``TRY_CAST(value AS to)`` as Spark computes it; None where it does not convert."""
    if value is None:
        return None
    kind = sql.type_kind(to)
    if isinstance(value, dt.date):  # a TIMESTAMP (datetime) or a DATE, to one or to STRING
        if kind == "string":
            return sql.format_time(value)
        if isinstance(value, dt.datetime):
            return value.date() if kind == "date" else value
        return dt.datetime(value.year, value.month, value.day) if kind == "timestamp" else value
    if kind == "string":
        if isinstance(value, bool):
            return "true" if value else "false"
        return _plain(value) if isinstance(value, Decimal) else str(value)
    if kind == "boolean":
        if isinstance(value, str):
            text = value.strip(_CAST_BLANKS).lower()
            return True if text in _TRUE_TEXTS else False if text in _FALSE_TEXTS else None
        return bool(value != 0)  # a NaN is true
    if kind == "integral":
        low, high = -sql.INTEGER_BOUNDS[to], sql.INTEGER_BOUNDS[to] - 1
        if isinstance(value, float):  # truncated, in range as Spark checks it (in doubles)
            if math.isnan(value) or math.isinf(value):
                return None
            if float(math.floor(value)) > float(high) or float(math.ceil(value)) < float(low):
                return None
            return max(low, min(high, int(value)))
        if isinstance(value, str):
            text = value.strip(_CAST_BLANKS)
            if not _INTEGER_TEXT.fullmatch(text):
                return None
            value = int(text)
        number = int(value)  # a decimal is truncated towards zero
        return number if low <= number <= high else None
    if kind == "double":
        return float(value)
    return _fit(Decimal(int(value)) if isinstance(value, bool | int) else value, to)


def _fit(number: Decimal, decimal_type: str) -> Decimal | None:
    """``number`` rounded half up to the type's scale; None if it has too many digits."""
    precision, scale = sql.decimal_precision(decimal_type)
    rounded = _EXACT.quantize(number, Decimal(1).scaleb(-scale))
    if rounded != 0 and rounded.adjusted() >= precision - scale:
        return None
    return rounded.copy_abs() if rounded == 0 else rounded


def _plain(number: Decimal) -> str:
    """A decimal as Spark writes it: plain digits, its scale kept, no negative zero."""
    return format(number.copy_abs() if number == 0 else number, "f")


def _arithmetic(op: str, a: Any, b: Any, type_name: str) -> Any:
    """``a op b`` in ``type_name`` (both operands of it; decimals of their own types), as
    Spark's ``try_`` functions compute it: None on overflow or a zero divisor."""
    kind = sql.type_kind(type_name)
    if op in ("/", "%") and b == 0:
        return None
    if kind == "double":
        if op == "%":  # Java's remainder of doubles
            if math.isnan(a) or math.isnan(b) or math.isinf(a):
                return math.nan
            return a if math.isinf(b) else math.fmod(a, b)
        return {"+": a + b, "-": a - b, "*": a * b}[op] if op != "/" else a / b
    if kind == "decimal":
        operation = {
            "+": _EXACT.add,
            "-": _EXACT.subtract,
            "*": _EXACT.multiply,
            "/": _TRUNCATED.divide,
            "%": _EXACT.remainder,
        }[op]
        return _fit(operation(a, b), type_name)
    if op == "%":  # the sign of the dividend, as in Java
        result = abs(a) % abs(b) * (1 if a >= 0 else -1)
    else:
        result = {"+": a + b, "-": a - b, "*": a * b}[op]
    return result if -_LONG <= result < _LONG else None


def _function(name: str, values: list[Any], type_name: str) -> Any:
    if name == "coalesce":
        return next((value for value in values if value is not None), None)
    if name in ("greatest", "least"):  # NULLs skipped; the first of equals kept
        best = None
        for value in values:
            if value is not None and (
                best is None or _order(value, best) == (1 if name == "greatest" else -1)
            ):
                best = value
        return best
    if any(value is None for value in values):
        return None
    if name in _TIME_FUNCTIONS:
        return _TIME_FUNCTIONS[name](*values)
    if name in ("floor", "ceil", "round"):
        return _rounded(name, values, type_name)
    first = values[0]
    if name == "abs":
        if isinstance(first, int):
            return abs(first) if abs(first) < _LONG else None
        return abs(first) if isinstance(first, float) else first.copy_abs()
    if name == "substring":
        return _substring(first, values[1], values[2])
    simple: dict[str, Callable[..., Any]] = {
        "lower": str.lower,
        "upper": str.upper,
        "trim": lambda s: s.strip(" "),
        "ltrim": lambda s: s.lstrip(" "),
        "rtrim": lambda s: s.rstrip(" "),
        "length": len,
        "concat": lambda *parts: "".join(parts),
        "startswith": str.startswith,
        "endswith": str.endswith,
        "contains": lambda text, part: part in text,
        "split_part": _split_part,
        "instr": lambda text, part: text.find(part) + 1,
        "replace": lambda text, old, new: text.replace(old, new) if old else text,
        "lpad": lambda text, length, pad: _pad(text, length, pad, left=True),
        "rpad": lambda text, length, pad: _pad(text, length, pad, left=False),
    }
    return simple[name](*values)


def _rounded(name: str, values: list[Any], type_name: str) -> Any:
    """``floor`` / ``ceil`` / ``round(x, d)`` (HALF_UP) as Spark computes them: a DOUBLE's
    floor saturates at the BIGINT bounds (NaN gives 0); a DOUBLE rounds from its shortest
    decimal text (NaN and infinities stay); a decimal to ``type_name``."""
    value = values[0]
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if name == "round":
            if math.isnan(value) or math.isinf(value):
                return value
            text = Decimal(repr(value))
            rounded = _WIDE.quantize(text, Decimal(1).scaleb(-values[1]))
            return float(rounded) + 0.0  # no negative zero, as Java's BigDecimal
        if math.isnan(value):
            return 0
        if math.isinf(value):
            return _LONG - 1 if value > 0 else -_LONG
        whole = math.floor(value) if name == "floor" else math.ceil(value)
        return max(-_LONG, min(_LONG - 1, whole))
    if name == "round":
        rounded = _WIDE.quantize(value, Decimal(1).scaleb(-values[1]))
    else:
        mode = ROUND_FLOOR if name == "floor" else ROUND_CEILING
        rounded = value.to_integral_value(rounding=mode)
    return _fit(rounded, type_name)


def _split_part(text: str, delimiter: str, index: int) -> str:
    """Spark's ``split_part``: part ``index`` (from 1; negative: from the end) of ``text``
    split at every ``delimiter`` (an empty one does not split); '' past the last part."""
    parts = text.split(delimiter) if delimiter else [text]
    position = index - 1 if index > 0 else len(parts) + index
    return parts[position] if 0 <= position < len(parts) else ""


def _pad(text: str, length: int, pad: str, left: bool) -> str:
    """Spark's ``lpad`` / ``rpad``: ``text`` cut or padded to ``length`` characters (an empty
    ``pad`` does not pad)."""
    if length <= len(text):
        return text[: max(length, 0)]
    if not pad:
        return text
    fill = (pad * (length // len(pad) + 1))[: length - len(text)]
    return fill + text if left else text + fill


def _date_trunc(unit: str, value: dt.datetime) -> dt.datetime:
    """``value`` truncated to the start of its ``unit`` (a week starts on Monday)."""
    if unit in ("year", "quarter", "month", "week", "day"):
        day = value.date()
        if unit == "week":
            day -= dt.timedelta(days=day.weekday())
        elif unit != "day":
            month = {"year": 1, "quarter": 3 * ((day.month - 1) // 3) + 1}.get(unit, day.month)
            day = dt.date(day.year, month, 1)
        return dt.datetime(day.year, day.month, day.day)
    if unit == "hour":
        return value.replace(minute=0, second=0, microsecond=0)
    if unit == "minute":
        return value.replace(second=0, microsecond=0)
    return value.replace(microsecond=0)


def _shift_days(day: dt.date, days: int) -> dt.date | None:
    """``day`` plus ``days``; None outside years 1 to 9999."""
    low, high = sql.DAYS_RANGE
    shifted = (day - _EPOCH.date()).days + days
    return _EPOCH.date() + dt.timedelta(days=shifted) if low <= shifted <= high else None


def _from_seconds(seconds: int) -> dt.datetime | None:
    low, high = sql.SECONDS_RANGE
    return _EPOCH + dt.timedelta(seconds=seconds) if low <= seconds <= high else None


def _micros(value: dt.datetime) -> int:
    return (value - _EPOCH) // _MICROSECOND


_TIME_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "year": lambda d: d.year,
    "month": lambda d: d.month,
    "day": lambda d: d.day,
    "dayofweek": lambda d: d.isoweekday() % 7 + 1,  # 1 is Sunday
    "dayofyear": lambda d: d.timetuple().tm_yday,
    "weekofyear": lambda d: d.isocalendar()[1],  # ISO 8601 weeks
    "hour": lambda t: t.hour,
    "minute": lambda t: t.minute,
    "second": lambda t: t.second,
    "date_trunc": _date_trunc,
    "unix_seconds": lambda t: _micros(t) // 1_000_000,
    "unix_millis": lambda t: _micros(t) // 1_000,
    "unix_micros": _micros,
    "timestamp_seconds": _from_seconds,
    "date_add": _shift_days,
    "date_sub": lambda d, n: _shift_days(d, -n),
    "datediff": lambda end, start: (end - start).days,
}


def _substring(text: str, start: int, length: int) -> str:
    """Spark's ``substring``: ``start`` counts from 1 (0 too), a negative one from the end."""
    begin = start - 1 if start > 0 else len(text) + start if start < 0 else 0
    end = begin + length
    begin = max(begin, 0)
    return "" if begin >= end else text[begin:end]
