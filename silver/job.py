"""The silver job: a streaming foreachBatch that applies one bronze topic to its entity tables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StructField, StructType

from bronze.table import INGEST_BATCH
from core import checkpoints
from core.columns import METADATA_COLUMNS, OP, REASON
from core.config import TableSpec
from core.delta_io import EnsuredTables, append, current_version, dml_once
from core.failures import guarded
from core.frames import kept_with_totals
from core.identifiers import table_name_for_topic
from core.layout import QUARANTINE_TABLE, Warehouse
from core.quarantine import ensure_quarantine, quarantine
from core.streaming import Trigger, query_app_id
from core.widening import TypeWidening
from expectations.compile import Check
from expectations.enforce import Outcome, TableChecks
from expectations.metrics import record_outcomes
from silver.changes import latest_per_key, newer_than
from silver.evolution import read_batch
from silver.history_job import apply_history, history_tables
from silver.parse import (
    BRONZE_BYTES,
    BRONZE_COORDINATES,
    DELETE_OP,
    SCHEMA_HASH,
    UPSERT_OPS,
    RowLayout,
    SchemaCache,
    SchemaVersion,
    as_text,
    discover_versions,
    order_of,
    schema_hashes,
    with_schema_hash,
)
from silver.settings import kept_layout, with_settings
from silver.tables import (
    RANGE_TYPES,
    TOMBSTONE_METADATA,
    EntityTables,
    KeyRange,
    current_orders,
    data_columns,
    delete_older_than,
    latest_truncation,
    lists_keys,
    merge_silver,
    order_literal,
    tombstones_of,
)


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


#: Told the report of each micro-batch a silver query applied.
BatchListener = Callable[[BatchReport], None]


class TruncationFloor:
    """The order of an entity's newest truncate (None: never truncated), read once per query:
    while the query runs, its own truncates are the only ones written, and it notes them."""

    def __init__(self) -> None:
        self._known = False
        self._order: Row | None = None

    def order(self, spark: SparkSession, path: str) -> Row | None:
        if not self._known:
            self._order, self._known = latest_truncation(spark, path), True
        return self._order

    def moved(self) -> None:
        """A truncate was written: read the floor again."""
        self._known = False


class QueryState:
    """What a silver query keeps between its micro-batches: the truncation floor, the schema
    version of its last batch (see :class:`silver.parse.SchemaCache`), and the schemas its
    tables took (so a batch of the same shape neither checks nor reads them again)."""

    def __init__(self) -> None:
        self.floor = TruncationFloor()
        self.schemas = SchemaCache()
        self._ensured = EnsuredTables()
        self._columns: StructType | None = None
        self._columns_known = False

    def data_columns(self, spark: SparkSession, path: str) -> StructType | None:
        """The silver table's :func:`~silver.tables.data_columns`, read again only after this
        query changed a table's schema."""
        if not self._columns_known:
            self._columns = data_columns(spark, path)
            self._columns_known = True
        return self._columns

    def ensure_table(
        self,
        spark: SparkSession,
        path: str,
        schema: StructType,
        change_feed: bool,
        widening: TypeWidening,
        deletion_vectors: bool = False,
    ) -> None:
        """:func:`core.delta_io.ensure_table`, once per schema and table in this query."""
        ensured = self._ensured.ensure(spark, path, schema, change_feed, widening, deletion_vectors)
        if ensured:
            self._columns_known = False


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

    The table takes new columns and widened types before the MERGE (silver.evolution).
    ``checks`` run on the upserts in the same Spark job as the batch's totals: rows a ``drop``
    expectation catches are quarantined, and the counts go to the quality metrics table.
    ``state``: what the query keeps between its batches (None: read and discover afresh).

    Raises:
        SchemaChangeError: a column type the table cannot take, under
            ``on_incompatible_type = "fail"`` (nothing of the batch is written).
        ExpectationFailedError: a ``fail`` expectation broke (nothing of the batch is written).
    """
    spark = batch.sparkSession
    state = state or QueryState()
    texts = with_schema_hash(as_text(batch))
    table = state.data_columns(spark, tables.silver)
    read = None
    if state.schemas.version is not None:
        read = _read(texts, spec, table, checks, [state.schemas.version])
        if not state.schemas.covers(read.counts.schemas):
            read = None  # a schema the cached version does not decode: discover them
    if read is None:
        versions = discover_versions(texts, spec)
        read = _read(texts, spec, table, checks, versions)
        state.schemas.remember(versions)
    layout, kept, compiled, counts = read.layout, read.kept, read.compiled, read.counts
    events = read.events.drop(SCHEMA_HASH)
    checks = checks if checks is not None and layout.columns else None
    outcomes: list[Outcome] = []
    if checks is not None:
        outcomes = checks.judge(
            compiled, counts, events, layout.key_names, batch_id, BRONZE_COORDINATES
        )
        events = TableChecks.unmark(events)
    reasons: tuple[tuple[str, int], ...] = ()
    if counts.quarantined:
        quarantine(
            events.where(F.col(REASON).isNotNull()),
            F.lit(spec.name),
            REASON,
            BRONZE_COORDINATES,
            tables.quarantine,
            f"{app_id}:quarantine",
            batch_id,
            BRONZE_BYTES,
        )
        reasons = _reasons(events)
    if checks is not None:
        record_outcomes(spark, checks.metrics, outcomes, app_id, batch_id)
    valid = events.where(F.col(REASON).isNull() & ~F.col("_tombstone"))
    changes = valid.where(F.col(OP) != "t")
    floor = state.floor
    if counts.truncates:
        _truncate(spark, valid.where(F.col(OP) == "t"), tables, app_id, batch_id)
        floor.moved()
    newest_truncate = floor.order(spark, tables.truncations)
    if newest_truncate is not None:
        changes = changes.where(order_of() > order_literal(newest_truncate, _order_type(changes)))
    applied = _apply_changes(
        spark,
        changes,
        kept,
        counts.toast_columns,
        tables,
        spec,
        state,
        app_id,
        batch_id,
        read.key_range,
        lists_keys(counts.records),
    )
    if tables.history is not None:
        apply_history(valid, kept, spec, tables.history, app_id, batch_id)
    return BatchReport(counts.records, counts.quarantined, counts.tombstones, applied, reasons)


@dataclass(frozen=True)
class _Read:
    """A micro-batch parsed and kept, with its totals (one Spark job)."""

    layout: RowLayout
    kept: RowLayout
    events: DataFrame
    compiled: list[Check]
    counts: Row
    #: The batch's range of its first integer or string key column (None: no such key).
    key_range: KeyRange | None


#: Totals of :func:`_read`: the lowest and highest value of the batch's ranged key column.
LOW_KEY, HIGH_KEY = "_low_key", "_high_key"


def _read(
    texts: DataFrame,
    spec: TableSpec,
    table: StructType | None,
    checks: TableChecks | None,
    versions: list[SchemaVersion],
) -> _Read:
    """Parse the batch with its schema ``versions``, mark the checks' rows, keep the result and
    count its totals (``schemas``: the schema hashes its records carry)."""
    layout, parsed = read_batch(texts, spec, table, versions)
    kept = kept_layout(layout, spec)
    events = with_settings(parsed, spec, layout)
    checks = checks if checks is not None and layout.columns else None
    compiled: list[Check] = []
    if checks is not None:
        upserts = F.col(REASON).isNull() & F.col(OP).isin(*UPSERT_OPS)
        events, compiled = checks.mark(events, upserts, REASON)
    ranged = next(
        (k for k in layout.key_names if isinstance(events.schema[k].dataType, RANGE_TYPES)), None
    )
    bounds = [F.min(ranged).alias(LOW_KEY), F.max(ranged).alias(HIGH_KEY)] if ranged else []
    events, counts = kept_with_totals(
        events,
        *bounds,
        F.count(F.lit(1)).alias("records"),
        F.count(REASON).alias("quarantined"),
        F.count_if("_tombstone").alias("tombstones"),
        F.count_if(F.col(OP) == "t").alias("truncates"),
        F.array_distinct(F.flatten(F.collect_set("_unavailable"))).alias("toast_columns"),
        schema_hashes().alias("schemas"),
        *TableChecks.totals(compiled),
    )
    key_range = None
    if ranged is not None and counts[LOW_KEY] is not None:
        key_range = KeyRange(ranged, counts[LOW_KEY], counts[HIGH_KEY])
    return _Read(layout, kept, events, compiled, counts, key_range)


def _apply_changes(
    spark: SparkSession,
    changes: DataFrame,
    layout: RowLayout,
    toast_columns: list[str],
    tables: EntityTables,
    spec: TableSpec,
    state: QueryState,
    app_id: str,
    batch_id: int,
    within: KeyRange | None = None,
    list_keys: bool = False,
) -> int:
    keys = layout.key_names
    if not keys:  # no keyed record in the batch: every change was quarantined
        return 0
    columns = [c.name for c in layout.value_columns]
    toast_columns = [c for c in toast_columns if c in columns]
    # Dropping the events not newer than the key's live row or tombstone keeps batches of
    # stale or duplicate events from committing MERGE versions, and keeps them from filling
    # partial columns (a version older than the table's is no previous version). The MERGE's
    # own order conditions cannot replace this: Delta rewrites every file its ON condition
    # matches, even where no clause's condition holds (a stale update of one row: one file
    # removed, one added, the row copied, a new version).
    # ``within`` bounds every read of the tables by the batch's keys, so Delta reads only the
    # files whose key statistics overlap them.
    fresh = newer_than(changes, current_orders(spark, tables, keys, within), keys)
    effective, totals = kept_with_totals(
        latest_per_key(fresh, keys, toast_columns),
        F.count(F.lit(1)).alias("applied"),
        F.count_if(F.col(OP) == DELETE_OP).alias("deletes"),
        *([F.collect_list(within.column).alias("listed")] if within and list_keys else []),
    )
    if not totals.applied:
        return 0
    if within is not None and list_keys:
        within = within.listing(totals.listed)
    row_schema = _schema_of(effective, (*keys, *columns, *METADATA_COLUMNS))
    state.ensure_table(
        spark, tables.silver, row_schema, True, spec.type_widening, spec.deletion_vectors
    )
    merge = partial(merge_silver, effective, tables.silver, keys, columns, toast_columns, within)
    dml_once(spark, tables.silver, f"{app_id}:silver", batch_id, merge)
    if totals.deletes:
        tombstone_schema = _schema_of(effective, (*keys, *TOMBSTONE_METADATA))
        state.ensure_table(spark, tables.tombstones, tombstone_schema, False, spec.type_widening)
        tombstones = tombstones_of(effective, keys)
        append(tombstones, tables.tombstones, f"{app_id}:tombstones", batch_id, False)
    return int(totals.applied)


def _truncate(
    spark: SparkSession, truncates: DataFrame, tables: EntityTables, app_id: str, batch_id: int
) -> None:
    """Record the batch's newest truncate and delete everything older than it."""
    newest = truncates.select(F.max(order_of()).alias("o")).select("o.*")
    append(newest, tables.truncations, f"{app_id}:truncations", batch_id)
    floor_row = latest_truncation(spark, tables.truncations)
    assert floor_row is not None
    floor = order_literal(floor_row, _order_type(truncates))
    for path, role in ((tables.silver, "silver"), (tables.tombstones, "tombstones")):
        delete = partial(delete_older_than, spark, path, floor)
        dml_once(spark, path, f"{app_id}:truncate-{role}", batch_id, delete)


def _reasons(events: DataFrame) -> tuple[tuple[str, int], ...]:
    """(reason, records) of the quarantined events, most first (a few distinct reasons)."""
    rows = events.where(F.col(REASON).isNotNull()).groupBy(REASON).count().collect()
    return tuple(sorted(((r._reason, int(r["count"])) for r in rows), key=lambda p: (-p[1], p[0])))


def _order_type(frame: DataFrame) -> StructType:
    order_type = frame.select(order_of().alias("o")).schema["o"].dataType
    assert isinstance(order_type, StructType)
    return order_type


def _schema_of(frame: DataFrame, names: tuple[str, ...] | list[str]) -> StructType:
    by_name = {f.name: f for f in frame.schema.fields}
    return StructType([StructField(n, by_name[n].dataType, True) for n in names])
