"""The gold engine: one streaming query per declared gold table (:class:`GoldTable`) over
its silver table's change feed, and the registry of the pipeline's gold jobs (:func:`gold_jobs`).

Each micro-batch finds the scope its changed rows affect (see :mod:`gold.aggregates`),
recomputes the declaration over the current silver rows of that scope and makes the gold
table's scope equal the result in one MERGE under the batch's Delta transaction id. So after
every committed batch the gold table equals its declaration evaluated in batch over silver,
whatever the order, updates, deletes or split of the changes.

A gold table with an enrichment join reads the joined entity's change feed in the same query
(the two feeds as one stream, :func:`joined_changes`), so one writer keeps the table and an
entity change recomputes the scope of the source rows with its key (:mod:`gold.enrichment`).
A gold table with a stream join reads the other table's change feed the same way
(:func:`streamed_changes`); a change on either side recomputes the source rows whose lookback
it falls in (:mod:`gold.stream_join`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from contextlib import suppress
from functools import partial
from operator import itemgetter
from typing import NamedTuple

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import BooleanType, StructField, StructType, TimestampType

from core import checkpoints, storage
from core.config import PipelineConfig, QualitySpec
from core.delta_io import (
    EnsuredTables,
    append,
    change_feed_complete,
    current_version,
    dml_once,
    ensure_table,
    merge_materialized,
    note_query_start,
    table_exists,
)
from core.errors import ConfigError
from core.failures import Failure, guarded
from core.frames import kept_with_totals
from core.gold_tables import GoldTable, Join
from core.layout import HISTORY_SUFFIX, LATE_EVENTS, Warehouse
from core.parallel import run_side_by_side
from core.streaming import Trigger, query_app_id
from core.widening import TypeWidening
from expectations.checks import load_checks
from expectations.enforce import TableChecks
from expectations.metrics import record_outcomes
from gold.aggregates import (
    ADDS,
    PRESENT,
    ROW_IMAGES,
    affected,
    evaluate,
    in_scope,
    out_of_scope,
    recompute,
    replacement,
    same_key,
    scope_columns,
)
from gold.enrichment import (
    ENTITY,
    SIDE,
    check_join,
    check_unique,
    enrich,
    entity_columns,
    entity_rows,
    entity_versions,
    history_columns,
    scope_rows,
)
from gold.finality import (
    FINAL,
    FINALIZED_AT,
    LATE_EVENTS_SCHEMA,
    earliest_end,
    late_events,
    newly_final,
    with_finality,
)
from gold.progress import (
    Applied,
    Attempt,
    applied_location,
    read_applied,
    seeded,
    write_applied,
)
from gold.schema_log import rebase_schema_log, schema_log_location
from gold.stream_join import (
    OTHER,
    check_stream_join,
    evaluate_joined,
    late_matches,
    other_changes,
    other_columns,
    recompute_rows,
    time_range,
)
from gold.stream_join import touched as touched_rows
from gold.watermarks import RecordedSeen, watermark_of

#: Gold tables are small and read by BI tools: a wider type rewrites them, so every Delta
#: reader keeps opening them.
GOLD_WIDENING: TypeWidening = "rewrite"


def silver_changes(
    spark: SparkSession,
    path: str,
    checkpoint: str | None = None,
    starting_version: int = 0,
    source: int = 0,
) -> DataFrame:
    """The change feed of a silver table as a stream, from ``starting_version`` (its first
    version, unless a replay installed a gold table that already holds the earlier ones).

    A new query (no batch in its ``checkpoint`` yet) of a table whose early changes can no
    longer be read (vacuumed, or its log cleaned up: a gold table declared on a warehouse that
    has run for a while) starts from the table's current rows instead, as inserts, and reads
    the changes after them: what the gold engine needs, as it recomputes each scope from silver.

    With the query's ``checkpoint``, the stream follows silver's schema changes: Delta keeps a
    schema log under the checkpoint and reads each version with the schema it was written
    with. A new column or a widened type stops the query once with Delta's
    ``DELTA_STREAMING_METADATA_EVOLUTION``; started again from its checkpoint (the pipeline
    does that), it reads on with the new schema. Without the log, a widened type would stop
    the stream for good. Silver only widens types, so every type change is accepted. The log
    is first pointed at the checkpoint's current place, in case it was moved (replay, copy).
    ``source`` is the input's number in its query (each input has its own schema log).
    """
    start: int | None = starting_version
    if starting_version > 0:
        start = min(starting_version, current_version(spark, path))
    elif not _has_batches(spark, checkpoint) and not change_feed_complete(spark, path):
        start = None  # Delta's default: the current rows, then the changes after them
    reader = spark.readStream.format("delta").option("readChangeFeed", "true")
    if start is not None:
        reader = reader.option("startingVersion", start)
    if checkpoint is not None:
        rebase_schema_log(checkpoint, source)
        reader = reader.option(
            "schemaTrackingLocation", schema_log_location(checkpoint, source)
        ).option("allowSourceColumnTypeChange", "always")
    changes = reader.load(path)
    if start is not None and start < starting_version:
        # A replay's pointer names the version after the one it installed, and silver has not
        # written that one yet (Delta cannot start there): read from the installed version and
        # leave its changes out, as the rebuilt gold table holds them.
        changes = changes.where(F.col("_commit_version") >= starting_version)
    return changes


def _has_batches(spark: SparkSession, checkpoint: str | None) -> bool:
    """Whether the query of ``checkpoint`` has planned a batch (it then ignores where a new
    query would start)."""
    return checkpoint is not None and bool(storage.names(spark, f"{checkpoint}/offsets"))


def query_name(table: GoldTable) -> str:
    """The streaming query (and checkpoint) name of a gold table's job."""
    return f"gold_{table.name}"


