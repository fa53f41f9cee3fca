"""Debezium JSON: Kafka Connect schemas to Spark types, and the value decoders (pure).

A Debezium message with ``schemas.enable=true`` carries the Connect schema of its row. Each
column maps to the Spark type its JSON value has (``raw_type``, what ``from_json`` reads) and a
decoder from that JSON value to the column's real type. Every Connect type (``int8`` ...
``double``, ``bytes``, ``array``, ``map``, ``struct``) and every Debezium logical type has its
Spark type; the table is "Debezium types" in docs/silver-semantics.md. A logical name this
module does not know is decoded as its Connect type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    AtomicType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

#: Postgres TOAST placeholder: "this column did not change".
UNAVAILABLE_VALUE = "__debezium_unavailable_value"

Decoder = Callable[[Column], Column]

#: Connect primitive types as the JsonConverter names them (``float32``/``float64`` are the
#: names of Connect's Java enum, accepted too) and their Spark types.
_PRIMITIVES: Mapping[str, DataType] = {
    "int8": ByteType(),
    "int16": ShortType(),
    "int32": IntegerType(),
    "int64": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "float32": FloatType(),
    "float64": DoubleType(),
    "boolean": BooleanType(),
    "string": StringType(),
}

#: Spark type of ``io.debezium.data.VariableScaleDecimal`` (``numeric`` without precision):
#: Spark's own JDBC type for such a column.
VARIABLE_SCALE_DECIMAL = DecimalType(38, 18)
_MICROS_PER_DAY = 86_400_000_000
#: ``io.debezium.time.ZonedTime``: ``HH:MM[:SS[.fraction]]`` and ``Z`` or an offset.
_ISO_TIME = (
    r"^([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:[.,]([0-9]+))?)?"
    r"(Z|z|([+-])([0-9]{2})(?::?([0-9]{2}))?)?\z"
)

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
        StructField("snapshot", StringType()),
    ]
)


@dataclass(frozen=True)
class Staged:
    """A decoding in two projections, so that its costly part runs once per row: ``prepare``
    (JSON value -> an intermediate value, computed in its own projection), then over that
    value ``decode`` and ``check`` (column name -> the quarantine reason of a value the decoder
    cannot hold exactly, which it decodes to null; null if it can)."""

    prepare: Decoder
    decode: Decoder
    check: Callable[[Column, str], Column]

    def read(self, value: Column) -> Column:
        """Decode a JSON value in one projection."""
        return self.decode(self.prepare(value))


@dataclass(frozen=True)
class ColumnCodec:
    """One column: its JSON-side Spark type and the decoder to its real type.

    ``staged``: the same decoding in two projections, with its quarantine check (None: every
    value decodes exactly). ``decoded_type``: the type of the decoded value (None: the JSON-side
    type, which the decoder keeps).
    """

    name: str
    raw_type: DataType
    decode: Decoder
    toastable: bool
    staged: Staged | None = None
    decoded_type: DataType | None = None

    @property
    def type(self) -> DataType:
        """The Spark type of the decoded value."""
        return self.raw_type if self.decoded_type is None else self.decoded_type


def identity(column: Column) -> Column:
    """The decoder of a value whose JSON type is its column's type: the value itself."""
    return column


@dataclass(frozen=True)
class _Typed:
    """How a Connect schema is read: the JSON-side type, the decoder, the decoded type."""

    raw: DataType
    decode: Decoder
    type: DataType
    staged: Staged | None = None


def codec_for(field: Mapping[str, Any]) -> ColumnCodec:
    """Map one Connect schema field (``{"type", "name", "parameters", "field", ...}``, as
    :func:`check_schema` accepts it) to a codec. A column can carry the TOAST placeholder if
    it is text or binary in silver."""
    typed = _typed(field)
    name = str(field["field"])
    toastable = isinstance(typed.raw, StringType) and isinstance(
        typed.type, StringType | BinaryType
    )
    return ColumnCodec(name, typed.raw, typed.decode, toastable, typed.staged, typed.type)


def _typed(schema: Mapping[str, Any]) -> _Typed:
    """How a schema :func:`check_schema` accepted is read."""
    logical = schema.get("name")
    if isinstance(logical, str) and logical in _LOGICAL:
        return _LOGICAL[logical](schema)
    connect_type = schema["type"]
    if connect_type in _PRIMITIVES:
        primitive = _PRIMITIVES[connect_type]
        return _Typed(primitive, identity, primitive)
    if connect_type == "bytes":
        return _Typed(StringType(), _base64_bytes, BinaryType())
    if connect_type == "array":
        return _array(_typed(schema["items"]))
    if connect_type == "map":
        return _map(_typed(schema["keys"]), _typed(schema["values"]))
    return _struct(schema)


