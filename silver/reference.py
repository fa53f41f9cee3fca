"""Reference fold: the expected silver table of one topic, computed in plain Python.

This module is the independent oracle for ``docs/silver-semantics.md``. ``lakehouse verify``
and the property tests compare the Spark MERGE output against :func:`fold`, so this code is
written for clarity, not speed: no Spark, no pandas, one pass to read the records, one sort,
one pass to apply them.

How it works:

1. Every bronze record is read into an event (or counted as a tombstone, or quarantined with
   one of the reasons ``unparseable``, ``payload is not an object``, ``missing op``,
   ``unknown op``, ``source is not an object``, ``after is not an object``, ``before is not an
   object``, ``missing key``, ``missing sequence``, ``incompatible type for column ...``,
   ``value of column <c> does not fit decimal(p,s): ...``).
2. The events are sorted by their order ``(sequence, bronze partition, bronze offset)``.
3. They are applied in that order to a ``key -> row`` dictionary: an upsert replaces the row
   (TOAST placeholders, and nulls under ``ignore_null_updates``, take the value of the row
   being replaced), a delete removes the key, a truncate removes every row. Because the fold
   is sorted, everything applied before an event is older than it, which is exactly the
   contract's "lower order is ignored" rule. An upsert meeting ``apply_as_truncates`` or
   ``apply_as_deletes`` is applied as a truncate or a delete.
4. The table keeps the key columns, the columns ``column_list`` / ``except_column_list``
   select, and the metadata columns.

The conditions are parsed by ``core.conditions`` (a small grammar, shared so that both
sides read the same text the same way) and evaluated here in plain Python, independently of
the Spark column expressions the job builds from the same tree.

Rows use the contract's canonical values: timestamps as int epoch microseconds (UTC), dates as
int days since the epoch, decimals as strings with exactly ``scale`` fraction digits, binary
as the base64 string, floats as the nearest 32-bit float, arrays as lists, maps as dicts,
structs as tuples of their fields (schema order), everything else as the JSON value. Values
with a Connect schema are decoded here from the schema's type names, in plain Python (the
table "Debezium types" in docs/silver-semantics.md), never by the Spark decoders.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import math
import re
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, localcontext
from typing import Any, Literal

from core.conditions import And, Compare, Condition, IsNull, Not, parse_condition

__all__ = [
    "METADATA_COLUMNS",
    "TOAST_PLACEHOLDER",
    "BronzeRecord",
    "FoldResult",
    "FoldSpec",
    "canonical_key",
    "fold",
]

#: Placeholder Debezium writes for an unchanged out-of-line (TOASTed) value.
TOAST_PLACEHOLDER = "__debezium_unavailable_value"

#: Metadata columns every silver row carries, in this order after the data columns.
METADATA_COLUMNS = (
    "_sequence",
    "_op",
    "_source_ts",
    "_bronze_topic",
    "_bronze_partition",
    "_bronze_offset",
)

# Quarantine reasons (the contract's wording).
UNPARSEABLE = "unparseable"
MISSING_OP = "missing op"
UNKNOWN_OP = "unknown op"
NOT_AN_OBJECT = "{} is not an object"  # payload, source, after, before: present, not an object
MISSING_KEY = "missing key"
MISSING_SEQUENCE = "missing sequence"
#: A decimal value its silver type does not hold exactly: ``value of column <c> does not fit
#: decimal(p,s): <why> (<fix>)``, with these fixes.
VARIABLE_SCALE_FIX = (
    "declare the column's precision in PostgreSQL, or set Debezium decimal.handling.mode=string"
)
DECIMAL_FIX = (
    "declare the column's precision as at most 38 in PostgreSQL, "
    "or set Debezium decimal.handling.mode=string"
)

# Kafka Connect logical type name with a parameter-dependent type (the others: _LOGICAL_TYPES).
_DECIMAL = "org.apache.kafka.connect.data.Decimal"

_UPSERT_OPS = ("c", "u", "r")
_EVENT_COLUMN_TYPES = ("string", "int", "bigint", "double", "boolean", "timestamp", "date")

_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_DIGITS = re.compile(r"[0-9]+")
_ISO_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_ISO_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2})"
    r"(?::([0-9]{2})(?:[.,]([0-9]+))?)?"
    r"(Z|z|[+-][0-9]{2}(?::?[0-9]{2})?)?"
)
_ISO_TIME = re.compile(
    r"([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:[.,]([0-9]+))?)?"
    r"(Z|z|([+-])([0-9]{2})(?::?([0-9]{2}))?)?"
)
_MICROS_PER_DAY = 86_400_000_000


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BronzeRecord:
    """One bronze row: the Kafka coordinates and the raw key and value bytes."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class FoldSpec:
    """How to read the records of one table (the parts of ``TableSpec`` the fold needs).

    ``keys``: key columns; for ``debezium`` the default is the fields of the record key, and
    when given they are read from ``after`` (``before`` for deletes). ``sequence_by``: ordering
    columns, read from the row image; required for ``events`` and for Debezium connectors other
    than ``postgresql`` and ``mysql`` (when given it replaces the connector's sequence).
    ``column_types`` (``events`` only): the declared columns and their types, one of
    ``string, int, bigint, double, boolean, timestamp, date``; when given, the table has
    exactly these columns (plus any undeclared key and ``sequence_by`` columns).
    ``apply_as_deletes`` / ``apply_as_truncates``: conditions (``core.conditions``
    grammar) on an upsert's image that make it a delete / a truncate (truncate first).
    ``column_list`` / ``except_column_list``: the non-key columns the table keeps.
    ``ignore_null_updates``: a null column of an upsert takes the previous version's value.
    ``table_types`` (``debezium`` only): the silver table's column types (Spark type names,
    e.g. ``bigint``, ``decimal(12,2)``). A record with a Connect schema whose value in a column
    has a type the table's type does not hold (docs/silver-semantics.md, "Schema changes") is
    quarantined as ``incompatible type for column <c>: table <type>, record <type>``; the
    other values are read in the table's type (a decimal with the table's scale).
    """

    format: Literal["debezium", "events"] = "debezium"
    keys: tuple[str, ...] | None = None
    sequence_by: tuple[str, ...] | None = None
    column_types: Mapping[str, str] | None = None
    apply_as_deletes: str | None = None
    apply_as_truncates: str | None = None
    column_list: tuple[str, ...] | None = None
    except_column_list: tuple[str, ...] | None = None
    ignore_null_updates: bool = False
    table_types: Mapping[str, str] | None = None


