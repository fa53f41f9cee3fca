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
from collections.abc import Callable, Sequence
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
from cdc.debezium import ColumnCodec
from expectations.enforce import TableChecks
from lakehouse_core import storage
from lakehouse_core.columns import METADATA_COLUMNS, OP
from lakehouse_core.config import TableSpec
from lakehouse_core.delta_io import read_files
from lakehouse_core.errors import LakehouseError
from lakehouse_core.frames import is_in
from silver.changes import LAST_DELETE, fill_order, fill_value, first_value
from silver.check import Checked, check
from silver.context import BatchContext, Current, QueryState, SchemaCache
from silver.decode import NEWEST_TRUNCATE, decode
from silver.parse import DELETE_OP, RowLayout, order_of, order_type_of
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
    return bronze_commits(spark, bronze, after, through)[0]


def bronze_commits(
    spark: SparkSession, bronze: str, after: int, through: int
) -> tuple[list[PendingCommit], list[int]]:
    """:func:`pending_commits`, and the versions among them that removed records.

    Raises:
        FreshReadError: the log no longer holds one of them (its cleanup removed it).
    """
    found, removals = [], []
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
        if removes:
            removals.append(version)
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
    return found, removals


def tail_frame(
    spark: SparkSession, bronze: str, through: int, commits: list[PendingCommit]
) -> DataFrame:
    """The bronze records the ``commits`` added, as of bronze version ``through`` (a record
    `lakehouse forget` removed since is not read). Files are chosen by name: read on the
    driver (:func:`~lakehouse_core.delta_io.read_files`: no Delta snapshot built in Spark, no
    job to list files) when they are few records of a local table, else by Spark, a bound on
    the ingest batch letting Delta skip the older files by their statistics."""
    names = sorted({name for commit in commits for name in commit.files})
    if names and (few := read_files(spark, bronze, through, names)) is not None:
        return few
    table = spark.read.format("delta").option("versionAsOf", through).load(bronze)
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


def decode_tail(
    spec: TableSpec,
    tables: EntityTables,
    columns: StructType | None,
    tail: DataFrame,
    checks: TableChecks | None = None,
    schemas: SchemaCache | None = None,
) -> Checked:
    """The bronze rows ``tail`` decoded and checked as one micro-batch of silver's query
    (:func:`silver.decode.decode` and :func:`silver.check.check`, as
    :func:`silver.job.apply_batch` runs them) against a table of the data ``columns`` (None:
    no table yet). ``tables``: the entity's tables (named in messages; nothing is read from or
    written to them here); ``checks``: its expectations (a ``drop`` expectation's rows are
    marked quarantined); ``schemas``: a schema cache kept between reads of the entity (decode
    skips discovering the tail's schema versions when the cached one is the tail's only one,
    as a query does between batches). The decoded rows are kept (computed once).

    Raises:
        SchemaChangeError: the tail has a column type the table cannot take, under
            ``on_incompatible_type = "fail"`` (silver's query stops on it too).
        ExpectationFailedError: a ``fail`` expectation broke in the tail.
    """
    state = _PinnedState(columns, schemas)
    ctx = BatchContext(tail.sparkSession, spec, tables, FRESH_APP_ID, 0, state, checks)
    return check(ctx, decode(ctx, tail))


def combined(pieces: Sequence[Checked]) -> Checked | None:
    """Tails decoded apart (:func:`decode_tail`) as one decoded tail (pure): their events side
    by side, their totals added; None when they cannot be joined so (their layouts or event
    columns differ, or more than one holds a truncate): decode them together then.

    Decoding is per record once a tail's layout is known, so pieces of one layout give the
    events decoding them together gives; the checks judged each piece (as silver judges each
    micro-batch), so the result carries no outcomes.
    """
    if not pieces:
        return None
    first = pieces[0]
    if len(pieces) == 1:
        return first
    decoded = first.decoded
    same = all(
        _shape(p.decoded.layout) == _shape(decoded.layout)
        and _shape(p.decoded.kept) == _shape(decoded.kept)
        and p.events.schema == first.events.schema
        for p in pieces
    )
    truncating = [p for p in pieces if p.decoded.counts[NEWEST_TRUNCATE] is not None]
    if not same or len(truncating) > 1:
        return None
    counts = {
        **decoded.counts.asDict(),
        "records": sum(p.decoded.counts.records for p in pieces),
        "quarantined": sum(p.decoded.counts.quarantined for p in pieces),
        "tombstones": sum(p.decoded.counts.tombstones for p in pieces),
        "truncates": sum(p.decoded.counts.truncates for p in pieces),
        "toast_columns": list(
            dict.fromkeys(c for p in pieces for c in p.decoded.counts.toast_columns or ())
        ),
        NEWEST_TRUNCATE: truncating[0].decoded.counts[NEWEST_TRUNCATE] if truncating else None,
    }
    events = reduce(DataFrame.unionByName, [p.events for p in pieces])
    whole = replace(decoded, events=events, counts=Row(**counts), key_range=None)
    return Checked(whole, events)


