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
   ``value of column <c> does not fit decimal(p,s): ...``, ``value of column <c> does not fit
   <type>``: a value its declared or Connect type does not hold, never read as null; under
   ``on_type_mismatch = "rescue"`` such values are kept in ``_rescued_data`` instead).
2. The events are sorted by their order ``(sequence, bronze partition, bronze offset)``.
3. They are applied in that order to a ``key -> row`` dictionary: an upsert replaces the row
   (TOAST placeholders, and nulls under ``ignore_null_updates``, take the value of the row
   being replaced), a delete removes the key, a truncate removes every row. Because the fold
   is sorted, everything applied before an event is older than it, which is exactly the
   contract's "lower order is ignored" rule. An upsert meeting ``apply_as_truncates`` or
   ``apply_as_deletes`` is applied as a truncate or a delete.
4. The table keeps the key columns, the columns ``column_list`` / ``except_column_list``
   select, and the metadata columns.

The conditions (Spark SQL expressions) are parsed and checked by ``lakehouse_core.conditions``,
shared so that both sides read the same text the same way, and evaluated in plain Python by its
:func:`~lakehouse_core.conditions.python.holds`, independently of the Spark column the job
builds from the same tree.

Rows use the contract's canonical values: timestamps as int epoch microseconds (UTC), dates as
int days since the epoch, decimals as strings with exactly ``scale`` fraction digits, binary
as the base64 string, floats as the nearest 32-bit float, arrays as lists, maps as dicts,
structs as tuples of their fields (schema order), everything else as the JSON value. Values
with a Connect schema are decoded here from the schema's type names, in plain Python (the
table "Debezium types" in docs/silver-semantics.md), never by the Spark decoders.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import re
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import (
    Decimal,
    localcontext,
)
from typing import Any, Literal, NamedTuple

from lakehouse_core import conditions as sql
from lakehouse_core.columns import METADATA_COLUMNS, OP, RESCUED, column_name_problem
from lakehouse_core.conditions import Condition, parse_condition
from lakehouse_core.conditions.python import holds, value_type
from silver.reference_snapshots import snapshot_end_truncates

__all__ = [
    "METADATA_COLUMNS",
    "RESCUED",
    "TOAST_PLACEHOLDER",
    "BronzeRecord",
    "FoldResult",
    "FoldSpec",
    "canonical_key",
    "fold",
]

#: Placeholder Debezium writes for an unchanged out-of-line (TOASTed) value.
TOAST_PLACEHOLDER = "__debezium_unavailable_value"