def _array(element: _Typed) -> _Typed:
    decode = identity if element.decode is identity else lambda c: F.transform(c, element.decode)
    return _Typed(ArrayType(element.raw), decode, ArrayType(element.type))


def _map(key: _Typed, value: _Typed) -> _Typed:
    """A map: a JSON object when its keys are strings, else an array of ``[key, value]``
    pairs (the JsonConverter's two forms)."""
    decoded = MapType(key.type, value.type)
    if isinstance(key.raw, StringType):

        def from_object(column: Column) -> Column:
            if key.decode is not identity:
                column = F.transform_keys(column, lambda k, _: key.decode(k))
            if value.decode is not identity:
                column = F.transform_values(column, lambda _, v: value.decode(v))
            return column

        return _Typed(MapType(StringType(), value.raw), from_object, decoded)

    def from_pairs(column: Column) -> Column:
        entries = F.transform(
            column,
            lambda pair: F.struct(
                key.decode(_from_text(pair[0], key.raw)).alias("key"),
                value.decode(_from_text(pair[1], value.raw)).alias("value"),
            ),
        )
        return F.when(column.isNotNull(), F.map_from_entries(entries))

    return _Typed(ArrayType(ArrayType(StringType())), from_pairs, decoded)


#: Base64 as the JsonConverter writes it (RFC 4648 section 4: the standard alphabet, padded,
#: nothing else). Spark's own decoder also takes text without padding or with spaces.
BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?\z"


def _base64_bytes(text: Column) -> Column:
    """:data:`BASE64` text as bytes; null for any other text (``unbase64`` fails the batch)."""
    return F.when(text.rlike(BASE64), F.try_to_binary(text, F.lit("base64")))


def _from_text(text: Column, raw: DataType) -> Column:
    """A JSON value read as text (a string unquoted, anything else its JSON) in type ``raw``."""
    if isinstance(raw, StringType):
        return text
    if isinstance(raw, AtomicType):
        return text.try_cast(raw)  # garbage is null, never a failed batch (ANSI casts raise)
    return F.from_json(text, raw if isinstance(raw, ArrayType | StructType) else raw.simpleString())


def decoding_of(schema: Mapping[str, Any]) -> Any:
    """What decides how a checked schema's values are decoded, as a JSON value: two schemas
    with the same one decode alike (whatever their nullability, docs or unread names)."""
    logical = schema.get("name")
    if logical == _DECIMAL:
        return [logical, *_decimal_parameters(schema["parameters"])]
    if isinstance(logical, str) and logical in _LOGICAL:
        return logical
    kind = schema["type"]
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind].simpleString()
    if kind == "array":
        return [kind, decoding_of(schema["items"])]
    if kind == "map":
        return [kind, decoding_of(schema["keys"]), decoding_of(schema["values"])]
    if kind == "struct":
        return [kind, [[f["field"], decoding_of(f)] for f in struct_fields(schema)]]
    return kind


def _struct(schema: Mapping[str, Any]) -> _Typed:
    fields = [(str(f["field"]), _typed(f)) for f in struct_fields(schema)]
    raw = StructType([StructField(name, t.raw) for name, t in fields])
    decoded = StructType([StructField(name, t.type) for name, t in fields])
    if all(t.decode is identity for _, t in fields):
        return _Typed(raw, identity, decoded)

    def decode(column: Column) -> Column:
        members = [t.decode(column[name]).alias(name) for name, t in fields]
        return F.when(column.isNotNull(), F.struct(*members))

    return _Typed(raw, decode, decoded)


# --------------------------------------------------------------------------------------------
# Logical types
# --------------------------------------------------------------------------------------------


def _simple(raw: DataType, decode: Decoder, decoded: DataType) -> Callable[[Any], _Typed]:
    typed = _Typed(raw, decode, decoded)
    return lambda _schema: typed


def _floor_div(column: Column, divisor: int) -> Column:
    """Exact floor division of a bigint (also below zero)."""
    return F.floor(column.cast(DecimalType(20, 0)) / F.lit(divisor)).cast(LongType())