def start_gold(
    spark: SparkSession,
    warehouse: Warehouse,
    trigger: Trigger,
    table: GoldTable,
    quality: QualitySpec | None = None,
) -> StreamingQuery:
    """Start the job that keeps ``gold.<table.name>`` equal to its declaration over silver;
    ``quality``: the suites whose expectations of ``gold.<table.name>`` each batch enforces.
    A declaration without a join has the query of a group of one (:func:`start_shared`).

    Raises:
        ConfigError: the declaration reads a column the silver table does not have; its join
            names a missing entity or column, columns of different types, or not a key; its
            suite is malformed or reads a column the gold table does not have.
    """
    if shareable(table):
        return start_shared(spark, warehouse, trigger, [table], quality)
    prepared = _prepared(spark, warehouse, table, quality)
    return start_on_changes(
        spark,
        warehouse,
        query_name(table),
        prepared.paths.source,
        trigger,
        lambda app_id: _maintainer(prepared.paths, table, app_id, prepared.checks),
        prepared.combine,
    )


class _Prepared(NamedTuple):
    """A declaration checked against its tables: where its job reads and writes, its suite's
    checks, and how its query combines a second feed (a join's)."""

    paths: GoldPaths
    checks: TableChecks | None
    combine: Callable[[DataFrame, SparkSession, str], DataFrame] | None


def _prepared(
    spark: SparkSession, warehouse: Warehouse, table: GoldTable, quality: QualitySpec | None
) -> _Prepared:
    """``table`` checked against its silver tables and suite (see :func:`start_gold` for what
    is raised), with the ``gold.late_events`` table every job appends to created."""
    source = warehouse.table("silver", table.source)
    facts = spark.read.format("delta").load(source)
    joined, combine, other = None, None, None
    declared: DataFrame | None = None
    if table.stream_join is not None:
        other = warehouse.table("silver", table.stream_join.source)
        if table.stream_join.source not in warehouse.table_names("silver", spark):
            raise ConfigError(
                f"Gold table {table.name!r} stream-joins silver.{table.stream_join.source}, "
                "which does not exist: name a silver table in stream_join.source (its "
                "entity must have had events)."
            )
        others = spark.read.format("delta").load(other)
        table.check_columns(facts.columns, others.columns)
        check_stream_join(table, facts.schema, others.schema)
        combine = partial(streamed_changes, other=other, table=table)
        declared = evaluate_joined(facts, others, table)
    elif table.join is not None:
        joined = join_inputs(warehouse, table.join)
        entity = joined.entity
        combine = partial(joined_changes, entity=joined.history or entity, table=table)
        names = warehouse.table_names("silver", spark)
        missing = next((name for name in _joined_tables(table) if name not in names), None)
        if missing is not None:
            raise ConfigError(
                f"Gold table {table.name!r} joins silver.{missing}, which does not exist: name "
                "a silver table in join.entity (its entity must have had events)."
            )
        dimension = spark.read.format("delta").load(entity)
        table.check_columns(facts.columns, dimension.columns)
        check_join(table, facts.schema, dimension.schema)
        check_unique(dimension, table, [e for _, e in table.join.on])
        facts = enrich(facts, entity_rows(dimension, table.join), table.join)
    else:
        table.check_columns(facts.columns)
    if declared is None:
        declared = evaluate(facts, table)  # the filter's types, at start
    checks = load_checks(spark, quality, warehouse, "gold", table.name) if quality else None
    if checks is not None:
        checks.compile(declared.schema)  # the suite's columns, at start
    paths = GoldPaths(
        source=source,
        gold=warehouse.table("gold", table.name),
        watermark=warehouse.watermark(table.name),
        late_events=warehouse.table("gold", LATE_EVENTS),
        joined=joined,
        other=other,
    )
    # Created before any query runs: the gold jobs of a pipeline append to it side by side.
    ensure_table(spark, paths.late_events, LATE_EVENTS_SCHEMA, change_feed=False)
    return _Prepared(paths, checks, combine)