# Quarantine reasons (the contract's wording).
UNPARSEABLE = "unparseable"
MISSING_OP = "missing op"
UNKNOWN_OP = "unknown op"
NOT_AN_OBJECT = "{} is not an object"  # payload, source, after, before: present, not an object
MISSING_KEY = "missing key"
MISSING_SEQUENCE = "missing sequence"
#: A value its column's type does not hold (a string in a number column, a number out of an
#: integer's range, text that is no timestamp, an object where a flat value is due):
#: ``value of column <c> does not fit <type>`` (Spark's type name).
MISFIT = "value of column {} does not fit {}"
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
_JSON_BLANK = "[ \t\n\r]*"
#: Postgres ``source.sequence``: LSNs of at most 20 digits (as silver pads them).
_POSTGRES_SEQUENCE = re.compile(
    rf'{_JSON_BLANK}\[{_JSON_BLANK}(?:null|"([0-9]{{1,20}})"){_JSON_BLANK},'
    rf'{_JSON_BLANK}"([0-9]{{1,20}})"{_JSON_BLANK}\]{_JSON_BLANK}'
)
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
    """How to read the records of one table (the parts of ``TableSpec`` the fold needs: a
    field named as a setting of ``TableSpec`` takes its value, :func:`silver.verify.fold_spec`).

    ``keys``: key columns; for ``debezium`` the default is the fields of the record key, and
    when given they are read from ``after`` (``before`` for deletes). ``sequence_by``: ordering
    columns, read from the row image; required for ``events`` and for Debezium connectors other
    than ``postgresql`` and ``mysql`` (when given it replaces the connector's sequence).
    ``column_types`` (``events`` only): the declared columns and their types, one of
    ``string, int, bigint, double, boolean, timestamp, date``; when given, the table has
    exactly these columns (plus any undeclared key and ``sequence_by`` columns).
    ``apply_as_deletes`` / ``apply_as_truncates``: conditions (Spark SQL,
    ``lakehouse_core.conditions``)
    on an upsert's image that make it a delete / a truncate (truncate first).
    ``column_list`` / ``except_column_list``: the non-key columns the table keeps.
    ``ignore_null_updates``: a null column of an upsert takes the previous version's value;
    ``ignore_null_updates_column_list`` / ``..._except_column_list``: only for these columns /
    for all but these (either one replaces ``ignore_null_updates``).
    ``table_types`` (``debezium`` only): the silver table's column types (Spark type names,
    e.g. ``bigint``, ``decimal(12,2)``). A record with a Connect schema whose value in a column
    has a type the table's type does not hold (docs/silver-semantics.md, "Schema changes") is
    quarantined as ``incompatible type for column <c>: table <type>, record <type>``; the
    other values are read in the table's type (a decimal with the table's scale).
    ``on_type_mismatch``: what a value its column's type does not hold does (an ``events``
    table's declared types, a Debezium record's Connect schema): ``quarantine`` its record
    (``value of column <c> does not fit <type>``), or ``rescue`` it: the column is None and
    :data:`RESCUED` holds those values by column name, as sent (a dict; None: none). Such a
    table has the column :data:`RESCUED`.
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
    ignore_null_updates_column_list: tuple[str, ...] | None = None
    ignore_null_updates_except_column_list: tuple[str, ...] | None = None
    table_types: Mapping[str, str] | None = None
    on_type_mismatch: Literal["quarantine", "rescue"] = "quarantine"
    #: ``full``: a full snapshot's end removes what it did not read (silver.reference_snapshots).
    resnapshot: Literal["upsert", "full"] = "upsert"

    def ignores_nulls_of(self, column: str) -> bool:
        """Whether a null in ``column`` of an upsert keeps the previous value."""
        if self.ignore_null_updates_column_list is not None:
            return column in self.ignore_null_updates_column_list
        if self.ignore_null_updates_except_column_list is not None:
            return column not in self.ignore_null_updates_except_column_list
        return self.ignore_null_updates


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
    truncates, deletes = _condition(spec.apply_as_truncates), _condition(spec.apply_as_deletes)

    events: list[_Event] = []
    quarantined: list[tuple[BronzeRecord, str]] = []
    skipped_tombstones = 0
    records = list(records)
    record_keys = _record_key_columns(records) if spec.keys is None else ()
    for record in records:
        if record.value is None:
            skipped_tombstones += 1
            continue
        try:
            if spec.format == "events":
                events.append(_read_events_record(record, spec, truncates))
            else:
                events.append(_read_debezium_record(record, spec, truncates, record_keys))
        except _Quarantine as problem:
            quarantined.append((record, problem.reason))

    columns = _table_columns(events, spec)

    events = with_column_defaults(events)
    events = [_with_conditions(event, truncates, deletes, spec) for event in events]
    if spec.resnapshot == "full":
        events += snapshot_end_truncates(events)
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
            row[OP] = event.op
            row["_source_ts"] = event.source_ts
            row["_bronze_topic"] = event.record.topic
            row["_bronze_partition"] = event.record.partition
            row["_bronze_offset"] = event.record.offset
            state[event.key] = row

    key_columns = {name for event in events for name in event.key_columns}
    kept = [name for name in columns if name in (*key_columns, RESCUED) or _keeps(spec, name)]
    all_columns = [*kept, *METADATA_COLUMNS]
    rows = {key: {name: row.get(name) for name in all_columns} for key, row in state.items()}
    return FoldResult(rows=rows, quarantined=quarantined, skipped_tombstones=skipped_tombstones)


def _table_columns(events: Sequence[_Event], spec: FoldSpec) -> dict[str, None]:
    """All columns ever seen, in first-seen order (input order, so that it is deterministic
    for a given input; the set of columns does not depend on the order); :data:`RESCUED`
    last, for a table that rescues values its declared or Connect types do not hold."""
    columns: dict[str, None] = {}
    if spec.format == "events" and spec.column_types is not None:
        columns.update(dict.fromkeys(spec.keys or ()))
        columns.update(dict.fromkeys(spec.column_types))
        columns.update(dict.fromkeys(spec.sequence_by or ()))
    else:
        for event in events:
            columns.update(dict.fromkeys(event.columns))
    rescues = spec.on_type_mismatch == "rescue" and (
        spec.column_types is not None or RESCUED in columns
    )
    for name in [*columns]:
        if name in METADATA_COLUMNS or column_name_problem(name) is not None:
            columns.pop(name)
    if rescues:
        columns[RESCUED] = None
    return columns


def with_column_defaults(events: Sequence[_Event]) -> list[_Event]:
    """The events with the Connect defaults of the columns their schema lacks.

    A column's default is the one given by the schema of the first event in bronze order
    (partition, offset) that has the column (none if that schema gives none): the default it
    was added to the table with. An upsert read by a Connect schema without the column holds
    that default, as the source database's rows that predate the column do; an upsert read
    without a schema holds null there.
    """
    defaults: dict[str, Any] = {}
    seen: set[str] = set()
    for event in sorted(events, key=lambda e: (e.record.partition, e.record.offset)):
        for name in event.columns:
            if name not in seen:
                seen.add(name)
                given = dict(event.defaults or ())
                if name in given:
                    defaults[name] = given[name]
    filled = []
    for event in events:
        lacking = {n: v for n, v in defaults.items() if n not in event.columns}
        if event.kind == "upsert" and event.defaults is not None and lacking:
            filled.append(replace(event, image={**event.image, **lacking}))
        else:
            filled.append(event)
    return filled


def _upserted_row(
    event: _Event, previous: dict[str, Any] | None, columns: Iterable[str], spec: FoldSpec
) -> dict[str, Any]:
    """The image of an upsert; its partial columns (TOAST placeholders, and with
    ``ignore_null_updates`` nulls) take the previous version's value if there is one."""
    row = dict(event.image)
    partial = set(event.toast_columns)
    partial.update(
        name
        for name in columns
        if row.get(name) is None
        and name not in (*event.key_columns, RESCUED)
        and spec.ignores_nulls_of(name)
    )
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
    event: _Event, truncates: Condition | None, deletes: Condition | None, spec: FoldSpec
) -> _Event:
    """An upsert whose image meets ``truncates`` becomes a truncate, else one that meets
    ``deletes`` a delete (the image read in the types the job reads it in)."""
    if event.kind != "upsert" or (truncates is None and deletes is None):
        return event
    types = _image_types(event, spec)
    if truncates is not None and holds(truncates, event.image, types) is True:
        return replace(event, kind="truncate")
    if deletes is not None and holds(deletes, event.image, types) is True:
        return replace(event, kind="delete")
    return event


def _image_types(event: _Event, spec: FoldSpec) -> dict[str, str]:
    """The Spark types of an upsert image's columns: the declared ``schema`` of an events
    table; for Debezium the table's types, else the record's Connect schema; else the types of
    the JSON values (as Spark infers them)."""
    types = {name: value_type(value) for name, value in event.image.items()}
    if spec.format == "events":
        types.update(spec.column_types or {})
        return types
    _, envelope_schema, wrapped = _read_envelope(event.record.value)
    if wrapped:
        fields = _struct_fields(envelope_schema, "after")
        if spec.keys is None:
            fields.update(_record_key_fields(event.record.key))
        for name, field_schema in fields.items():
            types[name] = _column_type(field_schema) or types.get(name, sql.VOID)
    types.update({name: t for name, t in (spec.table_types or {}).items() if name in types})
    return types


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
    #: Read by its Connect schema: the row columns that schema gives a default, with the
    #: default's canonical value in the table's type (None: read without a schema).
    defaults: tuple[tuple[str, Any], ...] | None = None

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


