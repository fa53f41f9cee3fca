"""Schema changes of a silver table, decided per micro-batch (docs/silver-semantics.md,
"Schema changes").

A micro-batch can hold records of several schema versions (each Debezium record carries its
Connect schema). Each version is parsed with its own schema, then every version's rows are
brought to one set of columns, the *target*: the table's columns and every column of the
batch, each in the narrowest type that holds the table's values and the batch's
(:func:`core.widening.widened`). A version whose type for a column no such type holds is a
conflict: with ``on_incompatible_type = "fail"`` the batch fails with
:class:`~core.errors.SchemaChangeError`; with ``"quarantine"`` its records that carry a
value in that column are quarantined, and the rest of the batch is applied. A conflict in a key
column is always quarantined: such a record cannot be a row of the table.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType, StructField, StructType

from cdc.debezium import ColumnCodec
from core.config import TableSpec
from core.errors import SchemaChangeError
from core.widening import same_type, widened
from silver.parse import (
    RowLayout,
    SchemaVersion,
    absent_columns,
    discover_versions,
    parse_changes,
)


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


@dataclass(frozen=True)
class SchemaPlan:
    """The target columns of a batch and, per schema version (same order), its conflicts."""

    target: StructType
    conflicts: tuple[tuple[TypeConflict, ...], ...]


def plan_schema(
    table: StructType | None, versions: Sequence[VersionColumns], dropped: Collection[str] = ()
) -> SchemaPlan:
    """Decide the target columns of a batch (pure).

    The target starts as the table's data columns (none for a new table); the versions are
    then taken in order (the caller orders them by their first record in bronze), each column
    widening its target type, or adding itself to the target, or, if no type holds both,
    becoming a conflict of that version. A table column no version has stays in the target
    with its type: its records carry no value for it, which is null. A ``dropped`` column (one
    silver does not keep) is never a conflict: where no type holds both, it becomes text.
    """
    target: dict[str, DataType] = {f.name: f.dataType for f in (table.fields if table else ())}
    conflicts: list[tuple[TypeConflict, ...]] = []
    for version in versions:
        found = []
        for field in version.columns.fields:
            current = target.get(field.name)
            if current is None:
                target[field.name] = field.dataType
                continue
            wider = widened(current, field.dataType, json_numbers=version.inferred)
            if wider is None and field.name in dropped:
                wider = StringType()
            if wider is None:
                found.append(TypeConflict(field.name, current, field.dataType))
            else:
                target[field.name] = wider
        conflicts.append(tuple(found))
    columns = StructType([StructField(name, kind, True) for name, kind in target.items()])
    return SchemaPlan(columns, tuple(conflicts))


def conform(
    events: DataFrame,
    data_columns: Sequence[str],
    target: StructType,
    nulls: Collection[str] = (),
) -> DataFrame:
    """Events of one schema version with exactly the ``target`` data columns (pure).

    ``data_columns``: the version's own data columns in ``events``. A target column the
    version lacks, or one of its ``nulls`` (conflicting or absent columns), is null; any other
    is cast to its target type, a widening, so no value changes.
    """
    own = set(data_columns)
    kept = [c for c in events.columns if c not in own]
    present = {
        f.name: f.dataType for f in events.schema.fields if f.name in own and f.name not in nulls
    }
    values = []
    for field in target.fields:
        kind = present.get(field.name)
        if kind is None:
            values.append(F.lit(None).cast(field.dataType).alias(field.name))
        elif same_type(kind, field.dataType):
            values.append(F.col(field.name))
        else:
            values.append(F.col(field.name).cast(field.dataType).alias(field.name))
    return events.select(*kept, *values)


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
    their target types. Under ``on_incompatible_type = "quarantine"`` a record that carries a
    value in a conflicting column has the reason ``incompatible type for column <c>: table
    <type>, record <type>``. ``versions``: the batch's schema versions if known (None: they are
    discovered, one small query).

    Raises:
        SchemaChangeError: a conflict in a value column under ``on_incompatible_type = "fail"``.
    """
    versions = versions if versions is not None else discover_versions(texts, spec)
    frames = [
        parse_changes(_rows_of(texts, v), spec, v.layout, problem=v.problem) for v in versions
    ]
    typed = [
        VersionColumns(_typed_columns(frame, v.layout), v.inferred)
        for v, frame in zip(versions, frames, strict=True)
    ]
    keys = versions[0].layout.keys
    dropped = {
        name
        for version in typed
        for name in version.columns.fieldNames()
        if name not in {k.name for k in keys} and not spec.keeps_column(name)
    }
    plan = plan_schema(table, typed, dropped)
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
        parts.append(conform(rows, _names(version.layout), target, nulls))
    layout = RowLayout(
        keys=tuple(_codec(target[k.name]) for k in keys),
        columns=tuple(_codec(f) for f in target.fields),
    )
    return layout, reduce(DataFrame.unionByName, parts)


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


def _rows_of(texts: DataFrame, version: SchemaVersion) -> DataFrame:
    return texts if version.selector is None else texts.where(version.selector)


def _names(layout: RowLayout) -> list[str]:
    return [*layout.key_names, *(c.name for c in layout.value_columns)]


def _typed_columns(frame: DataFrame, layout: RowLayout) -> StructType:
    """The data columns a version has a type for (not its absent key columns)."""
    absent = absent_columns(layout)
    return StructType([frame.schema[n] for n in _names(layout) if n not in absent])


def _codec(field: StructField) -> ColumnCodec:
    """A codec standing for a target column (the rows are decoded already)."""
    return ColumnCodec(field.name, field.dataType, lambda c: c, False)