def _zoned_time_micros(text: Column) -> Column:
    """``io.debezium.time.ZonedTime`` to microseconds since midnight UTC (null if unreadable)."""

    def number(group: int, width: int = 0) -> Column:
        digits = F.regexp_extract(text, _ISO_TIME, group)
        if width:
            digits = F.rpad(F.substring(digits, 1, width), width, "0")
        return F.coalesce(digits.try_cast(LongType()), F.lit(0))

    sign = F.when(F.regexp_extract(text, _ISO_TIME, 6) == "-", -1).otherwise(1)
    offset_minutes = sign * (number(7) * 60 + number(8))
    seconds = (number(1) * 60 + number(2) - offset_minutes) * 60 + number(3)
    micros = seconds * 1_000_000 + number(4, 6)
    return F.when(text.rlike(_ISO_TIME), F.pmod(micros, F.lit(_MICROS_PER_DAY)))


def _unscaled_text(encoded: Column) -> Column:
    """The signed decimal digits of a base64 big-endian two's-complement integer; null if it
    has more than 38 digits.

    A negative value is decoded as ``-(~x + 1)``: the complement's digits are the magnitude
    minus one, which keeps every intermediate value within ``decimal(38, 0)``.
    """
    hex_digits = F.hex(_base64_bytes(encoded))
    negative = F.substring(hex_digits, 1, 1).isin(*"89ABCDEF")
    complement = F.translate(hex_digits, "0123456789ABCDEF", "FEDCBA9876543210")
    magnitude = F.when(negative, F.try_add(_hex_to_decimal(complement), F.lit(1))).otherwise(
        _hex_to_decimal(hex_digits)
    )
    return F.concat(F.when(negative, F.lit("-")).otherwise(F.lit("")), magnitude.cast("string"))


_WIDE = DecimalType(38, 0)


def _hex_to_decimal(hex_digits: Column) -> Column:
    """Unsigned value of hex digits as ``decimal(38, 0)``, in two 64-bit halves (``conv``
    handles 64 bits); null beyond 38 decimal digits."""
    significant = F.regexp_replace(hex_digits, "^0+", "")
    padded = F.lpad(significant, 32, "0")
    high = F.conv(F.substring(padded, 1, 16), 16, 10).cast(_WIDE)
    low = F.conv(F.substring(padded, 17, 16), 16, 10).cast(_WIDE)
    value = F.try_add(F.try_multiply(high, F.lit(Decimal(2**64))), low)
    return F.when(F.length(significant) <= 32, value)


def _scaled(unscaled: Column, exponent: Column, target: DecimalType) -> Column:
    """``unscaled * 10**exponent`` as ``target`` (the text ``<digits>E<exponent>`` is cast, so
    no digit is lost on the way); only called for a value :func:`_misfit` accepts, so exact."""
    return F.concat(unscaled, F.lit("E"), exponent.cast("string")).try_cast(target)


#: The end of the quarantine reason of a decimal value that does not fit its silver type.
VARIABLE_SCALE_FIX = (
    "declare the column's precision in PostgreSQL, or set Debezium decimal.handling.mode=string"
)
DECIMAL_FIX = (
    "declare the column's precision as at most 38 in PostgreSQL, "
    "or set Debezium decimal.handling.mode=string"
)


def _misfit(unscaled: Column, scale: Column, target: DecimalType) -> Column:
    """Why ``unscaled * 10**-scale`` is not exactly a value of ``target`` (null: it is).

    ``unscaled``: signed decimal digits, null when there are more than 38 of them. Digits
    before the point: the unscaled digits less the scale; digits after the point: the scale
    less the unscaled value's trailing zeros (a zero after the last nonzero digit is no loss).
    """
    magnitude = F.regexp_replace(unscaled, "^-", "")
    significant = F.regexp_replace(magnitude, "0+$", "")
    wide_scale = scale.cast(LongType())
    before = F.length(magnitude).cast(LongType()) - wide_scale
    after = wide_scale - (F.length(magnitude) - F.length(significant))
    head = f"does not fit {target.simpleString()}: "
    return (
        F.when(unscaled.isNull(), F.lit(head + "more than 38 digits"))
        .when(magnitude == "0", F.lit(None).cast(StringType()))
        .when(
            before > target.precision - target.scale,
            F.concat(F.lit(head), before.cast("string"), F.lit(" digits before the point")),
        )
        .when(
            after > target.scale,
            F.concat(F.lit(head), after.cast("string"), F.lit(" digits after the point")),
        )
    )


