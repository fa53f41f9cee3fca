"""Builders for test inputs: Debezium envelopes and bronze DataFrames from records."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import TimestampType

from bronze.table import with_ingestion_metadata
from cdc.files import lines_to_records
from cdc.records import Record
from silver.reference import BronzeRecord


def source_frame(spark: SparkSession, records: Iterable[Record]) -> DataFrame:
    """Kafka-shaped source rows for ``records``, built through the real file-source parser."""
    lines = [(record.to_line(), "test") for record in records]
    return lines_to_records(spark.createDataFrame(lines, "value string, _source string"))


def deliver(source: Path, number: int, records: Iterable[Record]) -> None:
    """Write ``records`` as micro-batch ``number``'s file into the file source's folder
    ``source``: under a hidden name first, then renamed, so the source reads it whole."""
    hidden = source / f".batch-{number}.jsonl"
    hidden.write_text("".join(record.to_line() + "\n" for record in records), encoding="utf-8")
    hidden.rename(source / f"batch-{number}.jsonl")


def table_rows(spark: SparkSession, path: str) -> list[dict[str, Any]]:
    """Every row of the Delta table at ``path``, as dicts; timestamps as naive UTC datetimes
    (``collect()`` gives them in the Python process's local zone, whatever Spark's)."""
    frame = spark.read.format("delta").load(path)
    stamps = [f.name for f in frame.schema.fields if isinstance(f.dataType, TimestampType)]
    rows = [r.asDict() for r in frame.collect()]
    for row in rows:
        for name in stamps:
            if isinstance(row[name], datetime):
                row[name] = row[name].astimezone(UTC).replace(tzinfo=None)
    return rows


def bronze_frame(spark: SparkSession, records: Iterable[Record], batch_id: int = 0) -> DataFrame:
    """Bronze rows for ``records``, built through the real file-source parser."""
    return with_ingestion_metadata(source_frame(spark, records), batch_id)


CUSTOMER_FIELDS: list[dict[str, Any]] = [
    {"field": "id", "type": "int32", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "notes", "type": "string", "optional": True},
]


def pg_envelope(
    op: str,
    seq: tuple[int | None, int],
    after: dict[str, Any] | None = None,
    before: dict[str, Any] | None = None,
    fields: Sequence[dict[str, Any]] = tuple(CUSTOMER_FIELDS),
    wrapped: bool = True,
    ts_ms: int = 1_767_225_600_000,
) -> dict[str, Any]:
    """A Debezium Postgres change event value, with or without the schema wrapper."""
    commit, lsn = seq
    payload = {
        "before": before,
        "after": after,
        "op": op,
        "ts_ms": ts_ms + 5,
        "source": {
            "connector": "postgresql",
            "name": "shop",
            "db": "shop",
            "schema": "public",
            "table": "customers",
            "ts_ms": ts_ms,
            "sequence": json.dumps([None if commit is None else str(commit), str(lsn)]),
            "lsn": lsn,
        },
        "transaction": None,
    }
    if not wrapped:
        return payload
    row = {"type": "struct", "optional": True, "fields": list(fields)}
    schema = {
        "type": "struct",
        "name": "shop.public.customers.Envelope",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {"field": "op", "type": "string"},
            {"field": "ts_ms", "type": "int64", "optional": True},
        ],
    }
    return {"schema": schema, "payload": payload}


def pg_key(key: int, wrapped: bool = True) -> dict[str, Any]:
    if not wrapped:
        return {"id": key}
    return {
        "schema": {"type": "struct", "fields": [{"field": "id", "type": "int32"}]},
        "payload": {"id": key},
    }


def bronze_record(record: Record) -> BronzeRecord:
    """The reference fold's view of ``record``: its coordinates and its key and value bytes."""
    return BronzeRecord(
        record.topic, record.partition, record.offset, record.key_bytes, record.value_bytes
    )


def customer_change(
    topic: str,
    offset: int,
    op: str,
    id_: int | None,
    sequence: tuple[int | None, int],
    name: str | None = "n",
    notes: str | None = None,
    partition: int = 0,
) -> Record:
    """A bronze record with a wrapped Debezium Postgres change of the customers table
    (``op`` ``t``: a truncate, ``id_`` None); ``source.ts_ms`` grows with the LSN."""
    after = None if op in ("d", "t") else {"id": id_, "name": name, "notes": notes}
    before = {"id": id_, "name": None, "notes": None} if op == "d" else None
    key = None if id_ is None else pg_key(id_)
    ts_ms = 1_767_225_600_000 + sequence[1]
    value = pg_envelope(op, sequence, after=after, before=before, ts_ms=ts_ms)
    return Record(topic, partition, offset, ts_ms, key, value)


