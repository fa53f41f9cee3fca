"""Silver against PostgreSQL's own final table contents: every table, row and column.

Both sides are turned into plain Python values that mean the same thing, decided per PostgreSQL
type (what equality means for each is in docs/debezium-types.md): integers, floats (``real`` at
32-bit precision; NaN equals NaN), ``Decimal`` for numerics and ``money`` (Debezium's default
``decimal.handling.mode=precise``), ``numeric`` without precision rounded to silver's 18
decimal places, days since 1970-01-01 for ``date``, microseconds for ``time`` (since
midnight), ``timetz`` (since midnight UTC), ``timestamp`` (its wall-clock time as if UTC) and
``timestamptz`` (the instant), Debezium's ``MicroDuration`` microseconds for ``interval`` (a
month is 365.25 / 12 days), parsed documents for ``json``/``jsonb`` (JSON ``null`` is not SQL
NULL), lists for arrays, PostgreSQL's text output for ``inet``, ``uuid``, ``xml`` and enums.
PostgreSQL is read over SQL, never through our fold of the change events.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DateType, TimestampType

from lakehouse_core.identifiers import entity_name_for_topic
from lakehouse_core.layout import Warehouse

Row = dict[str, Any]
Key = tuple[Any, ...]

_MICROS_PER_DAY = 86_400_000_000
#: Debezium's MicroDuration: a month is 365.25 / 12 days = 2,629,800 seconds.
_MICROS_PER_MONTH = 2_629_800_000_000
_SILVER_SCALE = Decimal(1).scaleb(-18)
_WIDE = Context(prec=100, rounding=ROUND_HALF_UP)


#: Types read as microseconds since the epoch (``time``: since midnight; ``timetz``: since
#: midnight UTC, then taken modulo a day; ``timestamp``: its wall-clock time as if UTC).
_MICROS_SINCE_EPOCH = (
    "time without time zone",
    "time with time zone",
    "timestamp without time zone",
    "timestamp with time zone",
)


@dataclass(frozen=True)
class Column:
    name: str
    pg_type: str  # format_type(): 'numeric(12,4)', 'time with time zone', 'mood', ...
    is_enum: bool


@dataclass(frozen=True)
class TableContents:
    """One table's rows by primary key, each as comparable values."""

    name: str
    columns: tuple[Column, ...]
    keys: tuple[str, ...]
    rows: dict[Key, Row]


@dataclass(frozen=True)
class Difference:
    table: str
    key: Key | None
    column: str | None
    postgres: Any
    silver: Any

    def describe(self) -> str:
        where = self.table if self.key is None else f"{self.table} {self.key}"
        if self.column:
            where += f".{self.column}"
        return f"{where}: postgres {self.postgres!r}, silver {self.silver!r}"


def postgres_tables(
    conninfo: str, tables: tuple[str, ...], schema: str = "public"
) -> list[TableContents]:
    """Read each table of ``schema`` in ``tables`` with its primary key and column types."""
    import psycopg
    from psycopg import sql
    from psycopg.types.string import TextLoader

    result = []
    with psycopg.connect(conninfo) as connection:
        for text_type in ("inet", "json", "jsonb"):  # as PostgreSQL prints them
            connection.adapters.register_loader(text_type, TextLoader)
        for table in tables:
            columns = tuple(
                Column(name, pg_type, kind == "e")
                for name, pg_type, kind in connection.execute(
                    "SELECT a.attname, format_type(a.atttypid, a.atttypmod), t.typtype "
                    "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
                    "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped "
                    "ORDER BY a.attnum",
                    (f"{schema}.{table}",),
                ).fetchall()
            )
            keys = tuple(
                name
                for (name,) in connection.execute(
                    "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
                    "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                    "WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY a.attnum",
                    (f"{schema}.{table}",),
                ).fetchall()
            )
            selected = [_pg_select(c) for c in columns]
            query = sql.SQL("SELECT {} FROM {}").format(
                sql.SQL(", ").join(selected), sql.Identifier(schema, table)
            )
            rows = {}
            for values in connection.execute(query).fetchall():
                row = {
                    c.name: _canonical(c, v, "postgres")
                    for c, v in zip(columns, values, strict=True)
                }
                rows[tuple(row[k] for k in keys)] = row
            result.append(TableContents(table, columns, keys, rows))
    return result


def _pg_select(column: Column) -> Any:
    """The select-list item that reads ``column`` in a form :func:`_canonical` takes."""
    from psycopg import sql

    name = sql.Identifier(column.name)
    if column.pg_type == "money":
        return sql.SQL("{}::numeric").format(name)
    if column.pg_type == "date":  # days since 1970-01-01 (Python's date cannot hold BC)
        return sql.SQL("{} - DATE '1970-01-01'").format(name)
    if column.pg_type in _MICROS_SINCE_EPOCH:  # Python cannot hold 24:00 or every year
        return sql.SQL("(extract(epoch FROM {}) * 1000000)::bigint").format(name)
    if column.pg_type == "interval":
        parts = ", ".join(
            f"extract({field} from {{0}})"
            for field in ("year", "month", "day", "hour", "minute", "microseconds")
        )
        return sql.SQL(f"ARRAY[{parts}]::numeric[]").format(name)  # fixed field names only
    return name


