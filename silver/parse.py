"""Debezium (and plain JSON event) records to change events: the one room that reads a
batch's envelopes and Connect schemas into columns.

:func:`discover_versions` finds a micro-batch's schema versions, each with its
:class:`RowLayout` (the Spark jobs that sample the batch's Connect schemas, read through
:mod:`cdc.debezium`, or infer its JSON types); :func:`parse_changes` (pure) turns the rows of
one version into change events. The decode stage (:mod:`silver.decode`) calls both.

The output of :func:`parse_changes` has one row per bronze record:

* ``_reason``: null for a usable event, else why it goes to quarantine;
* ``_tombstone``: true for a Kafka tombstone (null value), which is skipped;
* ``_op`` (``c``/``u``/``r``/``d``/``t``), ``_sequence``, ``_source_ts``, ``_unavailable``
  (columns carrying the TOAST placeholder), the bronze coordinates ``_bronze_topic``,
  ``_bronze_partition``, ``_bronze_offset`` and, for a quarantined record, its raw key and
  value bytes (``_bronze_key``, ``_bronze_value``);
* the key columns and the row columns, decoded to their real types, whatever their names
  (``value``, ``key``, ``offset``, ...) except those :mod:`lakehouse_core.columns` reserves;
  a value its column's declared or Connect type does not hold is never read as null: its
  record is quarantined (:data:`MISFIT`), or, when the layout ``rescues``, the column is null
  and ``_rescued_data`` (last) holds such values by column name, as sent;
* ``_schema_hash`` if the bronze rows carry it (:func:`silver.decode.with_schema_hash`);
* for a ``resnapshot = "full"`` table, ``_snapshot_end`` (:mod:`silver.snapshots`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.errors import ParseException, PySparkException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    DateType,
    DoubleType,
    FloatType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
    VariantType,
)

from cdc.debezium import (
    SOURCE_TYPE,
    UNAVAILABLE_VALUE,
    ColumnCodec,
    SchemaProblem,
    decoding_of,
    envelope_row_schema,
    identity,
    key_struct,
    raw_struct,
    row_codecs,
    struct_fields,
    timestamp_from_millis,
)
from lakehouse_core.columns import (
    OP,
    REASON,
    RESCUED,
    SNAPSHOT_END,
    column_name_problem,
)
from lakehouse_core.config import TableSpec
from lakehouse_core.errors import ConfigError
from silver.snapshots import ends_snapshot

#: Debezium's ops: those that write a row (create, update, snapshot read), a delete, a truncate.
UPSERT_OPS = ("c", "u", "r")
DELETE_OP = "d"
CHANGE_OPS = (*UPSERT_OPS, DELETE_OP)
TRUNCATE_OP = "t"
#: Quarantine reason for an envelope part (payload, source, after, before) that is present but
#: not a JSON object.
NOT_AN_OBJECT = "{} is not an object"
MISSING_KEY = "missing key"
#: Quarantine reason of a value its column's type does not hold (Spark's JSON reader reads it
#: as null): a string in a number column, a number out of an integer's range, text that is no
#: timestamp or date, an object where a flat value is due (docs/silver-semantics.md, "Values
#: of the wrong type").
MISFIT = "value of column {} does not fit {}"
SEQUENCE_DIGITS = 20

#: Columns of a parsed event: a Kafka tombstone (null value, skipped), and the names of the
#: columns whose value is a TOAST placeholder (or a null under ``ignore_null_updates``).
TOMBSTONE, UNAVAILABLE = "_tombstone", "_unavailable"
#: The columns of a parsed event that say where its record is in bronze.
BRONZE_COORDINATES = ("_bronze_topic", "_bronze_partition", "_bronze_offset")
#: The columns of a parsed event holding a quarantined record's raw key and value bytes.
BRONZE_BYTES = ("_bronze_key", "_bronze_value")


#: Debezium's JSON converter writes ``{"schema":{...},"payload":{...}}``: the text before
#: ``,"payload":`` identifies the schema version without parsing the JSON (:func:`schema_hash`).
WRAPPER_PREFIX = '{"schema":'
PAYLOAD_MARKER = ',"payload":'


@dataclass(frozen=True)
class RowLayout:
    """The columns of a table as seen in one micro-batch."""

    keys: tuple[ColumnCodec, ...]
    columns: tuple[ColumnCodec, ...]
    #: Row columns silver cannot keep (:func:`lakehouse_core.columns.column_name_problem`), each
    #: with the reason that quarantines the records carrying a value in it.
    refused: tuple[tuple[ColumnCodec, str], ...] = ()
    #: The row columns' types are declared (an ``events`` table's ``schema``) or the records'
    #: Connect schema: a value such a type does not hold is a misfit (:data:`MISFIT`), never
    #: read as null. False: the types were inferred from the values themselves.
    checked: bool = False
    #: Such a value is kept whole in :data:`~lakehouse_core.columns.RESCUED` (its column null)
    #: instead of quarantining its record (``on_type_mismatch = "rescue"``).
    rescues: bool = False
    #: The row columns whose Connect schema gives them a default, each with that schema (JSON
    #: text, :data:`silver.evolution.CONNECT_DEFAULT`): the value of the rows a schema without
    #: the column wrote (docs/silver-semantics.md, "Schema changes").
    defaults: tuple[tuple[str, str], ...] = ()

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.keys)

    @property
    def value_columns(self) -> tuple[ColumnCodec, ...]:
        """Row columns that are not key columns."""
        return tuple(c for c in self.columns if c.name not in self.key_names)


def order_of(prefix: str = "") -> Column:
    """The total order of events: sequence, then bronze partition and offset."""
    return F.struct(
        F.col(f"{prefix}_sequence"),
        F.col(f"{prefix}_bronze_partition"),
        F.col(f"{prefix}_bronze_offset"),
    )


def order_type_of(frame: DataFrame) -> StructType:
    """The type of :func:`order_of` in ``frame`` (parsed events or rows of silver's tables)."""
    order_type = frame.select(order_of().alias("o")).schema["o"].dataType
    assert isinstance(order_type, StructType)
    return order_type


def as_text(batch: DataFrame) -> DataFrame:
    """Bronze rows with the key and value also as strings (``k``, ``v``)."""
    return batch.withColumns({"k": F.col("key").cast("string"), "v": F.col("value").cast("string")})


#: Column of bronze rows (see :func:`silver.decode.with_schema_hash`), kept by
#: :func:`parse_changes`.
SCHEMA_HASH = "_schema_hash"


def schema_hashes() -> Column:
    """Aggregate over parsed events: the distinct schema hashes their records carry."""
    return F.collect_set(SCHEMA_HASH)


def schema_hash() -> Column:
    """Identifies a record's schema version: the value's text before ``,"payload":``, the key's
    ``schema`` and the key's top-level names (whether it is a JSON object, a wrapper or not)."""
    wrapped = F.col("v").startswith(WRAPPER_PREFIX)
    schema_text = F.when(wrapped, F.substring_index("v", PAYLOAD_MARKER, 1))
    key_schema = F.get_json_object("k", "$.schema")
    return F.xxhash64(schema_text, key_schema, F.json_object_keys("k"))


@dataclass(frozen=True)
class SchemaVersion:
    """The records of a micro-batch that share one key and value schema.

    ``layout``: their columns, decoded by their own Connect schema (the key columns are those
    of the whole batch; a key column their schema lacks is read as null, so such records are
    quarantined as ``missing key``). ``selector``: which rows of the batch they are (None: all).
    ``first``: (bronze partition, offset) of their first record (None for an ``events`` table,
    whose batch is one version). ``inferred``: the types were inferred from JSON values
    because the records carry no Connect schema (or no declared one). ``problem``: why their
    schema cannot be decoded (their quarantine reason), or None; a column when they carry
    several schemas that cannot be decoded (each record's reason is its schema's).
    """

    layout: RowLayout
    selector: Column | None
    first: tuple[int, int] | None
    inferred: bool
    problem: str | Column | None = None  # their schema cannot be decoded: all are quarantined
    #: The schema hashes (see :func:`silver.decode.with_schema_hash`) of the records it decodes.
    hashes: frozenset[int] = frozenset()


def parse_changes(
    texts: DataFrame,
    spec: TableSpec,
    layout: RowLayout,
    rejected: Mapping[str, str] | None = None,
    problem: str | Column | None = None,
) -> DataFrame:
    """Turn bronze rows (with ``k``/``v`` text) into change events; see the module docstring.

    ``rejected``: column -> quarantine reason for the records that carry a value (not null) in
    that column (a type the table cannot take); the other reasons come first. ``problem``:
    the reason of every record (their schema cannot be decoded; see :class:`SchemaVersion`).
    """
    if spec.format == "events":
        return _parse_events(texts, spec, layout, rejected or {})
    return _parse_debezium(texts, spec, layout, rejected or {}, problem)


def _parse_debezium(
    texts: DataFrame,
    spec: TableSpec,
    layout: RowLayout,
    rejected: Mapping[str, str],
    problem: str | Column | None = None,
) -> DataFrame:
    row_type = raw_struct(_read_columns(layout))
    envelope_fields = [
        StructField("before", row_type),
        StructField("after", row_type),
        StructField("op", StringType()),
        StructField("ts_ms", StringType()),
        StructField("source", SOURCE_TYPE),
    ]
    value_type = StructType([StructField("payload", StructType(envelope_fields)), *envelope_fields])
    key_type = raw_struct(layout.keys)
    raw_view = [F.from_json("v", _RAW_ENVELOPE).alias("_raw")] if _checks_values(layout) else []
    parsed = texts.select(
        "*",
        *raw_view,
        F.from_json("v", value_type).alias("_value"),
        F.from_json("k", StructType([StructField("payload", key_type), *key_type.fields])).alias(
            "_key"
        ),
    )
    envelope = F.coalesce(
        F.col("_value.payload"),
        F.struct(*[F.col(f"_value.{f.name}").alias(f.name) for f in envelope_fields]),
    )
    record_key = F.coalesce(
        F.col("_key.payload"), F.struct(*[F.col(f"_key.{f.name}") for f in key_type.fields])
    )
    events = parsed.select("*", envelope.alias("_env"), record_key.alias("_rkey"))

    op = F.col("_env.op")
    after, before = F.col("_env.after"), F.col("_env.before")
    # What the reason and the result both use is computed once per row, in its own column:
    # the costly part of decodings (the value and its quarantine check follow from it), the
    # connector's sequence parts, then the key values and the sequence.
    staged = {c.name: c.staged for c in layout.value_columns if c.staged is not None}
    prepared = {name: f"_prepared_{i}" for i, name in enumerate(staged)}
    events = events.select(
        "*",
        *[s.prepare(after[name]).alias(prepared[name]) for name, s in staged.items()],
        F.from_json("_env.source.sequence", "array<string>").alias("_sequence_parts"),
    )
    if spec.keys:
        keys = {c.name: c.decode(F.coalesce(after[c.name], before[c.name])) for c in layout.keys}
    else:
        keys = {c.name: c.decode(F.col("_rkey")[c.name]) for c in layout.keys}
    sequence = (
        _configured_sequence(spec.order_columns, layout, after, before)
        if spec.order_columns
        else _connector_sequence(F.col("_env.source"), F.col("_sequence_parts"))
    )
    key_columns = {name: f"_key_value_{i}" for i, name in enumerate(keys)}
    events = events.select(
        "*",
        *[value.alias(key_columns[name]) for name, value in keys.items()],
        sequence.alias("_sequence_value"),
    )
    key_values = {name: F.col(column) for name, column in key_columns.items()}
    sequence = F.col("_sequence_value")
    reason = (
        F.when(op.isNull() & F.json_object_keys("v").isNull(), "unparseable")
        .when(op.isNull() & _payload_not_object(), NOT_AN_OBJECT.format("payload"))
        .when(op.isNull(), "missing op")
        .when(~op.isin(*CHANGE_OPS, TRUNCATE_OP), "unknown op")
        .when(_not_object("source"), NOT_AN_OBJECT.format("source"))
        .when(_not_object("after"), NOT_AN_OBJECT.format("after"))
        .when((op == DELETE_OP) & _not_object("before"), NOT_AN_OBJECT.format("before"))
        .when((op != TRUNCATE_OP) & _any_null(key_values.values()), MISSING_KEY)
        .when(sequence.isNull(), "missing sequence")
    )
    for column, why in rejected.items():
        carried = key_values[column] if column in key_values else after[column]
        reason = reason.when(carried.isNotNull(), why)
    for codec, why in layout.refused:
        reason = reason.when(after[codec.name].isNotNull(), why)
    # A value the decoder cannot hold exactly (it would be null or another number): the first
    # such column by name. Key columns decode such a value to null, so they are "missing key".
    raw_after = F.when(F.col("_value.payload").isNotNull(), F.col("_raw.payload.after"))
    raw_after = raw_after.otherwise(F.col("_raw.after"))
    checked = {c.name: c for c in layout.value_columns} if _checks_values(layout) else {}
    rescues = layout.rescues and bool(checked)
    unfits: dict[str, Column] = {}  # column -> its value is rescued (``rescues`` only)
    for name in sorted({*staged, *checked}):
        upsert_unfit = F.lit(False)
        if name in checked:
            decoded = _decoded(checked[name], after, prepared)
            upsert_unfit = op.isin(*UPSERT_OPS) & _unfit(checked[name], raw_after[name], decoded)
        # A decimal's own check comes first; a value of another JSON type (a
        # VariableScaleDecimal that is no object) is read as null before it: it does not fit.
        misfit = staged[name].check(F.col(prepared[name]), name) if name in staged else None
        if rescues:
            own = F.lit(False) if misfit is None else op.isin(*UPSERT_OPS) & misfit.isNotNull()
            unfits[name] = own | upsert_unfit
            continue
        if misfit is not None:
            reason = reason.when(misfit.isNotNull(), misfit)
        if name in checked:
            reason = reason.when(upsert_unfit, _misfit_reason(checked[name]))
    if problem is not None:
        reason = problem if isinstance(problem, Column) else F.lit(problem)
    toastable = [c.name for c in layout.value_columns if c.toastable]
    unavailable = F.filter(
        F.array(*[F.when(after[name] == UNAVAILABLE_VALUE, F.lit(name)) for name in toastable])
        if toastable
        else F.array().cast("array<string>"),
        lambda name: name.isNotNull(),
    )
    full = spec.resnapshot == "full"  # its snapshots' ends remove what they did not read
    return _with_reason(events, reason).select(
        *_common_columns(SCHEMA_HASH in texts.columns),
        op.alias(OP),
        sequence.alias("_sequence"),
        timestamp_from_millis(F.col("_env.source.ts_ms")).alias("_source_ts"),
        unavailable.alias(UNAVAILABLE),
        *[value.alias(name) for name, value in key_values.items()],
        *[
            _kept(_decoded(c, after, prepared), unfits.get(c.name)).alias(c.name)
            for c in layout.value_columns
        ],
        *([_rescued(raw_after, unfits).alias(RESCUED)] if rescues else []),
        *([ends_snapshot(op, F.col("_env.source.snapshot")).alias(SNAPSHOT_END)] if full else []),
    )


def _kept(value: Column, unfit: Column | None) -> Column:
    """A column's value, null where it is rescued (``unfit``; None: never)."""
    return value if unfit is None else F.when(~F.coalesce(unfit, F.lit(False)), value)


def _rescued(raw: Column, unfits: Mapping[str, Column]) -> Column:
    """:data:`~lakehouse_core.columns.RESCUED`: the JSON object of the row's values (as sent,
    from ``raw``, the image as a map of variants) whose column's type does not hold them, by
    column name (null: none)."""
    names = F.filter(
        F.array(*[F.when(unfit, F.lit(name)) for name, unfit in unfits.items()]),
        lambda name: name.isNotNull(),
    )
    values = F.map_filter(raw, lambda name, _: F.array_contains(names, name))
    return F.when(F.size(names) > 0, F.to_json(values))


#: The envelope's ``after`` image with each member's JSON value as sent (a variant), to tell a
#: value the column's type does not hold from a null.
_RAW_IMAGE = MapType(StringType(), VariantType())
_RAW_ENVELOPE = StructType(
    [
        StructField("payload", StructType([StructField("after", _RAW_IMAGE)])),
        StructField("after", _RAW_IMAGE),
    ]
)


def _checks_values(layout: RowLayout) -> bool:
    """Whether the values of the layout's row columns are checked against their types."""
    return layout.checked and bool(layout.value_columns)


def _unfit(codec: ColumnCodec, raw: Column, decoded: Column) -> Column:
    """True when a value was sent (``raw``, a variant: not absent, not JSON null) that the
    column's type does not hold: its decoded value is null (a TOAST placeholder aside), or
    (an ``events`` column of a declared type) it is not the JSON value the type reads (a
    string for text, a timestamp and a date, as :mod:`silver.reference` reads them; a number
    for a float)."""
    sent = raw.isNotNull() & ~F.is_variant_null(raw)
    unfit = decoded.isNull()
    if codec.toastable:
        unfit = unfit & ~F.coalesce(
            F.try_variant_get(raw, "$", "string") == UNAVAILABLE_VALUE, F.lit(False)
        )
    return sent & unfit


def _declared_unfit(codec: ColumnCodec, raw: Column, decoded: Column) -> Column:
    """:func:`_unfit` for a column an ``events`` table declares: also a value of another JSON
    kind than the type reads (Spark's reader would make one of it: a number's text, a
    timestamp from epoch seconds, NaN from a string)."""
    kind = F.schema_of_variant(raw)
    text = F.try_variant_get(raw, "$", "string")
    data_type = codec.type
    other_kind: Column | None = None
    if isinstance(data_type, StringType):
        other_kind = kind != "STRING"
    elif isinstance(data_type, DoubleType | FloatType):
        other_kind = kind == "STRING"
    elif isinstance(data_type, TimestampType):
        other_kind = (kind != "STRING") | ~text.rlike(EVENT_TIMESTAMP)
    elif isinstance(data_type, DateType):
        other_kind = (kind != "STRING") | ~text.rlike(EVENT_DATE)
    unfit = _unfit(codec, raw, decoded)
    if other_kind is None:
        return unfit
    sent = raw.isNotNull() & ~F.is_variant_null(raw)
    return unfit | (sent & F.coalesce(other_kind, F.lit(True)))


_SPACE = r"[ \t\n\r\f\x0b]*"
#: The timestamps and dates an ``events`` column reads: ISO-8601 (an offset or ``Z``; none is
#: UTC), as :mod:`silver.reference` reads them.
EVENT_TIMESTAMP = (
    rf"^{_SPACE}[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}[Tt ][0-9]{{2}}:[0-9]{{2}}"
    rf"(?::[0-9]{{2}}(?:[.,][0-9]+)?)?(?:Z|z|[+-][0-9]{{2}}(?::?[0-9]{{2}})?)?{_SPACE}\z"
)
EVENT_DATE = rf"^{_SPACE}[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}{_SPACE}\z"


def _misfit_reason(codec: ColumnCodec) -> Column:
    return F.lit(MISFIT.format(codec.name, codec.type.simpleString()))


def _read_columns(layout: RowLayout) -> tuple[ColumnCodec, ...]:
    """The row columns to read from the JSON: the kept ones and the refused ones (whose value
    decides whether a record is quarantined)."""
    return (*layout.columns, *(codec for codec, _ in layout.refused))


def _decoded(codec: ColumnCodec, after: Column, prepared: Mapping[str, str]) -> Column:
    """A value column decoded from the record's ``after`` or from its prepared column."""
    if codec.staged is not None:
        return codec.staged.decode(F.col(prepared[codec.name]))
    return codec.decode(after[codec.name])


def _payload_not_object() -> Column:
    """The value is the converter's wrapper (exactly ``schema`` and ``payload``) but its payload
    is not a JSON object (then ``_value.payload`` is null)."""
    keys = F.array_sort(F.json_object_keys("v"))
    return F.col("_value.payload").isNull() & (keys == F.array(F.lit("payload"), F.lit("schema")))


def _not_object(field: str) -> Column:
    """The envelope's ``field`` is present and not null, but not a JSON object.

    ``from_json`` reads such a field as null and goes on with the others, so the struct is
    null while the JSON text (read only then) is not.
    """
    wrapped = F.col("_value.payload").isNotNull()
    text = F.when(wrapped, F.get_json_object("v", f"$.payload.{field}")).otherwise(
        F.get_json_object("v", f"$.{field}")
    )
    return F.col(f"_env.{field}").isNull() & text.isNotNull()


def _parse_events(
    texts: DataFrame, spec: TableSpec, layout: RowLayout, rejected: Mapping[str, str]
) -> DataFrame:
    row = F.from_json("v", raw_struct(_read_columns(layout)))
    raw_image = _RAW_IMAGE.simpleString()
    raw_view = [F.from_json("v", raw_image).alias("_raw")] if _checks_values(layout) else []
    events = texts.select("*", row.alias("_row"), *raw_view)
    key_values = {c.name: F.col("_row")[c.name] for c in layout.keys}
    sequence = _configured_sequence(spec.order_columns, layout, F.col("_row"), F.col("_row"))
    reason = (
        F.when(F.json_object_keys("v").isNull(), "unparseable")
        .when(_any_null(key_values.values()), MISSING_KEY)
        .when(sequence.isNull(), "missing sequence")
    )
    for column, why in (*rejected.items(), *((c.name, why) for c, why in layout.refused)):
        reason = reason.when(F.col("_row")[column].isNotNull(), why)
    unfits: dict[str, Column] = {}  # column -> its value is rescued (``rescues`` only)
    if _checks_values(layout):  # the first column by name whose value its type does not hold
        for codec in sorted(layout.value_columns, key=lambda c: c.name):
            unfit = _declared_unfit(codec, F.col("_raw")[codec.name], F.col("_row")[codec.name])
            if layout.rescues:
                unfits[codec.name] = unfit
            else:
                reason = reason.when(unfit, _misfit_reason(codec))
    return _with_reason(events, reason).select(
        *_common_columns(SCHEMA_HASH in texts.columns),
        F.lit("c").alias(OP),
        sequence.alias("_sequence"),
        F.lit(None).cast("timestamp").alias("_source_ts"),
        F.array().cast("array<string>").alias(UNAVAILABLE),
        *[value.alias(name) for name, value in key_values.items()],
        *[
            _kept(F.col("_row")[c.name], unfits.get(c.name)).alias(c.name)
            for c in layout.value_columns
        ],
        *([_rescued(F.col("_raw"), unfits).alias(RESCUED)] if unfits else []),
    )


def _with_reason(events: DataFrame, reason: Column) -> DataFrame:
    """``events`` with the quarantine reason in its own column, computed once per row (the
    columns of :func:`_common_columns` use it three times)."""
    return events.select("*", reason.alias("_why"))


def _common_columns(hashed: bool) -> list[Column]:
    """The reason and bronze columns of every parsed event, after :func:`_with_reason`
    (``hashed``: the rows carry :data:`SCHEMA_HASH`, which is kept)."""
    tombstone, reason = F.col("value").isNull(), F.col("_why")
    return [
        *([F.col(SCHEMA_HASH)] if hashed else []),
        F.when(~tombstone, reason).alias(REASON),
        tombstone.alias(TOMBSTONE),
        F.col("topic").alias("_bronze_topic"),
        F.col("partition").alias("_bronze_partition"),
        F.col("offset").alias("_bronze_offset"),
        F.when(reason.isNotNull(), F.col("key")).alias(BRONZE_BYTES[0]),
        F.when(reason.isNotNull(), F.col("value")).alias(BRONZE_BYTES[1]),
    ]


#: Postgres ``source.sequence``: a JSON array of two strings of at most 20 digits, the first
#: maybe null (``\z``: the end of the text; Java's ``$`` also allows a line break before it).
_BLANK = r"[ \t\n\r]*"  # JSON's white space
_LSN = r'"[0-9]{1,20}"'
POSTGRES_SEQUENCE = (
    rf"^{_BLANK}\[{_BLANK}(?:null|{_LSN}){_BLANK},{_BLANK}{_LSN}{_BLANK}\]{_BLANK}\z"
)


def _connector_sequence(source: Column, parts: Column) -> Column:
    """Sortable text: Postgres ``[last commit LSN, LSN]`` (``parts``: ``source.sequence`` read
    as a JSON array of text, which :data:`POSTGRES_SEQUENCE` it must be); MySQL binlog file,
    position, row."""
    commit, lsn = parts[0], parts[1]
    digits = r"^[0-9]{1,20}\z"
    postgres = F.when(
        source["sequence"].rlike(POSTGRES_SEQUENCE)
        & (F.size(parts) == 2)
        & lsn.rlike(digits)
        & (commit.isNull() | commit.rlike(digits)),
        F.concat(
            F.lpad(F.coalesce(commit, F.lit("0")), SEQUENCE_DIGITS, "0"),
            F.lit("/"),
            F.lpad(lsn, SEQUENCE_DIGITS, "0"),
        ),
    )
    mysql = F.when(
        source["file"].isNotNull() & (source["pos"] >= 0),
        F.concat(
            source["file"],
            F.lit("/"),
            F.lpad(source["pos"].cast("string"), SEQUENCE_DIGITS, "0"),
            F.lit("/"),
            F.lpad(F.coalesce(source["row"], F.lit(0)).cast("string"), 10, "0"),
        ),
    )
    connector = source["connector"]
    return F.when(connector == "postgresql", postgres).when(connector == "mysql", mysql)


def _configured_sequence(
    columns: tuple[str, ...], layout: RowLayout, after: Column, before: Column
) -> Column:
    by_name = {c.name: c for c in layout.columns}
    missing = [name for name in columns if name not in by_name]
    if missing:
        return F.lit(None).cast("struct<missing:string>")
    values = [by_name[n].decode(F.coalesce(after[n], before[n])).alias(n) for n in columns]
    return F.when(~_any_null(values), F.struct(*values))


def _any_null(values: Any) -> Column:
    """True if any value is null, or if there are no values at all (no key known)."""
    columns = list(values)
    result = F.lit(not columns)
    for value in columns:
        result = result | value.isNull()
    return result


def check_declared_schemas(specs: Iterable[TableSpec]) -> None:
    """Parse every declared ``schema`` now, so a typo stops a run before it starts.

    Raises:
        ConfigError: see :func:`declared_schema`.
    """
    for spec in specs:
        declared_schema(spec)


def declared_schema(spec: TableSpec) -> StructType | None:
    """The columns an ``events`` table declares in ``schema`` (None: inferred from the JSON).
    Needs the active Spark session, which parses the DDL.

    Raises:
        ConfigError: the text is not a list of ``name type`` columns Spark can parse.
    """
    if not spec.schema:
        return None
    try:
        parsed = DataType.fromDDL(spec.schema)
    except ParseException as error:
        problem = next(line for line in str(error).splitlines() if line.strip())
        raise ConfigError(
            f"Table {spec.name!r}: schema {spec.schema!r} is not a list of 'name type' columns "
            f"Spark can read: {problem} Write it as, for example, 'id bigint, ts timestamp'."
        ) from None
    if not isinstance(parsed, StructType):
        raise ConfigError(
            f"Table {spec.name!r}: schema {spec.schema!r} must be a list of 'name type' columns, "
            "for example 'id bigint, ts timestamp'."
        )
    for name in parsed.fieldNames():
        if (unusable := column_name_problem(name)) is not None:
            raise ConfigError(f"Table {spec.name!r}: in its schema, {unusable}.")
    return parsed


# --------------------------------------------------------------------------------------------
# Schema versions: the Spark jobs that find a batch's schema versions
# --------------------------------------------------------------------------------------------


def rows_of(texts: DataFrame, version: SchemaVersion) -> DataFrame:
    """The rows of the batch ``texts`` that ``version`` decodes."""
    return texts if version.selector is None else texts.where(version.selector)


def discover_layout(texts: DataFrame, spec: TableSpec) -> RowLayout:
    """Find the key and row columns of a micro-batch (one small distinct-schema query): the union
    over its schema versions, a later version's codec winning for a shared column."""
    if spec.format == "events":
        return _events_layout(texts, spec)
    samples = _debezium_samples(texts)
    row_groups = [s.row.codecs for s in samples if not s.row_inferred]
    key_groups = [s.key.codecs for s in samples if not s.key_inferred]
    if any(s.row_inferred for s in samples):
        row_groups.insert(0, _inferred_envelope_row(texts))
    if any(s.key_inferred for s in samples):
        key_groups.insert(0, _inferred_record_key(texts))
    columns = tuple(merge_codecs(row_groups))
    if spec.keys:
        return _usable(_with_configured_keys(columns, spec.keys))
    return _usable(RowLayout(keys=tuple(merge_codecs(key_groups)), columns=columns))


def discover_versions(texts: DataFrame, spec: TableSpec) -> list[SchemaVersion]:
    """The schema versions of a micro-batch, ordered by their first record in bronze.

    Distinct schemas that have the same columns, decoded the same way (e.g. before and after a
    change of nullability or default) make one version, so a batch needs more than one only
    across a change of columns or types. A record is read with its own schema's columns only
    (a member of its JSON that its schema lacks is not read, whatever other schemas the batch
    holds). Every row of the batch (Kafka tombstones too) belongs to exactly one version, so
    parsing each version's rows with its layout and taking the union parses the whole batch.
    """
    if spec.format == "events":
        return [SchemaVersion(_events_layout(texts, spec), None, None, spec.schema is None)]
    found = _with_case_clashes(sorted(_debezium_samples(texts), key=lambda s: s.first))
    broken = [s for s in found if s.problem is not None]
    samples = [s for s in found if s.problem is None]
    if any(s.row_inferred for s in samples):
        row = _Decoding.inferred(_inferred_envelope_row(texts))
        samples = [replace(s, row=row) if s.row_inferred else s for s in samples]
    if any(s.key_inferred for s in samples):
        key = _Decoding.inferred(_inferred_record_key(texts))
        samples = [replace(s, key=key) if s.key_inferred else s for s in samples]
    groups: list[list[_Sample]] = []
    for sample in samples:
        group = next((g for g in groups if all(sample.agrees(other) for other in g)), None)
        if group is None:
            groups.append([sample])
        else:
            group.append(sample)
    key_names = _key_names(samples)
    empty = _with_configured_keys((), spec.keys) if spec.keys else RowLayout((), ())
    versions = []
    for index, group in enumerate(groups):
        columns = tuple(merge_codecs([s.row.codecs for s in group]))
        # Schemas of a group may differ in their defaults: its first record's schema's win.
        defaults = {n: d for s in reversed(group) for n, d in s.row.defaults.items()}
        if spec.keys:
            layout = _with_configured_keys(columns, spec.keys)
        else:
            keys = merge_codecs([s.key.codecs for s in group])
            layout = RowLayout(keys=_with_key_names(keys, key_names), columns=columns)
        others = [s.hash for g in groups if g is not group for s in g] + [s.hash for s in broken]
        # The first version also takes the rows no sample stands for (Kafka tombstones).
        selector = (
            None
            if not others
            else ~schema_hash().isin(others)
            if index == 0
            else schema_hash().isin([s.hash for s in group])
        )
        inferred = any(s.row_inferred or s.key_inferred for s in group)
        hashes = frozenset(s.hash for s in group)
        # Values read by their records' own Connect schema are checked against its types.
        checked = not any(s.row_inferred for s in group)
        layout = replace(layout, checked=checked, rescues=checked and _rescues(spec))
        if checked:
            layout = replace(layout, defaults=tuple(defaults.items()))
        screened, key_problem = _screened(layout)
        if key_problem is not None:  # no record of the version can be keyed
            screened = empty
        version = SchemaVersion(screened, selector, group[0].first, inferred, key_problem, hashes)
        versions.append(version)
    if not versions:  # only tombstones (and broken schemas): nothing to decode
        versions.append(SchemaVersion(empty, _none_of(broken), None, False))
    if broken:  # one version for all: a batch of many broken schemas is parsed in one pass
        selector = schema_hash().isin([s.hash for s in broken])
        first = min(s.first for s in broken)
        versions.append(SchemaVersion(empty, selector, first, False, _problem_of(broken)))
    return versions


def _problem_of(broken: list[_Sample]) -> str | Column:
    """The quarantine reason of the records of ``broken`` samples: their sample's problem."""
    if len({s.problem for s in broken}) == 1:
        return str(broken[0].problem)
    reasons = F.create_map(*[F.lit(part) for s in broken for part in (s.hash, s.problem)])
    return reasons[schema_hash()]


def _with_case_clashes(samples: list[_Sample]) -> list[_Sample]:
    """Mark a sample broken when one of its columns differs only in letter case from a column
    of an earlier sample: Spark and Delta take both for one column."""
    spelling: dict[str, str] = {}
    marked = []
    for sample in samples:
        names = [c.name for c in (*sample.row.codecs, *sample.key.codecs)]
        clash = next((n for n in names if spelling.get(n.lower(), n) != n), None)
        if sample.problem is None and clash is not None:
            first = spelling[clash.lower()]
            why = f"column {clash!r} differs from {first!r} only in letter case"
            marked.append(replace(sample, problem=why))
            continue
        if sample.problem is None:
            spelling.update((n.lower(), n) for n in names if n.lower() not in spelling)
        marked.append(sample)
    return marked


def _none_of(samples: list[_Sample]) -> Column | None:
    return ~schema_hash().isin([s.hash for s in samples]) if samples else None


@dataclass(frozen=True)
class _Decoding:
    """The codecs of a row or key schema and, per column, what decides how it is decoded
    (``cdc.debezium.decoding_of`` its Connect field schema, or its inferred JSON type)."""

    codecs: list[ColumnCodec]
    signatures: dict[str, str]
    #: Column -> its Connect field schema (JSON text), for the fields with a ``default``.
    defaults: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def connect(struct: Mapping[str, Any]) -> _Decoding:
        """The decoding of a Connect struct schema (checked: ``cdc.debezium.check_schema``)."""
        fields = struct_fields(struct)
        return _Decoding(
            codecs=row_codecs(struct),
            signatures={f["field"]: json.dumps(decoding_of(f)) for f in fields},
            defaults={
                f["field"]: json.dumps(f, sort_keys=True)
                for f in fields
                if f.get("default") is not None
            },
        )

    @staticmethod
    def inferred(codecs: list[ColumnCodec]) -> _Decoding:
        return _Decoding(codecs, {c.name: f"json {c.raw_type.simpleString()}" for c in codecs})

    def agrees(self, other: _Decoding) -> bool:
        """Whether both have the same columns, decoded the same way."""
        return self.signatures == other.signatures


_NOTHING = _Decoding([], {})


@dataclass(frozen=True)
class _Sample:
    """One distinct (value schema, key schema) of a batch. ``row_inferred``/``key_inferred``:
    the records have no such schema, their decoding is inferred from the batch's values.
    ``records``: how many records carry it; ``keyed``: their keys are JSON objects (with a
    Connect schema: a struct), so they tell the key columns."""

    hash: int
    first: tuple[int, int]
    row: _Decoding
    key: _Decoding
    row_inferred: bool
    key_inferred: bool
    problem: str | None = None  # why the schemas cannot be decoded
    records: int = 0
    keyed: bool = False

    def agrees(self, other: _Sample) -> bool:
        return self.row.agrees(other.row) and self.key.agrees(other.key)


#: Errors of Python code reading a schema that the schema can cause (besides SchemaProblem).
_SCHEMA_ERRORS = (
    ArithmeticError,
    AttributeError,
    KeyError,
    IndexError,
    RecursionError,
    TypeError,
    ValueError,
)


def _debezium_samples(texts: DataFrame) -> list[_Sample]:
    position = F.struct("partition", "offset")
    found = (
        texts.where(F.col("v").isNotNull())
        .groupBy(schema_hash().alias("h"))
        .agg(
            F.min_by(F.struct("v", "k"), position).alias("sample"),
            F.min(position).alias("first"),
            F.count(F.lit(1)).alias("records"),
        )
        .collect()
    )
    samples = []
    for group in found:
        first = (group.first.partition, group.first.offset)
        try:
            sample = _sample(group.h, first, group.sample.v, group.sample.k)
        except SchemaProblem as problem:
            sample = _Sample(group.h, first, _NOTHING, _NOTHING, False, False, str(problem))
        except _SCHEMA_ERRORS as error:  # a last resort: the schema is at fault, not the run
            if isinstance(error, PySparkException):
                raise
            why = f"schema cannot be decoded: {type(error).__name__}: {error}"[:500]
            sample = _Sample(group.h, first, _NOTHING, _NOTHING, False, False, why)
        samples.append(replace(sample, records=group.records))
    return samples


def _sample(hash_: int, first: tuple[int, int], value: str, key: str | None) -> _Sample:
    """The decoding of the records whose value and key are like ``value`` and ``key``.

    Raises:
        SchemaProblem: the value's or the key's Connect schema cannot be decoded.
    """
    wrapped, value_schema = _wrapped_schema(value)
    row = _Decoding.connect(envelope_row_schema(value_schema)) if wrapped else _NOTHING
    document = _json_object(key)
    if document is not None and _is_wrapper(document):
        struct = key_struct(document["schema"])
        decoding = _Decoding.connect(struct) if struct is not None else _NOTHING
        keyed = bool(decoding.codecs)
        return _Sample(hash_, first, row, decoding, not wrapped, False, keyed=keyed)
    return _Sample(hash_, first, row, _NOTHING, not wrapped, True, keyed=document is not None)


def _key_names(samples: list[_Sample]) -> tuple[str, ...]:
    """The key columns of a batch whose table has no ``keys``: those of the record keys that
    most of its records carry (keys without a Connect schema count as one, with their
    inferred fields; of equally many, the first in bronze). A record whose key lacks one of
    them is ``missing key``, so a few bad keys cannot take the good ones' columns away."""
    found: dict[tuple[str, ...], tuple[int, tuple[int, int]]] = {}
    for sample in samples:
        names = tuple(c.name for c in sample.key.codecs)
        if sample.keyed and names:
            records, first = found.get(names, (0, sample.first))
            found[names] = (records + sample.records, min(first, sample.first))
    if not found:
        return ()
    return max(found, key=lambda n: (found[n][0], -found[n][1][0], -found[n][1][1]))


def _events_layout(texts: DataFrame, spec: TableSpec) -> RowLayout:
    row_type = declared_schema(spec) or _infer(texts, "v")
    columns = tuple(inferred_codecs(row_type))
    missing = [k for k in spec.keys or () if k not in row_type.fieldNames()]
    if missing and spec.schema:
        raise ConfigError(
            f"Table {spec.name!r}: key column(s) {', '.join(missing)} are not in its schema."
        )
    layout = _with_configured_keys(columns, spec.keys or ())
    checked = spec.schema is not None
    return _usable(replace(layout, checked=checked, rescues=checked and _rescues(spec)))


def _rescues(spec: TableSpec) -> bool:
    """Whether a value its column's type does not hold is rescued, not quarantined."""
    return spec.on_type_mismatch == "rescue"


def _inferred_record_key(texts: DataFrame) -> list[ColumnCodec]:
    """Key codecs inferred from the record keys that are not the converter's wrapper."""
    names = F.array_sort(F.json_object_keys("k"))
    wrapper = F.coalesce(names == F.array(F.lit("payload"), F.lit("schema")), F.lit(False))
    return inferred_codecs(_infer(texts.where(~wrapper), "k", keep_all_null=True))


def _with_key_names(codecs: list[ColumnCodec], names: tuple[str, ...]) -> tuple[ColumnCodec, ...]:
    """Codecs for the batch's key columns; a key column ``codecs`` lack is read as null."""
    by_name = {c.name: c for c in codecs}
    return tuple(by_name.get(n) or _absent_key(n) for n in names)


def read_as_null(column: Column) -> Column:
    """Decoder of a key column the records' schema lacks: null, whatever the JSON holds."""
    return F.lit(None).cast(StringType())


def _absent_key(name: str) -> ColumnCodec:
    return ColumnCodec(name, StringType(), read_as_null, False)


def _with_configured_keys(columns: tuple[ColumnCodec, ...], keys: tuple[str, ...]) -> RowLayout:
    """Key codecs for configured key columns; a key no record of the batch has is read as a
    null string, so those records are quarantined as ``missing key``."""
    by_name = {c.name: c for c in columns}
    absent = tuple(_absent_key(k) for k in keys if k not in by_name)
    key_codecs = tuple(by_name.get(k) or next(a for a in absent if a.name == k) for k in keys)
    return RowLayout(keys=key_codecs, columns=columns + absent)


def _wrapped_schema(value: str) -> tuple[bool, Any]:
    """Whether a value is the converter's wrapper (a JSON object of just ``schema`` and
    ``payload``) and its Connect schema, read from the text before the payload if it starts
    like the converter's output."""
    if value.startswith(WRAPPER_PREFIX) and PAYLOAD_MARKER in value:
        schema_text = value[len(WRAPPER_PREFIX) : value.index(PAYLOAD_MARKER)]
        try:
            return True, json.loads(schema_text)
        except (ValueError, RecursionError):
            pass  # the marker is inside the schema, or the value is no JSON: read it whole
    document = _json_object(value)
    if document is None or not _is_wrapper(document):
        return False, None
    return True, document["schema"]


def _is_wrapper(document: Mapping[str, Any]) -> bool:
    return set(document) == {"schema", "payload"}


def _json_object(text: str | None) -> dict[str, Any] | None:
    """``text`` read as a JSON object (None: null, not JSON, nested deeper than Python
    follows, or another JSON value)."""
    if not text:
        return None
    try:
        loaded = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _infer(texts: DataFrame, column: str, keep_all_null: bool = False) -> StructType:
    """Infer a JSON schema from the non-null object strings of ``column``.

    A field that is null in every record says nothing about its type (Spark would call it a
    string), so it is left out unless ``keep_all_null`` (record keys: a key field that is
    always null must stay, so that its records are quarantined as ``missing key``).
    """
    strings = texts.where(F.col(column).startswith("{")).select(column).rdd.map(lambda r: r[0])
    if strings.isEmpty():
        return StructType()
    reader = texts.sparkSession.read.options(
        dropFieldIfAllNull=not keep_all_null, columnNameOfCorruptRecord=_CORRUPT_RECORD
    )
    inferred = reader.json(strings).schema
    return StructType([f for f in inferred.fields if f.name != _CORRUPT_RECORD])


#: Where schema inference puts text that is not JSON: not a plain name, so no source column
#: silver keeps can have it (Spark's default, ``_corrupt_record``, is an ordinary name).
_CORRUPT_RECORD = "corrupt record"


def _inferred_envelope_row(texts: DataFrame) -> list[ColumnCodec]:
    """Row codecs inferred from the ``after`` images (else the ``before`` images) of the
    records that carry no Connect schema."""
    unwrapped = texts.where(F.get_json_object("v", "$.schema").isNull())
    envelope = _infer(unwrapped, "v")
    for side in ("after", "before"):
        if side in envelope.fieldNames():
            side_type: DataType = envelope[side].dataType
            if not isinstance(side_type, StructType):
                # Some records' image is not an object (they are quarantined), so inference
                # found no struct: infer from the images that are objects.
                side_type = _infer(_object_images(unwrapped, side), side)
            if side_type.fields:
                return inferred_codecs(side_type)
    return []


def _object_images(texts: DataFrame, side: str) -> DataFrame:
    """The JSON text of the ``side`` image of each record whose image is a JSON object (a map
    reads nothing else)."""
    as_map = F.from_json("v", StructType([StructField(side, MapType(StringType(), StringType()))]))
    return texts.where(as_map[side].isNotNull()).select(
        F.get_json_object("v", f"$.{side}").alias(side)
    )


def _screened(layout: RowLayout) -> tuple[RowLayout, str | None]:
    """``layout`` with the row columns silver cannot keep moved to ``refused``, and the
    problem of its first key column silver cannot keep (None: every key is usable)."""
    key_problem = next(
        (why for c in layout.keys if (why := column_name_problem(c.name)) is not None), None
    )
    refused = tuple(
        (c, why)
        for c in layout.columns
        if c.name not in layout.key_names and (why := column_name_problem(c.name)) is not None
    )
    if not refused:
        return layout, key_problem
    names = {c.name for c, _ in refused}
    kept = tuple(c for c in layout.columns if c.name not in names)
    return replace(layout, columns=kept, refused=refused), key_problem


def _usable(layout: RowLayout) -> RowLayout:
    """:func:`_screened` where a key silver cannot keep is a configuration error.

    Raises:
        ConfigError: a key column's name is not one silver can keep.
    """
    screened, key_problem = _screened(layout)
    if key_problem is not None:
        raise ConfigError(f"Key {key_problem}.")
    return screened


def inferred_codecs(row_type: StructType) -> list[ColumnCodec]:
    """Codecs for rows without a Connect schema: keep the types JSON inference found."""
    return [
        ColumnCodec(f.name, f.dataType, identity, isinstance(f.dataType, StringType))
        for f in row_type.fields
    ]


def merge_codecs(groups: Sequence[Sequence[ColumnCodec]]) -> list[ColumnCodec]:
    """Union of columns over several schema versions; a later version's codec wins."""
    merged: dict[str, ColumnCodec] = {}
    for group in groups:
        for codec in group:
            merged[codec.name] = codec
    return list(merged.values())