def joined_changes(
    facts: DataFrame, spark: SparkSession, checkpoint: str, entity: str, table: GoldTable
) -> DataFrame:
    """The change feed ``facts`` of a gold table's source and that of its joined entity at
    ``entity`` (the query's second input, from its first version; the entity's history table
    for a join as of event time) as one stream: each row has :data:`SIDE` ``source`` or
    ``entity``; an entity row has only ``_change_type``, ``_commit_version``,
    ``_commit_timestamp`` and :data:`ENTITY` (its :func:`~gold.enrichment.entity_columns`, or
    :func:`~gold.enrichment.history_columns`, as a struct), a source row a null :data:`ENTITY`."""
    join = table.join
    assert join is not None
    columns = history_columns(join) if join.at_event_time else entity_columns(join)
    changes, none = _second_feed(spark, checkpoint, entity, columns, ENTITY)
    source = facts.withColumns({ENTITY: none, SIDE: F.lit("source")})
    entity_side = changes.withColumn(SIDE, F.lit("entity"))
    return source.unionByName(entity_side, allowMissingColumns=True)


def streamed_changes(
    facts: DataFrame, spark: SparkSession, checkpoint: str, other: str, table: GoldTable
) -> DataFrame:
    """The change feed ``facts`` of a stream-join table's source and that of the other silver
    table at ``other`` (the query's second input, from its first version) as one stream: an
    other-side row has only ``_change_type``, ``_commit_version``, ``_commit_timestamp`` and
    :data:`~gold.stream_join.OTHER` (its :func:`~gold.stream_join.other_columns` as a struct),
    a source row a null :data:`~gold.stream_join.OTHER`."""
    columns = other_columns(table, spark.read.format("delta").load(other).columns)
    changes, none = _second_feed(spark, checkpoint, other, columns, OTHER)
    return facts.withColumn(OTHER, none).unionByName(changes, allowMissingColumns=True)


def _second_feed(
    spark: SparkSession,
    checkpoint: str,
    path: str,
    columns: Sequence[str | Column],
    into: str,
) -> tuple[DataFrame, Column]:
    """The change feed of a query's second input, the silver table at ``path`` (from its
    first version): ``_change_type``, ``_commit_version``, ``_commit_timestamp`` and
    ``columns`` as the struct ``into``; and a null of that struct's type, for the first input's
    rows."""
    shape = spark.read.format("delta").load(path).select(F.struct(*columns))
    none = F.lit(None).cast(shape.schema.fields[0].dataType)
    changes = silver_changes(spark, path, checkpoint, 0, source=1).select(
        "_change_type", "_commit_version", "_commit_timestamp", F.struct(*columns).alias(into)
    )
    return changes, none


def start_on_changes(
    spark: SparkSession,
    warehouse: Warehouse,
    query: str,
    source: str,
    trigger: Trigger,
    batch_function: Callable[[str], Callable[[DataFrame, int], None]],
    combine: Callable[[DataFrame, SparkSession, str], DataFrame] | None = None,
) -> StreamingQuery:
    """Start streaming query ``query`` over the change feed of the silver table at
    ``source``; ``batch_function(app_id)`` (the query's idempotency id) handles each batch.
    ``combine(changes, spark, checkpoint)``, if given, makes the query's stream of that feed
    (a gold table with a join adds its entity's, :func:`joined_changes`).

    The checkpoint is the query's current one (:func:`core.checkpoints.current`: after a
    replay on an object store, the generation its pointer names, read from the version the
    pointer gives)."""
    place = checkpoints.current(spark, warehouse.checkpoint(query))
    stream = silver_changes(spark, source, place.location, place.starting_version)
    if combine is not None:
        stream = combine(stream, spark, place.location)
    writer = (
        stream.writeStream.queryName(query)
        .option("checkpointLocation", place.location)
        .foreachBatch(guarded(batch_function(query_app_id(spark, place.location))))
    )
    return trigger.apply(writer).start()


#: Whether the declarations of a shared micro-batch apply it side by side (threads), or one
#: after the other. Measured by ``benchmarks/gold_bench.py``.
SIDE_BY_SIDE = True


def shareable(table: GoldTable) -> bool:
    """Whether ``table`` reads its source's change feed alone (no join, no stream join), so
    it can share one query with the other declarations over that source."""
    return table.join is None and table.stream_join is None


def shared_query_name(source: str) -> str:
    """The streaming query (and checkpoint) name of the declarations over silver ``source``
    that share one query (a group of one keeps :func:`query_name`)."""
    return f"gold_shared_{source}"


def group_query(tables: Sequence[GoldTable]) -> str:
    """The query name of a group of shareable declarations over one source."""
    return query_name(tables[0]) if len(tables) == 1 else shared_query_name(tables[0].source)