@dataclass(frozen=True)
class FoldResult:
    """The expected silver table.

    ``rows``: key tuple (canonical values in key column order) -> row with every column of the
    table (missing ones ``None``) and the metadata columns. ``quarantined``: records and their
    reasons, in input order. ``skipped_tombstones``: records with a null value.
    """

    rows: dict[tuple[Any, ...], dict[str, Any]]
    quarantined: list[tuple[BronzeRecord, str]]
    skipped_tombstones: int


def canonical_key(values: Sequence[Any]) -> tuple[Any, ...]:
    """Return a hashable key tuple for canonical key values.

    Scalars (str, int, float, bool, None) are kept as they are; a JSON object or array (only
    possible for an unusual key column type) becomes its compact JSON text with sorted keys.
    """
    return tuple(
        json.dumps(v, sort_keys=True, separators=(",", ":")) if isinstance(v, dict | list) else v
        for v in values
    )


def fold(records: Iterable[BronzeRecord], spec: FoldSpec) -> FoldResult:
    """Fold the bronze records of one topic into the expected silver table."""
    _check_spec(spec)

    events: list[_Event] = []
    quarantined: list[tuple[BronzeRecord, str]] = []
    skipped_tombstones = 0
    for record in records:
        if record.value is None:
            skipped_tombstones += 1
            continue
        try:
            if spec.format == "events":
                events.append(_read_events_record(record, spec))
            else:
                events.append(_read_debezium_record(record, spec))
        except _Quarantine as problem:
            quarantined.append((record, problem.reason))

    # All columns ever seen, in first-seen order (input order, so that it is deterministic for
    # a given input; the set of columns does not depend on the order).
    columns: dict[str, None] = {}
    if spec.format == "events" and spec.column_types is not None:
        columns.update(dict.fromkeys(spec.keys or ()))
        columns.update(dict.fromkeys(spec.column_types))
        columns.update(dict.fromkeys(spec.sequence_by or ()))
    else:
        for event in events:
            columns.update(dict.fromkeys(event.columns))
    for name in METADATA_COLUMNS:
        columns.pop(name, None)

    truncates, deletes = _condition(spec.apply_as_truncates), _condition(spec.apply_as_deletes)
    events = [_with_conditions(event, truncates, deletes) for event in events]
    events.sort(key=lambda e: e.sort_key)

    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    for event in events:
        if event.kind == "truncate":
            state.clear()
        elif event.kind == "delete":
            assert event.key is not None
            state.pop(event.key, None)
        else:
            assert event.key is not None
            row = _upserted_row(event, state.get(event.key), columns, spec)
            row["_sequence"] = event.sequence
            row["_op"] = event.op
            row["_source_ts"] = event.source_ts
            row["_bronze_topic"] = event.record.topic
            row["_bronze_partition"] = event.record.partition
            row["_bronze_offset"] = event.record.offset
            state[event.key] = row

    key_columns = {name for event in events for name in event.key_columns}
    kept = [name for name in columns if name in key_columns or _keeps(spec, name)]
    all_columns = [*kept, *METADATA_COLUMNS]
    rows = {key: {name: row.get(name) for name in all_columns} for key, row in state.items()}
    return FoldResult(rows=rows, quarantined=quarantined, skipped_tombstones=skipped_tombstones)


def _upserted_row(
    event: _Event, previous: dict[str, Any] | None, columns: Iterable[str], spec: FoldSpec
) -> dict[str, Any]:
    """The image of an upsert; its partial columns (TOAST placeholders, and with
    ``ignore_null_updates`` nulls) take the previous version's value if there is one."""
    row = dict(event.image)
    partial = set(event.toast_columns)
    if spec.ignore_null_updates:
        partial.update(name for name in columns if row.get(name) is None)
    if previous is not None:
        for name in partial:
            row[name] = previous.get(name)
    return row


# --------------------------------------------------------------------------------------------
# Table settings: conditions and kept columns
# --------------------------------------------------------------------------------------------


def _condition(text: str | None) -> Condition | None:
    return None if text is None else parse_condition(text, "the fold")


def _with_conditions(
    event: _Event, truncates: Condition | None, deletes: Condition | None
) -> _Event:
    """An upsert whose image meets ``truncates`` becomes a truncate, else one that meets
    ``deletes`` a delete."""
    if event.kind != "upsert":
        return event
    if truncates is not None and _holds(truncates, event.image) is True:
        return replace(event, kind="truncate")
    if deletes is not None and _holds(deletes, event.image) is True:
        return replace(event, kind="delete")
    return event