class TailCache:
    """What an entity's fresh reads keep between reads: the schema cache of their tails, the
    tail decoded piece by piece (each bronze commit decoded once: a read decodes only the
    commits the last one had not, while its layout holds), and the last read's result for
    its pinned pair (read again, it costs only the read of its rows).

    Everything kept belongs to one ``key`` (the entity's settings, its table's columns and
    checks): a read under another key starts afresh.
    """

    def __init__(self) -> None:
        self.schemas = SchemaCache()
        self._key: object = None
        self._start = self._end = -1  # the pieces cover bronze versions (start, end]
        self._pieces: list[tuple[int, Checked]] = []  # (the last version it covers, tail)
        self._pinned: object = None
        self._rows: DataFrame | None = None

    def checked(
        self,
        key: object,
        commits: Sequence[PendingCommit],
        removals: Sequence[int],
        after: int,
        through: int,
        decode_commits: Callable[[list[PendingCommit]], Checked],
    ) -> Checked | None:
        """The decoded tail of the bronze ``commits`` after version ``after`` through
        ``through`` (None: no commit): the kept pieces that cover it, the commits no piece
        covers decoded by ``decode_commits`` as one more piece (the commits are decoded as
        of the read's bronze version, so after a commit that removed records, ``removals``,
        everything kept before it is let go). Pieces a read no longer
        needs (silver applied them) are let go; a kept piece that reaches below ``after``
        is used whole (silver applied part of it: folding a record twice changes nothing).
        If the pieces cannot be joined (:func:`combined`), the tail is decoded whole."""
        removed = any(version > self._end for version in removals)
        if key != self._key:
            self.schemas = SchemaCache()
        if key != self._key or removed or self._start > after or self._end > through:
            self._key, self._start, self._end, self._pieces = key, after, after, []
        while self._pieces and self._pieces[0][0] <= after:
            self._start = self._pieces.pop(0)[0]
        if not self._pieces:
            self._start = self._end = max(self._end, after)
        new = [c for c in commits if c.version > self._end]
        if new:
            self._pieces.append((through, decode_commits(new)))
        self._end = through
        together = combined([piece for _, piece in self._pieces])
        if together is None and len(self._pieces) > 1:
            needed = [c for c in commits if c.version > after]
            together = decode_commits(needed)
            self._start, self._pieces = after, [(through, together)]
        return together

    def rows(self, pinned: object, fold: Callable[[], DataFrame]) -> DataFrame:
        """The read of the pair ``pinned``: the last one's if it was of the same pair, else
        ``fold()`` (kept for the next read)."""
        if self._rows is None or pinned != self._pinned:
            self._rows, self._pinned = fold(), pinned
        return self._rows


def _shape(layout: RowLayout) -> tuple[Any, ...]:
    """What decides how a decoded tail of ``layout`` is planned: the layout with each
    column's decoder named, not compared by identity (a decoded tail's columns are already
    decoded: their decoders are made afresh for each tail, each keeping its value)."""

    def codec(c: ColumnCodec) -> tuple[Any, ...]:
        return (c.name, c.raw_type, c.decode.__qualname__, c.toastable, c.staged, c.decoded_type)

    return (
        tuple(codec(c) for c in layout.keys),
        tuple(codec(c) for c in layout.columns),
        tuple((codec(c), reason) for c, reason in layout.refused),
        layout.checked,
        layout.rescues,
        layout.defaults,
    )