class GoldIsolation:
    """The declarations of a run's shared gold queries whose part of a micro-batch failed:
    each is left out of the query's batches until its retry is due (``retry(attempts)``:
    seconds after its ``attempts``-th failure in a row; None: not again in this run), then
    catches up. Thread-safe: batches run on Spark's threads."""

    def __init__(self, retry: Callable[[int], float] | None = None) -> None:
        self._retry = retry
        self._failing: dict[str, tuple[Failure, int, float | None]] = {}
        self._new: list[tuple[str, Failure, int, float | None]] = []
        self._recovered: list[str] = []
        self._lock = threading.Lock()

    def due(self, name: str) -> bool:
        """Whether gold table ``name`` takes part in the next batch."""
        with self._lock:
            failing = self._failing.get(name)
            if failing is None:
                return True
            at = failing[2]
            return at is not None and time.monotonic() >= at

    def failed(self, name: str, failure: Failure) -> None:
        """Note that gold table ``name``'s part of a batch failed with ``failure``."""
        with self._lock:
            previous = self._failing.get(name)
            attempts = 1 if previous is None else previous[1] + 1
            delay = None if self._retry is None else self._retry(attempts)
            at = None if delay is None else time.monotonic() + delay
            self._failing[name] = (failure, attempts, at)
            self._new.append((name, failure, attempts, delay))

    def succeeded(self, name: str) -> None:
        """Note that gold table ``name`` applied a batch (it recovered, if it was failing)."""
        with self._lock:
            if self._failing.pop(name, None) is not None:
                self._recovered.append(name)

    def failing(self) -> dict[str, Failure]:
        """The failure of each gold table failing now."""
        with self._lock:
            return {name: failing[0] for name, failing in self._failing.items()}

    def take(self) -> tuple[list[tuple[str, Failure, int, float | None]], list[str]]:
        """The failures (name, failure, attempts in a row, seconds to the retry or None) and
        the recoveries (names) since the last call."""
        with self._lock:
            new, self._new = self._new, []
            recovered, self._recovered = self._recovered, []
            return new, recovered


def start_shared(
    spark: SparkSession,
    warehouse: Warehouse,
    trigger: Trigger,
    tables: Sequence[GoldTable],
    quality: QualitySpec | None = None,
    isolation: GoldIsolation | None = None,
) -> StreamingQuery:
    """Start one query that keeps every declaration of ``tables`` (shareable, over one silver
    source): each micro-batch reads the change feed once and each declaration applies it
    under its own exactly-once ids, from its own place in the feed (:mod:`gold.progress`).

    With ``isolation``, a declaration that fails (at start too) is left to it and the others
    go on; without it, or alone in its query, such a failure fails the batch (after the others
    applied it), or the start.

    Raises:
        ConfigError: without ``isolation``, as :func:`start_gold`.
    """
    source = tables[0].source
    assert all(shareable(t) and t.source == source for t in tables)
    if len(tables) == 1:
        isolation = None  # alone: its failure is its query's, retried as a query is
    query = group_query(tables)
    place = checkpoints.current(spark, warehouse.checkpoint(query))
    members = [_Member(warehouse, t, quality, place, len(tables) == 1) for t in tables]
    for member in members:
        if isolation is None:
            member.prepare(spark)
        elif isolation.due(member.table.name):
            member.try_prepare(spark, isolation)
    shared = _SharedBatch(members, isolation)
    return start_on_changes(
        spark, warehouse, query, warehouse.table("silver", source), trigger, shared.bound
    )


