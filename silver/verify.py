"""Checks a silver table against the reference fold of its bronze records.

The Spark side renders each silver row in the canonical form of :mod:`silver.reference`
(timestamps as epoch microseconds, dates as epoch days, decimals as plain strings, binary as
base64, arrays as lists, maps as dicts, structs as tuples, the rescued values' JSON as the
values), so the two can be compared value by value.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DateType,
    DecimalType,
    MapType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from expectations.enforce import DROPPED_PREFIX
from lakehouse_core.config import TableSpec
from lakehouse_core.delta_io import table_exists
from silver.reference import METADATA_COLUMNS, RESCUED, BronzeRecord, FoldSpec, fold
from silver.reference_history import START_AT, VALID_FROM, VALID_TO, fold_history

MAX_REPORTED = 20


@dataclass
class TableCheck:
    """The differences found for one silver table."""

    table: str
    expected_rows: int = 0
    actual_rows: int = 0
    differences: list[str] = field(default_factory=list)
    #: The layer of the table (``gold`` checks share this report).
    layer: str = "silver"

    @property
    def ok(self) -> bool:
        return not self.differences


def fold_spec(spec: TableSpec, silver_schema: StructType | None) -> FoldSpec:
    """The fold's view of ``spec``: each setting of :class:`FoldSpec` that the spec has (by
    name) as the spec holds it; ``sequence_by``: every column that orders (``sequence_by``,
    then ``system_sequence_by``); the column types of the silver table (``silver_schema``:
    its schema; None: no table yet)."""
    column_types = None
    if spec.format == "events" and spec.schema and silver_schema is not None:
        column_types = {
            f.name: _simple_type(f.dataType)
            for f in silver_schema.fields
            if f.name not in METADATA_COLUMNS
        }
    spec_fields = {f.name for f in fields(spec)}
    shared = {f.name: getattr(spec, f.name) for f in fields(FoldSpec) if f.name in spec_fields}
    derived = {
        "sequence_by": spec.order_columns or None,
        "column_types": column_types,
        "table_types": _table_types(spec, silver_schema),
    }
    return FoldSpec(**(shared | derived))


def _table_types(spec: TableSpec, silver_schema: StructType | None) -> dict[str, str] | None:
    """A Debezium table's column types, which decide which record types it holds."""
    if spec.format != "debezium" or silver_schema is None:
        return None
    return {
        f.name: f.dataType.simpleString()
        for f in silver_schema.fields
        if f.name not in METADATA_COLUMNS
    }


log = logging.getLogger(__name__)


def check_table(
    spark: SparkSession,
    bronze_path: str,
    silver_path: str,
    spec: TableSpec,
    quarantine_path: str | None = None,
) -> TableCheck:
    """Compare ``silver_path`` with the fold of ``bronze_path``, leaving out the records a
    ``drop`` expectation sent to the quarantine table at ``quarantine_path`` (if given).
    Logs one progress line (``verify: silver.<name> ...``) as it starts."""
    log.info(f"verify: silver.{spec.name} against the fold of its bronze records")
    check = TableCheck(table=spec.name)
    silver = (
        spark.read.format("delta").load(silver_path) if table_exists(spark, silver_path) else None
    )
    expected = fold(
        _bronze_records(spark, bronze_path, quarantine_path),
        fold_spec(spec, silver.schema if silver else None),
    )
    return _compared(check, expected.rows, silver, spec)


def check_fresh(
    spark: SparkSession,
    bronze_path: str,
    fresh: DataFrame,
    through: int,
    spec: TableSpec,
    quarantine_path: str | None = None,
) -> TableCheck:
    """Compare ``fresh``, a fresh read of ``spec``'s silver table pinned to bronze version
    ``through`` (:mod:`silver.fresh`), with the fold of the bronze records through that version
    (without those a ``drop`` expectation quarantined, as :func:`check_table`; a ``drop``
    expectation's records in the unapplied tail are not in the quarantine yet, so they count
    as differences). The check is named ``<table> (fresh)``."""
    log.info(f"verify: a fresh read of silver.{spec.name} against the fold through {through}")
    check = TableCheck(table=f"{spec.name} (fresh)")
    records = _bronze_records(spark, bronze_path, quarantine_path, through)
    expected = fold(records, fold_spec(spec, fresh.schema if fresh.columns else None))
    return _compared(check, expected.rows, fresh if fresh.columns else None, spec)


def _compared(
    check: TableCheck,
    expected: dict[tuple[Any, ...], dict[str, Any]],
    silver: DataFrame | None,
    spec: TableSpec,
) -> TableCheck:
    """``check`` with the rows of ``silver`` (None: no table) compared with ``expected``."""
    check.expected_rows = len(expected)
    actual: dict[tuple[Any, ...], dict[str, Any]] = {}
    if silver is not None:
        key_names = _key_names(expected, spec, silver)
        for row in canonical_rows(silver):
            actual[tuple(row[k] for k in key_names)] = row
    check.actual_rows = len(actual)
    check.differences.extend(row_differences(expected, actual))
    return check


