"""The decode stage of a silver micro-batch: bronze rows to typed change events.

:func:`decode` takes the micro-batch as bronze hands it and returns it decoded (:class:`Decoded`):
its schema versions discovered (:func:`discover_versions`: the Spark jobs that sample the
batch's Connect schemas or infer its JSON types, skipped when the query's
:class:`SchemaCache` covers the batch), each version parsed (:func:`silver.parse.parse_changes`,
pure), brought to the table's columns (:mod:`silver.evolution`, pure), the table's column
settings applied (:mod:`silver.settings`), the rows the expectations test marked, and the
batch's totals counted, all in one Spark job over the kept result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, MapType, StringType, StructField, StructType

from cdc.debezium import (
    ColumnCodec,
    SchemaProblem,
    decoding_of,
    envelope_row_schema,
    inferred_codecs,
    key_struct,
    merge_codecs,
    row_codecs,
    struct_fields,
)
from expectations.compile import Check
from expectations.enforce import TableChecks
from lakehouse_core.columns import OP, REASON, RESCUED, column_name_problem
from lakehouse_core.config import TableSpec
from lakehouse_core.errors import ConfigError, SchemaChangeError
from lakehouse_core.frames import kept_with_totals
from silver.context import BatchContext
from silver.evolution import (
    VersionColumns,
    conform,
    defaults_of,
    incompatible_message,
    plan_schema,
    with_defaults,
)
from silver.parse import (
    PAYLOAD_MARKER,
    SCHEMA_HASH,
    TOMBSTONE,
    TRUNCATE_OP,
    UNAVAILABLE,
    UPSERT_OPS,
    WRAPPER_PREFIX,
    RowLayout,
    SchemaVersion,
    as_text,
    declared_schema,
    order_of,
    parse_changes,
    schema_hash,
    schema_hashes,
    with_schema_hash,
)
from silver.settings import kept_layout, with_settings
from silver.snapshots import truncate_order
from silver.tables import RANGE_TYPES, KeyRange

#: Totals of :func:`decode`: the lowest and highest value of the batch's ranged key column, and
#: the order of its newest truncate that is not quarantined, a full snapshot's end included
#: (:mod:`silver.snapshots`; None: none).
LOW_KEY, HIGH_KEY, NEWEST_TRUNCATE = "_low_key", "_high_key", "_newest_truncate"


@dataclass(frozen=True)
class Decoded:
    """A micro-batch decoded, marked for its checks and kept, with its totals (one Spark job).

    ``layout``: the batch's key and target columns; ``kept``: those silver keeps (its column
    settings); ``events``: the parsed events (as :func:`silver.parse.parse_changes` describes
    them, without :data:`~silver.parse.SCHEMA_HASH`), rows a ``drop`` expectation catches
    already carrying their reason; ``compiled``: the checks, limited to the upserts (none:
    the table has no checks, or the batch no columns); ``counts``: the totals (``records``,
    ``quarantined``, ``tombstones``, ``truncates``, ``toast_columns``, ``schemas``, the
    checks' totals, :data:`NEWEST_TRUNCATE`, ``rescued``: the records kept with values their
    types do not hold in :data:`~lakehouse_core.columns.RESCUED`); ``key_range``: the batch's
    range of its first integer or string key column (None: no such key).
    """

    layout: RowLayout
    kept: RowLayout
    events: DataFrame
    compiled: list[Check]
    counts: Row
    key_range: KeyRange | None

    @property
    def checks_apply(self) -> bool:
        """Whether the table's checks judge this batch (it has columns to check)."""
        return bool(self.layout.columns)


def decode(ctx: BatchContext, batch: DataFrame) -> Decoded:
    """Decode a micro-batch of bronze rows (see the module docstring).

    The query's cached schema version is tried first; if the batch carries a schema it does
    not decode, the batch's versions are discovered and decoded afresh (and cached).

    Raises:
        SchemaChangeError: a column type the table cannot take, under
            ``on_incompatible_type = "fail"``.
    """
    texts = with_schema_hash(as_text(batch))
    table = ctx.state.data_columns(ctx.spark, ctx.tables.silver)
    cache = ctx.state.schemas
    if cache.version is not None:
        decoded = _decoded(texts, ctx, table, [cache.version])
        if cache.covers(decoded.counts.schemas):
            return decoded
    versions = discover_versions(texts, ctx.spec)
    decoded = _decoded(texts, ctx, table, versions)
    cache.remember(versions)
    return decoded


def _decoded(
    texts: DataFrame, ctx: BatchContext, table: StructType | None, versions: list[SchemaVersion]
) -> Decoded:
    """Parse the batch with its schema ``versions``, mark the checks' rows, keep the result and
    count its totals (``schemas``: the schema hashes its records carry)."""
    spec = ctx.spec
    layout, parsed = read_batch(texts, spec, table, versions)
    kept = kept_layout(layout, spec)
    events = with_settings(parsed, spec, layout)
    compiled: list[Check] = []
    if ctx.checks is not None and layout.columns:
        upserts = F.col(REASON).isNull() & F.col(OP).isin(*UPSERT_OPS)
        events, compiled = ctx.checks.mark(events, upserts, REASON)
    ranged = next(
        (k for k in layout.key_names if isinstance(events.schema[k].dataType, RANGE_TYPES)), None
    )
    bounds = [F.min(ranged).alias(LOW_KEY), F.max(ranged).alias(HIGH_KEY)] if ranged else []
    kept_truncate = F.col(REASON).isNull() & ~F.col(TOMBSTONE) & (F.col(OP) == TRUNCATE_OP)
    rescued = F.col(REASON).isNull() & F.col(RESCUED).isNotNull()
    events, counts = kept_with_totals(
        events,
        *bounds,
        F.count(F.lit(1)).alias("records"),
        F.count(REASON).alias("quarantined"),
        F.count_if(TOMBSTONE).alias("tombstones"),
        F.count_if(F.col(OP) == TRUNCATE_OP).alias("truncates"),
        (F.count_if(rescued) if RESCUED in events.columns else F.lit(0)).alias("rescued"),
        F.max(truncate_order(events, kept_truncate, order_of())).alias(NEWEST_TRUNCATE),
        F.array_distinct(F.flatten(F.collect_set(UNAVAILABLE))).alias("toast_columns"),
        schema_hashes().alias("schemas"),
        *TableChecks.totals(compiled),
    )
    key_range = None
    if ranged is not None and counts[LOW_KEY] is not None:
        key_range = KeyRange(ranged, counts[LOW_KEY], counts[HIGH_KEY])
    return Decoded(layout, kept, events.drop(SCHEMA_HASH), compiled, counts, key_range)