def merge_counts(metrics: dict[str, str]) -> tuple[int, int, int]:
    """(inserted, updated, deleted) target rows of a MERGE commit."""
    return tuple(  # type: ignore[return-value]
        int(metrics.get(f"numTargetRows{what}", "0")) for what in ("Inserted", "Updated", "Deleted")
    )


# --------------------------------------------------------------------------------------------
# Debezium types: one column per Connect / Debezium type, as the JsonConverter writes them
# --------------------------------------------------------------------------------------------


def connect_field(name: str, kind: str, logical: str | None = None, **extra: Any) -> dict[str, Any]:
    """A field of a Connect struct schema, shaped like the JsonConverter's output."""
    schema: dict[str, Any] = {"type": kind, "optional": True}
    if logical is not None:
        schema.update(name=logical, version=1)
    return {**schema, **extra, "field": name}


def b64_int(unscaled: int) -> str:
    """Base64 of the minimal big-endian two's-complement bytes (Connect ``Decimal``)."""
    width = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(width, "big", signed=True)).decode()


_WKB_POINT = "AQEAAAAAAAAAAADwPwAAAAAAAABA"  # POINT(1 2)
_GEOMETRY_FIELDS = [
    {"type": "bytes", "optional": False, "field": "wkb"},
    {"type": "int32", "optional": True, "field": "srid"},
]

