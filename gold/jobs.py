"""The gold engine's queries: one streaming query per declared gold table (:class:`GoldTable`)
over its silver table's change feed, or one shared by the declarations over one source
(:func:`start_shared`); each micro-batch runs :mod:`gold.batch`'s stages.

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
from collections.abc import Callable, Sequence
from contextlib import suppress
from functools import partial
from typing import NamedTuple

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from expectations.checks import load_checks
from expectations.enforce import TableChecks
from gold.aggregates import (
    evaluate,
)
from gold.batch import GoldMaintainer, GoldPaths, join_inputs
from gold.enrichment import (
    ENTITY,
    SIDE,
    check_join,
    check_unique,
    enrich,
    entity_columns,
    entity_rows,
    history_columns,
)
from gold.feed import silver_changes, start_on_changes
from gold.finality import (
    LATE_EVENTS_SCHEMA,
)
from gold.progress import (
    Applied,
    Attempt,
    applied_location,
    read_applied,
    seeded,
    write_applied,
)
from gold.stream_join import (
    OTHER,
    check_stream_join,
    evaluate_joined,
    other_columns,
)
from lakehouse_core import checkpoints
from lakehouse_core.config import QualitySpec
from lakehouse_core.delta_io import (
    change_feed_complete,
    ensure_table,
    note_query_start,
    read_held,
    table_exists,
)
from lakehouse_core.errors import ConfigError
from lakehouse_core.failures import Failure
from lakehouse_core.frames import kept_with_totals
from lakehouse_core.gold_tables import GoldTable
from lakehouse_core.layout import HISTORY_SUFFIX, LATE_EVENTS, Warehouse
from lakehouse_core.parallel import in_session, run_side_by_side
from lakehouse_core.streaming import Trigger


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
        lambda app_id: GoldMaintainer(prepared.paths, table, app_id, prepared.checks),
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
        missing = next((name for name in joined_tables(table) if name not in names), None)
        if missing is not None:
            raise ConfigError(
                f"Gold table {table.name!r} joins silver.{missing}, which does not exist: name "
                "a silver table in join.entity (its entity must have had events)."
            )
        dimension = spark.read.format("delta").load(entity)
        table.check_columns(facts.columns, dimension.columns)
        check_join(table, facts.schema, dimension.schema)
        key = [e for _, e in table.join.on]
        held = read_held(entity, key)
        check_unique(dimension if held is None else held, table, key)
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
        self.maintain = GoldMaintainer(self.prepared.paths, self.table, "", self.prepared.checks)
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
        # Kept, and its newest silver version found, in one Spark job.
        versions = F.col("_commit_version") if "_commit_version" in batch.columns else F.lit(None)
        kept, totals = kept_with_totals(batch, F.max(versions).alias("newest"))
        newest = totals.newest
        tasks = [partial(self._part, m, kept, batch_id, newest, query_app) for m in taking]
        errors = run_side_by_side(spark, tasks) if SIDE_BY_SIDE else [t(spark) for t in tasks]
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
        self,
        member: _Member,
        batch: DataFrame,
        batch_id: int,
        newest: int | None,
        app: str,
        session: SparkSession,
    ) -> Exception | None:
        """One declaration's part, in ``session`` (its own when the parts run side by side:
        the mark and transaction id of its commits are its own); its error is returned (after
        it is noted in the isolation, or for the batch to raise without one)."""
        batch = in_session(batch, session)
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


def joined_entity_name(table: GoldTable) -> str | None:
    """The entity whose silver table ``table``'s join or stream join reads, if any."""
    if table.stream_join is not None:
        return table.stream_join.source
    return table.join.entity if table.join is not None else None


def joined_tables(table: GoldTable) -> tuple[str, ...]:
    """The silver tables ``table``'s join reads: its entity, and the entity's history table
    for a join as of event time; or its stream join's other table."""
    entity = joined_entity_name(table)
    if entity is None:
        return ()
    at_event_time = table.join is not None and table.join.at_event_time
    return (entity, *((f"{entity}{HISTORY_SUFFIX}",) if at_event_time else ()))