def _read_events_record(
    record: BronzeRecord, spec: FoldSpec, truncates: Condition | None
) -> _Event:
    assert spec.keys is not None and spec.sequence_by is not None
    value = _parse_json_object(record.value)
    types = spec.column_types

    image: dict[str, Any] = {}
    misfits: dict[str, str] = {}  # column -> reason: a value its declared type does not hold
    for name, raw in value.items():
        if types is None:
            image[name] = raw
        elif name in types:
            try:
                image[name] = _typed_event_value(raw, types[name])
            except _Quarantine:
                image[name] = None
                misfits[name] = MISFIT.format(name, types[name])
        elif name in spec.keys or name in spec.sequence_by:
            image[name] = raw  # undeclared key or sequence column: the JSON value
    if types is not None:
        for name in types:
            image.setdefault(name, None)

    try:
        key: tuple[Any, ...] | None = _key_from_image(value, image, spec.keys)
    except _Quarantine:
        _require_keyless_truncate(value, image, spec.sequence_by, truncates)
        key = None
    sequence = _sequence_from_image(value, image, spec.sequence_by)
    if any(name in misfits for name in spec.sequence_by):
        raise _Quarantine(MISSING_SEQUENCE)  # read as null, as a column the record lacks
    if types is None and key is not None:
        _reject_refused_columns(value, spec.keys)
    if key is not None:
        image.update(_rescued_or_quarantined(misfits, value, spec.keys, spec))
    return _Event(
        record=record,
        kind="upsert" if key is not None else "truncate",
        key=key,
        sequence_order=_sequence_by_order(sequence),
        sequence=sequence,
        op="c",
        source_ts=None,
        image=image,
        columns=tuple(value),
        key_columns=spec.keys,
    )


def _require_keyless_truncate(
    raw: Mapping[str, Any] | None,
    image: Mapping[str, Any] | None,
    sequence_by: Sequence[str] | None,
    truncates: Condition | None,
) -> None:
    """Pass if an upsert without a key is a truncate: it meets ``truncates`` and has every
    ``sequence_by`` value (a truncate needs no key); else quarantine it as ``missing key``."""
    if truncates is None or image is None or holds(truncates, image) is not True:
        raise _Quarantine(MISSING_KEY)
    if sequence_by:
        try:
            values = _sequence_from_image(raw, image, sequence_by)
        except _Quarantine:
            raise _Quarantine(MISSING_KEY) from None
        if any(value is None for value in values):
            raise _Quarantine(MISSING_KEY)


def _reject_refused_columns(row: Mapping[str, Any] | None, keys: Sequence[str]) -> None:
    """Quarantine a record that carries a value in a column silver cannot keep."""
    for name, value in (row or {}).items():
        problem = column_name_problem(name)
        if value is not None and problem is not None and name not in keys:
            raise _Quarantine(problem)


def _read_debezium_record(
    record: BronzeRecord,
    spec: FoldSpec,
    truncates: Condition | None,
    record_keys: Sequence[str] | None = None,
) -> _Event:
    """The event of a record; ``record_keys``: the table's key columns when it has no ``keys``
    (:func:`_record_key_columns` of all its records; None: of this record alone)."""
    # 1. A Connect schema (of the value or of the key) that cannot be read: whatever it holds.
    _require_readable_schemas(record)

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
    # for truncates), decoded by the row schema when the wrapper is present (``row_fields``;
    # None without). ``after`` must be an object or null whatever the op; ``before`` only
    # matters to a delete.
    row_fields = _row_fields(envelope_schema) if wrapped else None
    after_fields = row_fields or {}
    after_raw = _object_or_none(envelope, "after")
    raw_image: dict[str, Any] | None = None
    image: dict[str, Any] | None = None
    misfits: dict[str, str] = {}  # column -> reason: a value silver cannot hold exactly
    if kind == "upsert":
        raw_image = after_raw
        image = _decode_image(raw_image, row_fields, misfits)
    elif kind == "delete":
        raw_image = _object_or_none(envelope, "before")
        image = _decode_image(raw_image, row_fields, {})

    # 4. Key: the record key's fields by default, else the configured columns of the image.
    key_columns, key = _debezium_key(record, spec, kind, raw_image, image, truncates, record_keys)
    if kind == "upsert" and key is None:
        kind = "truncate"

    # 5. Sequence (a keyless truncate without one is ``missing key``, as its key is checked
    # first).
    try:
        sequence_order, sequence = _debezium_sequence(source, raw_image, image, spec.sequence_by)
    except _Quarantine:
        if kind == "truncate" and op != "t":
            raise _Quarantine(MISSING_KEY) from None
        raise

    # 6. Types: the table must hold the type of every value the record carries.
    if spec.table_types is not None and wrapped and key is not None:
        key_fields = _record_key_fields(record.key) if spec.keys is None else after_fields
        row = _carried(after_raw, row_fields) if kind == "upsert" else None
        key, image = _in_table_types(
            spec.table_types,
            dict(zip(key_columns, key, strict=True)),
            key_fields,
            image,
            row,
            after_fields,
        )

    # 7. Values: a value in a column silver cannot keep (lakehouse_core.columns); then a non-key
    # value its column cannot hold exactly (the first column by name).
    # A keyless truncate was ``missing key`` before these checks.
    # A key value that does not fit reads as null: the record is already ``missing key``.
    if kind != "truncate" or op == "t":
        _reject_refused_columns(_carried(after_raw, row_fields), key_columns)
        rescued = _rescued_or_quarantined(misfits, after_raw or {}, key_columns, spec)
        image = {**image, **rescued} if kind == "upsert" and image is not None else image

    image_out: dict[str, Any] = {}
    toast: tuple[str, ...] = ()
    if kind == "upsert":
        image_out = dict(image or {})
        if spec.keys is None:
            assert key is not None
            image_out.update(zip(key_columns, key, strict=True))
        toast = _toast_columns(after_raw, row_fields)

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
        # Columns shown: the key columns, then the row schema's fields (without one, the
        # ``after`` image's).
        columns=tuple(
            {
                **dict.fromkeys(key_columns),
                **dict.fromkeys(after_raw or {} if row_fields is None else row_fields),
                # A record read by its Connect schema shows the rescued column too.
                **dict.fromkeys(
                    [RESCUED] if row_fields and spec.on_type_mismatch == "rescue" else []
                ),
            }
        ),
        key_columns=key_columns,
        defaults=None if row_fields is None else _defaults(row_fields, spec.table_types),
    )