#: Type family -> columns ``(Connect field schema, JSON value, Spark type, canonical value)``.
#: Canonical values as docs/silver-semantics.md defines them (what ``lakehouse verify``
#: compares): timestamps epoch µs, dates epoch days, decimals text, binary base64, structs
#: tuples, times of day µs since midnight, durations µs.
DEBEZIUM_TYPES: dict[str, list[tuple[dict[str, Any], Any, str, Any]]] = {
    "primitives": [
        (connect_field("i8", "int8"), -128, "tinyint", -128),
        (connect_field("i16", "int16"), 32_767, "smallint", 32_767),
        (connect_field("i32", "int32"), -70_000, "int", -70_000),
        (connect_field("i64", "int64"), 2**62, "bigint", 2**62),
        (connect_field("real", "float"), 1.1, "float", 1.100000023841858),  # float32(1.1)
        (connect_field("dbl", "double"), 3.141592653589793, "double", 3.141592653589793),
        (connect_field("flag", "boolean"), True, "boolean", True),
        (connect_field("txt", "string"), "x  ", "string", "x  "),
        (connect_field("raw", "bytes"), "AP9oaQ==", "binary", "AP9oaQ=="),
    ],
    "times": [
        (connect_field("d", "int32", "io.debezium.time.Date"), 19_723, "date", 19_723),
        (connect_field("cd", "int32", "org.apache.kafka.connect.data.Date"), -1, "date", -1),
        (
            connect_field("ms", "int64", "io.debezium.time.Timestamp"),
            1_700_000_000_123,
            "timestamp",
            1_700_000_000_123_000,
        ),
        (
            connect_field("cms", "int64", "org.apache.kafka.connect.data.Timestamp"),
            -1_500,
            "timestamp",
            -1_500_000,
        ),
        (
            connect_field("us", "int64", "io.debezium.time.MicroTimestamp"),
            1_700_000_000_123_456,
            "timestamp",
            1_700_000_000_123_456,
        ),
        (  # ns / 1000 as a double would round up to ...457
            connect_field("ns", "int64", "io.debezium.time.NanoTimestamp"),
            1_700_000_000_123_456_999,
            "timestamp",
            1_700_000_000_123_456,
        ),
        (
            connect_field("tz", "string", "io.debezium.time.ZonedTimestamp"),
            "2024-01-01T10:00:00.123456Z",
            "timestamp",
            1_704_103_200_123_456,
        ),
        (
            connect_field("t", "int32", "io.debezium.time.Time"),
            45_296_789,
            "bigint",
            45_296_789_000,
        ),
        (
            connect_field("ct", "int32", "org.apache.kafka.connect.data.Time"),
            45_296_789,
            "bigint",
            45_296_789_000,
        ),
        (
            connect_field("ut", "int64", "io.debezium.time.MicroTime"),
            45_296_789_012,
            "bigint",
            45_296_789_012,
        ),
        (
            connect_field("nt", "int64", "io.debezium.time.NanoTime"),
            45_296_789_012_345,
            "bigint",
            45_296_789_012,
        ),
        (
            connect_field("zt", "string", "io.debezium.time.ZonedTime"),
            "21:30:00.123456Z",
            "bigint",
            77_400_123_456,
        ),
        (
            connect_field("dur", "int64", "io.debezium.time.MicroDuration"),
            90_061_000_001,
            "bigint",
            90_061_000_001,
        ),
        (
            connect_field("iv", "string", "io.debezium.time.Interval"),
            "P1Y2M3DT4H5M6.78S",
            "string",
            "P1Y2M3DT4H5M6.78S",
        ),
        (connect_field("yr", "int32", "io.debezium.time.Year"), 2024, "int", 2024),
    ],
    "decimals": [
        (  # more than 6 fraction digits
            connect_field(
                "amount",
                "bytes",
                "org.apache.kafka.connect.data.Decimal",
                parameters={"scale": "10", "connect.decimal.precision": "20"},
            ),
            b64_int(-12_345_678_901),
            "decimal(20,10)",
            "-1.2345678901",
        ),
        (
            connect_field(
                "n",
                "struct",
                "io.debezium.data.VariableScaleDecimal",
                fields=[
                    {"type": "int32", "optional": False, "field": "scale"},
                    {"type": "bytes", "optional": False, "field": "value"},
                ],
                doc="Variable scaled decimal",
            ),
            {"scale": 3, "value": b64_int(-12_345)},
            "decimal(38,18)",
            "-12.345000000000000000",
        ),
        (  # scale 20, but the last two digits are zeros: exactly 18 fraction digits
            connect_field(
                "tiny",
                "struct",
                "io.debezium.data.VariableScaleDecimal",
                fields=[
                    {"type": "int32", "optional": False, "field": "scale"},
                    {"type": "bytes", "optional": False, "field": "value"},
                ],
            ),
            {"scale": 20, "value": b64_int(1500)},
            "decimal(38,18)",
            "0.000000000000000015",
        ),
    ],
    "texts": [
        (connect_field("doc", "string", "io.debezium.data.Json"), '{"a": 1}', "string", '{"a": 1}'),
        (connect_field("xml", "string", "io.debezium.data.Xml"), "<a>1</a>", "string", "<a>1</a>"),
        (
            connect_field("uid", "string", "io.debezium.data.Uuid"),
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "string",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        ),
        (
            connect_field("mood", "string", "io.debezium.data.Enum", parameters={"allowed": "a,b"}),
            "b",
            "string",
            "b",
        ),
        (
            connect_field(
                "tags", "string", "io.debezium.data.EnumSet", parameters={"allowed": "a,b,c"}
            ),
            "a,c",
            "string",
            "a,c",
        ),
        (
            connect_field("bits", "bytes", "io.debezium.data.Bits", parameters={"length": "8"}),
            "BQ==",
            "binary",
            "BQ==",
        ),
        (  # an unknown logical name is read as its Connect type
            connect_field("custom", "double", "com.example.Celsius"),
            21.5,
            "double",
            21.5,
        ),
    ],
    "nested": [
        (
            connect_field("ints", "array", items={"type": "int32", "optional": True}),
            [1, None, 3],
            "array<int>",
            [1, None, 3],
        ),
        (
            connect_field(
                "stamps",
                "array",
                items={"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1},
            ),
            [1_000_000, -1],
            "array<timestamp>",
            [1_000_000, -1],
        ),
        (  # hstore.handling.mode=map
            connect_field(
                "attrs",
                "map",
                keys={"type": "string", "optional": False},
                values={"type": "string", "optional": True},
            ),
            {"k": "v", "e": None},
            "map<string,string>",
            {"k": "v", "e": None},
        ),
        (  # keys that are not strings: an array of [key, value] pairs
            connect_field(
                "scores",
                "map",
                keys={"type": "int32", "optional": False},
                values={"type": "double", "optional": True},
            ),
            [[1, 0.5], [2, 2.0]],
            "map<int,double>",
            {1: 0.5, 2: 2.0},
        ),
        (
            connect_field(
                "pair",
                "struct",
                fields=[
                    {"type": "int32", "optional": False, "field": "x"},
                    connect_field("at", "int64", "io.debezium.time.MicroTimestamp"),
                ],
            ),
            {"x": 7, "at": 5_000_000},
            "struct<x:int,at:timestamp>",
            (7, 5_000_000),
        ),
        (
            connect_field(
                "geom", "struct", "io.debezium.data.geometry.Geometry", fields=_GEOMETRY_FIELDS
            ),
            {"wkb": _WKB_POINT, "srid": 4326},
            "struct<wkb:binary,srid:int>",
            (_WKB_POINT, 4326),
        ),
        (
            connect_field(
                "geog", "struct", "io.debezium.data.geometry.Geography", fields=_GEOMETRY_FIELDS
            ),
            {"wkb": _WKB_POINT, "srid": 4326},
            "struct<wkb:binary,srid:int>",
            (_WKB_POINT, 4326),
        ),
        (
            connect_field(
                "pt",
                "struct",
                "io.debezium.data.geometry.Point",
                fields=[
                    {"type": "double", "optional": False, "field": "x"},
                    {"type": "double", "optional": False, "field": "y"},
                    *_GEOMETRY_FIELDS[:1],
                    {"type": "int32", "optional": True, "field": "srid"},
                ],
            ),
            {"x": 1.0, "y": 2.0, "wkb": _WKB_POINT, "srid": None},
            "struct<x:double,y:double,wkb:binary,srid:int>",
            (1.0, 2.0, _WKB_POINT, None),
        ),
    ],
}


#: Decimal columns for :data:`DECIMAL_FITS`: ``numeric`` (VariableScaleDecimal, silver
#: decimal(38,18)), ``numeric(50,2)`` (silver decimal(38,2)) and ``numeric(12,4)``.
DECIMAL_FIELDS: list[dict[str, Any]] = [
    connect_field(
        "n",
        "struct",
        "io.debezium.data.VariableScaleDecimal",
        fields=[
            {"type": "int32", "optional": False, "field": "scale"},
            {"type": "bytes", "optional": False, "field": "value"},
        ],
    ),
    connect_field(
        "wide",
        "bytes",
        "org.apache.kafka.connect.data.Decimal",
        parameters={"scale": "2", "connect.decimal.precision": "50"},
    ),
    connect_field(
        "small",
        "bytes",
        "org.apache.kafka.connect.data.Decimal",
        parameters={"scale": "4", "connect.decimal.precision": "12"},
    ),
]

_NUMERIC_FIX = (
    "(declare the column's precision in PostgreSQL, or set Debezium decimal.handling.mode=string)"
)
_DECIMAL_FIX = (
    "(declare the column's precision as at most 38 in PostgreSQL, "
    "or set Debezium decimal.handling.mode=string)"
)


def _vsd(scale: int, unscaled: int) -> dict[str, Any]:
    return {"scale": scale, "value": b64_int(unscaled)}


def _misfit(column: str, target: str, why: str) -> str:
    fix = _NUMERIC_FIX if column == "n" else _DECIMAL_FIX
    return f"value of column {column} does not fit {target}: {why} {fix}"


#: Decimal values at the edges of their silver type: ``(column, JSON value, canonical value
#: when it fits, else None, quarantine reason when it does not, else None)``.
DECIMAL_FITS: list[tuple[str, Any, str | None, str | None]] = [
    ("n", _vsd(0, 10**20 - 1), "99999999999999999999.000000000000000000", None),
    ("n", _vsd(0, -(10**20) + 1), "-99999999999999999999.000000000000000000", None),
    ("n", _vsd(0, 10**20), None, _misfit("n", "decimal(38,18)", "21 digits before the point")),
    ("n", _vsd(0, -(10**20)), None, _misfit("n", "decimal(38,18)", "21 digits before the point")),
    ("n", _vsd(3, 10**27), None, _misfit("n", "decimal(38,18)", "25 digits before the point")),
    ("n", _vsd(18, 1), "0.000000000000000001", None),
    ("n", _vsd(18, -(10**38) + 1), "-99999999999999999999.999999999999999999", None),
    ("n", _vsd(19, 1), None, _misfit("n", "decimal(38,18)", "19 digits after the point")),
    ("n", _vsd(19, -15), None, _misfit("n", "decimal(38,18)", "19 digits after the point")),
    ("n", _vsd(20, 1), None, _misfit("n", "decimal(38,18)", "20 digits after the point")),
    ("n", _vsd(0, 0), "0.000000000000000000", None),
    ("n", _vsd(0, 7), "7.000000000000000000", None),
    ("n", _vsd(-3, 5), "5000.000000000000000000", None),  # a negative scale: 5E+3
    ("n", _vsd(1000, 0), "0.000000000000000000", None),
    ("n", _vsd(1000, 1), None, _misfit("n", "decimal(38,18)", "1000 digits after the point")),
    ("n", _vsd(40, 10**22), "0.000000000000000001", None),  # trailing zeros are no loss
    ("n", _vsd(18, 10**38), None, _misfit("n", "decimal(38,18)", "more than 38 digits")),
    ("n", {"scale": 2, "value": "!!"}, None, "unparseable"),
    ("wide", b64_int(10**38 - 1), "9" * 36 + ".99", None),
    ("wide", b64_int(-(10**38) + 1), "-" + "9" * 36 + ".99", None),
    ("wide", b64_int(10**38), None, _misfit("wide", "decimal(38,2)", "more than 38 digits")),
    ("wide", b64_int(-(10**45)), None, _misfit("wide", "decimal(38,2)", "more than 38 digits")),
    ("small", b64_int(10**12 - 1), "99999999.9999", None),
    (
        "small",
        b64_int(10**12),
        None,
        _misfit("small", "decimal(12,4)", "9 digits before the point"),
    ),
]


def spark_jobs(spark: SparkSession, group: str, run: Callable[[], object]) -> int:
    """How many Spark jobs ``run`` starts (in this thread, under the job group ``group``)."""
    spark.sparkContext.setJobGroup(group, group)
    try:
        run()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
