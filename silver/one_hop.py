"""One hop from source to silver: each bronze micro-batch, once appended, is applied to its
entities' silver tables in the same ``foreachBatch`` (no silver query, no second trigger).

Exactly once as in two hops: every silver write carries a transaction id of its own
(``<bronze query's id>:hop:<entity>``, the bronze batch id as version), so a batch a restart
does again adds nothing the crashed attempt committed. Bronze stays the system of record.

The hand-over to a silver query (a later run in two hops): after each batch, the entity's
silver checkpoint is pointed (:mod:`lakehouse_core.checkpoints`) at a fresh generation that starts
reading bronze after the version this batch left, so a silver query does not read again what a
hop applied. After a crash between a hop's silver commits and that pointer, a restart in one hop
does the batch again (its commits are skipped, the pointer written); a run in two hops instead
reads the batch again in silver, where its changes are stale but its unparseable records are
quarantined a second time.

Failure isolation (:class:`Isolation`): in a continuous run, an entity whose part of a hop fails
is left to a silver query of its own (which the run starts, and retries while it fails); the
bronze query and the other entities' hops go on. Its checkpoint was not handed over for the
failed batch, so that query reads the batch from bronze (what the failed attempt committed is
stale there, except quarantined records, which are quarantined again).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bronze.table import INGEST_BATCH
from expectations.checks import load_checks
from expectations.enforce import TableChecks
from lakehouse_core import checkpoints, storage
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.delta_io import current_version, table_exists
from lakehouse_core.failures import Failure
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import APP_ID_FILE
from silver.job import (
    BatchReport,
    QueryState,
    apply_batch,
    bronze_path,
    ensure_shared_tables,
    entity_tables,
)
from silver.topic_kind import holds_plain_events

#: Told what each bronze micro-batch applied to each entity: (entity, batch id, report).
HopListener = Callable[[str, int, BatchReport], None]


class Isolation:
    """The entities a run's hops leave alone: each one whose part of a hop (or whose catch-up
    before the hops) failed. Thread-safe: hops run on Spark's threads."""

    def __init__(self) -> None:
        self._left: set[str] = set()
        self._new: list[tuple[str, Failure, bool]] = []
        self._lock = threading.Lock()

    def __contains__(self, entity: object) -> bool:
        with self._lock:
            return entity in self._left

    def entities(self) -> set[str]:
        with self._lock:
            return set(self._left)

    def leave(self, entity: str, failure: Failure, logged: bool = False) -> None:
        """Leave ``entity`` out of the hops from now on, because of ``failure`` (``logged``:
        the event log has it already, from the end of the entity's own query)."""
        with self._lock:
            self._left.add(entity)
            self._new.append((entity, failure, logged))

    def take_left(self) -> list[tuple[str, Failure, bool]]:
        """(entity, failure, logged) of each entity left since the last call."""
        with self._lock:
            taken, self._new = self._new, []
            return taken