def _defaults(
    fields: Mapping[str, Mapping[str, Any]], table_types: Mapping[str, str] | None
) -> tuple[tuple[str, Any], ...]:
    """The row columns whose Connect schema gives a ``default``, with its canonical value in
    the table's type (a default its type does not hold is None, as such a value reads)."""
    found = []
    for name, field_schema in fields.items():
        if field_schema.get("default") is None:
            continue
        try:
            value = _column_value(field_schema["default"], field_schema)
        except (_Misfit, _Unreadable):
            value = None
        table = (table_types or {}).get(name)
        found.append((name, _in_type(value, table, _column_type(field_schema))))
    return tuple(found)


def _rescued_or_quarantined(
    misfits: Mapping[str, str], raw: Mapping[str, Any], keys: Sequence[str], spec: FoldSpec
) -> dict[str, Any]:
    """What the values its columns' types do not hold (``misfits``: column -> reason) do to a
    record: quarantine it (the first such column by name; key columns aside, they are
    ``missing key`` already), or under ``on_type_mismatch = "rescue"`` give its image
    :data:`RESCUED` (the ``raw`` values of those columns; None: none)."""
    unfit = sorted(name for name in misfits if name not in keys)
    if spec.on_type_mismatch != "rescue":
        if unfit:
            raise _Quarantine(misfits[unfit[0]])
        return {}
    return {RESCUED: {name: raw[name] for name in unfit} or None}


def _toast_columns(
    after: Mapping[str, Any] | None, row_fields: Mapping[str, dict[str, Any]] | None
) -> tuple[str, ...]:
    """The string columns of an upsert's image (with a row schema: of its fields) holding the
    TOAST placeholder."""
    return tuple(
        name
        for name, raw in (after or {}).items()
        if raw == TOAST_PLACEHOLDER
        and (row_fields is None or name in row_fields)
        and _is_string_column(None if row_fields is None else row_fields[name])
    )


def _debezium_key(
    record: BronzeRecord,
    spec: FoldSpec,
    kind: str,
    raw_image: Mapping[str, Any] | None,
    image: Mapping[str, Any] | None,
    truncates: Condition | None,
    record_keys: Sequence[str] | None,
) -> tuple[tuple[str, ...], tuple[Any, ...] | None]:
    """(key columns, key) of a Debezium event: none for a truncate, or for an upsert without
    a key that is a truncate (:func:`_require_keyless_truncate`). ``record_keys``: the key
    columns in the record key (a table without ``keys``; None: this record's own)."""
    if kind == "truncate":
        return (), None
    try:
        if spec.keys is None:
            names = _record_key_columns([record]) if record_keys is None else record_keys
            return _key_from_record_key(record.key, names)
        return spec.keys, _key_from_image(raw_image, image, spec.keys)
    except _Quarantine:
        if kind != "upsert":
            raise
        _require_keyless_truncate(raw_image, image, spec.sequence_by, truncates)
        return (), None


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
    """``source.ts_ms`` (the source commit time) as epoch microseconds (None: not a bigint,
    or beyond the timestamps)."""
    ts_ms = source.get("ts_ms")
    if not isinstance(ts_ms, int) or isinstance(ts_ms, bool):
        return None
    return _millis_micros(ts_ms)


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
    """``source.sequence`` = ``["<last commit LSN>" | null, "<LSN>"]``: JSON text of that
    form, decimal strings of at most 20 digits (a value that is no string is read as its JSON
    text)."""
    sequence = source.get("sequence")
    text = sequence if sequence is None or isinstance(sequence, str) else _json_text(sequence)
    match = None if text is None else _POSTGRES_SEQUENCE.fullmatch(text)
    if match is None:
        raise _Quarantine(MISSING_SEQUENCE)
    first, second = match.groups()
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


#: Types whose values a text column holds as their text (``lakehouse_core.widening``).
_AS_TEXT = (*_INTEGER_TYPES, "boolean", "date")


def _fits(record: str, table: str, text: bool = True) -> bool:
    """Whether a ``table`` column holds every value of type ``record``: the same type, one
    Delta 4.0 type widening reaches, or (``text``) text holding integers, booleans and dates
    as their text."""
    if record == table:
        return True
    if text and table == "string" and record in _AS_TEXT:
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
    text: bool = True,
) -> None:
    """Quarantine the record if a non-null value's type is one its table column cannot hold
    (``text``: a text column holds integers, booleans and dates; not for key columns)."""
    for name, value in values.items():
        field_schema, table = fields.get(name), table_types.get(name)
        if value is None or field_schema is None or table is None:
            continue
        record = _column_type(field_schema)
        if record is not None and not _fits(record, table, text):
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
    _check_types(key, key_fields, table_types, text=False)
    _check_types(
        {n: v for n, v in (after or {}).items() if n not in key}, after_fields, table_types
    )
    typed_key = canonical_key([_in_type(v, table_types.get(n)) for n, v in key.items()])
    if image is None:
        return typed_key, None
    typed = {}
    for name, value in image.items():
        field_schema = after_fields.get(name)
        record = None if field_schema is None else _column_type(field_schema)
        typed[name] = _in_type(value, table_types.get(name), record)
    return typed_key, typed


def _in_type(value: Any, table: str | None, record: str | None = None) -> Any:
    """A canonical value in its table column's type: decimals change form (an integer or a
    decimal of a smaller scale gets the table's scale), and in a text column an integer,
    boolean or date (``record``: its type) becomes its text as Spark's cast writes it."""
    if table == "string" and record in _AS_TEXT and value is not None:
        return _as_text(value, record)
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


