"""Schema changes of a silver table, decided per micro-batch (docs/silver-semantics.md,
"Schema changes").

Pure decisions and transforms; :func:`silver.decode.read_batch` applies them to a batch.
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

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType, StructField, StructType

from lakehouse_core.config import TableSpec
from lakehouse_core.widening import same_type, widened


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