def _decimal_staged(target: DecimalType, fix: str, prepare: Decoder) -> Staged:
    """A decimal read from what ``prepare`` makes of the JSON value (see
    :func:`_prepared_decimal`): its value as ``target`` if that holds it exactly, else null and
    the reason ``value of column <c> does not fit <target>: ... (<fix>)``, or ``unparseable``
    when it is no number."""

    def decode(prepared: Column) -> Column:
        digits, scale = prepared["digits"], prepared["scale"]
        fits = _misfit(digits, scale, target).isNull()
        return F.when(fits, _scaled(digits, -scale.cast(LongType()), target))

    def check(prepared: Column, name: str) -> Column:
        problem = _misfit(prepared["digits"], prepared["scale"], target)
        reason = F.concat(F.lit(f"value of column {name} "), problem, F.lit(f" ({fix})"))
        unreadable = ~prepared["readable"] | prepared["scale"].isNull()
        return F.when(prepared.isNotNull(), F.when(unreadable, "unparseable").otherwise(reason))

    return Staged(prepare, decode, check)


def _prepared_decimal(encoded: Column, scale: Column, present: Column) -> Column:
    """The costly part of decoding a decimal, computed once per row: the signed digits of the
    base64 unscaled value, the scale, and whether the base64 was readable; null if the JSON
    value was null."""
    return F.when(
        present,
        F.struct(
            _unscaled_text(encoded).alias("digits"),
            scale.alias("scale"),
            _base64_bytes(encoded).isNotNull().alias("readable"),
        ),
    )


def _decimal(schema: Mapping[str, Any]) -> _Typed:
    """``org.apache.kafka.connect.data.Decimal``: base64 unscaled value, ``scale`` parameter,
    as ``decimal(min(precision, 38), scale)``; a value with more digits does not fit."""
    precision, scale = _decimal_parameters(schema["parameters"])
    target = DecimalType(precision, scale)
    staged = _decimal_staged(
        target,
        DECIMAL_FIX,
        lambda encoded: _prepared_decimal(encoded, F.lit(scale), encoded.isNotNull()),
    )
    return _Typed(StringType(), staged.read, target, staged)


_VARIABLE_SCALE_RAW = StructType(
    [StructField("scale", IntegerType()), StructField("value", StringType())]
)


def _variable_scale_decimal(_schema: Mapping[str, Any]) -> _Typed:
    """``io.debezium.data.VariableScaleDecimal`` (``{scale, value}``) as ``decimal(38, 18)``;
    a value that is not exactly one of that type does not fit."""
    staged = _decimal_staged(
        VARIABLE_SCALE_DECIMAL,
        VARIABLE_SCALE_FIX,
        lambda value: _prepared_decimal(value["value"], value["scale"], value.isNotNull()),
    )
    return _Typed(_VARIABLE_SCALE_RAW, staged.read, VARIABLE_SCALE_DECIMAL, staged)


_TIMESTAMP, _DATE, _TIME_OF_DAY = TimestampType(), DateType(), LongType()
#: The most epoch milliseconds a timestamp holds (its microseconds fill a bigint).
_MAX_MILLIS = (2**63 - 1) // 1000
#: ``io.debezium.time.ZonedTimestamp`` as Debezium writes it: ISO-8601 date and time with
#: seconds and an offset. Spark's cast also reads other forms (a time alone: today's).
ISO_TIMESTAMP = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.][0-9]{1,9})?"
    r"(?:Z|[+-][0-9]{2}(?::?[0-9]{2})?)\z"
)


def timestamp_from_millis(millis: Column) -> Column:
    """Epoch milliseconds (bigint) as a timestamp; null where there is no such timestamp
    (``timestamp_millis`` fails the batch there)."""
    return F.when(millis.between(-_MAX_MILLIS, _MAX_MILLIS), F.timestamp_millis(millis))


def _zoned_timestamp(text: Column) -> Column:
    """:data:`ISO_TIMESTAMP` text (year 1 and later) as a timestamp; null for other text."""
    iso = text.rlike(ISO_TIMESTAMP) & ~text.startswith("0000")
    return F.when(iso, text.try_cast(_TIMESTAMP))