def _holds(condition: Condition, row: Mapping[str, Any]) -> bool | None:
    """SQL three-valued truth of ``condition`` on a canonical row (None: unknown). A value
    equals a literal only if both have the same JSON type (``1`` is not ``TRUE`` or ``'1'``)."""
    if isinstance(condition, Compare):
        value = row.get(condition.column)
        if value is None:
            return None
        equal = type(value) is type(condition.value) and value == condition.value
        return equal is not condition.negated
    if isinstance(condition, IsNull):
        return (row.get(condition.column) is None) is not condition.negated
    if isinstance(condition, Not):
        inner = _holds(condition.operand, row)
        return None if inner is None else not inner
    left, right = _holds(condition.left, row), _holds(condition.right, row)
    if isinstance(condition, And):
        if left is False or right is False:
            return False
        return None if left is None or right is None else True
    if left is True or right is True:
        return True
    return None if left is None or right is None else False


def _keeps(spec: FoldSpec, column: str) -> bool:
    """Whether the table keeps non-key column ``column``."""
    if spec.column_list is not None:
        return column in spec.column_list
    return column not in (spec.except_column_list or ())


# --------------------------------------------------------------------------------------------
# Events read from records
# --------------------------------------------------------------------------------------------


class _Quarantine(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Misfit(Exception):
    """A value its silver type cannot hold exactly; ``detail`` is the reason after the column
    name (``does not fit decimal(38,18): ...``)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class _Event:
    """A valid change event, ready to be sorted and applied."""

    record: BronzeRecord
    kind: Literal["upsert", "delete", "truncate"]
    key: tuple[Any, ...] | None  # None only for truncate
    sequence_order: tuple[Any, ...]  # comparable form of the sequence
    sequence: Any  # canonical ``_sequence`` value
    op: str
    source_ts: int | None
    image: dict[str, Any] = field(default_factory=dict)  # canonical after image (upserts)
    toast_columns: tuple[str, ...] = ()  # string columns holding the TOAST placeholder
    columns: tuple[str, ...] = ()  # the table columns this event shows
    key_columns: tuple[str, ...] = ()  # the names of the key columns

    @property
    def sort_key(self) -> tuple[Any, ...]:
        # The order is (sequence, partition, offset). The rest only makes the sort
        # deterministic for malformed input with repeated coordinates (e.g. several topics).
        record = self.record
        return (
            self.sequence_order,
            record.partition,
            record.offset,
            record.topic,
            record.key is not None,
            record.key or b"",
            record.value or b"",
        )


def _check_spec(spec: FoldSpec) -> None:
    if spec.format not in ("debezium", "events"):
        raise ValueError(f"unknown format {spec.format!r}")
    if spec.format == "events":
        if not spec.keys:
            raise ValueError("events tables need keys")
        if not spec.sequence_by:
            raise ValueError("events tables need sequence_by")
    elif spec.column_types is not None:
        raise ValueError("column_types is for events tables only")
    if spec.format == "events" and spec.table_types is not None:
        raise ValueError("table_types is for debezium tables only")
    for name, type_name in (spec.column_types or {}).items():
        if type_name not in _EVENT_COLUMN_TYPES:
            raise ValueError(f"column {name!r}: unsupported type {type_name!r}")
    if spec.column_list is not None and spec.except_column_list is not None:
        raise ValueError("column_list and except_column_list exclude each other")


def _read_events_record(record: BronzeRecord, spec: FoldSpec) -> _Event:
    assert spec.keys is not None and spec.sequence_by is not None
    value = _parse_json_object(record.value)
    types = spec.column_types

    image: dict[str, Any] = {}
    for name, raw in value.items():
        if types is None:
            image[name] = raw
        elif name in types:
            image[name] = _typed_event_value(raw, types[name])
        elif name in spec.keys or name in spec.sequence_by:
            image[name] = raw  # undeclared key or sequence column: the JSON value
    if types is not None:
        for name in types:
            image.setdefault(name, None)

    key = _key_from_image(value, image, spec.keys)
    sequence = _sequence_from_image(value, image, spec.sequence_by)
    return _Event(
        record=record,
        kind="upsert",
        key=key,
        sequence_order=_sequence_by_order(sequence),
        sequence=sequence,
        op="c",
        source_ts=None,
        image=image,
        columns=tuple(value),
        key_columns=spec.keys,
    )


def _read_debezium_record(record: BronzeRecord, spec: FoldSpec) -> _Event:
    # 2. The value must be a JSON object; with the wrapper the envelope is its payload.
    envelope, envelope_schema, wrapped = _read_envelope(record.value)

    # 3. Op.
    op = envelope.get("op")
    if op is None:
        raise _Quarantine(MISSING_OP)
    if op not in ("c", "u", "r", "d", "t"):
        raise _Quarantine(UNKNOWN_OP)
    kind: Literal["upsert", "delete", "truncate"]
    kind = "upsert" if op in _UPSERT_OPS else "delete" if op == "d" else "truncate"

    source = _object_or_none(envelope, "source") or {}

    # The row image the event is about (``after`` for upserts, ``before`` for deletes, none
    # for truncates), decoded by its connect schema when the wrapper is present. ``after`` must
    # be an object or null whatever the op; ``before`` only matters to a delete.
    after_fields = _struct_fields(envelope_schema, "after") if wrapped else {}
    after_raw = _object_or_none(envelope, "after")
    raw_image: dict[str, Any] | None = None
    image: dict[str, Any] | None = None
    image_fields: dict[str, dict[str, Any]] = {}
    misfits: dict[str, str] = {}  # column -> reason: a value silver cannot hold exactly
    if kind == "upsert":
        raw_image = after_raw
        image_fields = after_fields
        image = _decode_image(raw_image, after_fields, misfits)
    elif kind == "delete":
        raw_image = _object_or_none(envelope, "before")
        image_fields = _struct_fields(envelope_schema, "before") if wrapped else {}
        image = _decode_image(raw_image, image_fields, {})

    # 4. Key: the record key's fields by default, else the configured columns of the image.
    key: tuple[Any, ...] | None = None
    key_columns: tuple[str, ...] = ()
    if kind != "truncate":
        if spec.keys is None:
            key_columns, key = _key_from_record_key(record.key)
        else:
            key_columns = spec.keys
            key = _key_from_image(raw_image, image, key_columns)

    # 5. Sequence.
    sequence_order, sequence = _debezium_sequence(source, raw_image, image, spec.sequence_by)

    # 6. Types: the table must hold the type of every value the record carries.
    if spec.table_types is not None and wrapped and key is not None:
        key_fields = _record_key_fields(record.key) if spec.keys is None else image_fields
        row = after_raw if kind == "upsert" else None
        key, image = _in_table_types(
            spec.table_types,
            dict(zip(key_columns, key, strict=True)),
            key_fields,
            image,
            row,
            after_fields,
        )

    # 7. Values: a non-key value its column cannot hold exactly (the first column by name).
    # A key value that does not fit reads as null: the record is already ``missing key``.
    for name in sorted(misfits):
        if name not in key_columns:
            raise _Quarantine(misfits[name])

    image_out: dict[str, Any] = {}
    toast: tuple[str, ...] = ()
    if kind == "upsert":
        image_out = dict(image or {})
        if spec.keys is None:
            assert key is not None
            image_out.update(zip(key_columns, key, strict=True))
        toast = tuple(
            name
            for name, raw in (after_raw or {}).items()
            if raw == TOAST_PLACEHOLDER and _is_string_column(after_fields.get(name))
        )

    return _Event(
        record=record,
        kind=kind,
        key=key,
        sequence_order=sequence_order,
        sequence=sequence,
        op=op,
        source_ts=_source_ts_micros(source),
        image=image_out,
        toast_columns=toast,
        # Columns shown: the key columns, then the ``after`` schema's fields and values.
        columns=tuple(
            {
                **dict.fromkeys(key_columns),
                **dict.fromkeys(after_fields),
                **dict.fromkeys(after_raw or {}),
            }
        ),
        key_columns=key_columns,
    )


def _debezium_sequence(
    source: Mapping[str, Any],
    raw_image: Mapping[str, Any] | None,
    image: Mapping[str, Any] | None,
    sequence_by: Sequence[str] | None,
) -> tuple[tuple[Any, ...], Any]:
    """(comparable order, canonical ``_sequence``): configured columns, else by connector."""
    if sequence_by is not None:
        values = _sequence_from_image(raw_image, image, sequence_by)
        return _sequence_by_order(values), values
    if source.get("connector") == "postgresql":
        return _postgres_sequence(source)
    if source.get("connector") == "mysql":
        return _mysql_sequence(source)
    raise _Quarantine(MISSING_SEQUENCE)


def _source_ts_micros(source: Mapping[str, Any]) -> int | None:
    """``source.ts_ms`` (the source commit time) as epoch microseconds."""
    ts_ms = source.get("ts_ms")
    if not isinstance(ts_ms, int) or isinstance(ts_ms, bool):
        return None
    return ts_ms * 1000


def _read_envelope(value: bytes | None) -> tuple[dict[str, Any], Any, bool]:
    """The Debezium envelope, its connect schema (None without the wrapper) and whether the
    value had the ``{"schema": ..., "payload": ...}`` wrapper."""
    document = _parse_json_object(value)
    if not _is_wrapper(document):
        return document, None, False
    envelope = document["payload"]
    if not isinstance(envelope, dict):
        raise _Quarantine(NOT_AN_OBJECT.format("payload"))
    return envelope, document["schema"], True


def _is_wrapper(document: dict[str, Any]) -> bool:
    """True for the JSON converter's ``{"schema": ..., "payload": ...}`` form."""
    return set(document) == {"schema", "payload"}


def _parse_json_object(data: bytes | None) -> dict[str, Any]:
    parsed = _parse_json(data)
    if not isinstance(parsed, dict):
        raise _Quarantine(UNPARSEABLE)
    return parsed


def _parse_json(data: bytes | None) -> Any:
    if data is None:
        raise _Quarantine(UNPARSEABLE)
    try:
        return _loads(data)
    except ValueError as error:
        raise _Quarantine(UNPARSEABLE) from error


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")  # NaN, Infinity, -Infinity


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _loads(data: bytes) -> Any:
    """Strict JSON from UTF-8 bytes; raises ValueError (also for bad UTF-8, NaN, and nesting
    deeper than Python's recursion limit, which Spark's JSON reader does not follow either)."""
    try:
        return _DECODER.decode(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _object_or_none(envelope: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The envelope's ``name`` field (``source``, ``before``, ``after``): a JSON object, or
    None when it is absent or null; any other value quarantines the record."""
    value = envelope.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Quarantine(NOT_AN_OBJECT.format(name))
    return value


def _key_from_record_key(data: bytes | None) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """Key columns and canonical values from the Kafka record key (the Debezium default)."""
    if data is None:
        raise _Quarantine(MISSING_KEY)
    try:
        document = _loads(data)
    except ValueError as error:
        raise _Quarantine(MISSING_KEY) from error
    if not isinstance(document, dict):
        raise _Quarantine(MISSING_KEY)
    fields: dict[str, dict[str, Any]] = {}
    if _is_wrapper(document):
        fields = _connect_fields(document["schema"])
        document = document["payload"]
        if not isinstance(document, dict):
            raise _Quarantine(MISSING_KEY)
    if not document:
        raise _Quarantine(MISSING_KEY)
    values = []
    for name, raw in document.items():
        if raw is None:
            raise _Quarantine(MISSING_KEY)
        try:
            values.append(_decode_connect(raw, fields.get(name)))
        except (_Quarantine, _Misfit) as error:
            raise _Quarantine(MISSING_KEY) from error
    return tuple(document), canonical_key(values)


def _key_from_image(
    raw: Mapping[str, Any] | None, image: Mapping[str, Any] | None, names: Sequence[str]
) -> tuple[Any, ...]:
    """Key values (canonical) of the configured key columns from a row image."""
    if raw is None or image is None:
        raise _Quarantine(MISSING_KEY)
    values = []
    for name in names:
        if raw.get(name) is None or image.get(name) is None:
            raise _Quarantine(MISSING_KEY)
        values.append(image[name])
    return canonical_key(values)


def _sequence_from_image(
    raw: Mapping[str, Any] | None, image: Mapping[str, Any] | None, names: Sequence[str]
) -> tuple[Any, ...]:
    """Canonical values of the ``sequence_by`` columns; a column may be null, not absent."""
    if raw is None or image is None:
        raise _Quarantine(MISSING_SEQUENCE)
    if any(name not in raw for name in names):
        raise _Quarantine(MISSING_SEQUENCE)
    return tuple(image.get(name) for name in names)


def _sequence_by_order(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """Comparable form of ``sequence_by`` values: null first, then by value.

    Values of one column normally share a type; the type rank only keeps the sort total (and
    deterministic) if they do not.
    """
    return tuple(_sortable(v) for v in values)


def _sortable(value: Any) -> tuple[Any, ...]:
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, int | float):
        return (2, value)
    if isinstance(value, str):
        return (3, value)
    return (4, json.dumps(value, sort_keys=True, separators=(",", ":")))


def _postgres_sequence(source: Mapping[str, Any]) -> tuple[tuple[int, int], str]:
    """``source.sequence`` = ``["<last commit LSN>" | null, "<LSN>"]`` (a JSON string)."""
    sequence = source.get("sequence")
    if isinstance(sequence, str):
        try:
            sequence = _loads(sequence.encode("utf-8"))
        except ValueError as error:
            raise _Quarantine(MISSING_SEQUENCE) from error
    if not isinstance(sequence, list) or len(sequence) != 2:
        raise _Quarantine(MISSING_SEQUENCE)
    first, second = sequence
    if first is not None and not _is_decimal_string(first):
        raise _Quarantine(MISSING_SEQUENCE)
    if not _is_decimal_string(second):
        raise _Quarantine(MISSING_SEQUENCE)
    first_int = int(first) if first is not None else None
    second_int = int(second)
    order = (first_int if first_int is not None else -1, second_int)
    stored = f"{first_int or 0:020d}/{second_int:020d}"
    return order, stored


def _mysql_sequence(source: Mapping[str, Any]) -> tuple[tuple[str, int, int], str]:
    """``(source.file, source.pos, source.row)``."""
    file, pos, row = source.get("file"), source.get("pos"), source.get("row")
    if not isinstance(file, str) or not file:
        raise _Quarantine(MISSING_SEQUENCE)
    if not isinstance(pos, int) or isinstance(pos, bool) or pos < 0:
        raise _Quarantine(MISSING_SEQUENCE)
    if not isinstance(row, int) or isinstance(row, bool) or row < 0:
        raise _Quarantine(MISSING_SEQUENCE)
    return (file, pos, row), f"{file}/{pos:020d}/{row:010d}"


def _is_decimal_string(value: Any) -> bool:
    return isinstance(value, str) and _DIGITS.fullmatch(value) is not None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------
# Column types: which types a silver column holds (docs/silver-semantics.md, "Schema changes")
# --------------------------------------------------------------------------------------------

_INTEGER_TYPES = ("tinyint", "smallint", "int", "bigint")
_DECIMAL_TYPE = re.compile(r"decimal\(([0-9]+),([0-9]+)\)")
_CONNECT_TYPES = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float": "float",
    "double": "double",
    "float32": "float",  # Connect's Java enum names, accepted too
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
}


def _column_type(field_schema: Mapping[str, Any]) -> str | None:
    """The silver column type (Spark's type name) of a connect schema (None: not a readable
    schema). A logical name not known here is read as its connect type."""
    name = field_schema.get("name")
    if name == _DECIMAL:
        parameters = field_schema.get("parameters") or {}
        try:
            precision = int(parameters.get("connect.decimal.precision", 38))
            scale = int(parameters.get("scale", 0))
        except (TypeError, ValueError):
            return None
        return f"decimal({min(precision, 38)},{scale})"
    if isinstance(name, str) and name in _LOGICAL_TYPES:
        return _LOGICAL_TYPES[name][0]
    kind = field_schema.get("type", "string")
    if kind == "array":
        items = _column_type(_schema_of(field_schema.get("items")))
        return None if items is None else f"array<{items}>"
    if kind == "map":
        keys = _column_type(_schema_of(field_schema.get("keys")))
        values = _column_type(_schema_of(field_schema.get("values")))
        return None if keys is None or values is None else f"map<{keys},{values}>"
    if kind == "struct":
        members = []
        for name_, member in _connect_fields(field_schema).items():
            member_type = _column_type(member)
            if member_type is None:
                return None
            members.append(f"{name_}:{member_type}")
        return f"struct<{','.join(members)}>"
    return _CONNECT_TYPES.get(str(kind), "string")


def _schema_of(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _fits(record: str, table: str) -> bool:
    """Whether a ``table`` column holds every value of type ``record``: the same type, or one
    Delta 4.0 type widening reaches."""
    if record == table:
        return True
    if record in _INTEGER_TYPES and table in _INTEGER_TYPES:
        return _INTEGER_TYPES.index(record) <= _INTEGER_TYPES.index(table)
    if table == "double":
        return record in ("tinyint", "smallint", "int", "float")
    table_decimal = _DECIMAL_TYPE.fullmatch(table)
    if table_decimal is not None:
        precision, scale = (int(g) for g in table_decimal.groups())
        if record in _INTEGER_TYPES:
            return precision - scale >= (20 if record == "bigint" else 10)
        record_decimal = _DECIMAL_TYPE.fullmatch(record)
        if record_decimal is not None:
            record_precision, record_scale = (int(g) for g in record_decimal.groups())
            return scale >= record_scale and precision - scale >= record_precision - record_scale
    return record == "date" and table == "timestamp_ntz"


def _check_types(
    values: Mapping[str, Any],
    fields: Mapping[str, Mapping[str, Any]],
    table_types: Mapping[str, str],
) -> None:
    """Quarantine the record if a non-null value's type is one its table column cannot hold."""
    for name, value in values.items():
        field_schema, table = fields.get(name), table_types.get(name)
        if value is None or field_schema is None or table is None:
            continue
        record = _column_type(field_schema)
        if record is not None and not _fits(record, table):
            reason = f"incompatible type for column {name}: table {table}, record {record}"
            raise _Quarantine(reason)


def _in_table_types(
    table_types: Mapping[str, str],
    key: Mapping[str, Any],
    key_fields: Mapping[str, Mapping[str, Any]],
    image: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    after_fields: Mapping[str, Mapping[str, Any]],
) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
    """The key and image in the table's types, after checking the types of the key values and
    of the ``after`` values (upserts) against the table's."""
    _check_types(key, key_fields, table_types)
    _check_types(
        {n: v for n, v in (after or {}).items() if n not in key}, after_fields, table_types
    )
    typed_key = canonical_key([_in_type(v, table_types.get(n)) for n, v in key.items()])
    if image is None:
        return typed_key, None
    return typed_key, {n: _in_type(v, table_types.get(n)) for n, v in image.items()}


def _in_type(value: Any, table: str | None) -> Any:
    """A canonical value in its table column's type: only decimals change form (an integer or
    a decimal of a smaller scale gets the table's scale)."""
    decimal = _DECIMAL_TYPE.fullmatch(table or "")
    if value is None or decimal is None or isinstance(value, bool):
        return value
    if not isinstance(value, int | str):
        return value
    try:
        number = Decimal(str(value))
    except ArithmeticError:
        return value
    with localcontext() as context:
        context.prec = 100  # decimal(38, s) needs more than the default 28 digits
        return format(number.quantize(Decimal(1).scaleb(-int(decimal.group(2)))), "f")


def _record_key_fields(data: bytes | None) -> dict[str, dict[str, Any]]:
    """The connect fields of a record key with the schema wrapper (empty without)."""
    try:
        document = _loads(data) if data is not None else None
    except ValueError:
        return {}
    if not isinstance(document, dict) or not _is_wrapper(document):
        return {}
    return _connect_fields(document["schema"])


# --------------------------------------------------------------------------------------------
# Values: Debezium connect schemas and events column types -> canonical values
# --------------------------------------------------------------------------------------------


def _connect_fields(struct_schema: Any) -> dict[str, dict[str, Any]]:
    """Field name -> field schema of a connect ``struct`` schema (empty if there is none)."""
    if not isinstance(struct_schema, dict):
        return {}
    fields = struct_schema.get("fields")
    if not isinstance(fields, list):
        return {}
    result: dict[str, dict[str, Any]] = {}
    for item in fields:
        if isinstance(item, dict) and isinstance(item.get("field"), str):
            result[item["field"]] = item
    return result


def _struct_fields(envelope_schema: Any, name: str) -> dict[str, dict[str, Any]]:
    """Fields of the envelope's ``before`` or ``after`` struct schema."""
    return _connect_fields(_connect_fields(envelope_schema).get(name))


def _decode_image(
    image: Mapping[str, Any] | None,
    fields: Mapping[str, dict[str, Any]],
    misfits: dict[str, str],
) -> dict[str, Any] | None:
    """The canonical image; a value its type cannot hold exactly is None, and its reason is
    added to ``misfits``."""
    if image is None:
        return None
    decoded: dict[str, Any] = {}
    for name, raw in image.items():
        try:
            decoded[name] = _decode_connect(raw, fields.get(name))
        except _Misfit as misfit:
            decoded[name] = None
            misfits[name] = f"value of column {name} {misfit.detail}"
    return decoded


def _is_string_column(field_schema: dict[str, Any] | None) -> bool:
    """A string column in silver: connect type string read as text (not ``ZonedTimestamp`` or
    ``ZonedTime``), or any column when there is no schema (the placeholder is a string)."""
    if field_schema is None:
        return True
    return field_schema.get("type") == "string" and _column_type(field_schema) == "string"


def _decode_connect(value: Any, field_schema: Mapping[str, Any] | None) -> Any:
    """Canonical value of a JSON value under its connect schema (None: no schema)."""
    if value is None or field_schema is None:
        return value
    name = field_schema.get("name")
    if name == _DECIMAL:
        return _connect_decimal(value, field_schema.get("parameters"))
    if isinstance(name, str) and name in _LOGICAL_TYPES:
        return _LOGICAL_TYPES[name][1](value, field_schema)
    kind = field_schema.get("type")
    if kind in ("float", "float32"):
        return _float32(_json_float(value))
    if kind in ("double", "float64"):
        return _json_float(value)
    if kind == "array" and isinstance(value, list):
        items = _schema_of(field_schema.get("items"))
        return [_decode_nested(item, items) for item in value]
    if kind == "map":
        return _connect_map(value, field_schema)
    if kind == "struct" and isinstance(value, dict):
        fields = _connect_fields(field_schema)
        return tuple(_decode_nested(value.get(n), f) for n, f in fields.items())
    # Integers, booleans and strings are their JSON value; bytes (and the logical types read
    # as bytes) the base64 string the converter wrote, which is already their canonical form.
    return value


def _decode_nested(value: Any, field_schema: Mapping[str, Any] | None) -> Any:
    """A value inside an array, map or struct: one its type cannot hold exactly is None (only
    a column's own value quarantines its record)."""
    try:
        return _decode_connect(value, field_schema)
    except _Misfit:
        return None


def _connect_map(value: Any, field_schema: Mapping[str, Any]) -> dict[Any, Any]:
    """A map: a JSON object when its keys are strings, else a list of ``[key, value]``."""
    keys = _schema_of(field_schema.get("keys"))
    values = _schema_of(field_schema.get("values"))
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value):
        pairs = [(p[0], p[1]) for p in value]
    else:
        raise _Quarantine(UNPARSEABLE)
    return {_decode_nested(k, keys): _decode_nested(v, values) for k, v in pairs}


_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _json_float(value: Any) -> float:
    """A floating point JSON value (the converter writes NaN and infinities as strings)."""
    if isinstance(value, str) and value in _NON_FINITE:
        return _NON_FINITE[value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Quarantine(UNPARSEABLE)
    return float(value)


def _float32(value: float) -> float:
    """The nearest 32-bit float (what a ``float`` column holds)."""
    try:
        result: float = struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)
    return result


def _require_int(value: Any) -> int:
    if not _is_int(value):
        raise _Quarantine(UNPARSEABLE)
    result: int = value
    return result


def _whole(value: Any, _schema: Mapping[str, Any]) -> int:
    """A number already in the column's unit (µs, days, years)."""
    return _require_int(value)


def _thousandfold(value: Any, _schema: Mapping[str, Any]) -> int:
    """Milliseconds to microseconds."""
    return _require_int(value) * 1000


def _thousandth(value: Any, _schema: Mapping[str, Any]) -> int:
    """Nanoseconds to microseconds, floored (also before the epoch)."""
    return _require_int(value) // 1000


def _text(value: Any, _schema: Mapping[str, Any]) -> str:
    if not isinstance(value, str):
        raise _Quarantine(UNPARSEABLE)
    return value


def _connect_decimal(value: Any, parameters: Any) -> str:
    """Base64 big-endian two's-complement unscaled value + ``scale`` parameter -> "d.ddd" in
    ``decimal(min(precision, 38), scale)``.

    Raises:
        _Misfit: the value has more digits than that type holds.
    """
    if not isinstance(value, str) or not isinstance(parameters, dict):
        raise _Quarantine(UNPARSEABLE)
    try:
        scale = int(parameters["scale"])
        precision = int(parameters.get("connect.decimal.precision", 38))
    except (KeyError, TypeError, ValueError) as error:
        raise _Quarantine(UNPARSEABLE) from error
    if scale < 0:
        raise _Quarantine(UNPARSEABLE)
    return _exact_decimal(_unscaled(value), scale, min(precision, 38), scale, DECIMAL_FIX)


def _variable_scale_decimal(value: Any, _schema: Mapping[str, Any]) -> str:
    """``io.debezium.data.VariableScaleDecimal`` ``{scale, value}`` -> decimal(38, 18) text.

    Raises:
        _Misfit: the value is not exactly a decimal(38, 18).
    """
    if not isinstance(value, dict):
        raise _Quarantine(UNPARSEABLE)
    scale, encoded = _require_int(value.get("scale")), value.get("value")
    if not isinstance(encoded, str) or not -(2**31) <= scale < 2**31:  # scale is an int32
        raise _Quarantine(UNPARSEABLE)
    return _exact_decimal(_unscaled(encoded), scale, 38, 18, VARIABLE_SCALE_FIX)


def _unscaled(encoded: str) -> int:
    try:
        unscaled_bytes = base64.b64decode(encoded, validate=True)
    except (ValueError, binascii.Error) as error:
        raise _Quarantine(UNPARSEABLE) from error
    return int.from_bytes(unscaled_bytes, "big", signed=True)


def _exact_decimal(unscaled: int, scale: int, precision: int, target_scale: int, fix: str) -> str:
    """``unscaled * 10**-scale`` with exactly ``target_scale`` fraction digits.

    Raises:
        _Misfit: the unscaled value has more than 38 digits, or the value has more digits
            before the point than ``decimal(precision, target_scale)`` holds, or nonzero
            digits after its ``target_scale``-th fraction digit.
    """
    head = f"does not fit decimal({precision},{target_scale}): "
    if abs(unscaled) >= 10**38:
        raise _Misfit(f"{head}more than 38 digits ({fix})")
    if unscaled != 0:
        digits = str(abs(unscaled))
        before = len(digits) - scale
        after = scale - (len(digits) - len(digits.rstrip("0")))
        if before > precision - target_scale:
            raise _Misfit(f"{head}{before} digits before the point ({fix})")
        if after > target_scale:
            raise _Misfit(f"{head}{after} digits after the point ({fix})")
    with localcontext() as context:
        context.prec = 100  # exact: at most 38 digits, and the checks above bound the scale
        number = Decimal(unscaled).scaleb(-scale)
        return format(number.quantize(Decimal(1).scaleb(-target_scale)), "f")


def _iso_time_micros(value: Any, _schema: Mapping[str, Any]) -> int:
    """``io.debezium.time.ZonedTime`` (``HH:MM[:SS[.f]]`` and ``Z`` or an offset; none means
    UTC) -> microseconds since midnight UTC. Fractions beyond microseconds are truncated."""
    if not isinstance(value, str):
        raise _Quarantine(UNPARSEABLE)
    match = _ISO_TIME.fullmatch(value)
    if match is None:
        raise _Quarantine(UNPARSEABLE)
    hour, minute, second, fraction, _, sign, offset_hours, offset_minutes = match.groups()
    offset = int(offset_hours or 0) * 60 + int(offset_minutes or 0)
    minutes = int(hour) * 60 + int(minute) - (-offset if sign == "-" else offset)
    micros = (minutes * 60 + int(second or 0)) * 1_000_000 + int((fraction or "")[:6].ljust(6, "0"))
    return micros % _MICROS_PER_DAY


_Decode = Callable[[Any, Mapping[str, Any]], Any]

#: Debezium and Connect logical types (but ``Decimal``): name -> (silver column type, decoder of
#: the JSON value). Times of day are microseconds since midnight, durations microseconds. Any
#: other name (``Xml``, ``Uuid``, ``Enum``, ``EnumSet``, ``Interval``, ``Year``, ``Bits``, the
#: geometry structs, ...) is read as its connect type.
_LOGICAL_TYPES: dict[str, tuple[str, _Decode]] = {
    "io.debezium.time.Date": ("date", _whole),
    "org.apache.kafka.connect.data.Date": ("date", _whole),
    "io.debezium.time.Timestamp": ("timestamp", _thousandfold),
    "org.apache.kafka.connect.data.Timestamp": ("timestamp", _thousandfold),
    "io.debezium.time.MicroTimestamp": ("timestamp", _whole),
    "io.debezium.time.NanoTimestamp": ("timestamp", _thousandth),
    "io.debezium.time.ZonedTimestamp": ("timestamp", lambda v, _: _iso_timestamp_micros(v)),
    "io.debezium.time.Time": ("bigint", _thousandfold),
    "org.apache.kafka.connect.data.Time": ("bigint", _thousandfold),
    "io.debezium.time.MicroTime": ("bigint", _whole),
    "io.debezium.time.NanoTime": ("bigint", _thousandth),
    "io.debezium.time.ZonedTime": ("bigint", _iso_time_micros),
    "io.debezium.time.MicroDuration": ("bigint", _whole),
    "io.debezium.data.VariableScaleDecimal": ("decimal(38,18)", _variable_scale_decimal),
    "io.debezium.data.Json": ("string", _text),
}


def _iso_timestamp_micros(value: Any) -> int:
    """ISO-8601 timestamp (offset or ``Z``; none means UTC) -> epoch microseconds, UTC.

    Fractions beyond microseconds are truncated, i.e. floored.
    """
    if not isinstance(value, str):
        raise _Quarantine(UNPARSEABLE)
    match = _ISO_TIMESTAMP.fullmatch(value.strip())
    if match is None:
        raise _Quarantine(UNPARSEABLE)
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    days = _days(int(year), int(month), int(day))
    hour_i, minute_i, second_i = int(hour), int(minute), int(second or 0)
    if hour_i > 23 or minute_i > 59 or second_i > 59:
        raise _Quarantine(UNPARSEABLE)
    offset_seconds = 0
    if offset is not None and offset not in ("Z", "z"):
        sign = -1 if offset[0] == "-" else 1
        offset_digits = offset[1:].replace(":", "")
        offset_hours = int(offset_digits[:2])
        offset_minutes = int(offset_digits[2:] or 0)
        if offset_hours > 23 or offset_minutes > 59:
            raise _Quarantine(UNPARSEABLE)
        offset_seconds = sign * (offset_hours * 3600 + offset_minutes * 60)
    seconds = days * 86400 + hour_i * 3600 + minute_i * 60 + second_i - offset_seconds
    micros = int((fraction or "")[:6].ljust(6, "0"))
    return seconds * 1_000_000 + micros


def _iso_date_days(value: Any) -> int:
    if not isinstance(value, str):
        raise _Quarantine(UNPARSEABLE)
    match = _ISO_DATE.fullmatch(value.strip())
    if match is None:
        raise _Quarantine(UNPARSEABLE)
    year, month, day = match.groups()
    return _days(int(year), int(month), int(day))


def _days(year: int, month: int, day: int) -> int:
    try:
        return dt.date(year, month, day).toordinal() - _EPOCH_ORDINAL
    except ValueError as error:
        raise _Quarantine(UNPARSEABLE) from error


def _typed_event_value(value: Any, type_name: str) -> Any:
    """Canonical value of an ``events`` column of a declared type (strict: a JSON value of
    another type quarantines the record as ``unparseable``)."""
    if value is None:
        return None
    if type_name == "string":
        if not isinstance(value, str):
            raise _Quarantine(UNPARSEABLE)
        return value
    if type_name in ("int", "bigint"):
        bits = 32 if type_name == "int" else 64
        if not _is_int(value) or not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise _Quarantine(UNPARSEABLE)
        return value
    if type_name == "double":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Quarantine(UNPARSEABLE)
        return float(value)
    if type_name == "boolean":
        if not isinstance(value, bool):
            raise _Quarantine(UNPARSEABLE)
        return value
    if type_name == "timestamp":
        return _iso_timestamp_micros(value)
    if type_name == "date":
        return _iso_date_days(value)
    raise ValueError(f"unsupported column type {type_name!r}")