def fold_tail(
    spec: TableSpec,
    tables: EntityTables,
    snapshot: Snapshot,
    tail: DataFrame,
    checks: TableChecks | None = None,
    schemas: SchemaCache | None = None,
) -> DataFrame:
    """The rows of silver's table after applying the bronze rows ``tail`` to ``snapshot`` as one
    micro-batch: :func:`decode_tail` (which see for the arguments), then :func:`fold_checked`.

    Raises:
        SchemaChangeError: see :func:`decode_tail`.
        ExpectationFailedError: a ``fail`` expectation broke in the tail.
    """
    checked = decode_tail(spec, tables, snapshot.columns, tail, checks, schemas)
    return fold_checked(snapshot, checked)


def fold_checked(snapshot: Snapshot, checked: Checked) -> DataFrame:
    """The rows of silver's table after applying the decoded tail ``checked`` to ``snapshot``:
    the plan stage as :func:`silver.job.apply_batch` runs it, the writes' result computed by
    :func:`merged`.

    Two small things are computed here and kept: the table's rows whose keys the tail holds
    (one pass over the table, joined with the tail's keys broadcast), and what the MERGE
    leaves of those rows and of the tail's new keys (:func:`merged` over them alone, the
    newest change per key computed within). The result is then the table's other rows (one pass,
    those keys broadcast, no shuffle; a row older than the tail's truncate left out) and the
    kept rows: the rows themselves are read when the result is.
    """
    keys = checked.decoded.kept.key_names
    touched = listed = orders = None
    if keys:
        wanted = F.broadcast(checked.events.select(*keys))
        parts = []
        if snapshot.rows is not None:
            touched = snapshot.rows.join(wanted, list(keys), "left_semi").localCheckpoint()
            listed = touched.select(*keys, order_of().alias("_current"))
            parts.append(listed)
        if snapshot.tombstones is not None:
            parts.append(snapshot.tombstones.select(*keys, order_of().alias("_current")))
        orders = reduce(DataFrame.unionByName, parts) if parts else None
    writes = plan(checked, Current(snapshot.floor, orders))
    truncate = checked.decoded.counts[NEWEST_TRUNCATE]
    if writes.merge is None or snapshot.rows is None or touched is None or listed is None:
        return merged(snapshot.rows, writes, truncate, listed)
    # Silver's rows among the tail's keys and the tail's new keys, after the MERGE (small;
    # the newest change per key is computed within, from the kept tail and rows).
    folded = merged(touched, writes, truncate, listed).localCheckpoint()
    # The other rows stay as they are (but for a truncate): the keys the tail touched are
    # exactly those of ``listed``, so the two parts are the table's rows, split by key.
    untouched = _after_truncate(snapshot.rows, writes, truncate).join(
        F.broadcast(listed.select(*keys)), list(keys), "left_anti"
    )
    return folded.unionByName(untouched, allowMissingColumns=True)


def _after_truncate(rows: DataFrame, writes: BatchWrites, truncate: Row | None) -> DataFrame:
    """``rows`` without those older than the batch's newest ``truncate`` (None: all)."""
    if truncate is None or writes.truncates is None:
        return rows
    floor = order_literal(truncate, order_type_of(writes.truncates))
    return rows.where(~F.coalesce(order_of() < floor, F.lit(False)))


def merged(
    rows: DataFrame | None,
    writes: BatchWrites,
    truncate: Row | None,
    listed: DataFrame | None = None,
) -> DataFrame:
    """The rows :func:`silver.write.write` leaves in a table holding ``rows`` after it wrote
    ``writes`` (pure): the rows older than ``truncate`` (the batch's newest truncate; None:
    none) removed, then the MERGE of :func:`silver.tables.merge_silver` applied: a newer
    delete removes the key's row, a newer upsert replaces it (a partial column resolved as
    the MERGE resolves it), an upsert of a new key inserts it.

    The batch's changes (one per key) are the small side: the table's rows are read in one
    pass joined with them broadcast, its key column once more to find the batch's new keys
    (unless ``listed`` gives them: the key and order, ``_current``, of the rows among the
    batch's keys); the table is not shuffled. The columns are the table's, then those the
    batch adds; with neither a table nor a keyed change, an empty frame of no columns.
    """
    if rows is not None and truncate is not None and writes.truncates is not None:
        rows = _after_truncate(rows, writes, truncate)
        if listed is not None:
            floor = order_literal(truncate, order_type_of(writes.truncates))
            listed = listed.where(~F.coalesce(F.col("_current") < floor, F.lit(False)))
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
    if listed is None:
        listed = rows.select(*keys).join(F.broadcast(source.select(*keys)), keys, "left_semi")
    else:
        listed = listed.select(*keys)
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