#: Debezium and Connect logical types: schema -> how it is read. Times of day are bigint
#: microseconds since midnight (Spark 4.0 has no time type Delta can store), durations bigint
#: microseconds (Delta stores no interval type).
_LOGICAL: Mapping[str, Callable[[Mapping[str, Any]], _Typed]] = {
    "io.debezium.time.Date": _simple(IntegerType(), F.date_from_unix_date, _DATE),
    "org.apache.kafka.connect.data.Date": _simple(IntegerType(), F.date_from_unix_date, _DATE),
    "io.debezium.time.Timestamp": _simple(LongType(), timestamp_from_millis, _TIMESTAMP),
    "org.apache.kafka.connect.data.Timestamp": _simple(
        LongType(), timestamp_from_millis, _TIMESTAMP
    ),
    "io.debezium.time.MicroTimestamp": _simple(LongType(), F.timestamp_micros, _TIMESTAMP),
    "io.debezium.time.NanoTimestamp": _simple(
        LongType(), lambda c: F.timestamp_micros(_floor_div(c, 1000)), _TIMESTAMP
    ),
    "io.debezium.time.ZonedTimestamp": _simple(StringType(), _zoned_timestamp, _TIMESTAMP),
    "io.debezium.time.Time": _simple(
        IntegerType(), lambda c: c.cast(LongType()) * 1000, _TIME_OF_DAY
    ),
    "org.apache.kafka.connect.data.Time": _simple(
        IntegerType(), lambda c: c.cast(LongType()) * 1000, _TIME_OF_DAY
    ),
    "io.debezium.time.MicroTime": _simple(LongType(), identity, _TIME_OF_DAY),
    "io.debezium.time.NanoTime": _simple(LongType(), lambda c: _floor_div(c, 1000), _TIME_OF_DAY),
    "io.debezium.time.ZonedTime": _simple(StringType(), _zoned_time_micros, _TIME_OF_DAY),
    "io.debezium.time.MicroDuration": _simple(LongType(), identity, LongType()),
    "org.apache.kafka.connect.data.Decimal": _decimal,
    "io.debezium.data.VariableScaleDecimal": _variable_scale_decimal,
}


class SchemaProblem(ValueError):
    """A Connect schema that cannot be decoded; the message is its records' quarantine reason."""


#: The types of Connect schemas as the JsonConverter writes them (see :data:`_PRIMITIVES`).
CONNECT_TYPES = frozenset({*_PRIMITIVES, "bytes", "array", "map", "struct"})
#: How deep Connect schemas may nest (Debezium's: envelope, row, column, array items).
MAX_SCHEMA_DEPTH = 32
_DECIMAL = "org.apache.kafka.connect.data.Decimal"
#: A whole number parameter (the JsonConverter writes parameters as text).
_WHOLE = re.compile(r"[0-9]{1,10}")


def check_schema(schema: Any, where: str, depth: int = 1) -> Mapping[str, Any]:
    """``schema`` if it is a Connect schema this module can read, checked all the way down.

    That is a JSON object whose ``type`` is one of :data:`CONNECT_TYPES`; its ``name`` (if
    not null) a string, its ``parameters`` (if not null) an object of strings; a ``struct``'s
    ``fields`` (if not null) a list of such schemas each named by a string ``field``, no name
    twice (letter case aside); an ``array`` has ``items``, a ``map`` ``keys`` and ``values``; a
    ``Decimal`` has a ``scale`` and maybe a ``connect.decimal.precision`` parameter (whole
    numbers; the scale at most the precision and 38); nothing nests deeper than
    :data:`MAX_SCHEMA_DEPTH`. Other members (``optional``, ``default``, ``doc``, ...) are
    not read. ``where`` names the schema in the message.

    Raises:
        SchemaProblem: ``invalid Connect schema: <where>: <what is wrong>``.
    """
    if not isinstance(schema, dict):
        raise _problem(f"{where} is not an object: {_shown(schema)}")
    if depth > MAX_SCHEMA_DEPTH:
        raise _problem(f"{where} nests deeper than {MAX_SCHEMA_DEPTH} schemas")
    kind, name, parameters = schema.get("type"), schema.get("name"), schema.get("parameters")
    if not isinstance(kind, str) or kind not in CONNECT_TYPES:
        raise _problem(f"{where}: type {_shown(kind)} is not a Connect type")
    if name is not None and not isinstance(name, str):
        raise _problem(f"{where}: name {_shown(name)} is not a string")
    if parameters is not None and not isinstance(parameters, dict):
        raise _problem(f"{where}: parameters {_shown(parameters)} are not an object")
    for parameter, value in (parameters or {}).items():
        if not isinstance(value, str):
            raise _problem(f"{where}: parameter {parameter!r} {_shown(value)} is not a string")
    if name == _DECIMAL:
        try:
            _decimal_parameters(parameters or {})
        except ValueError as error:
            raise _problem(f"{where}: {error}") from None
    if kind == "struct":
        _check_fields(struct_fields(schema), where, depth)
    for member in {"array": ("items",), "map": ("keys", "values")}.get(kind, ()):
        check_schema(schema.get(member), f"{where} > {member}", depth + 1)
    return schema


