"""Schema changes of a silver table, decided per micro-batch (docs/silver-semantics.md,
"Schema changes").

Pure decisions and transforms; :func:`silver.decode.read_batch` applies them to a batch
(:func:`typed_columns`: what each schema version gives; :func:`plan_schema`: the target;
:func:`conform`: each version's events in it).
A micro-batch can hold records of several schema versions (each Debezium record carries its
Connect schema). Each version is parsed with its own schema, then every version's rows are
brought to one set of columns, the *target*: the table's columns and every column of the
batch, each in the narrowest type that holds the table's values and the batch's
(:func:`lakehouse_core.widening.widened`). A version whose type for a column no such type holds is a
conflict: with ``on_incompatible_type = "fail"`` the batch fails with
:class:`~lakehouse_core.errors.SchemaChangeError`; with ``"quarantine"`` its records that carry a
value in that column are quarantined, and the rest of the batch is applied. A conflict in a key
column is always quarantined: such a record cannot be a row of the table.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType, StructField, StructType

from cdc.debezium import ColumnCodec, codec_for
from lakehouse_core.columns import RESCUED
from lakehouse_core.config import TableSpec
from lakehouse_core.widening import same_type, widened
from silver.parse import RowLayout, read_as_null

#: Field metadata of a silver column whose Connect schema, when the column was added, gave it
#: a default: that Connect field schema (JSON text, ``default`` included). Rows of a schema
#: version without the column hold the default, as the source database's rows do.
CONNECT_DEFAULT = "lakehouse.connect_default"


@dataclass(frozen=True)
class TypeConflict:
    """A column whose type in some records the table (or the batch's target) cannot take."""

    column: str
    table_type: DataType
    record_type: DataType

    @property
    def reason(self) -> str:
        """The quarantine reason of the records that carry a value in the column."""
        return (
            f"incompatible type for column {self.column}: "
            f"table {self.table_type.simpleString()}, record {self.record_type.simpleString()}"
        )


@dataclass(frozen=True)
class VersionColumns:
    """The data columns (keys and row columns) one schema version decodes, in its types;
    ``inferred``: the types were inferred from JSON values."""

    columns: StructType
    inferred: bool = False


def with_default(column: StructField, connect_field: str | None) -> StructField:
    """``column`` carrying the Connect field schema ``connect_field`` (JSON text with a
    ``default``; None: no default) in its metadata (:data:`CONNECT_DEFAULT`)."""
    if connect_field is None:
        return column
    metadata = {**column.metadata, CONNECT_DEFAULT: connect_field}
    return StructField(column.name, column.dataType, column.nullable, metadata)


def default_of(column: StructField) -> Column | None:
    """The Connect default a column's metadata records (:data:`CONNECT_DEFAULT`), decoded as a
    record's value of that schema is, in the column's type (None: no default; a default the
    schema cannot read is null, as such a value would be)."""
    text = column.metadata.get(CONNECT_DEFAULT)
    if text is None:
        return None
    schema: dict[str, Any] = json.loads(text)
    codec = codec_for(schema)
    raw_type = StructType([StructField("v", codec.raw_type)])
    raw = F.from_json(F.lit(json.dumps({"v": schema.get("default")})), raw_type)["v"]
    value = codec.staged.read(raw) if codec.staged is not None else codec.decode(raw)
    return value.cast(column.dataType)


def defaults_of(columns: StructType) -> tuple[tuple[str, str], ...]:
    """The columns of ``columns`` that record a Connect default, with its field schema."""
    return tuple(
        (f.name, str(f.metadata[CONNECT_DEFAULT]))
        for f in columns.fields
        if CONNECT_DEFAULT in f.metadata
    )


def default_fills(columns: StructType, defaults: Sequence[tuple[str, str]]) -> dict[str, Column]:
    """Per column of ``columns`` with one of the ``defaults`` (column, Connect field schema):
    the default's value in the column's type (:func:`default_of`), for the rows a table held
    before it had the column (:func:`lakehouse_core.delta_io.ensure_table`)."""
    typed = with_defaults(columns, dict(defaults))
    return {f.name: d for f in typed.fields if (d := default_of(f)) is not None}


def with_defaults(columns: StructType, defaults: Mapping[str, str]) -> StructType:
    """``columns`` with the ``defaults`` (column -> Connect field schema) in their metadata."""
    return StructType([with_default(f, defaults.get(f.name)) for f in columns.fields])


@dataclass(frozen=True)
class SchemaPlan:
    """The target columns of a batch and, per schema version (same order), its conflicts."""

    target: StructType
    conflicts: tuple[tuple[TypeConflict, ...], ...]


def plan_schema(
    table: StructType | None,
    versions: Sequence[VersionColumns],
    dropped: Collection[str] = (),
    keys: Collection[str] = (),
) -> SchemaPlan:
    """Decide the target columns of a batch (pure).

    The target starts as the table's data columns (none for a new table); the versions are
    then taken in order (the caller orders them by their first record in bronze), each column
    widening its target type, or adding itself to the target, or, if no type holds both,
    becoming a conflict of that version. A column of integers, booleans or dates and one of
    text (or two of those no other type holds) become text, except in the ``keys`` and in
    versions whose types were inferred from JSON values (the fold reads those values as
    sent). A table column no version has stays in the target
    with its type: its records carry no value for it, which is null (or its Connect default).
    A ``dropped`` column (one silver does not keep) is never a conflict: where no type holds
    both, it becomes text. A column keeps the metadata it has in the table, else that of the
    first version that has it (:data:`CONNECT_DEFAULT`: the default it was added with).
    """
    target: dict[str, StructField] = {f.name: f for f in (table.fields if table else ())}
    conflicts: list[tuple[TypeConflict, ...]] = []
    for version in versions:
        found = []
        for field in version.columns.fields:
            current = target.get(field.name)
            if current is None:
                target[field.name] = field  # its Connect default, if any, is the column's
                continue
            # A key changing type is a record of another entity, not a change to make.
            text = not version.inferred and field.name not in keys
            wider = widened(
                current.dataType, field.dataType, json_numbers=version.inferred, text=text
            )
            if wider is None and field.name in dropped:
                wider = StringType()
            if wider is None:
                found.append(TypeConflict(field.name, current.dataType, field.dataType))
            else:
                target[field.name] = StructField(field.name, wider, True, current.metadata)
        conflicts.append(tuple(found))
    columns = StructType(
        [StructField(f.name, f.dataType, True, f.metadata) for f in target.values()]
    )
    return SchemaPlan(columns, tuple(conflicts))


def conform(
    events: DataFrame,
    data_columns: Sequence[str],
    target: StructType,
    nulls: Collection[str] = (),
    defaults: bool = False,
) -> DataFrame:
    """Events of one schema version with exactly the ``target`` data columns (pure).

    ``data_columns``: the version's own data columns in ``events``. One of its ``nulls``
    (conflicting or absent columns) is null; a target column the version lacks is null, or,
    with ``defaults`` (the version is read by its Connect schema), the Connect default the
    target column records (:func:`default_of`); any other is cast to its target type, a
    widening, so no value changes.
    """
    own = set(data_columns)
    kept = [c for c in events.columns if c not in own]
    present = {
        f.name: f.dataType for f in events.schema.fields if f.name in own and f.name not in nulls
    }
    values = []
    for field in target.fields:
        kind = present.get(field.name)
        default = default_of(field) if defaults and field.name not in own else None
        if default is not None:
            values.append(default.alias(field.name))
        elif kind is None:
            values.append(F.lit(None).cast(field.dataType).alias(field.name))
        elif same_type(kind, field.dataType):
            values.append(F.col(field.name))
        else:
            values.append(F.col(field.name).cast(field.dataType).alias(field.name))
    return events.select(*kept, *values)


def incompatible_message(
    spec: TableSpec, conflict: TypeConflict, first: tuple[int, int] | None = None
) -> str:
    """The one-line error for a conflict: table, column, both types, where, what to do."""
    where = f"records of topic {spec.topic}"
    if first is not None:
        where += f" (first at partition {first[0]}, offset {first[1]})"
    return (
        f"Incompatible type change in silver.{spec.name}: column {conflict.column!r} is "
        f"{conflict.table_type.simpleString()} in the table but "
        f"{conflict.record_type.simpleString()} in {where}, and no Delta type widening holds "
        f'both. Set on_incompatible_type = "quarantine" for table {spec.name!r} to quarantine '
        "such records and apply the rest, or change the silver table to the new type and "
        "rebuild it from bronze (replay)."
    )


def data_names(layout: RowLayout) -> list[str]:
    """The data columns of the events :func:`silver.parse.parse_changes` makes of ``layout``."""
    rescued = [RESCUED] if layout.rescues and layout.value_columns else []
    return [*layout.key_names, *(c.name for c in layout.value_columns), *rescued]


def typed_columns(frame: DataFrame, layout: RowLayout) -> StructType:
    """The data columns a version has a type for (not its absent key columns)."""
    absent = absent_columns(layout)
    return StructType([frame.schema[n] for n in data_names(layout) if n not in absent])


def target_codec(field: StructField) -> ColumnCodec:
    """A codec standing for a target column (the rows are decoded already)."""
    return ColumnCodec(field.name, field.dataType, lambda c: c, False)


def absent_columns(layout: RowLayout) -> frozenset[str]:
    """The key columns of ``layout`` its records' schema lacks: read as null, they say nothing
    about the column's type."""
    return frozenset(c.name for c in (*layout.keys, *layout.columns) if c.decode is read_as_null)
