"""Fresh (merge-on-read) reads of a silver table: the table as of a pinned version with the
bronze records it has not applied yet folded over it, by silver's own stages.

A fresh read is a pinned pair: silver's tables as of their versions when the read began, and
the bronze records of the bronze versions after the one silver's query had applied, through
bronze's version ``W`` (read last). The tail runs through the stages of a micro-batch
(:func:`silver.decode.decode`, :func:`silver.check.check`, :func:`silver.plan.plan`) exactly as
:func:`silver.job.apply_batch` runs them; only the write stage is replaced by
:func:`merged`, which computes the rows that the write's truncate and MERGE would leave, as a
DataFrame (nothing is written).

Silver is a function of the set of bronze records (any order, duplicates, split), so a tail
that overlaps what silver applied (silver committed a batch while the read was pinned) gives
the same rows: the read equals silver after it has applied bronze through ``W``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import reduce
from posixpath import basename
from typing import Any
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from bronze.table import INGEST_BATCH
from expectations.enforce import TableChecks
from lakehouse_core import storage
from lakehouse_core.columns import METADATA_COLUMNS, OP
from lakehouse_core.config import TableSpec
from lakehouse_core.errors import LakehouseError
from lakehouse_core.frames import is_in
from silver.changes import LAST_DELETE, fill_order, fill_value, first_value
from silver.check import check
from silver.context import BatchContext, Current, QueryState, SchemaCache
from silver.decode import NEWEST_TRUNCATE, decode
from silver.parse import DELETE_OP, order_of, order_type_of
from silver.plan import BatchWrites, plan
from silver.tables import EntityTables, order_literal

#: The application id a fresh read's batch context carries (it writes nothing).
FRESH_APP_ID = "fresh-read"


class FreshReadError(LakehouseError):
    """A fresh read cannot be made (too much unapplied bronze, a table without one)."""


@dataclass(frozen=True)
class FreshLimits:
    """How much unapplied bronze a fresh read folds at most: ``max_records`` records, and
    bronze commits at most ``max_age`` older than the read."""

    max_records: int = 100_000
    max_age: timedelta = timedelta(minutes=30)

    def __post_init__(self) -> None:
        records = self.max_records
        if isinstance(records, bool) or not isinstance(records, int) or records < 0:
            raise FreshReadError(
                f"Invalid max_records {records!r}: give a whole number of at least 0."
            )
        if not isinstance(self.max_age, timedelta) or self.max_age < timedelta(0):
            raise FreshReadError(
                f"Invalid max_age {self.max_age!r}: give a timedelta of at least 0."
            )


@dataclass(frozen=True)
class PendingCommit:
    """A bronze commit silver's query has not applied: its ``version``, the data files it
    added (their names), its records (None: not in its statistics), its commit time (epoch
    ms) and the lowest ingest batch id of its files (None: not in their statistics)."""

    version: int
    files: tuple[str, ...]
    records: int | None
    timestamp_ms: int
    lowest_batch: int | None


def pending_commits(
    spark: SparkSession, bronze: str, after: int, through: int
) -> list[PendingCommit]:
    """The commits of the bronze table at ``bronze`` after version ``after`` through
    ``through`` that silver's stream reads: those adding records (a commit that removes
    records, `lakehouse forget` or retention, is skipped as the stream skips it).

    Raises:
        FreshReadError: the log no longer holds one of them (its cleanup removed it).
    """
    found = []
    for version in range(after + 1, through + 1):
        text = storage.read_text(spark, f"{bronze}/_delta_log/{version:020d}.json")
        if text is None:
            raise FreshReadError(
                f"Bronze version {version} of {bronze} is no longer in its log, so the records "
                "silver has not applied cannot be listed: read the plain silver table."
            )
        actions = [json.loads(line) for line in text.splitlines() if line.strip()]
        removes = any(a["remove"].get("dataChange", True) for a in actions if "remove" in a)
        adds = [a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)]
        if removes or not adds:
            continue
        stats: list[dict[str, Any]] = [json.loads(a.get("stats") or "{}") for a in adds]
        counts = [s.get("numRecords") for s in stats]
        lowest = [s.get("minValues", {}).get(INGEST_BATCH) for s in stats]
        info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        found.append(
            PendingCommit(
                version=version,
                files=tuple(unquote(basename(a["path"])) for a in adds),
                records=None if None in counts else sum(int(c or 0) for c in counts),
                timestamp_ms=int(info.get("timestamp", 0)),
                lowest_batch=None if None in lowest else min(int(b or 0) for b in lowest),
            )
        )
    return found


def tail_frame(
    spark: SparkSession, bronze: str, through: int, commits: list[PendingCommit]
) -> DataFrame:
    """The bronze records the ``commits`` added, as of bronze version ``through`` (a record
    `lakehouse forget` removed since is not read). Files are chosen by name; a bound on the
    ingest batch lets Delta skip the older files by their statistics."""
    table = spark.read.format("delta").option("versionAsOf", through).load(bronze)
    names = sorted({name for commit in commits for name in commit.files})
    if not names:
        return table.limit(0)
    lowest = [c.lowest_batch for c in commits]
    if None not in lowest:
        table = table.where(F.col(INGEST_BATCH) >= min(b for b in lowest if b is not None))
    return table.where(is_in("_metadata.file_name", names)).select(*table.columns)


@dataclass(frozen=True)
class Snapshot:
    """Silver's tables of one entity as a fresh read pins them: the rows (None: no table
    yet), the tombstones (None: none), the truncation floor (None: never truncated) and the
    table's key and row columns (None: no table)."""

    rows: DataFrame | None
    tombstones: DataFrame | None
    floor: Row | None
    columns: StructType | None


