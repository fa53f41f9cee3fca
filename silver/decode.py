"""The decode stage of a silver micro-batch: bronze rows to typed change events.

:func:`decode` takes the micro-batch as bronze hands it and returns it decoded (:class:`Decoded`):
its schema versions discovered (:func:`silver.parse.discover_versions`: the Spark jobs that
sample the batch's Connect schemas or infer its JSON types, skipped when the query's
:class:`SchemaCache` covers the batch), each version parsed (:func:`silver.parse.parse_changes`,
pure), brought to the table's columns (:mod:`silver.evolution`, pure), the table's column
settings applied (:mod:`silver.settings`), the rows the expectations test marked, and the
batch's totals counted, all in one Spark job over the kept result.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from expectations.compile import Check
from expectations.enforce import TableChecks
from lakehouse_core.columns import OP, REASON, RESCUED
from lakehouse_core.config import TableSpec
from lakehouse_core.errors import SchemaChangeError
from lakehouse_core.frames import kept_with_totals
from silver.context import BatchContext
from silver.evolution import (
    VersionColumns,
    absent_columns,
    conform,
    data_names,
    defaults_of,
    incompatible_message,
    plan_schema,
    target_codec,
    typed_columns,
    with_defaults,
)
from silver.parse import (
    SCHEMA_HASH,
    TOMBSTONE,
    TRUNCATE_OP,
    UNAVAILABLE,
    UPSERT_OPS,
    RowLayout,
    SchemaVersion,
    as_text,
    discover_versions,
    order_of,
    parse_changes,
    rows_of,
    schema_hash,
    schema_hashes,
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


def with_schema_hash(texts: DataFrame) -> DataFrame:
    """Bronze rows (with ``k``/``v`` text) with :data:`SCHEMA_HASH`: which schema version each
    record carries (null for a Kafka tombstone); the parsed events keep the column."""
    return texts.withColumn(SCHEMA_HASH, F.when(F.col("v").isNotNull(), schema_hash()))


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
    frames = [parse_changes(rows_of(texts, v), spec, v.layout, problem=v.problem) for v in versions]
    typed = [
        VersionColumns(
            with_defaults(typed_columns(frame, v.layout), dict(v.layout.defaults)), v.inferred
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
            parse_changes(rows_of(texts, version), spec, version.layout, rejected)
            if rejected
            else parsed
        )
        nulls = {*rejected, *absent_columns(version.layout)}
        checked = version.layout.checked and not version.inferred
        parts.append(conform(rows, data_names(version.layout), target, nulls, defaults=checked))
    layout = RowLayout(
        keys=tuple(target_codec(target[k.name]) for k in keys),
        columns=tuple(target_codec(f) for f in target.fields),
        defaults=defaults_of(target),
    )
    return layout, reduce(DataFrame.unionByName, parts)
