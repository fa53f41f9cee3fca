"""Debezium JSON: Kafka Connect schemas to Spark types, and the value decoders (pure).

A Debezium message with ``schemas.enable=true`` carries the Connect schema of its row. Each
column maps to the Spark type its JSON value has (``raw_type``) and a decoder from that JSON
value to the column's real type: ``MicroTimestamp`` (µs) and ``Timestamp`` (ms) to timestamp,
``ZonedTimestamp`` (ISO-8601) to timestamp, ``Date`` (days) to date, ``Decimal`` (base64 of the
big-endian two's-complement unscaled value) to ``decimal(p, s)``, ``bytes`` (base64) to binary.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

#: Postgres TOAST placeholder: "this column did not change".
UNAVAILABLE_VALUE = "__debezium_unavailable_value"

Decoder = Callable[[Column], Column]

_PRIMITIVES: Mapping[str, DataType] = {
    "int8": ByteType(),
    "int16": ShortType(),
    "int32": IntegerType(),
    "int64": LongType(),
    "float32": FloatType(),
    "float64": DoubleType(),
    "boolean": BooleanType(),
    "string": StringType(),
    "bytes": StringType(),
}

#: Fields of ``source`` used for ordering and provenance, for every connector.
SOURCE_TYPE = StructType(
    [
        StructField("connector", StringType()),
        StructField("name", StringType()),
        StructField("db", StringType()),
        StructField("schema", StringType()),
        StructField("table", StringType()),
        StructField("ts_ms", LongType()),
        StructField("sequence", StringType()),
        StructField("lsn", LongType()),
        StructField("file", StringType()),
        StructField("pos", LongType()),
        StructField("row", IntegerType()),
    ]
)


@dataclass(frozen=True)
class ColumnCodec:
    """One column: its JSON-side Spark type and the decoder to its real type."""

    name: str
    raw_type: DataType
    decode: Decoder
    toastable: bool


def _identity(column: Column) -> Column:
    return column


def codec_for(field: Mapping[str, Any]) -> ColumnCodec:
    """Map one Connect schema field (``{"type", "name", "parameters", "field"}``) to a codec."""
    name = str(field["field"])
    connect_type = str(field.get("type", "string"))
    logical = field.get("name")
    if logical in ("io.debezium.time.MicroTimestamp",):
        return ColumnCodec(name, LongType(), F.timestamp_micros, False)
    if logical in ("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"):
        return ColumnCodec(name, LongType(), F.timestamp_millis, False)
    if logical == "io.debezium.time.NanoTimestamp":
        return ColumnCodec(name, LongType(), lambda c: F.timestamp_micros(F.floor(c / 1000)), False)
    if logical == "io.debezium.time.ZonedTimestamp":
        return ColumnCodec(name, StringType(), lambda c: c.cast("timestamp"), False)
    if logical in ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date"):
        return ColumnCodec(name, IntegerType(), F.date_from_unix_date, False)
    if logical == "org.apache.kafka.connect.data.Decimal":
        parameters = field.get("parameters") or {}
        scale = int(parameters.get("scale", 0))
        precision = int(parameters.get("connect.decimal.precision", 38))
        return ColumnCodec(name, StringType(), _decimal_decoder(precision, scale), False)
    if connect_type == "bytes":
        return ColumnCodec(name, StringType(), F.unbase64, True)
    if connect_type == "array":
        element = codec_for({**(field.get("items") or {}), "field": "item"})
        return ColumnCodec(name, ArrayType(element.raw_type), _identity, False)
    if connect_type in _PRIMITIVES:
        raw = _PRIMITIVES[connect_type]
        return ColumnCodec(name, raw, _identity, isinstance(raw, StringType))
    # Nested structs and maps are kept as their JSON text.
    return ColumnCodec(name, StringType(), _identity, False)


def row_codecs(connect_struct: Mapping[str, Any]) -> list[ColumnCodec]:
    """Codecs for the fields of a Connect ``struct`` schema, in schema order."""
    return [codec_for(field) for field in connect_struct.get("fields", [])]


def envelope_row_schema(envelope_schema: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The row struct (``after``, else ``before``) of a Debezium envelope's Connect schema."""
    by_name = {f.get("field"): f for f in envelope_schema.get("fields", [])}
    for side in ("after", "before"):
        if side in by_name and by_name[side].get("type") == "struct":
            row: Mapping[str, Any] = by_name[side]
            return row
    return None


def inferred_codecs(row_type: StructType) -> list[ColumnCodec]:
    """Codecs for rows without a Connect schema: keep the types JSON inference found."""
    return [
        ColumnCodec(f.name, f.dataType, _identity, isinstance(f.dataType, StringType))
        for f in row_type.fields
    ]


def merge_codecs(groups: Sequence[Sequence[ColumnCodec]]) -> list[ColumnCodec]:
    """Union of columns over several schema versions; a later version's codec wins."""
    merged: dict[str, ColumnCodec] = {}
    for group in groups:
        for codec in group:
            merged[codec.name] = codec
    return list(merged.values())


def raw_struct(codecs: Sequence[ColumnCodec]) -> StructType:
    """The JSON-side struct type for ``from_json``."""
    return StructType([StructField(c.name, c.raw_type) for c in codecs])


def _decimal_decoder(precision: int, scale: int) -> Decoder:
    """Decode base64 big-endian two's complement (up to 16 bytes) to ``decimal(p, s)``.

    A negative value is decoded as ``-(~x + 1)``: the complement's digits are the magnitude
    minus one, which keeps every intermediate value within ``decimal(38, 0)``.
    """
    target = DecimalType(min(precision, 38), scale)
    unit = F.lit(Decimal(1).scaleb(-scale))
    negative_unit = F.lit(Decimal(-1).scaleb(-scale))

    def decode(encoded: Column) -> Column:
        hex_digits = F.hex(F.unbase64(encoded))
        negative = F.conv(F.substring(hex_digits, 1, 1), 16, 10).cast("int") >= 8
        complement = F.translate(hex_digits, "0123456789ABCDEF", "FEDCBA9876543210")
        # Spark's unary minus on decimal(38, 0) loses digits; multiply by a signed unit instead.
        return (
            F.when(negative, (_hex_to_decimal(complement) + 1) * negative_unit)
            .otherwise(_hex_to_decimal(hex_digits) * unit)
            .cast(target)
        )

    return decode


_WIDE = DecimalType(38, 0)


def _hex_to_decimal(hex_digits: Column) -> Column:
    """Unsigned value of up to 32 hex digits, in two halves (``conv`` handles 64 bits)."""
    padded = F.lpad(hex_digits, 32, "0")
    high = F.conv(F.substring(padded, 1, 16), 16, 10).cast(_WIDE)
    low = F.conv(F.substring(padded, 17, 16), 16, 10).cast(_WIDE)
    return high * F.lit(Decimal(2**64)) + low