def _as_text(value: Any, record: str | None) -> str:
    """An integer, boolean or date (canonical: days since the epoch) as its text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if record == "date" and _is_int(value):
        return _date_text(value)
    return str(value)


def _date_text(days: int) -> str:
    """A date as Spark writes it as text: ``yyyy-MM-dd``, a year beyond 9999 with a ``+``, one
    before year 1 as a signed proleptic year (year 0 is 1 BC)."""
    if dt.date.min.toordinal() <= days + _EPOCH_ORDINAL <= dt.date.max.toordinal():
        return dt.date.fromordinal(days + _EPOCH_ORDINAL).isoformat()
    year, month, day = _civil_from_days(days)
    sign = "+" if year > 9999 else "-" if year < 0 else ""
    return f"{sign}{abs(year):04d}-{month:02d}-{day:02d}"


_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of the proleptic Gregorian calendar (astronomical years)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def _record_key_fields(data: bytes | None) -> dict[str, dict[str, Any]]:
    """The connect fields of a record key with the schema wrapper (empty without)."""
    try:
        document = _loads(data) if data is not None else None
    except ValueError:
        return {}
    if not isinstance(document, dict) or not _is_wrapper(document):
        return {}
    return _connect_fields(document["schema"])


def _json_object(data: bytes | None) -> dict[str, Any] | None:
    """``data`` read as a JSON object (None: null, not JSON, or another JSON value)."""
    if data is None:
        return None
    try:
        document = _loads(data)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def _key_from_record_key(
    data: bytes | None, names: Sequence[str]
) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """Canonical values of the key columns ``names`` (:func:`_record_key_columns`) in the
    Kafka record key (the Debezium default). A key that is no JSON object, lacks one of them
    (also in its Connect schema, if it has one) or holds null or a value of another type
    there is ``missing key``."""
    document = _json_object(data)
    if document is None or not names:
        raise _Quarantine(MISSING_KEY)
    fields: dict[str, dict[str, Any]] | None = None
    if _is_wrapper(document):
        schema = document["schema"]
        fields = _connect_fields(schema) if schema.get("type") == "struct" else {}
        document = document["payload"]
        if not isinstance(document, dict):
            raise _Quarantine(MISSING_KEY)
    values = []
    for name in names:
        if fields is not None and name not in fields:
            raise _Quarantine(MISSING_KEY)
        try:
            value = _column_value(document.get(name), None if fields is None else fields[name])
        except (_Misfit, _Unreadable):
            value = None
        if value is None:
            raise _Quarantine(MISSING_KEY)
        values.append(value)
    return tuple(names), canonical_key(values)


def _record_key_columns(records: Sequence[BronzeRecord]) -> tuple[str, ...]:
    """The key columns of a Debezium table without ``keys``: the fields of the record keys
    most records (with a value, and Connect schemas that can be read) carry; the fields of
    a key's Connect schema (a struct), or for keys without one (JSON objects) the names of
    all such keys together, in name order. Of equally many, the first in (partition,
    offset) wins; keys without fields count for nothing."""
    unwrapped = sorted({n for r in records for n in _unwrapped_key_names(r.key)})
    found: dict[tuple[str, ...], tuple[int, tuple[int, int]]] = {}
    for record in records:
        document = _json_object(record.key)
        if record.value is None or document is None or _schemas_problem(record) is not None:
            continue
        names = tuple(unwrapped)
        if _is_wrapper(document):
            schema = document["schema"]
            names = tuple(_connect_fields(schema)) if schema["type"] == "struct" else ()
        if names:
            count, first = found.get(names, (0, (record.partition, record.offset)))
            found[names] = (count + 1, min(first, (record.partition, record.offset)))
    if not found:
        return ()
    return max(found, key=lambda n: (found[n][0], -found[n][1][0], -found[n][1][1]))


def _unwrapped_key_names(data: bytes | None) -> list[str]:
    document = _json_object(data)
    return [] if document is None or _is_wrapper(document) else list(document)


# --------------------------------------------------------------------------------------------
# Connect schemas: which can be read (docs/silver-semantics.md, "Reading one bronze record")
# --------------------------------------------------------------------------------------------

_SCHEMA_TYPES = frozenset(
    {"int8", "int16", "int32", "int64", "float", "double", "float32", "float64", "boolean"}
    | {"string", "bytes", "array", "map", "struct"}
)
_MAX_SCHEMA_DEPTH = 32
_WHOLE_NUMBER = re.compile(r"[0-9]{1,10}")


def _require_readable_schemas(record: BronzeRecord) -> None:
    """Quarantine a record whose value's or key's Connect schema cannot be read."""
    problem = _schemas_problem(record)
    if problem is not None:
        raise _Quarantine(problem)


def _schemas_problem(record: BronzeRecord) -> str | None:
    """Why the Connect schema of a record's value or key cannot be read (the quarantine
    reason of every record that carries it), or None."""
    value = _json_object(record.value)
    if value is not None and _is_wrapper(value):
        problem = _envelope_schema_problem(value["schema"])
        if problem is not None:
            return problem
    key = _json_object(record.key)
    if key is not None and _is_wrapper(key):
        return _schema_problem(key["schema"], "key schema")
    return None


def _envelope_schema_problem(schema: Any) -> str | None:
    problem = _schema_problem(schema, "value schema")
    if problem is not None:
        return problem
    if schema["type"] != "struct":
        return _invalid(f"value schema: type {_shown(schema['type'])} is not struct")
    for side, side_schema in _connect_fields(schema).items():
        if side in ("after", "before") and side_schema["type"] != "struct":
            kind = _shown(side_schema["type"])
            return _invalid(f"value schema > field {side!r}: type {kind} is not struct")
    return None


def _schema_problem(schema: Any, where: str, depth: int = 1) -> str | None:
    """Why a Connect schema cannot be read, or None (the rules: docs/silver-semantics.md)."""
    if not isinstance(schema, dict):
        return _invalid(f"{where} is not an object: {_shown(schema)}")
    if depth > _MAX_SCHEMA_DEPTH:
        return _invalid(f"{where} nests deeper than {_MAX_SCHEMA_DEPTH} schemas")
    kind, name, parameters = schema.get("type"), schema.get("name"), schema.get("parameters")
    if not (isinstance(kind, str) and kind in _SCHEMA_TYPES):
        return _invalid(f"{where}: type {_shown(kind)} is not a Connect type")
    if name is not None and not isinstance(name, str):
        return _invalid(f"{where}: name {_shown(name)} is not a string")
    if parameters is not None and not isinstance(parameters, dict):
        return _invalid(f"{where}: parameters {_shown(parameters)} are not an object")
    for parameter, text in (parameters or {}).items():
        if not isinstance(text, str):
            return _invalid(f"{where}: parameter {parameter!r} {_shown(text)} is not a string")
    if name == _DECIMAL:
        problem = _decimal_problem(parameters or {})
        if problem is not None:
            return _invalid(f"{where}: {problem}")
    members = {"array": ["items"], "map": ["keys", "values"]}.get(kind, [])
    for member in members:
        problem = _schema_problem(schema.get(member), f"{where} > {member}", depth + 1)
        if problem is not None:
            return problem
    fields = schema.get("fields")
    return (
        _fields_problem(fields, where, depth) if kind == "struct" and fields is not None else None
    )


def _fields_problem(fields: Any, where: str, depth: int) -> str | None:
    if not isinstance(fields, list):
        return _invalid(f"{where}: fields {_shown(fields)} are not a list")
    names: set[str] = set()
    for number, field_schema in enumerate(fields):
        if not isinstance(field_schema, dict):
            return _invalid(f"{where} > field {number} is not an object: {_shown(field_schema)}")
        name = field_schema.get("field")
        if not isinstance(name, str):
            return _invalid(f"{where} > field {number}: name {_shown(name)} is not a string")
        if name.lower() in names:
            return _invalid(f"{where}: field {name!r} is repeated (letter case aside)")
        names.add(name.lower())
        problem = _schema_problem(field_schema, f"{where} > field {name!r}", depth + 1)
        if problem is not None:
            return problem
    return None


def _decimal_problem(parameters: Mapping[str, str]) -> str | None:
    scale = parameters.get("scale")
    precision = parameters.get("connect.decimal.precision", "38")
    for what, text in (("scale", scale), ("connect.decimal.precision", precision)):
        if not isinstance(text, str) or not _WHOLE_NUMBER.fullmatch(text):
            return f"decimal parameter {what!r} {_shown(text)} is not a whole number"
    assert scale is not None
    if int(precision) == 0 or int(scale) > min(int(precision), 38):
        return f"decimal scale {int(scale)} does not fit precision {int(precision)}"
    return None


def _invalid(what: str) -> str:
    return f"invalid Connect schema: {what}"


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError):  # an integer of thousands of digits, deep nesting
        text = f"<a JSON {type(value).__name__}>"
    return text if len(text) <= 40 else text[:37] + "..."


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


def _row_fields(envelope_schema: Any) -> dict[str, dict[str, Any]]:
    """Fields of the row schema of an envelope schema: its ``after`` struct, else its
    ``before`` struct (both images are read with it)."""
    sides = _connect_fields(envelope_schema)
    return _connect_fields(sides.get("after", sides.get("before")))


def _decode_image(
    image: Mapping[str, Any] | None,
    fields: Mapping[str, dict[str, Any]] | None,
    misfits: dict[str, str],
) -> dict[str, Any] | None:
    """The canonical image: with a schema (``fields``), the value of each of its fields (a
    value the image lacks is None, a member the schema lacks is not read); a value its type
    cannot hold exactly is None, and its reason is added to ``misfits``."""
    if image is None:
        return None
    if fields is None:
        return dict(image)
    decoded: dict[str, Any] = {}
    for name, field_schema in fields.items():
        raw = image.get(name)
        try:
            decoded[name] = _column_value(raw, field_schema)
        except _Misfit as misfit:
            decoded[name] = None
            misfits[name] = f"value of column {name} {misfit.detail}"
        except _Unreadable:
            decoded[name] = None
            misfits[name] = UNPARSEABLE
        else:
            column_type = _column_type(field_schema)
            placeholder = raw == TOAST_PLACEHOLDER and column_type in ("string", "binary")
            if raw is not None and decoded[name] is None and not placeholder:
                misfits[name] = MISFIT.format(name, column_type)
    return decoded


def _carried(
    image: Mapping[str, Any] | None, fields: Mapping[str, dict[str, Any]] | None
) -> dict[str, Any]:
    """The members of a raw image that carry a value: not null, and (with a schema) read by
    their field's type."""
    if image is None:
        return {}
    if fields is None:
        return {n: v for n, v in image.items() if v is not None}
    carried = {}
    for name, field_schema in fields.items():
        try:
            raw = _read(image.get(name), field_schema)
        except _Unfit:
            continue
        if raw is not None:
            carried[name] = image[name]
    return carried


