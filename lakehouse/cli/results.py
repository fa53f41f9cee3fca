"""A query's rows printed as a table, CSV or JSON, every value in full (nothing cut short).

Values as Spark returns them to Python become text the same way in the table and in CSV:
``NULL`` in the table and an empty field in CSV for a null, ``true``/``false``, timestamps as
``YYYY-MM-DD HH:MM:SS[.ffffff]``, binary as base64, arrays, maps and structs as JSON, and
non-finite floats as ``NaN``, ``Infinity`` and ``-Infinity`` (Spark's names). JSON
output keeps numbers and booleans as JSON values, decimals as strings (exact), binary as
base64, dates and timestamps in ISO 8601, and non-finite floats as the strings ``NaN``,
``Infinity`` and ``-Infinity``.
"""

from __future__ import annotations

import base64
import csv
import json
import math
from collections import Counter
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal, TextIO

from lakehouse_core.errors import LakehouseError

Format = Literal["table", "csv", "json"]
FORMATS: tuple[Format, ...] = ("table", "csv", "json")


def json_value(value: Any) -> Any:
    """``value`` as a JSON-serialisable value, without losing digits or bytes."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _non_finite(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime | date):
        return value.isoformat()
    if hasattr(value, "__fields__"):  # a struct (pyspark Row)
        return {
            str(name): json_value(item) for name, item in zip(value.__fields__, value, strict=True)
        }
    if isinstance(value, dict):
        return {str(json_value(key)): json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(item) for item in value]
    return str(value)


def _non_finite(value: float) -> str:
    """Spark's names for the floats JSON has no number for."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def cell_text(value: Any, null: str = "NULL") -> str:
    """``value`` as one cell of text (``null`` for None)."""
    if value is None:
        return null
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, float) and not math.isfinite(value):
        return _non_finite(value)
    if isinstance(value, str | int | float | Decimal | date):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return str(json_value(value))
    if hasattr(value, "__fields__") or isinstance(value, dict | list | tuple):
        return json.dumps(json_value(value), ensure_ascii=False)
    return str(value)


def write_csv(out: TextIO, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """A header line, then one line per row (RFC 4180 quoting; null is an empty field)."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([cell_text(value, null="") for value in row] for row in rows)


def check_columns(output: Format, columns: list[str]) -> None:
    """Raise if ``output`` cannot show these columns.

    Raises:
        LakehouseError: JSON output of two columns with the same name (one would hide the
            other in the row's object).
    """
    repeated = sorted(name for name, count in Counter(columns).items() if count > 1)
    if output == "json" and repeated:
        raise LakehouseError(
            f"--format json needs distinct column names, and {', '.join(repeated)} appears more "
            "than once. Name each column with AS, or use --format csv."
        )


def write_json(out: TextIO, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """A JSON array with one object per row, one row per line (see :func:`check_columns`)."""
    check_columns("json", columns)
    out.write("[")
    for index, row in enumerate(rows):
        record = {name: json_value(value) for name, value in zip(columns, row, strict=True)}
        out.write(("," if index else "") + "\n" + json.dumps(record, ensure_ascii=False))
    out.write("\n]\n" if rows else "]\n")