def struct_fields(schema: Mapping[str, Any]) -> Any:
    """The ``fields`` of a struct schema (none when absent or null)."""
    fields = schema.get("fields")
    return [] if fields is None else fields


def _check_fields(fields: Any, where: str, depth: int) -> None:
    if not isinstance(fields, list):
        raise _problem(f"{where}: fields {_shown(fields)} are not a list")
    seen: set[str] = set()
    for number, field in enumerate(fields):
        if not isinstance(field, dict):
            raise _problem(f"{where} > field {number} is not an object: {_shown(field)}")
        name = field.get("field")
        if not isinstance(name, str):
            raise _problem(f"{where} > field {number}: name {_shown(name)} is not a string")
        if name.lower() in seen:
            raise _problem(f"{where}: field {name!r} is repeated (letter case aside)")
        seen.add(name.lower())
        check_schema(field, f"{where} > field {name!r}", depth + 1)


def _decimal_parameters(parameters: Mapping[str, Any]) -> tuple[int, int]:
    """(precision, scale) of a ``Decimal`` schema; precision at most 38 (38 when not given).

    Raises:
        ValueError: the message says which parameter is wrong.
    """
    numbers = []
    for what, default in (("scale", None), ("connect.decimal.precision", "38")):
        text = parameters.get(what, default)
        if not isinstance(text, str) or not _WHOLE.fullmatch(text):
            raise ValueError(f"decimal parameter {what!r} {_shown(text)} is not a whole number")
        numbers.append(int(text))
    scale, precision = numbers
    if precision == 0 or scale > min(precision, 38):
        raise ValueError(f"decimal scale {scale} does not fit precision {precision}")
    return min(precision, 38), scale


def _problem(what: str) -> SchemaProblem:
    return SchemaProblem(f"invalid Connect schema: {what}")


def _shown(value: Any) -> str:
    """A JSON value in a message, cut to 40 characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError):  # an integer of thousands of digits, deep nesting
        text = f"<a JSON {type(value).__name__}>"
    return text if len(text) <= 40 else text[:37] + "..."


def row_codecs(connect_struct: Mapping[str, Any]) -> list[ColumnCodec]:
    """Codecs for the fields of a Connect ``struct`` schema :func:`check_schema` accepted, in
    schema order (whatever their names: which ones silver keeps is decided there)."""
    return [codec_for(field) for field in struct_fields(connect_struct)]


#: The row schema of an envelope without ``after`` and ``before``: no columns.
_NO_ROW: Mapping[str, Any] = {"type": "struct", "fields": []}


def envelope_row_schema(envelope_schema: Any) -> Mapping[str, Any]:
    """The row struct (``after``, else ``before``; without both, one of no fields) of a
    Debezium envelope's Connect schema, once the whole schema is checked
    (:func:`check_schema`).

    Raises:
        SchemaProblem: the schema cannot be read, is no struct, or its ``after`` or ``before``
            is no struct.
    """
    schema = _struct_schema(envelope_schema, "value schema")
    sides = {f["field"]: f for f in struct_fields(schema) if f["field"] in ("after", "before")}
    for side, field in sides.items():
        if field["type"] != "struct":
            raise _problem(
                f"value schema > field {side!r}: type {_shown(field['type'])} is not struct"
            )
    row: Mapping[str, Any] = sides.get("after", sides.get("before", _NO_ROW))
    return row


def key_struct(key_schema: Any) -> Mapping[str, Any] | None:
    """The Connect schema of a record key, once checked (:func:`check_schema`), if it is a
    struct (None: a key of another type, which has no key columns).

    Raises:
        SchemaProblem: the schema cannot be read.
    """
    schema = check_schema(key_schema, "key schema")
    return schema if schema["type"] == "struct" else None


def _struct_schema(schema: Any, where: str) -> Mapping[str, Any]:
    checked = check_schema(schema, where)
    if checked["type"] != "struct":
        raise _problem(f"{where}: type {_shown(checked['type'])} is not struct")
    return checked


def raw_struct(codecs: Sequence[ColumnCodec]) -> StructType:
    """The JSON-side struct type for ``from_json``."""
    return StructType([StructField(c.name, c.raw_type) for c in codecs])