def _is_string_column(field_schema: dict[str, Any] | None) -> bool:
    """A string column in silver: connect type string read as text (not ``ZonedTimestamp`` or
    ``ZonedTime``), or any column when there is no schema (the placeholder is a string)."""
    if field_schema is None:
        return True
    return field_schema.get("type") == "string" and _column_type(field_schema) == "string"


class _Unfit(Exception):
    """A JSON value its Connect type does not read (Spark's JSON reader makes it null): a
    column or a struct member is then null, and so is the whole array or map holding it."""


class _Unreadable(Exception):
    """A decimal value that is no number (its text is not base64, or it has no scale): the
    record is ``unparseable`` if it is a column of an upsert, else it is null."""


def _column_value(value: Any, field_schema: Mapping[str, Any] | None) -> Any:
    """Canonical value of a column's JSON value under its connect schema (None: no schema,
    the JSON value). A value its type does not read is None.

    Raises:
        _Misfit, _Unreadable: a decimal value (see there).
    """
    if field_schema is None:
        return value
    try:
        raw = _read(value, field_schema)
    except _Unfit:
        return None
    return None if raw is None else _decode(raw, field_schema)


#: The JSON type each logical type is read as (the others: their Connect type).
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_FLOATS = ("float", "double", "float32", "float64")
_NON_FINITE = {
    "NaN": math.nan,
    "Infinity": math.inf,
    "+Infinity": math.inf,
    "-Infinity": -math.inf,
    "+INF": math.inf,
    "-INF": -math.inf,
}