def silver_tables(
    spark: SparkSession, warehouse: Warehouse, expected: list[TableContents], topic_prefix: str
) -> list[TableContents]:
    """Silver's rows for each of ``expected``'s tables (the entity of topic
    ``<topic_prefix>.<table>``), with the same columns and keys."""
    result = []
    for table in expected:
        entity = entity_name_for_topic(f"{topic_prefix}.{table.name}")
        frame = spark.read.format("delta").load(warehouse.table("silver", entity))
        types = {f.name: f.dataType for f in frame.schema.fields}
        present = [c for c in table.columns if c.name in types]
        selected = [_silver_select(c.name, types[c.name]) for c in present]
        rows = {}
        for record in frame.select(*selected).collect():
            values = record.asDict()
            row = {c.name: _canonical(c, values[c.name], "silver") for c in present}
            for missing in table.columns:
                row.setdefault(missing.name, _MISSING)
            rows[tuple(row[k] for k in table.keys)] = row
        result.append(TableContents(table.name, table.columns, table.keys, rows))
    return result


def delta_rs_tables(
    warehouse: Warehouse, expected: list[TableContents], topic_prefix: str
) -> list[TableContents]:
    """:func:`silver_tables` read with delta-rs (the ``deltalake`` package) instead of Spark:
    what a reader without Spark's Delta features sees."""
    import pyarrow as pa
    from deltalake import DeltaTable

    result = []
    for table in expected:
        entity = entity_name_for_topic(f"{topic_prefix}.{table.name}")
        arrow = DeltaTable(warehouse.table("silver", entity)).to_pyarrow_table()
        for index, field in enumerate(arrow.schema):
            if pa.types.is_timestamp(field.type):  # microseconds since the epoch
                micros = arrow.column(index).cast(pa.timestamp("us")).cast(pa.int64())
                arrow = arrow.set_column(index, field.name, micros)
            elif pa.types.is_date32(field.type):  # days since the epoch
                arrow = arrow.set_column(index, field.name, arrow.column(index).cast(pa.int32()))
        present = [c for c in table.columns if c.name in arrow.column_names]
        rows = {}
        for values in arrow.select([c.name for c in present]).to_pylist():
            row = {c.name: _canonical(c, values[c.name], "silver") for c in present}
            for missing in table.columns:
                row.setdefault(missing.name, _MISSING)
            rows[tuple(row[k] for k in table.keys)] = row
        result.append(TableContents(table.name, table.columns, table.keys, rows))
    return result


def _silver_select(name: str, data_type: DataType) -> SparkColumn:
    """Dates as days and timestamps as microseconds since the epoch (Python's ``date`` and
    ``datetime`` cannot hold every year Spark can)."""
    if isinstance(data_type, TimestampType):
        return F.unix_micros(F.col(name)).alias(name)
    if isinstance(data_type, DateType):
        return F.unix_date(F.col(name)).alias(name)
    return F.col(name)


class _Missing:
    def __repr__(self) -> str:
        return "<no such column>"


_MISSING = _Missing()


def differences(
    postgres: list[TableContents],
    silver: list[TableContents],
    quarantined: Mapping[str, Mapping[Key, str]] | None = None,
) -> list[Difference]:
    """Every row missing on one side and every cell that differs, table by table.

    ``quarantined``: table -> keys of rows silver cannot hold (their records go to the
    quarantine): such a row must be absent from silver.
    """
    found = []
    for expected, actual in zip(postgres, silver, strict=True):
        excluded = (quarantined or {}).get(expected.name, {})
        for key in sorted(expected.rows.keys() | actual.rows.keys(), key=repr):
            want, got = expected.rows.get(key), actual.rows.get(key)
            if key in excluded:
                if got is not None:
                    found.append(Difference(expected.name, key, None, "quarantined", got))
                continue
            if want is None or got is None:
                found.append(Difference(expected.name, key, None, want, got))
                continue
            for column in expected.columns:
                if not _same(want[column.name], got[column.name]):
                    found.append(
                        Difference(
                            expected.name, key, column.name, want[column.name], got[column.name]
                        )
                    )
    return found


def _same(left: Any, right: Any) -> bool:
    """Equal values of the same Python type (``True`` is not ``1``); NaN equals NaN."""
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left):
        return math.isnan(right)
    return type(left) is type(right) and bool(left == right)


def _float32(value: float) -> float:
    result: float = struct.unpack("f", struct.pack("f", value))[0]
    return result


def _canonical(column: Column, value: Any, side: str) -> Any:
    """``value`` of ``column`` from PostgreSQL (``side="postgres"``) or silver, as a value
    that compares equal exactly when both mean the same."""
    if value is None:
        return None
    pg_type = column.pg_type
    # Only values of the expected Python type are converted: a silver column of another type
    # (a real read as text) must stay different.
    if pg_type == "real" and isinstance(value, float):
        return _float32(value)
    if pg_type == "bytea" and isinstance(value, bytes | bytearray):
        return bytes(value)
    if pg_type in ("json", "jsonb") and isinstance(value, str):
        return ("json", json.loads(value))  # the document; JSON null is not SQL NULL
    if side == "silver" or column.is_enum:
        if isinstance(value, Decimal) and pg_type == "numeric":
            return value.quantize(_SILVER_SCALE, context=_WIDE)
        return list(value) if isinstance(value, list) else value
    # PostgreSQL values as psycopg loads them.
    if pg_type == "numeric":
        return Decimal(value).quantize(_SILVER_SCALE, context=_WIDE)
    if pg_type == "time with time zone":
        return int(value) % _MICROS_PER_DAY
    if pg_type == "interval":
        if None in value:  # a null interval: every part is null
            return None
        years, months, days, hours, minutes, micros = (int(part) for part in value)
        return (
            (years * 12 + months) * _MICROS_PER_MONTH
            + days * _MICROS_PER_DAY
            + (hours * 60 + minutes) * 60_000_000
            + micros
        )
    if pg_type == "uuid":
        return str(value)
    return value