class _PinnedState(QueryState):
    """A query state whose table columns are those of the pinned snapshot (decode reads them
    to bring the tail's columns to the table's) and whose schema cache is ``schemas``."""

    def __init__(self, columns: StructType | None, schemas: SchemaCache | None) -> None:
        super().__init__()
        self._pinned = columns
        if schemas is not None:
            self.schemas = schemas

    def data_columns(self, spark: SparkSession, path: str) -> StructType | None:
        return self._pinned


def fold_tail(
    spec: TableSpec,
    tables: EntityTables,
    snapshot: Snapshot,
    tail: DataFrame,
    checks: TableChecks | None = None,
    schemas: SchemaCache | None = None,
) -> DataFrame:
    """The rows of silver's table after applying the bronze rows ``tail`` to ``snapshot`` as one
    micro-batch (decode, check and plan as :func:`silver.job.apply_batch` runs them; the
    writes' result computed by :func:`merged`). ``tables``: the entity's tables (named in
    messages; nothing is read from or written to them here); ``checks``: its expectations (a
    ``drop`` expectation's rows are left out, as silver quarantines them); ``schemas``: a
    schema cache kept between reads of the entity (decode skips discovering the tail's schema
    versions when the cached one is the tail's only one, as a query does between batches).

    Raises:
        SchemaChangeError: the tail has a column type the table cannot take, under
            ``on_incompatible_type = "fail"`` (silver's query stops on it too).
        ExpectationFailedError: a ``fail`` expectation broke in the tail.
    """
    state = _PinnedState(snapshot.columns, schemas)
    ctx = BatchContext(tail.sparkSession, spec, tables, FRESH_APP_ID, 0, state, checks)
    decoded = decode(ctx, tail)
    checked = check(ctx, decoded)
    keys = decoded.kept.key_names
    parts = [
        frame.select(*keys, order_of().alias("_current"))
        for frame in (snapshot.rows, snapshot.tombstones)
        if frame is not None and keys
    ]
    orders = reduce(DataFrame.unionByName, parts) if parts else None
    writes = plan(checked, Current(snapshot.floor, orders))
    if writes.merge is not None:
        # The newest change per key: computed once (a pass over the table's key and order
        # columns), small, kept, so the read's plan broadcasts it rather than recomputing it.
        changes = writes.merge.changes.localCheckpoint()
        writes = replace(writes, merge=replace(writes.merge, changes=changes))
    return merged(snapshot.rows, writes, decoded.counts[NEWEST_TRUNCATE])