def _read(value: Any, field_schema: Mapping[str, Any]) -> Any:
    """A JSON value as Spark's JSON reader reads it for ``field_schema``: integers in their
    range, numbers (and the texts of :data:`_NON_FINITE`) as floats, booleans, any value as
    text where text is read (its JSON text if it is no string), arrays, objects as maps and
    structs (a struct member that does not fit is None); null stays None.

    Raises:
        _Unfit: the value is none of that.
    """
    if value is None:
        return None
    kind = _json_kind(field_schema)
    if kind in _INT_BITS:
        limit = 2 ** (_INT_BITS[kind] - 1)
        if _is_int(value) and -limit <= value < limit:
            return value
        raise _Unfit
    if kind in _FLOATS:
        if isinstance(value, str) and value in _NON_FINITE:
            return _NON_FINITE[value]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Unfit
        return _to_float(value)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise _Unfit
        return value
    if kind == "text":
        try:
            return value if isinstance(value, str) else _json_text(value)
        except RecursionError:  # nested deeper than Python follows
            raise _Unfit from None
    if kind == "array":
        if not isinstance(value, list):
            raise _Unfit
        return [_read(element, field_schema["items"]) for element in value]
    if kind == "map":
        return _read_map(value, field_schema)
    if not isinstance(value, dict):
        raise _Unfit
    members = _VARIABLE_SCALE_MEMBERS if kind == "variable scale" else _connect_fields(field_schema)
    return {name: _read_member(value.get(name), member) for name, member in members.items()}


_VARIABLE_SCALE_MEMBERS = {"scale": {"type": "int32"}, "value": {"type": "string"}}


def _json_kind(field_schema: Mapping[str, Any]) -> str:
    name = field_schema.get("name")
    if name == _DECIMAL:
        return "text"
    if isinstance(name, str) and name in _LOGICAL_TYPES:
        return _LOGICAL_TYPES[name].json
    kind: str = field_schema["type"]
    return "text" if kind in ("string", "bytes") else kind


def _read_member(value: Any, field_schema: Mapping[str, Any]) -> Any:
    try:
        return _read(value, field_schema)
    except _Unfit:
        return None


def _read_map(value: Any, field_schema: Mapping[str, Any]) -> dict[Any, Any]:
    """A map: a JSON object when its keys are read as text, else a list of ``[key, value]``
    pairs (only their shape is checked here)."""
    if _json_kind(field_schema["keys"]) == "text":
        if not isinstance(value, dict):
            raise _Unfit
        return {k: _read(v, field_schema["values"]) for k, v in value.items()}
    if not isinstance(value, list) or not all(isinstance(p, list) and len(p) == 2 for p in value):
        raise _Unfit
    keys, values = field_schema["keys"], field_schema["values"]
    return {_read_member(k, keys): _read_member(v, values) for k, v in value}


def _decode(raw: Any, field_schema: Mapping[str, Any]) -> Any:
    """The canonical value of a value :func:`_read` read (not None).

    Raises:
        _Misfit, _Unreadable: a decimal value (see there).
    """
    name = field_schema.get("name")
    if name == _DECIMAL:
        return _connect_decimal(raw, field_schema["parameters"])
    if isinstance(name, str) and name in _LOGICAL_TYPES:
        return _LOGICAL_TYPES[name].decode(raw)
    kind = field_schema["type"]
    if kind in ("float", "float32"):
        return _float32(raw)
    if kind == "bytes":
        return _canonical_base64(raw)
    if kind == "array":
        return [_decode_nested(element, field_schema["items"]) for element in raw]
    if kind == "map":
        keys, values = field_schema["keys"], field_schema["values"]
        return {_decode_nested(k, keys): _decode_nested(v, values) for k, v in raw.items()}
    if kind == "struct":
        fields = _connect_fields(field_schema)
        return tuple(_decode_nested(raw[n], f) for n, f in fields.items())
    return raw  # integers, floating point, booleans and text are what was read


def _decode_nested(raw: Any, field_schema: Mapping[str, Any]) -> Any:
    """A value inside an array, map or struct: one its type cannot hold exactly is None (only
    a column's own value quarantines its record)."""
    if raw is None:
        return None
    try:
        return _decode(raw, field_schema)
    except (_Misfit, _Unreadable):
        return None


def _to_float(number: int | float) -> float:
    try:
        return float(number)
    except OverflowError:  # an integer beyond the doubles: Spark reads it as infinite
        return math.copysign(math.inf, number)


def _json_text(value: Any) -> str:
    """A JSON value as Spark writes it where text is read: compact, numbers as Java writes
    doubles (``1000.0``, ``1.0E7``)."""
    if isinstance(value, dict):
        members = (f"{json.dumps(k, ensure_ascii=False)}:{_json_text(v)}" for k, v in value.items())
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    if isinstance(value, float) and math.isfinite(value) and not 1e-3 <= abs(value) < 1e7:
        if value == 0:
            return "-0.0" if math.copysign(1, value) < 0 else "0.0"
        digits = Decimal(repr(abs(value))).normalize()
        mantissa = str(digits.scaleb(-digits.adjusted()))
        mantissa = mantissa if "." in mantissa else mantissa + ".0"
        return f"{'-' if value < 0 else ''}{mantissa}E{digits.adjusted()}"
    if isinstance(value, float) and not math.isfinite(value):
        return json.dumps(json.dumps(value))  # the quoted text of NaN or Infinity
    return json.dumps(value, ensure_ascii=False)


def _float32(value: float) -> float:
    """The nearest 32-bit float (what a ``float`` column holds)."""
    try:
        result: float = struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)
    return result


#: Base64 as the JsonConverter writes it (RFC 4648 section 4: standard alphabet, padded).
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def _base64_bytes(text: str) -> bytes | None:
    """The bytes of :data:`_BASE64` text; None for any other text."""
    return base64.b64decode(text) if _BASE64.fullmatch(text) else None


def _canonical_base64(text: str) -> str | None:
    data = _base64_bytes(text)
    return None if data is None else base64.b64encode(data).decode("ascii")