class _Member:
    """One declaration of a shared query: its tables, its place in the change feed and its
    batch function (made again after a failure, so it reads its state afresh)."""

    def __init__(
        self,
        warehouse: Warehouse,
        table: GoldTable,
        quality: QualitySpec | None,
        place: checkpoints.CheckpointPlace,
        alone: bool,
    ) -> None:
        self.warehouse = warehouse
        self.table = table
        self.quality = quality
        self.place = place
        #: Alone in its query: it writes under the query's own id (as before queries were
        #: shared, so a warehouse of that time goes on with the same ids).
        self.alone = alone
        self.state_path = applied_location(warehouse, table.name)
        self.prepared: _Prepared | None = None
        self.maintain: Callable[..., None] | None = None
        self.state: Applied | None = None
        self.known = False
        #: Its attempt at the batch it is applying (kept as pending if it fails).
        self._attempt: Attempt | None = None

    def prepare(self, spark: SparkSession) -> None:
        """Check the declaration (see :func:`start_gold`) and make its batch function."""
        self.prepared = _prepared(spark, self.warehouse, self.table, self.quality)
        self.maintain = _maintainer(self.prepared.paths, self.table, "", self.prepared.checks)
        self.known = False

    def try_prepare(self, spark: SparkSession, isolation: GoldIsolation) -> bool:
        """:meth:`prepare`, a failure noted in ``isolation``; whether it is ready."""
        try:
            self.prepare(spark)
            return True
        except Exception as error:
            self.prepared = None
            isolation.failed(self.table.name, Failure.of(error))
            return False

    def writer(self, query_app: str) -> str:
        """Its exactly-once writer id in the query ``query_app``."""
        return query_app if self.alone else f"{query_app}:{self.table.name}"

    def _place(self, spark: SparkSession) -> Applied | None:
        """Its place, read once per batch function (only it writes it while it runs)."""
        if self.known:
            return self.state
        state = read_applied(spark, self.state_path)
        if state is None:
            state = seeded(spark, self.warehouse.checkpoint(query_name(self.table)))
        if (
            state is not None
            and state.checkpoint != self.place.location
            and self.place.starting_version > 0
        ):
            # A replay installed the rebuilt tables with this checkpoint (on an object
            # store): they hold every change before its starting version.
            state = Applied(self.place.starting_version - 1)
        assert self.prepared is not None
        if state is not None and not table_exists(spark, self.prepared.paths.gold):
            state = None  # its table was dropped: from the start, as a new declaration
        self.state, self.known = state, True
        return state

    def apply(self, batch: DataFrame, batch_id: int, newest: int | None, query_app: str) -> None:
        """Apply micro-batch ``batch_id`` (``batch``, whose newest silver version is
        ``newest``; None: no rows) of the query ``query_app``: the batch itself if the
        declaration applied the batch before it, else its changes from its place up to
        ``newest`` (read from the change feed); a pending attempt first, under its own ids.
        Its place is written last."""
        spark = batch.sparkSession
        assert self.maintain is not None
        self._attempt = None
        writer = self.writer(query_app)
        state = self._place(spark)
        if state is not None and state.app_id == writer and (state.batch or -1) >= batch_id:
            return  # done before a crash (its place is written last)
        pending = None if state is None else state.pending
        if pending is not None and (pending.app_id, pending.batch) == (writer, batch_id):
            pending = None  # this very batch again: as in step
        in_step = (state is None and batch_id == 0) or (
            state is not None
            and state.app_id == writer
            and state.batch == batch_id - 1
            and pending is None
        )
        through = None if state is None else state.through
        if pending is not None:
            owner = pending.app_id.partition(":")[0]
            if owner != query_app:  # another query's batch (an upgrade's): it may have run
                note_query_start(owner, pending.batch)
            changes = self._changes(spark, batch, pending.first, pending.last, through)
            self.maintain(changes, pending.batch, pending.app_id)
            through = max(pending.last, -1 if through is None else through)
            state = Applied(through, pending.app_id, pending.batch, None, self.place.location)
            self._write(spark, state)
        if in_step:
            changes = batch
        elif newest is None:
            return  # nothing to read up to: it catches up at a batch with rows
        else:
            first = 0 if through is None else through + 1
            changes = self._changes(spark, batch, first, newest, through)
        self._attempt = Attempt(
            writer,
            batch_id,
            0 if through is None else through + 1,
            -1 if newest is None else newest,
        )
        self.maintain(changes, batch_id, writer)
        last = max(v for v in (through, newest, -1) if v is not None)
        self._write(
            spark, Applied(None if last < 0 else last, writer, batch_id, None, self.place.location)
        )

    def failed(self, spark: SparkSession, batch_id: int, query_app: str) -> None:
        """After its part of micro-batch ``batch_id`` failed: keep the attempt as pending
        (some of its writes may have landed), and read its state afresh next time."""
        state = self.state if self.known else self._place(spark)
        attempt = self._attempt
        if attempt is not None and attempt.batch == batch_id and attempt.last >= attempt.first:
            through = None if state is None else state.through
            if state is None or state.pending is None:
                keep = Applied(
                    through,
                    None if state is None else state.app_id,
                    None if state is None else state.batch,
                    attempt,
                    self.place.location,
                )
                self._write(spark, keep)
        # Its later batches may find marks of this one: look for them.
        note_query_start(query_app, batch_id)
        self.known = False
        self.prepared = None

    def _write(self, spark: SparkSession, state: Applied) -> None:
        write_applied(spark, self.state_path, state)
        self.state, self.known = state, True

    def _changes(
        self, spark: SparkSession, batch: DataFrame, first: int, last: int, through: int | None
    ) -> DataFrame:
        """The change rows of silver versions ``first`` to ``last``, in ``batch``'s columns:
        read from the change feed, or (nothing applied yet, ``through`` None, and the early
        versions' changes no longer readable) the rows of version ``last`` as inserts."""
        assert self.prepared is not None
        source = self.prepared.paths.source
        if first > last:
            return batch.limit(0)
        if through is None and not change_feed_complete(spark, source):
            rows = spark.read.format("delta").option("versionAsOf", last).load(source)
            at = (
                DeltaTable.forPath(spark, source)
                .history()
                .where(F.col("version") == last)
                .select("timestamp")
                .first()
            )
            rows = rows.withColumns(
                {
                    "_change_type": F.lit("insert"),
                    "_commit_version": F.lit(last).cast("long"),
                    "_commit_timestamp": F.lit(None if at is None else at[0]).cast("timestamp"),
                }
            )
        else:
            rows = (
                spark.read.format("delta")
                .option("readChangeFeed", "true")
                .option("startingVersion", first)
                .option("endingVersion", last)
                .load(source)
            )
        return rows.select(
            *[
                F.col(f.name).cast(f.dataType)
                if f.name in rows.columns
                else F.lit(None).cast(f.dataType).alias(f.name)
                for f in batch.schema.fields
            ]
        )


