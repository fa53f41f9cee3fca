"""The write stage of a silver micro-batch: the planned writes, each exactly once (Delta
transaction markers, one per table and batch id: :func:`lakehouse_core.delta_io.dml_once` and
:func:`lakehouse_core.delta_io.append`), so a batch run again writes nothing twice."""

from __future__ import annotations

from functools import partial

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from expectations.metrics import record_outcomes
from lakehouse_core.columns import METADATA_COLUMNS, OP, REASON
from lakehouse_core.delta_io import append, dml_once
from lakehouse_core.frames import kept_with_totals
from lakehouse_core.quarantine import quarantine
from silver.context import BatchContext
from silver.evolution import default_of, with_defaults
from silver.history_job import apply_history
from silver.parse import (
    BRONZE_BYTES,
    BRONZE_COORDINATES,
    DELETE_OP,
    RowLayout,
    order_of,
    order_type_of,
)
from silver.plan import BatchWrites, Merge
from silver.tables import (
    TOMBSTONE_METADATA,
    delete_older_than,
    latest_truncation,
    merge_silver,
    order_literal,
    tombstones_of,
)


def write(ctx: BatchContext, writes: BatchWrites) -> int:
    """Write a batch's ``writes`` in order: quarantine, quality metrics, truncates, the MERGE
    (and the tombstones of its deletes), history. Returns how many changes were applied."""
    if writes.quarantined is not None:
        quarantine(
            writes.quarantined,
            F.lit(ctx.spec.name),
            REASON,
            BRONZE_COORDINATES,
            ctx.tables.quarantine,
            ctx.marker("quarantine"),
            ctx.batch_id,
            BRONZE_BYTES,
        )
    if writes.outcomes is not None and ctx.checks is not None:
        metrics = ctx.checks.metrics
        record_outcomes(ctx.spark, metrics, list(writes.outcomes), ctx.app_id, ctx.batch_id)
    if writes.truncates is not None:
        _truncate(ctx, writes.truncates)
        ctx.state.floor.moved()
    applied = _merge(ctx, writes.merge, writes.kept) if writes.merge is not None else 0
    if ctx.tables.history is not None:
        apply_history(
            writes.valid, writes.kept, ctx.spec, ctx.tables.history, ctx.app_id, ctx.batch_id
        )
    return applied


def _truncate(ctx: BatchContext, truncates: DataFrame) -> None:
    """Record the batch's newest truncate and delete everything older than it."""
    spark, tables = ctx.spark, ctx.tables
    newest = truncates.select(F.max(order_of()).alias("o")).select("o.*")
    append(newest, tables.truncations, ctx.marker("truncations"), ctx.batch_id)
    floor_row = latest_truncation(spark, tables.truncations)
    assert floor_row is not None
    floor = order_literal(floor_row, order_type_of(truncates))
    for path, role in ((tables.silver, "silver"), (tables.tombstones, "tombstones")):
        delete = partial(delete_older_than, spark, path, floor)
        dml_once(spark, path, ctx.marker(f"truncate-{role}"), ctx.batch_id, delete)


def _merge(ctx: BatchContext, merge: Merge, kept: RowLayout) -> int:
    """Compute the MERGE's changes (one Spark job, kept), then MERGE them into the silver table
    and append the deletes' tombstones. Returns how many changes were applied. A column the
    table gains with a Connect default (``kept.defaults``) gets it in the rows the table holds,
    in the commit that adds the column (docs/silver-semantics.md, "Schema changes")."""
    keys, within = merge.keys, merge.within
    listed = [F.collect_list(within.column).alias("listed")] if within and merge.list_keys else []
    effective, totals = kept_with_totals(
        merge.changes,
        F.count(F.lit(1)).alias("applied"),
        F.count_if(F.col(OP) == DELETE_OP).alias("deletes"),
        *listed,
    )
    if not totals.applied:
        return 0
    if within is not None and listed:
        within = within.listing(totals.listed)
    spec, tables = ctx.spec, ctx.tables
    row_schema = _schema_of(effective, (*keys, *merge.columns, *METADATA_COLUMNS))
    row_schema = with_defaults(row_schema, dict(kept.defaults))
    fills = {f.name: d for f in row_schema.fields if (d := default_of(f)) is not None}
    ctx.state.ensure_table(
        ctx.spark,
        tables.silver,
        row_schema,
        True,
        spec.type_widening,
        spec.deletion_vectors,
        fills,
    )
    apply = partial(
        merge_silver, effective, tables.silver, keys, merge.columns, merge.toast_columns, within
    )
    dml_once(ctx.spark, tables.silver, ctx.marker("silver"), ctx.batch_id, apply)
    if totals.deletes:
        tombstone_schema = _schema_of(effective, (*keys, *TOMBSTONE_METADATA))
        ctx.state.ensure_table(
            ctx.spark, tables.tombstones, tombstone_schema, False, spec.type_widening
        )
        tombstones = tombstones_of(effective, keys)
        append(tombstones, tables.tombstones, ctx.marker("tombstones"), ctx.batch_id, False)
    return int(totals.applied)


def _schema_of(frame: DataFrame, names: tuple[str, ...]) -> StructType:
    by_name = {f.name: f for f in frame.schema.fields}
    return StructType([StructField(n, by_name[n].dataType, True) for n in names])