#: The most epoch milliseconds a timestamp holds (its microseconds fill a bigint).
_MAX_MILLIS = (2**63 - 1) // 1000


def _millis_micros(millis: int) -> int | None:
    return millis * 1000 if -_MAX_MILLIS <= millis <= _MAX_MILLIS else None


def _connect_decimal(text: str, parameters: Mapping[str, str]) -> str:
    """Base64 big-endian two's-complement unscaled value + ``scale`` parameter -> "d.ddd" in
    ``decimal(min(precision, 38), scale)``.

    Raises:
        _Unreadable: the text is not base64.
        _Misfit: the value has more digits than that type holds.
    """
    scale = int(parameters["scale"])
    precision = min(int(parameters.get("connect.decimal.precision", "38")), 38)
    return _exact_decimal(_unscaled(text), scale, precision, scale, DECIMAL_FIX)


def _variable_scale_decimal(raw: Mapping[str, Any]) -> str:
    """``io.debezium.data.VariableScaleDecimal`` ``{scale, value}`` -> decimal(38, 18) text.

    Raises:
        _Unreadable: no scale, or a value that is not base64.
        _Misfit: the value is not exactly a decimal(38, 18).
    """
    scale, encoded = raw["scale"], raw["value"]
    if scale is None or encoded is None:
        raise _Unreadable
    return _exact_decimal(_unscaled(encoded), scale, 38, 18, VARIABLE_SCALE_FIX)


def _unscaled(encoded: str) -> int:
    data = _base64_bytes(encoded)
    if data is None:
        raise _Unreadable
    return int.from_bytes(data, "big", signed=True)


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


def _zoned_time_micros(text: str) -> int | None:
    """``io.debezium.time.ZonedTime`` (``HH:MM[:SS[.f]]`` and ``Z`` or an offset; none means
    UTC) -> microseconds since midnight UTC (None: not such a time). Fractions beyond
    microseconds are truncated."""
    match = _ISO_TIME.fullmatch(text)
    if match is None:
        return None
    hour, minute, second, fraction, _, sign, offset_hours, offset_minutes = match.groups()
    offset = int(offset_hours or 0) * 60 + int(offset_minutes or 0)
    minutes = int(hour) * 60 + int(minute) - (-offset if sign == "-" else offset)
    micros = (minutes * 60 + int(second or 0)) * 1_000_000 + int((fraction or "")[:6].ljust(6, "0"))
    return micros % _MICROS_PER_DAY


#: ``io.debezium.time.ZonedTimestamp`` as Debezium writes it: date, time with seconds, offset.
_ZONED_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:[.]([0-9]{1,9}))?"
    r"(Z|[+-][0-9]{2}(?::?[0-9]{2})?)"
)


def _zoned_timestamp_micros(text: str) -> int | None:
    """``io.debezium.time.ZonedTimestamp`` -> epoch microseconds, UTC (None: not such a time,
    e.g. an offset beyond 18 hours). Fractions beyond microseconds are truncated."""
    match = _ZONED_TIMESTAMP.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    try:
        days = dt.date(int(year), int(month), int(day)).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        return None
    hours, minutes, seconds = int(hour), int(minute), int(second)
    offset_hours, offset_minutes = (
        (0, 0) if offset == "Z" else (int(offset[1:3]), int(offset[-2:]) if len(offset) > 3 else 0)
    )
    offset_seconds = (offset_hours * 60 + offset_minutes) * 60
    if (
        hours > 23
        or minutes > 59
        or seconds > 59
        or offset_minutes > 59
        or offset_seconds > 18 * 3600
    ):
        return None
    offset_seconds *= -1 if offset.startswith("-") else 1
    total = days * 86400 + hours * 3600 + minutes * 60 + seconds - offset_seconds
    return total * 1_000_000 + int((fraction or "")[:6].ljust(6, "0"))


class _Logical(NamedTuple):
    """A logical type: its silver column type, the JSON type it is read as, the decoder of
    what was read."""

    column_type: str
    json: str
    decode: Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


#: Debezium and Connect logical types (but ``Decimal``). Times of day are microseconds since
#: midnight, durations microseconds. Any other name (``Xml``, ``Uuid``, ``Enum``,
#: ``EnumSet``, ``Interval``, ``Year``, ``Bits``, the geometry structs, ...) is read as its
#: connect type.
_LOGICAL_TYPES: dict[str, _Logical] = {
    "io.debezium.time.Date": _Logical("date", "int32", _identity),
    "org.apache.kafka.connect.data.Date": _Logical("date", "int32", _identity),
    "io.debezium.time.Timestamp": _Logical("timestamp", "int64", _millis_micros),
    "org.apache.kafka.connect.data.Timestamp": _Logical("timestamp", "int64", _millis_micros),
    "io.debezium.time.MicroTimestamp": _Logical("timestamp", "int64", _identity),
    "io.debezium.time.NanoTimestamp": _Logical("timestamp", "int64", lambda n: n // 1000),
    "io.debezium.time.ZonedTimestamp": _Logical("timestamp", "text", _zoned_timestamp_micros),
    "io.debezium.time.Time": _Logical("bigint", "int32", lambda ms: ms * 1000),
    "org.apache.kafka.connect.data.Time": _Logical("bigint", "int32", lambda ms: ms * 1000),
    "io.debezium.time.MicroTime": _Logical("bigint", "int64", _identity),
    "io.debezium.time.NanoTime": _Logical("bigint", "int64", lambda n: n // 1000),
    "io.debezium.time.ZonedTime": _Logical("bigint", "text", _zoned_time_micros),
    "io.debezium.time.MicroDuration": _Logical("bigint", "int64", _identity),
    "io.debezium.data.VariableScaleDecimal": _Logical(
        "decimal(38,18)", "variable scale", _variable_scale_decimal
    ),
    "io.debezium.data.Json": _Logical("string", "text", _identity),
}


def _iso_timestamp_micros(value: Any) -> int:
    """ISO-8601 timestamp (offset or ``Z``; none means UTC) -> epoch microseconds, UTC (an
    ``events`` column). Fractions beyond microseconds are truncated, i.e. floored.
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
