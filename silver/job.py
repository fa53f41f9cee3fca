"""The silver job: a streaming foreachBatch that applies one bronze topic to its entity tables.

:func:`start_silver` reads the bronze table as a stream (the read stage); each micro-batch
then runs through :func:`apply_batch`'s stages: decode -> check -> plan -> write."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from bronze.table import INGEST_BATCH
from expectations.enforce import TableChecks
from lakehouse_core import checkpoints
from lakehouse_core.config import TableSpec
from lakehouse_core.delta_io import current_version
from lakehouse_core.failures import guarded
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import QUARANTINE_TABLE, Warehouse
from lakehouse_core.quarantine import ensure_quarantine
from lakehouse_core.streaming import Trigger, query_app_id
from silver.check import check
from silver.context import BatchContext, QueryState
from silver.decode import decode
from silver.history_job import history_tables
from silver.plan import plan
from silver.tables import EntityTables
from silver.write import write

__all__ = [
    "BatchListener",
    "BatchReport",
    "QueryState",
    "apply_batch",
    "batch_applier",
    "bronze_path",
    "ensure_shared_tables",
    "entity_tables",
    "has_unread_bronze",
    "start_silver",
]


@dataclass(frozen=True)
class BatchReport:
    """What one micro-batch did: bronze records read, records quarantined (``reasons``: how
    many for each reason, most first), tombstones, and changes applied (the newest event per
    key that was newer than the table's)."""

    records: int
    quarantined: int
    tombstones: int
    applied: int
    reasons: tuple[tuple[str, int], ...] = ()
    #: Records applied with values their columns' types do not hold, kept in
    #: ``_rescued_data`` (``on_type_mismatch = "rescue"``).
    rescued: int = 0


#: Told the report of each micro-batch a silver query applied.
BatchListener = Callable[[BatchReport], None]


def entity_tables(warehouse: Warehouse, spec: TableSpec) -> EntityTables:
    return EntityTables(
        silver=warehouse.table("silver", spec.name),
        tombstones=warehouse.tombstones(spec.name),
        truncations=warehouse.truncations(spec.name),
        quarantine=warehouse.table("silver", QUARANTINE_TABLE),
        history=history_tables(warehouse, spec),
    )


def ensure_shared_tables(spark: SparkSession, warehouse: Warehouse) -> None:
    """Create the tables all silver queries of ``warehouse`` write (the quarantine table).

    Call it before starting queries that run at the same time: the first appends of queries
    started together would otherwise race to create the table, and all but one would fail.
    """
    ensure_quarantine(spark, warehouse.table("silver", QUARANTINE_TABLE))


def start_silver(
    spark: SparkSession,
    warehouse: Warehouse,
    spec: TableSpec,
    trigger: Trigger,
    listener: BatchListener | None = None,
    checks: TableChecks | None = None,
    through_batch: int | None = None,
) -> StreamingQuery:
    """Stream ``bronze/<topic>`` into the entity's silver tables; ``listener`` is told what
    each micro-batch did (it runs in this Python process, on Spark's callback thread);
    ``checks``: the table's data-quality expectations, enforced in each micro-batch;
    ``through_batch``: read only the bronze records of bronze micro-batches up to that id
    (the others are one hop's to apply, see :mod:`silver.one_hop`)."""
    place = checkpoints.current(spark, warehouse.checkpoint(f"silver_{spec.name}"))
    checkpoint = place.location
    tables = entity_tables(warehouse, spec)
    app_id = query_app_id(spark, checkpoint)
    # Bronze only changes other than by appends when `lakehouse forget` or bronze retention
    # delete records, after this job has applied them: such commits are skipped, not replayed.
    reader = spark.readStream.format("delta").option("skipChangeCommits", "true")
    if place.starting_version:  # a fresh checkpoint after what one hop applied (silver.one_hop)
        reader = reader.option("startingVersion", place.starting_version)
    source = reader.load(bronze_path(warehouse, spec))
    if through_batch is not None:
        source = source.where(F.col(INGEST_BATCH) <= through_batch)
    writer = (
        source.writeStream.queryName(f"silver_{spec.name}")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(guarded(batch_applier(spec, tables, app_id, listener, checks)))
    )
    return trigger.apply(writer).start()


def bronze_path(warehouse: Warehouse, spec: TableSpec) -> str:
    """The bronze table the entity's silver tables are applied from."""
    return warehouse.table("bronze", table_name_for_topic(spec.topic))


def has_unread_bronze(spark: SparkSession, warehouse: Warehouse, spec: TableSpec) -> bool:
    """Whether the entity's silver query has bronze to read: not when one hop handed its
    checkpoint over after bronze's newest version (a stream cannot start past it)."""
    start = checkpoints.current(spark, warehouse.checkpoint(f"silver_{spec.name}"))
    if not start.starting_version:
        return True
    return start.starting_version <= current_version(spark, bronze_path(warehouse, spec))


def batch_applier(
    spec: TableSpec,
    tables: EntityTables,
    app_id: str,
    listener: BatchListener | None = None,
    checks: TableChecks | None = None,
) -> Callable[[DataFrame, int], None]:
    state = QueryState()

    def apply(batch: DataFrame, batch_id: int) -> None:
        report = apply_batch(batch, batch_id, spec, tables, app_id, checks, state)
        if listener is not None:
            listener(report)

    return apply


def apply_batch(
    batch: DataFrame,
    batch_id: int,
    spec: TableSpec,
    tables: EntityTables,
    app_id: str,
    checks: TableChecks | None = None,
    state: QueryState | None = None,
) -> BatchReport:
    """Apply one micro-batch of bronze rows; safe to run again for the same ``batch_id``.

    The batch runs through its stages once each, in order: decode (:mod:`silver.decode`:
    schema discovery, parsing, the table's new columns and widened types, column settings),
    check (:mod:`silver.check`: ``checks``, the table's expectations, judged from the batch's
    totals), plan (:mod:`silver.plan`: the writes, from the batch and what the tables hold),
    write (:mod:`silver.write`: quarantine, quality metrics, truncates, the MERGE, tombstones,
    history, each exactly once). ``state``: what the query keeps between its batches (None:
    read and discover afresh).

    Raises:
        SchemaChangeError: a column type the table cannot take, under
            ``on_incompatible_type = "fail"`` (nothing of the batch is written).
        ExpectationFailedError: a ``fail`` expectation broke (nothing of the batch is written).
    """
    ctx = BatchContext(
        batch.sparkSession, spec, tables, app_id, batch_id, state or QueryState(), checks
    )
    decoded = decode(ctx, batch)
    checked = check(ctx, decoded)
    writes = plan(checked, ctx.current(decoded.kept.key_names, decoded.key_range))
    applied = write(ctx, writes)
    counts = decoded.counts
    return BatchReport(
        counts.records,
        counts.quarantined,
        counts.tombstones,
        applied,
        checked.reasons,
        counts.rescued,
    )