class _SharedBatch:
    """The foreachBatch function of a shared query: the batch read once (kept as a local
    checkpoint), then each declaration's part, side by side (:data:`SIDE_BY_SIDE`)."""

    def __init__(self, members: Sequence[_Member], isolation: GoldIsolation | None) -> None:
        self.members = members
        self.isolation = isolation

    def bound(self, query_app: str) -> Callable[[DataFrame, int], None]:
        """The batch function of the query whose exactly-once id is ``query_app``."""
        return partial(self.run, query_app=query_app)

    def run(self, batch: DataFrame, batch_id: int, query_app: str) -> None:
        spark = batch.sparkSession
        taking = [m for m in self.members if self._takes_part(spark, m)]
        if not taking:
            return
        kept = batch.localCheckpoint()
        newest = None
        if "_commit_version" in batch.columns:
            newest = kept.agg(F.max("_commit_version")).first()[0]  # type: ignore[index]
        tasks = [partial(self._part, m, kept, batch_id, newest, query_app) for m in taking]
        errors = run_side_by_side(spark, tasks) if SIDE_BY_SIDE else [t() for t in tasks]
        raised = next((e for e in errors if e is not None), None)
        if raised is not None:
            raise raised

    def _takes_part(self, spark: SparkSession, member: _Member) -> bool:
        if self.isolation is None:
            return True
        if not self.isolation.due(member.table.name):
            return False
        return member.prepared is not None or member.try_prepare(spark, self.isolation)

    def _part(
        self, member: _Member, batch: DataFrame, batch_id: int, newest: int | None, app: str
    ) -> Exception | None:
        """One declaration's part; its error is returned (after it is noted in the isolation,
        or for the batch to raise without one)."""
        try:
            member.apply(batch, batch_id, newest, app)
        except Exception as error:
            with suppress(Exception):  # its place stays: the next batch catches up from it
                member.failed(batch.sparkSession, batch_id, app)
            if self.isolation is None:
                member.prepare(batch.sparkSession)
                return error
            self.isolation.failed(member.table.name, Failure.of(error))
            return None
        if self.isolation is not None:
            self.isolation.succeeded(member.table.name)
        return None


class JoinInputs(NamedTuple):
    """Where a join's entity is read: its silver table, and for a join as of event time its
    history table and history log (None otherwise)."""

    entity: str
    history: str | None = None
    log: str | None = None


def join_inputs(warehouse: Warehouse, join: Join) -> JoinInputs:
    """The tables the ``join`` reads in ``warehouse``."""
    entity = warehouse.table("silver", join.entity)
    if not join.at_event_time:
        return JoinInputs(entity)
    history = warehouse.table("silver", f"{join.entity}{HISTORY_SUFFIX}")
    return JoinInputs(entity, history, warehouse.history_log(join.entity))


def joined_entity(spark: SparkSession, join: Join, inputs: JoinInputs) -> DataFrame:
    """What the join takes its columns from: the entity's current rows
    (:func:`~gold.enrichment.entity_rows`), or as of event time its history's versions
    (:func:`~gold.enrichment.entity_versions`)."""
    if inputs.history is None or inputs.log is None:
        return entity_rows(spark.read.format("delta").load(inputs.entity), join)
    history = spark.read.format("delta").load(inputs.history).select(*history_columns(join))
    return entity_versions(history, spark.read.format("delta").load(inputs.log), join)


class GoldPaths(NamedTuple):
    """Where a gold job reads and writes: its silver source, gold table, watermark state,
    the shared ``gold.late_events`` and the joined entity's tables (if any)."""

    source: str
    gold: str
    watermark: str
    late_events: str
    joined: JoinInputs | None = None
    #: The stream-joined silver table (if any).
    other: str | None = None