class SilverHop:
    """The follower (:data:`bronze.job.BatchFollower`) of a bronze query that applies each
    micro-batch's topics to their silver entities (topics starting with ``_`` have none)."""

    def __init__(
        self,
        spark: SparkSession,
        warehouse: Warehouse,
        config: PipelineConfig,
        listener: HopListener | None = None,
        redo: int | None = None,
        isolation: Isolation | None = None,
    ) -> None:
        """``redo``: the id of the bronze micro-batch a crash left unfinished, which the query
        does first (:func:`keep_redo_for_silver`); ``isolation``: where an entity whose part
        of a batch fails is left (and which entities to leave alone); without it, such a
        failure fails the batch."""
        self._spark = spark
        self._isolation = isolation
        self._redo = redo
        self._warehouse = warehouse
        self._config = config
        self._listener = listener
        self._states: dict[str, QueryState] = {}
        self._checks: dict[str, TableChecks | None] = {}
        self._handed_over: set[str] = set()
        #: Per topic without a declaration: whether it holds plain events (left in bronze).
        self._plain: dict[str, bool] = {}
        ensure_shared_tables(spark, warehouse)

    def __call__(
        self, appended: Mapping[str, DataFrame], bronze_app_id: str, batch_id: int
    ) -> None:
        for topic in sorted(t for t in appended if not t.startswith("_")):
            spec = self._config.spec_for_topic(topic)
            if self._left_in_bronze(spec, appended[topic]):
                continue
            if self._isolation is None:
                self._apply(spec, appended[topic], bronze_app_id, batch_id)
            elif spec.name not in self._isolation:
                try:
                    self._apply(spec, appended[topic], bronze_app_id, batch_id)
                except Exception as error:
                    self._isolation.leave(spec.name, Failure.of(error))

    def _left_in_bronze(self, spec: TableSpec, records: DataFrame) -> bool:
        """Whether ``spec``'s topic has no declaration and silver table, and is one of
        Debezium's own topics by its name (``[debezium]``) or holds plain events: its records
        stay in bronze (:func:`silver.topic_kind.holds_plain_events`; decided once per
        topic)."""
        if any(table.topic == spec.topic for table in self._config.tables):
            return False
        if spec.topic not in self._plain:
            silver = entity_tables(self._warehouse, spec).silver
            own = self._config.debezium.kind_of(spec.topic) is not None
            self._plain[spec.topic] = not table_exists(self._spark, silver) and (
                own or holds_plain_events(records)
            )
        return self._plain[spec.topic]

    def _apply(
        self, spec: TableSpec, records: DataFrame, bronze_app_id: str, batch_id: int
    ) -> None:
        """Apply an entity's records of the batch, hand its checkpoint over, tell the listener."""
        if batch_id == self._redo:  # bronze may have changed since (``forget``): read it
            records = self._bronze(spec).where(F.col(INGEST_BATCH) == batch_id)
        if spec.name not in self._states:
            self._states[spec.name] = QueryState()
        report = apply_batch(
            records,
            batch_id,
            spec,
            entity_tables(self._warehouse, spec),
            f"{bronze_app_id}:hop:{spec.name}",
            self._checks_of(spec),
            self._states[spec.name],
        )
        self._hand_over(spec)
        if self._listener is not None:
            self._listener(spec.name, batch_id, report)

    def _checks_of(self, spec: TableSpec) -> TableChecks | None:
        if spec.name not in self._checks:
            self._checks[spec.name] = load_checks(
                self._spark, self._config.quality, self._warehouse, "silver", spec.name
            )
        return self._checks[spec.name]

    def _bronze(self, spec: TableSpec) -> DataFrame:
        return self._spark.read.format("delta").load(bronze_path(self._warehouse, spec))

    def _hand_over(self, spec: TableSpec) -> None:
        """Point the entity's silver checkpoint past the bronze version this batch left, and
        delete the checkpoint that pointer supersedes (once per entity and query: later ones
        were never started)."""
        spark, base = self._spark, self._warehouse.checkpoint(f"silver_{spec.name}")
        version = current_version(spark, bronze_path(self._warehouse, spec))
        first = spec.name not in self._handed_over
        superseded = checkpoints.current(spark, base).location if first else None
        generation = f"hop-{version}"
        checkpoints.point(spark, base, generation, version + 1)
        self._handed_over.add(spec.name)
        if superseded is not None and superseded != checkpoints.generation(base, generation):
            storage.delete_tree(spark, superseded)
            storage.delete_tree(spark, f"{superseded}.{APP_ID_FILE}")


def keep_redo_for_silver(
    spark: SparkSession, warehouse: Warehouse, specs: list[TableSpec], redo: int
) -> None:
    """Point the silver checkpoint of each entity whose bronze holds records of the unfinished
    micro-batch ``redo`` at the bronze version that added them.

    Silver catches up with the committed bronze micro-batches only (the unfinished one is the
    hop's), and its query moves past that version; should the hop not finish the batch
    either, a later silver query still reads it from there."""
    for spec in specs:
        bronze = bronze_path(warehouse, spec)
        if spark.read.format("delta").load(bronze).where(F.col(INGEST_BATCH) == redo).isEmpty():
            continue
        appends = DeltaTable.forPath(spark, bronze).history().where("operation = 'WRITE'")
        newest = appends.agg(F.max("version").alias("v")).first()
        assert newest is not None and newest.v is not None  # the batch's rows were appended
        base = warehouse.checkpoint(f"silver_{spec.name}")
        caught_up = checkpoints.current(spark, base).location
        checkpoints.point(spark, base, f"redo-{newest.v}", int(newest.v))
        storage.delete_tree(spark, caught_up)
        storage.delete_tree(spark, f"{caught_up}.{APP_ID_FILE}")
