"""What every gold query stands on: silver's change feed as a stream (:func:`silver_changes`),
a query started over it (:func:`start_on_changes`), and the record of a gold job
(:class:`GoldJob`) that the registry (:mod:`gold.registry`) lists."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from gold.schema_log import rebase_schema_log, schema_log_location
from lakehouse_core import checkpoints, storage
from lakehouse_core.delta_io import change_feed_complete, current_version
from lakehouse_core.failures import guarded
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import Trigger, query_app_id
from lakehouse_core.widening import TypeWidening

#: Gold tables are small and read by BI tools: a wider type rewrites them, so every Delta
#: reader keeps opening them.
GOLD_WIDENING: TypeWidening = "rewrite"

#: The setting a gold or pattern micro-batch plans its joins under: no join is broadcast unless
#: a plan asks for it. A broadcast is a Spark job of its own, and a batch's joins are mostly of
#: frames its scope limits to what the change reaches, which a shuffle inside the batch's job
#: joins for less (a steady ``run --once`` of the demo's pipeline, 100 records: 230 to 235 jobs
#: before, 171 to 176 after; ``benchmarks/batch_jobs.py``). A join with a whole table (a
#: per-group window's silver rows, an enrichment's entity) was shuffled before too once the
#: table passed Spark's broadcast size (10 MB), since the scope's rows have no size estimate.
#: Measured again on ``benchmarks.gold_sharing``'s twelve declarations over 100k rows, one
#: batch of 1,000 changes: 68 jobs and 46-52 s without broadcasts, 120 jobs and 63-80 s with.
#: Set on the query's own session (Spark gives each streaming query a copy of the session that
#: started it), never on the session a user passed in.
NO_AUTO_BROADCAST = ("spark.sql.autoBroadcastJoinThreshold", "-1")


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

    The checkpoint is the query's current one (:func:`lakehouse_core.checkpoints.current`: after a
    replay on an object store, the generation its pointer names, read from the version the
    pointer gives)."""
    place = checkpoints.current(spark, warehouse.checkpoint(query))
    stream = silver_changes(spark, source, place.location, place.starting_version)
    if combine is not None:
        stream = combine(stream, spark, place.location)
    app_id = query_app_id(spark, place.location)
    writer = (
        stream.writeStream.queryName(query)
        .option("checkpointLocation", place.location)
        .foreachBatch(guarded(_without_auto_broadcast(batch_function(app_id))))
    )
    return trigger.apply(writer).start()


def _without_auto_broadcast(
    function: Callable[[DataFrame, int], None],
) -> Callable[[DataFrame, int], None]:
    """``function`` run with :data:`NO_AUTO_BROADCAST` set on its micro-batch's session."""

    def call(batch: DataFrame, batch_id: int) -> None:
        batch.sparkSession.conf.set(*NO_AUTO_BROADCAST)
        function(batch, batch_id)

    return call


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