def _maintainer(
    paths: GoldPaths, table: GoldTable, app_id: str, checks: TableChecks | None = None
) -> Callable[..., None]:
    """The foreachBatch function of ``table``'s job; ``checks``: its suite's row-level
    expectations, enforced on the rows each batch writes. Its optional third argument is the
    exactly-once writer id of the batch (default ``app_id``, the query's)."""

    ensured = EnsuredTables()
    recorded = RecordedSeen(paths.watermark)

    def maintain(batch: DataFrame, batch_id: int, app_id: str = app_id) -> None:
        spark = batch.sparkSession
        silver = spark.read.format("delta").load(paths.source)
        # The batch's newest event time and commit time, and the earliest end of a window its
        # changes can fall in, taken in the job that finds its scope.
        stats = Observation(f"{app_id}:{batch_id}")
        image = F.col("_change_type").isin(*ROW_IMAGES)
        added = image & F.col("_change_type").isin(*ADDS)
        batch = batch.observe(
            stats,
            F.max(F.when(added, F.unix_micros(F.col(table.event_time)))).alias("seen"),
            F.max(F.when(image, F.unix_micros("_commit_timestamp"))).alias("at"),
            earliest_end(table).alias("earliest_end"),
        )
        facts, silver, touched, others = _scoped_batch(batch, silver, table, paths)
        # Distinct (group, window) keys, as small as the change, kept as Arrow: the scope then
        # reaches Spark again without a Python worker (timestamps stay instants, in UTC).
        keys = touched.toArrow()
        newest, batch_time, earliest = itemgetter("seen", "at", "earliest_end")(stats.get)
        before = recorded.read(spark, app_id, batch_id)
        seen = max((s for s in (before, newest) if s is not None), default=None)
        watermark = watermark_of(seen, table)
        scope = spark.createDataFrame(keys, touched.schema)
        starts = [] if table.window.per_group else keys[table.window.key_column].to_pylist()
        first, last = (min(starts), max(starts)) if starts else (None, None)
        if paths.other is not None:
            other = spark.read.format("delta").load(paths.other)
            recomputed = recompute_rows(silver, other, scope, table, first, last)
        else:
            recomputed = recompute(silver, scope, table, first, last)
        schema = StructType(
            [
                *recomputed.schema.fields,
                StructField(FINAL, BooleanType()),
                StructField(FINALIZED_AT, TimestampType()),
            ]
        )
        ensured.ensure(spark, paths.gold, schema, change_feed=False, widening=GOLD_WIDENING)
        if batch_time is None:
            return  # no row images: nothing changed
        # Writes in this order, the watermark last (the others under the batch's transaction
        # id): a retried batch reads the watermark its first attempt read, so decides the same.
        # The expectations are judged first: a broken ``fail`` one stops before any write.
        previous = watermark_of(before, table)
        gold = spark.read.format("delta").load(paths.gold)
        existing = in_scope(_between(gold, table, first, last), scope, scope_columns(table))
        changes = replacement(
            with_finality(recomputed, existing, table, watermark, batch_time), existing, table
        )
        if watermark is not None:
            outside = out_of_scope(gold, scope, scope_columns(table), keys.num_rows > 0)
            finals = newly_final(outside, table, watermark, batch_time)
            changes = changes.unionByName(finals.withColumn(PRESENT, F.lit(True)))
        merge = keys.num_rows > 0 or watermark != previous
        if merge:
            changes = _checked(changes, checks, table, app_id, batch_id)
        # A stream join's late matches are found in the gold rows; otherwise a batch whose
        # changes all end after the watermark has no late events, and no job looks for them.
        if previous is not None and (others is not None or _may_be_late(earliest, previous)):
            late = late_events(facts, table, previous)
            if others is not None:
                late = late.unionByName(late_matches(others, existing, table, previous))
            late, found = kept_with_totals(late, F.count(F.lit(1)).alias("rows"))
            if found.rows:
                append(late, paths.late_events, app_id, batch_id)
        if merge:
            replace = partial(replace_windows, spark, paths.gold, changes, table)
            dml_once(spark, paths.gold, app_id, batch_id, replace)
        if seen is not None and seen != before:
            recorded.record(spark, table, seen, app_id, batch_id)

    return maintain


def _may_be_late(earliest_end: int | None, watermark: int) -> bool:
    """Whether a batch whose row images' earliest window end is ``earliest_end`` (epoch µs,
    None: no row image with an event time) can hold a change late under ``watermark``."""
    return earliest_end is not None and earliest_end <= watermark


def _checked(
    changes: DataFrame, checks: TableChecks | None, table: GoldTable, app_id: str, batch_id: int
) -> DataFrame:
    """``changes`` kept (a local checkpoint); with ``checks``, each is counted on the rows the
    MERGE writes (inserted or updated) in the job that keeps them, judged, and its metrics
    recorded.

    Raises:
        ExpectationFailedError: a ``fail`` expectation broke on a written row (nothing of the
            batch is written).
    """
    if checks is None:
        return changes.localCheckpoint()
    compiled = checks.compile(changes.schema, F.col(PRESENT))
    kept, counts = kept_with_totals(changes, *TableChecks.totals(compiled))
    outcomes = checks.judge(compiled, counts, kept, scope_columns(table), batch_id)
    record_outcomes(kept.sparkSession, checks.metrics, outcomes, app_id, batch_id)
    return kept


def _scoped_batch(
    batch: DataFrame, silver: DataFrame, table: GoldTable, paths: GoldPaths
) -> tuple[DataFrame, DataFrame, DataFrame, DataFrame | None]:
    """A micro-batch's source change rows, the current source rows (both enriched for a
    join), the scope the batch affects and, for a stream join, its other-side change rows."""
    if paths.joined is not None:
        facts, silver, touched = _joined_batch(batch, silver, table, paths.joined)
        return facts, silver, touched, None
    if paths.other is not None:
        facts = batch.where(F.col(OTHER).isNull()).drop(OTHER)
        others = other_changes(batch)
        span = time_range(others, table)
        return facts, silver, touched_rows(facts, silver, others, table, *span), others
    return batch, silver, affected(batch, table), None