def check_history(
    spark: SparkSession,
    bronze_path: str,
    history_path: str,
    spec: TableSpec,
    quarantine_path: str | None = None,
) -> TableCheck:
    """Compare the SCD type 2 table at ``history_path`` with the reference history of bronze
    (without the records a ``drop`` expectation quarantined, as :func:`check_table`).

    Rows are matched by key and ``__start_at``; the check is named ``<name>_history``. A
    table from before the validity columns (``__valid_from``, ``__valid_to``; the next
    micro-batch with an event adds them) is compared without them.
    """
    assert spec.history_name is not None, "only SCD type 2 tables have a history"
    log.info(f"verify: silver.{spec.history_name} against the history folded from bronze")
    check = TableCheck(table=spec.history_name)
    history = (
        spark.read.format("delta").load(history_path) if table_exists(spark, history_path) else None
    )
    expected = fold_history(
        _bronze_records(spark, bronze_path, quarantine_path),
        fold_spec(spec, history.schema if history else None),
        spec.track_history_column_list,
        spec.track_history_except_column_list,
    )
    if history is not None and VALID_FROM not in history.columns:
        log.info(f"verify: silver.{spec.history_name} has no {VALID_FROM}/{VALID_TO} yet")
        expected = {
            key: {c: v for c, v in row.items() if c not in (VALID_FROM, VALID_TO)}
            for key, row in expected.items()
        }
    check.expected_rows = len(expected)
    actual: dict[tuple[Any, ...], dict[str, Any]] = {}
    if history is not None:
        width = len(next(iter(expected))[0]) if expected else 1
        key_names = list(spec.keys) if spec.keys else history.columns[:width]
        for row in canonical_rows(history):
            actual[(tuple(row[k] for k in key_names), row[START_AT])] = row
    check.actual_rows = len(actual)
    check.differences.extend(row_differences(dict(expected), actual))
    return check


def row_differences(
    expected: dict[Any, dict[str, Any]], actual: dict[Any, dict[str, Any]]
) -> Iterator[str]:
    """One line per row that is missing, unexpected, or has a column with another value."""
    for key in sorted(set(expected) | set(actual), key=repr):
        want, got = expected.get(key), actual.get(key)
        if want is None:
            yield f"key {key}: in silver but not expected"
        elif got is None:
            yield f"key {key}: expected but missing from silver"
        else:
            for column, value in want.items():
                if got.get(column) != value:
                    yield f"key {key}: column {column} is {got.get(column)!r}, expected {value!r}"


def canonical_rows(frame: DataFrame) -> Iterator[dict[str, Any]]:
    """Rows of ``frame`` with every value in canonical form."""
    columns = [
        _canonical(F.col(f"`{f.name}`"), f.dataType).alias(f.name) for f in frame.schema.fields
    ]
    for row in frame.select(*columns).toLocalIterator():
        values = {name: _plain(value) for name, value in row.asDict().items()}
        if values.get(RESCUED) is not None:  # its JSON object, as the fold holds it
            values[RESCUED] = json.loads(values[RESCUED])
        yield values


def _canonical(column: Column, data_type: DataType) -> Column:
    if isinstance(data_type, TimestampType | TimestampNTZType):
        return F.unix_micros(column.cast("timestamp"))
    if isinstance(data_type, DateType):
        return F.unix_date(column)
    if isinstance(data_type, DecimalType):
        return column.cast("string")
    if isinstance(data_type, BinaryType):
        return F.base64(column)
    if isinstance(data_type, StructType):
        fields = [_canonical(column[f.name], f.dataType).alias(f.name) for f in data_type.fields]
        return F.when(column.isNotNull(), F.struct(*fields))
    if isinstance(data_type, ArrayType):
        return F.transform(column, lambda element: _canonical(element, data_type.elementType))
    if isinstance(data_type, MapType):
        keys = F.transform_keys(column, lambda k, _: _canonical(k, data_type.keyType))
        return F.transform_values(keys, lambda _, v: _canonical(v, data_type.valueType))
    return column


def _plain(value: Any) -> Any:
    """Python values of a canonical row: a struct as the tuple of its fields, a map as a
    dict, an array as a list."""
    if isinstance(value, Row):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _key_names(
    rows: dict[tuple[Any, ...], dict[str, Any]], spec: TableSpec, silver: DataFrame
) -> list[str]:
    """Silver tables start with their key columns; the fold's keys tell how many."""
    if spec.keys:
        return list(spec.keys)
    width = len(next(iter(rows))) if rows else 1
    return silver.columns[:width]


def _bronze_records(
    spark: SparkSession, path: str, quarantine_path: str | None = None, version: int | None = None
) -> Iterator[BronzeRecord]:
    """The records of the bronze table at ``path`` (as of ``version``; None: the newest)."""
    coordinates = ["topic", "partition", "offset"]
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    frame = reader.load(path).select(*coordinates, "key", "value")
    if quarantine_path is not None and table_exists(spark, quarantine_path):
        dropped = spark.read.format("delta").load(quarantine_path)
        dropped = dropped.where(F.col("reason").startswith(DROPPED_PREFIX)).select(*coordinates)
        frame = frame.join(dropped, coordinates, "left_anti")
    for row in frame.toLocalIterator():
        yield BronzeRecord(
            topic=row.topic,
            partition=row.partition,
            offset=row.offset,
            key=bytes(row.key) if row.key is not None else None,
            value=bytes(row.value) if row.value is not None else None,
        )


def _simple_type(data_type: DataType) -> str:
    name = data_type.simpleString()
    return {"integer": "int", "long": "bigint"}.get(name, name)