def merged(rows: DataFrame | None, writes: BatchWrites, truncate: Row | None) -> DataFrame:
    """The rows :func:`silver.write.write` leaves in a table holding ``rows`` after it wrote
    ``writes`` (pure): the rows older than ``truncate`` (the batch's newest truncate; None:
    none) removed, then the MERGE of :func:`silver.tables.merge_silver` applied: a newer
    delete removes the key's row, a newer upsert replaces it (a partial column resolved as
    the MERGE resolves it), an upsert of a new key inserts it.

    The batch's changes (one per key) are the small side: the table's rows are read in one
    pass joined with them broadcast, its key column once more to find the batch's new keys;
    the table is not shuffled. The columns are the table's, then those the batch adds; with
    neither a table nor a keyed change, an empty frame of no columns.
    """
    if rows is not None and truncate is not None and writes.truncates is not None:
        floor = order_literal(truncate, order_type_of(writes.truncates))
        rows = rows.where(~F.coalesce(order_of() < floor, F.lit(False)))
    merge = writes.merge
    if merge is None:
        if rows is not None:
            return rows
        return writes.valid.sparkSession.createDataFrame([], StructType())
    source = merge.changes
    keys = list(merge.keys)
    assigned = (*merge.keys, *merge.columns, *METADATA_COLUMNS)
    if rows is None:
        schema = StructType([source.schema[name] for name in assigned])
        rows = source.sparkSession.createDataFrame([], schema)
    names = [*rows.columns, *(n for n in assigned if n not in rows.columns)]
    target = rows.withColumn("_in_table", F.lit(True)).alias("t")
    changes = source.withColumn("_in_batch", F.lit(True))
    on = reduce(lambda a, b: a & b, [F.col(f"t.{k}") == F.col(f"s.{k}") for k in keys])
    # The table's rows, each with its key's change if the batch has one.
    present = target.join(F.broadcast(changes.alias("s")), on, "left")
    # The changes of keys the table has no row of (an empty left side: no read of the table).
    listed = rows.select(*keys).join(F.broadcast(source.select(*keys)), keys, "left_semi")
    arrivals = changes.join(listed, keys, "left_anti").alias("s")
    absent = target.where(F.lit(False)).join(arrivals, on, "right")
    in_table = F.coalesce(F.col("t._in_table"), F.lit(False))
    in_batch = F.coalesce(F.col("s._in_batch"), F.lit(False))
    newer = in_batch & (~in_table | F.coalesce(order_of("s.") > order_of("t."), F.lit(False)))
    kept = F.when(newer, F.col(f"s.{OP}") != DELETE_OP).otherwise(in_table)
    toast = set(merge.toast_columns)
    values = []
    for name in names:
        if name in merge.keys:
            value = F.coalesce(F.col(f"t.{name}"), F.col(f"s.{name}"))
        elif name not in assigned:
            value = F.col(f"t.{name}")  # a column the MERGE does not set keeps its value
        elif name in toast:
            value = F.when(newer, _partial(name, in_table)).otherwise(F.col(f"t.{name}"))
        elif name in rows.columns:
            value = F.when(newer, F.col(f"s.{name}")).otherwise(F.col(f"t.{name}"))
        else:
            value = F.when(newer, F.col(f"s.{name}"))
        values.append(value.alias(name))
    return present.where(kept).select(*values).unionByName(absent.where(kept).select(*values))


def _partial(column: str, in_table: Column) -> Column:
    """The value the MERGE gives a partial ``column`` (see ``merge_silver``): the batch's
    latest real value after the key's last delete, else the table's row if the batch has no
    delete of the key (an update), else the value the key's first event after the delete
    received; a column the winner carries is its own value."""
    partial = F.array_contains("s._unavailable", column)
    filled = partial & F.col(f"s.{fill_order(column)}").isNotNull()
    table_row = partial & F.col(f"s.{LAST_DELETE}").isNull() & in_table
    return (
        F.when(filled, F.col(f"s.{fill_value(column)}"))
        .when(table_row, F.col(f"t.{column}"))
        .when(partial, F.col(f"s.{first_value(column)}"))
        .otherwise(F.col(f"s.{column}"))
    )