def _joined_batch(
    batch: DataFrame, silver: DataFrame, table: GoldTable, inputs: JoinInputs
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """A joined gold table's micro-batch (:func:`joined_changes`) as the source's change rows
    and the current source rows, both enriched, and the scope the batch affects."""
    join = table.join
    assert join is not None
    spark = batch.sparkSession
    at = table.event_time if join.at_event_time else None
    # Read three times below: as of event time, its versions are computed once.
    entity = joined_entity(spark, join, inputs)
    if at is not None:
        entity = entity.localCheckpoint()
    changes = batch.where(F.col(SIDE) == "entity").select("_change_type", f"{ENTITY}.*")
    if inputs.log is not None:
        log = spark.read.format("delta").load(inputs.log)
        changes = entity_versions(changes, log, join, keep=("_change_type",))
    facts = batch.where(F.col(SIDE) == "source").drop(SIDE, ENTITY)
    touched = affected(scope_rows(facts, silver, changes, entity, join, at), table)
    return enrich(facts, entity, join, at), enrich(silver, entity, join, at), touched


def _between(gold: DataFrame, table: GoldTable, first: object, last: object) -> DataFrame:
    """The gold rows whose window key lies from ``first`` to ``last`` (the scope's, for time
    windows; None: no bound): Delta skips the files whose statistics lie outside."""
    if first is None:
        return gold
    return gold.where(F.col(table.window.key_column).between(F.lit(first), F.lit(last)))


def replace_windows(spark: SparkSession, path: str, changes: DataFrame, table: GoldTable) -> None:
    """Apply a :func:`gold.aggregates.replacement` to the gold table in one MERGE: rows marked
    absent are deleted, the others replace the row of their key or are inserted.

    One MERGE, not a delete and an append: a replayed micro-batch must not delete what the
    first attempt wrote, and applying the same rows again changes nothing. ``changes`` is
    materialized (:func:`_checked` keeps it).
    """
    written = (*table.columns, FINAL, FINALIZED_AT)
    values: dict[str, str | Column] = {c: F.col(f"s.{c}") for c in written}
    merge = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(changes.alias("s"), same_key(table))
        .whenMatchedDelete(condition=~F.col(f"s.{PRESENT}"))
        .whenMatchedUpdate(set=values)
        .whenNotMatchedInsert(condition=F.col(f"s.{PRESENT}"), values=values)
    )
    merge_materialized(merge, changes)


class GoldJob(NamedTuple):
    """A gold streaming job: its query (and checkpoint) name, gold table and silver input."""

    query: str
    table: str
    input: str
    what: str
    #: Starts its query: ``start(spark, warehouse, trigger)``; a shared query's also takes
    #: ``isolation`` (:class:`GoldIsolation`).
    start: Callable[..., StreamingQuery]
    #: The silver tables it joins (they must exist before it starts).
    joins: tuple[str, ...] = ()
    #: The entities whose silver tables it reads: its input's, and its join's.
    entities: frozenset[str] = frozenset()
    #: Whether its query is shared (:func:`start_shared`, taking ``isolation``).
    shared: bool = False

    def reads_any(self, entities: Collection[str]) -> bool:
        """True if it reads the silver table (or history table) of one of ``entities``."""
        return not self.entities.isdisjoint(entities)


def _joined_entity(table: GoldTable) -> str | None:
    """The entity whose silver table ``table``'s join or stream join reads, if any."""
    if table.stream_join is not None:
        return table.stream_join.source
    return table.join.entity if table.join is not None else None


def _joined_tables(table: GoldTable) -> tuple[str, ...]:
    """The silver tables ``table``'s join reads: its entity, and the entity's history table
    for a join as of event time; or its stream join's other table."""
    entity = _joined_entity(table)
    if entity is None:
        return ()
    at_event_time = table.join is not None and table.join.at_event_time
    return (entity, *((f"{entity}{HISTORY_SUFFIX}",) if at_event_time else ()))


def gold_jobs(config: PipelineConfig) -> list[GoldJob]:
    """Every gold job of the pipeline (one per declared gold table, one per pattern) with the
    silver table it reads. The declarations over one silver table without a join share one query
    (:func:`start_shared`): their jobs have its name and the same ``start``."""
    groups: dict[str, list[GoldTable]] = {}
    for table in config.gold_declarations:
        if shareable(table):
            groups.setdefault(table.source, []).append(table)
    starts: dict[str, Callable[..., StreamingQuery]] = {
        source: partial(start_shared, tables=tables, quality=config.quality)
        for source, tables in groups.items()
    }
    jobs = []
    for table in config.gold_declarations:
        shared = groups.get(table.source) if shareable(table) else None
        jobs.append(
            GoldJob(
                query_name(table) if shared is None else group_query(shared),
                table.name,
                table.source,
                f"stream join with silver.{table.stream_join.source} into gold.{table.name}"
                if table.stream_join is not None
                else f"{table.window.kind} windows into gold.{table.name}",
                partial(start_gold, table=table, quality=config.quality)
                if shared is None
                else starts[table.source],
                _joined_tables(table),
                frozenset(filter(None, (table.source, _joined_entity(table)))),
                shared is not None,
            )
        )
    from gold.pattern_jobs import pattern_jobs  # it builds on this module

    return jobs + pattern_jobs(config)