def read_batch(
    texts: DataFrame,
    spec: TableSpec,
    table: StructType | None,
    versions: list[SchemaVersion] | None = None,
) -> tuple[RowLayout, DataFrame]:
    """Parse a micro-batch (bronze rows with ``k``/``v`` text) whose records may carry several
    schema versions, against the table's current data columns ``table`` (None: no table yet).

    Returns the layout of the result (key columns, then every target column) and the parsed
    events (as :func:`silver.parse.parse_changes` describes them) with the target columns in
    their target types (:mod:`silver.evolution`). Under ``on_incompatible_type =
    "quarantine"`` a record that carries a value in a conflicting column has the reason
    ``incompatible type for column <c>: table <type>, record <type>``. ``versions``: the
    batch's schema versions if known (None: they are discovered, one small query).

    Raises:
        SchemaChangeError: a conflict in a value column under ``on_incompatible_type = "fail"``.
    """
    versions = versions if versions is not None else discover_versions(texts, spec)
    frames = [
        parse_changes(_rows_of(texts, v), spec, v.layout, problem=v.problem) for v in versions
    ]
    typed = [
        VersionColumns(
            with_defaults(_typed_columns(frame, v.layout), dict(v.layout.defaults)), v.inferred
        )
        for v, frame in zip(versions, frames, strict=True)
    ]
    keys = versions[0].layout.keys
    dropped = {
        name
        for version in typed
        for name in version.columns.fieldNames()
        if name not in {k.name for k in keys} and name != RESCUED and not spec.keeps_column(name)
    }
    plan = plan_schema(table, typed, dropped, {k.name for k in keys})
    if spec.on_incompatible_type == "fail":
        # A key of another type cannot be a row of the table at all: its records are always
        # quarantined, so one bad producer cannot stop the entity.
        key_names = {k.name for k in keys}
        for version, conflicts in zip(versions, plan.conflicts, strict=True):
            if values := [c for c in conflicts if c.column not in key_names]:
                raise SchemaChangeError(incompatible_message(spec, values[0], version.first))
    # A key column no record has (so every record misses its key) still needs a column.
    planned = plan.target.fieldNames()
    untyped = [StructField(k.name, StringType(), True) for k in keys if k.name not in planned]
    target = StructType([*plan.target.fields, *untyped])
    parts = []
    for version, parsed, conflicts in zip(versions, frames, plan.conflicts, strict=True):
        rejected = {c.column: c.reason for c in conflicts}
        rows = (
            parse_changes(_rows_of(texts, version), spec, version.layout, rejected)
            if rejected
            else parsed
        )
        nulls = {*rejected, *absent_columns(version.layout)}
        checked = version.layout.checked and not version.inferred
        parts.append(conform(rows, _names(version.layout), target, nulls, defaults=checked))
    layout = RowLayout(
        keys=tuple(_codec(target[k.name]) for k in keys),
        columns=tuple(_codec(f) for f in target.fields),
        defaults=defaults_of(target),
    )
    return layout, reduce(DataFrame.unionByName, parts)


def _rows_of(texts: DataFrame, version: SchemaVersion) -> DataFrame:
    return texts if version.selector is None else texts.where(version.selector)


def _names(layout: RowLayout) -> list[str]:
    """The data columns of the events :func:`silver.parse.parse_changes` makes of ``layout``."""
    rescued = [RESCUED] if layout.rescues and layout.value_columns else []
    return [*layout.key_names, *(c.name for c in layout.value_columns), *rescued]


def _typed_columns(frame: DataFrame, layout: RowLayout) -> StructType:
    """The data columns a version has a type for (not its absent key columns)."""
    absent = absent_columns(layout)
    return StructType([frame.schema[n] for n in _names(layout) if n not in absent])


def _codec(field: StructField) -> ColumnCodec:
    """A codec standing for a target column (the rows are decoded already)."""
    return ColumnCodec(field.name, field.dataType, lambda c: c, False)


# Schema discovery: the Spark jobs that find a batch's schema versions.


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


def _read_as_null(column: Column) -> Column:
    """Decoder of a key column the records' schema lacks: null, whatever the JSON holds."""
    return F.lit(None).cast(StringType())


def _absent_key(name: str) -> ColumnCodec:
    return ColumnCodec(name, StringType(), _read_as_null, False)


def absent_columns(layout: RowLayout) -> frozenset[str]:
    """The key columns of ``layout`` its records' schema lacks: read as null, they say nothing
    about the column's type."""
    return frozenset(c.name for c in (*layout.keys, *layout.columns) if c.decode is _read_as_null)


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
