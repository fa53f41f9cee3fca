"""Generic Delta table I/O every layer uses: exactly-once appends and DML, table creation and
schema growth, properties, maintenance and log inspection (I/O only).

Table properties are changed with ``ALTER TABLE delta.`<path>` ...`` (the Python API has no
property setter); the path is quoted (backquotes doubled) and the property and values are
constants. Everything else uses the ``DeltaTable`` Python API, but for the few rows of
bookkeeping and of a gold micro-batch (:func:`append_held`, :func:`append_few`,
:func:`replace_once`), which ``deltalake`` writes to a local table from the driver, and the
small local tables and schemas ``deltalake`` reads there (:func:`read_table`,
:class:`EnsuredTables`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from enum import Enum
from posixpath import basename
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from delta.tables import DeltaMergeBuilder, DeltaTable
from deltalake import CommitProperties, write_deltalake
from deltalake import DeltaTable as DeltaLakeTable
from deltalake.exceptions import DeltaError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructField, StructType

from lakehouse_core import storage
from lakehouse_core.errors import TableNotFoundError
from lakehouse_core.identifiers import quote_identifier
from lakehouse_core.layout import is_uri
from lakehouse_core.widening import TableChanges, TypeWidening, table_changes

_log = logging.getLogger(__name__)

#: Delta refuses VACUUM below this retention unless its safety check is disabled.
DELTA_SAFE_RETENTION_HOURS = 168
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
APPEND_ONLY = "delta.appendOnly"
#: Whether Delta copies a MERGE's source before reading it (``auto``: whenever the source is
#: not only Delta scans, which a local checkpoint is not).
MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"


@dataclass(frozen=True)
class FileStats:
    """Data files of a table's current version, and of its directory on disk."""

    files: int
    bytes: int
    files_on_disk: int


@contextmanager
def session_settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Set Spark session settings for the block, then restore their previous values."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def session_setting(spark: SparkSession, key: str, value: str) -> AbstractContextManager[None]:
    """Set one Spark session setting for the block (:func:`session_settings`)."""
    return session_settings(spark, {key: value})


def merge_materialized(merge: DeltaMergeBuilder, source: DataFrame) -> None:
    """Run ``merge`` without Delta's own copy of its ``source``.

    Delta copies a source that is not only Delta scans so that its two passes (find the
    files with matches, rewrite them) read the same rows; ``source`` must therefore already
    be materialized (a local checkpoint, as :func:`lakehouse_core.frames.kept_with_totals` makes).
    Both passes then read the rows it holds, and the MERGE runs one Spark job less.
    """
    with session_setting(source.sparkSession, MATERIALIZE_SOURCE, "none"):
        merge.execute()


def commit_message(spark: SparkSession, text: str) -> AbstractContextManager[None]:
    """Record ``text`` as ``userMetadata`` in the history of every commit made in the block."""
    return session_setting(spark, USER_METADATA, text)


def quoted_path(path: str) -> str:
    """``delta.`<path>``` for a SQL statement (backquotes in the path doubled)."""
    return "delta.`" + path.replace("`", "``") + "`"


def table_property(spark: SparkSession, path: str, key: str) -> str | None:
    """The value of table property ``key`` of the Delta table at ``path`` (None if unset).

    Read from the table's metadata (``SHOW TBLPROPERTIES``, no Spark job), not from
    ``DeltaTable.detail()``, which also counts the table's files."""
    rows = spark.sql(f"SHOW TBLPROPERTIES {quoted_path(path)}").collect()
    return next((str(row.value) for row in rows if row.key == key), None)


def table_flag(spark: SparkSession, path: str, key: str) -> bool:
    """Whether the boolean table property ``key`` of the Delta table at ``path`` is on."""
    return (table_property(spark, path, key) or "").lower() == "true"


def set_append_only(spark: SparkSession, path: str, enabled: bool) -> None:
    """Set ``delta.appendOnly`` on the table at ``path``."""
    value = "true" if enabled else "false"
    spark.sql(f"ALTER TABLE {quoted_path(path)} SET TBLPROPERTIES ('{APPEND_ONLY}' = '{value}')")


@contextmanager
def rewritable(spark: SparkSession, path: str, reason: str) -> Iterator[None]:
    """Lift ``delta.appendOnly`` for the block and restore it afterwards, even on failure.

    Every commit of the block, including both property changes, records ``reason``.
    """
    with commit_message(spark, reason):
        set_append_only(spark, path, False)
        try:
            yield
        finally:
            set_append_only(spark, path, True)


def vacuum(spark: SparkSession, path: str, retention_hours: float) -> None:
    """VACUUM with ``retention_hours``; Delta's minimum-retention check is disabled for this
    call only when the retention is below Delta's safe default."""
    check_off = (
        session_setting(spark, RETENTION_CHECK, "false")
        if retention_hours < DELTA_SAFE_RETENTION_HOURS
        else nullcontext()
    )
    with check_off:
        DeltaTable.forPath(spark, path).vacuum(float(retention_hours))


def optimize(spark: SparkSession, path: str) -> None:
    """Compact the small files of the table's current version (bin-packing)."""
    DeltaTable.forPath(spark, path).optimize().executeCompaction()


def file_stats(spark: SparkSession, path: str) -> FileStats:
    detail = DeltaTable.forPath(spark, path).detail().select("numFiles", "sizeInBytes").first()
    assert detail is not None
    return FileStats(int(detail.numFiles), int(detail.sizeInBytes), files_on_disk(spark, path))


def files_on_disk(spark: SparkSession, path: str) -> int:
    """Parquet files under a table directory (data and change data, not the log)."""
    return sum(1 for f in storage.files_under(spark, path, ".parquet") if "/_delta_log/" not in f)


def current_version(spark: SparkSession, path: str) -> int:
    """The table's newest version, read on the driver from the commit files of its log
    (Delta's history is a Spark job per read; a run asked this of every bronze table).

    Raises:
        TableNotFoundError: no Delta table with a commit is at ``path``.
    """
    versions = _commit_versions(spark, path)
    if not versions:
        raise TableNotFoundError(f"No Delta table at {path}: its _delta_log holds no commit.")
    return max(versions)


def versions(spark: SparkSession, path: str) -> list[int]:
    """Every version still listed in the table's log, oldest first."""
    rows = DeltaTable.forPath(spark, path).history().select("version").collect()
    return sorted(int(r.version) for r in rows)


def readable_version(spark: SparkSession, path: str, version: int) -> DataFrame | None:
    """The table as of ``version`` if every data file of that version still exists, else None
    (VACUUM removed some: the version can no longer be read)."""
    frame = spark.read.format("delta").option("versionAsOf", version).load(path)
    if all(storage.exists(spark, unquote(f)) for f in frame.inputFiles()):
        return frame
    return None


def change_feed_readable(spark: SparkSession, path: str, version: int) -> bool:
    """Whether every file the change feed of ``version`` reads still exists (at any URI).

    As the Delta protocol defines the change feed of a commit: its ``cdc`` files when it has
    any, else the data files it adds and removes. Checked from the commit's JSON, without
    reading (a read of a vacuumed file fails in a Spark task, which logs an error).
    """
    commit = storage.read_text(spark, f"{path}/_delta_log/{version:020d}.json")
    if commit is None:
        return False  # log cleanup removed the commit: its changes cannot be read
    actions = [json.loads(line) for line in commit.splitlines() if line.strip()]
    changes = [a["cdc"]["path"] for a in actions if "cdc" in a]
    if not changes:
        changes = [
            action[kind]["path"]
            for action in actions
            for kind in ("add", "remove")
            if kind in action and action[kind].get("dataChange", True)
        ]
    return all(storage.exists(spark, _in_table(path, file)) for file in changes)


def change_feed_complete(spark: SparkSession, path: str) -> bool:
    """Whether the change feed of every version of the table at ``path`` can still be read:
    its log still begins at version 0 and it was never vacuumed (VACUUM deletes the files the
    older versions' changes are read from; Delta logs every VACUUM in the table's history)."""
    if not storage.exists(spark, f"{path}/_delta_log/{0:020d}.json"):
        return False
    history = DeltaTable.forPath(spark, path).history().select("operation")
    return history.where(F.col("operation").startswith("VACUUM")).isEmpty()


def _in_table(table: str, file: str) -> str:
    """The location of a file a Delta log names: an absolute URI as is, a relative (URL-encoded)
    path under the table's directory."""
    if urlparse(file).scheme:
        return file
    return f"{table.rstrip('/')}/{unquote(file)}"


def replace_contents(spark: SparkSession, frame: DataFrame, path: str) -> bool:
    """Make the Delta table at ``path`` hold ``frame``'s rows and schema; the rows change in one
    commit (a reader sees the old rows or the new ones), and the table keeps its identity and
    history. Returns whether the table's metadata was kept as it was.

    Same schema (names, order, types, nullability): a plain overwrite, which keeps every
    column's NOT NULL and the table's properties. Another schema is replaced with it
    (``overwriteSchema``), and then Delta makes every column nullable: a write cannot declare
    NOT NULL, and ``ALTER TABLE`` cannot add it to a column that holds rows.
    """
    same = spark.read.format("delta").load(path).schema == frame.schema
    writer = frame.write.format("delta").mode("overwrite")
    if not same:
        writer = writer.option("overwriteSchema", "true")
    writer.save(path)
    return same


def has_commit(spark: SparkSession, path: str, message: str) -> bool:
    """Whether a commit of the Delta table at ``path`` carries ``message`` as its
    ``userMetadata`` (see :func:`commit_message`)."""
    history = DeltaTable.forPath(spark, path).history().select("userMetadata")
    return not history.where(F.col("userMetadata") == message).isEmpty()


def forget_cached_logs(spark: SparkSession) -> None:
    """Drop the session's cached Delta logs, after table directories were swapped on disk."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


def table_exists(spark: SparkSession, path: str) -> bool:
    return DeltaTable.isDeltaTable(spark, path)


#: A committed version in a ``_delta_log``: a commit file or a checkpoint (``.crc``, temporary
#: and hidden files are not).
_COMMITTED = re.compile(r"^\d{20}\.(json|checkpoint(\.\d+\.\d+)?\.parquet)$|^_last_checkpoint$")


def committed_log(spark: SparkSession, path: str) -> bool:
    """Whether the ``_delta_log`` of ``path`` holds a committed version (a commit file or a
    checkpoint)."""
    return any(_COMMITTED.match(name) for name in storage.names(spark, f"{path}/_delta_log"))


#: A commit file of a ``_delta_log``: its version, 20 digits, and ``.json``.
COMMIT_FILE = re.compile(r"^(\d{20})\.json$")


def newest_commit_messages(
    spark: SparkSession, path: str, limit: int
) -> Iterator[tuple[int, str | None]]:
    """The version and ``userMetadata`` of the table's newest commits (at most ``limit``),
    newest first; none if the table has no commit. Read on the driver from the commit files
    of its log, one by one as they are asked for: Delta's history is a Spark job per read, and
    brings the table's state up to date first."""
    log = f"{path}/_delta_log"
    for version in sorted(_commit_versions(spark, path), reverse=True)[:limit]:
        commit = storage.read_text(spark, f"{log}/{version:020d}.json")
        if commit is not None:  # gone meanwhile: the log's cleanup removed it
            yield version, commit_user_metadata(commit)


def _commit_versions(spark: SparkSession, path: str) -> list[int]:
    """The versions of the commit files in the log of the table at ``path`` (the log's cleanup
    keeps the newest)."""
    names = storage.names(spark, f"{path}/_delta_log")
    return [int(match[1]) for match in map(COMMIT_FILE.match, names) if match]


def commit_user_metadata(commit: str) -> str | None:
    """The ``userMetadata`` of a commit file's ``commitInfo`` action (None: it has none)."""
    for line in commit.splitlines():
        action = json.loads(line) if line.strip() else {}
        if "commitInfo" in action:
            text = action["commitInfo"].get("userMetadata")
            return text if isinstance(text, str) else None
    return None


def half_created(spark: SparkSession, path: str) -> bool:
    """Whether ``path`` is a table a kill interrupted before its first commit: a ``_delta_log``
    without a committed version (empty, or only temporary files), or data files and no
    ``_delta_log`` at all. Nothing in such a directory was ever committed, so nothing is lost
    when it goes; an empty directory is not half created (creating there works)."""
    if committed_log(spark, path):
        return False
    entries = storage.names(spark, path)
    return "_delta_log" in entries or any(name.startswith("part-") for name in entries)


def discard_half_created(spark: SparkSession, path: str) -> bool:
    """Delete ``path`` if it is :func:`half_created` (so creating the table starts again);
    returns whether it did."""
    if not half_created(spark, path):
        return False
    storage.delete_tree(spark, path)
    forget_cached_logs(spark)
    return True


#: ``userMetadata`` of the commit of an exactly-once write: the writing query's id and batch.
BATCH_MARK = "lakehouse batch {} {}"
#: Delta's transaction id of the DML a session runs (a write takes them as options).
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
#: Per query id (:func:`lakehouse_core.streaming.query_app_id`): the newest micro-batch its
#: checkpoint had planned when it started. Its later batches cannot have run before.
_planned_at_start: dict[str, int] = {}


def note_query_start(app_id: str, planned: int | None) -> None:
    """Record that the query ``app_id`` started with ``planned`` as the newest micro-batch
    of its checkpoint (None: none), so that its later batches are known to be new."""
    _planned_at_start[app_id] = -1 if planned is None else planned


class _Attempt(Enum):
    """What an exactly-once write of a micro-batch must do (:func:`_attempt`)."""

    #: The batch cannot have run before: write it, marked.
    NEW = "new"
    #: It may have run and did not land: write it, marked and under Delta's transaction id.
    AGAIN = "again"
    #: It landed: write nothing.
    LANDED = "landed"


def _attempt(spark: SparkSession, path: str, app_id: str, batch_id: int) -> _Attempt:
    """Whether micro-batch ``batch_id`` of the query ``app_id`` (or an id derived from it,
    ``<query id>:<role>``) is to be written to the table at ``path``.

    A batch the query's checkpoint had not planned when the query started is new. Only a batch
    that may have run before looks for its mark (:data:`BATCH_MARK`) in the table's history,
    back to the query's newest mark; if it is not there, the write also carries Delta's
    transaction id, which finds the batches written before the marks. Why not the transaction
    id alone: Delta 4.0 looks it up by reconstructing the table's state, a Spark job of three
    stages on every commit.
    """
    planned = _planned_at_start.get(app_id.partition(":")[0])
    if planned is not None and batch_id > planned:
        return _Attempt.NEW
    return _Attempt.LANDED if _marked(spark, path, app_id, batch_id) else _Attempt.AGAIN


def append(
    frame: DataFrame, path: str, app_id: str, batch_id: int, merge_schema: bool = True
) -> None:
    """Append ``frame`` as micro-batch ``batch_id`` of the query ``app_id`` exactly once: a
    batch run again after a crash adds nothing (:func:`_attempt`)."""
    todo = _attempt(frame.sparkSession, path, app_id, batch_id)
    if todo is not _Attempt.LANDED:
        _append_through_spark(frame, path, todo, app_id, batch_id, merge_schema)


def _append_through_spark(
    frame: DataFrame,
    path: str,
    todo: _Attempt,
    app_id: str,
    batch_id: int,
    merge_schema: bool = True,
) -> None:
    """Spark's append of ``frame`` as micro-batch ``batch_id`` of ``app_id`` (``todo``: new
    or again), marked, and again under Delta's transaction id."""
    writer = frame.write.format("delta").mode("append").option("mergeSchema", merge_schema)
    if todo is _Attempt.AGAIN:
        writer = writer.option("txnAppId", app_id).option("txnVersion", batch_id)
    writer.option("userMetadata", BATCH_MARK.format(app_id, batch_id)).save(path)


def append_held(
    spark: SparkSession,
    rows: Sequence[Mapping[str, object]],
    schema: StructType,
    path: str,
    batch: tuple[str, int] | None = None,
) -> None:
    """Append ``rows`` (a few rows the driver holds, such as quality metrics and the event
    log's; a column a row lacks is null) of ``schema``, creating the table or adding the
    columns it lacks; with ``batch`` (a query's exactly-once id and a micro-batch id), as that
    micro-batch exactly once, like :func:`append`.

    A table on a local disk is written from the driver by ``deltalake`` (delta-rs): no Spark
    job, and no state of the table rebuilt in Spark. Its commit carries the same mark
    (``userMetadata``) and is numbered by the same atomic rule (a commit file is created only
    if absent), so Spark's writers and this one may append side by side. A table at a URI
    (which only the session's file systems reach) and a micro-batch that may have run before
    (it needs Delta's transaction id) are appended through Spark.
    """
    todo = _Attempt.NEW if batch is None else _attempt(spark, path, *batch)
    if todo is _Attempt.LANDED or not rows:
        return
    held = pa.Table.from_pylist(list(rows), schema=to_arrow_schema(schema))
    if todo is _Attempt.NEW and not is_uri(path):
        _append_from_driver(path, held, None if batch is None else BATCH_MARK.format(*batch))
        return
    frame = spark.createDataFrame(held, schema)
    if batch is None:
        frame.write.format("delta").mode("append").option("mergeSchema", "true").save(path)
    else:
        append(frame, path, *batch)


def dml_once(
    spark: SparkSession, path: str, app_id: str, batch_id: int, dml: Callable[[], object]
) -> None:
    """Run ``dml`` (a MERGE or DELETE: one commit to the table at ``path``) as micro-batch
    ``batch_id`` of the query ``app_id`` exactly once (:func:`_attempt`)."""
    todo = _attempt(spark, path, app_id, batch_id)
    if todo is _Attempt.LANDED:
        return
    with session_settings(spark, _batch_settings(todo, app_id, batch_id)):
        dml()


def _batch_settings(todo: _Attempt, app_id: str, batch_id: int) -> dict[str, str]:
    """The session settings of a DML written as micro-batch ``batch_id`` of the query
    ``app_id``: its mark, and Delta's transaction id if it may have run before."""
    settings = {USER_METADATA: BATCH_MARK.format(app_id, batch_id)}
    if todo is _Attempt.AGAIN:
        settings |= {TXN_APP_ID: app_id, TXN_VERSION: str(batch_id)}
    return settings


#: The most rows of a micro-batch's write (:func:`replace_once`, :func:`append_few`) the
#: driver collects and writes itself; a larger one is written by Spark.
HELD_ROWS = 100_000


@dataclass(frozen=True)
class Replacement:
    """A keyed replacement of rows: each source row replaces the target row of the same
    ``key`` (null equal to null) in ``columns``, or is inserted; a source row whose
    ``present`` column is false deletes it instead."""

    key: tuple[str, ...]
    columns: tuple[str, ...]
    present: str


@dataclass(frozen=True)
class HeldRows:
    """Rows the driver holds, to be committed with ``mark`` as the commit's ``userMetadata``."""

    rows: pa.Table
    mark: str


def replace_once(
    spark: SparkSession,
    path: str,
    changes: DataFrame,
    batch: tuple[str, int],
    replace: Callable[[DataFrame | HeldRows], object],
) -> None:
    """Run ``replace`` (one commit to the table at ``path``, such as :func:`merge_held`) on
    ``changes`` as micro-batch ``batch`` (a query's exactly-once id and a batch id) exactly
    once, like :func:`dml_once`.

    A new batch of at most :data:`HELD_ROWS` rows to a table on a local disk is
    collected (one Spark job) and handed over as :class:`HeldRows`, to be written from the
    driver: none of a Spark MERGE's four or five jobs. Otherwise, or if ``deltalake`` cannot
    write the table (a table feature it lacks), ``replace`` gets ``changes`` kept (a local
    checkpoint) and runs under the batch's mark and transaction id. A replacement applied
    twice changes nothing, so falling back after a failed attempt is safe.
    """
    todo = _attempt(spark, path, *batch)
    if todo is _Attempt.LANDED:
        return
    mark = BATCH_MARK.format(*batch)
    rows = _collected(changes, path, todo)
    if rows is not None:
        try:
            replace(HeldRows(rows, mark))
            return
        except DeltaError as error:
            _log.info("deltalake cannot write %s (%s): Spark does", path, error)
        changes = spark.createDataFrame(rows, changes.schema)
    with session_settings(spark, _batch_settings(todo, *batch)):
        replace(changes.localCheckpoint())


def append_few(frame: DataFrame, path: str, app_id: str, batch_id: int) -> None:
    """:func:`append` of a frame of few rows (a batch's late events), nothing if it has none.

    A new batch of at most :data:`HELD_ROWS` rows to a table on a local disk is collected (one
    Spark job) and appended from the driver by ``deltalake`` with the batch's mark, as
    :func:`append_held` does; otherwise it is kept, and appended by Spark if it has rows."""
    spark = frame.sparkSession
    todo = _attempt(spark, path, app_id, batch_id)
    if todo is _Attempt.LANDED:
        return
    rows = _collected(frame, path, todo)
    if rows is not None:
        if rows.num_rows:
            _append_from_driver(path, rows, BATCH_MARK.format(app_id, batch_id))
        return
    kept = frame.localCheckpoint()
    if not kept.isEmpty():
        _append_through_spark(kept, path, todo, app_id, batch_id)


def _append_from_driver(path: str, rows: pa.Table, mark: str | None) -> None:
    """Append ``rows`` to the table at ``path`` (created, or given the columns it lacks) with
    ``deltalake``, the commit marked ``mark`` (its ``userMetadata``; None: unmarked)."""
    metadata = {} if mark is None else {"userMetadata": mark}
    commit = CommitProperties(custom_metadata=metadata)
    write_deltalake(path, rows, mode="append", schema_mode="merge", commit_properties=commit)


def _collected(frame: DataFrame, path: str, todo: _Attempt) -> pa.Table | None:
    """The rows of ``frame`` collected for the driver to write to the table at ``path`` (one
    Spark job): for a new batch (``todo``) to a local table, unless it has more than
    :data:`HELD_ROWS` rows (None: Spark writes it)."""
    if todo is not _Attempt.NEW or is_uri(path):
        return None
    rows = frame.limit(HELD_ROWS + 1).toArrow()
    return rows if rows.num_rows <= HELD_ROWS else None


def merge_held(path: str, held: HeldRows, replacement: Replacement) -> None:
    """Merge the rows ``held`` into the table at ``path`` by ``replacement``, from the driver
    with ``deltalake`` (no Spark job), in one commit marked as ``held`` says."""
    if held.rows.num_rows == 0:
        return
    same = " AND ".join(
        f"(t.{_sql_name(k)} IS NOT DISTINCT FROM s.{_sql_name(k)})" for k in replacement.key
    )
    present = f"s.{_sql_name(replacement.present)}"
    values = {_sql_name(c): f"s.{_sql_name(c)}" for c in replacement.columns}
    commit = CommitProperties(custom_metadata={"userMetadata": held.mark})
    (
        DeltaLakeTable(path)
        .merge(held.rows, same, source_alias="s", target_alias="t", commit_properties=commit)
        .when_matched_delete(predicate=f"NOT {present}")
        .when_matched_update(updates=values)
        .when_not_matched_insert(updates=values, predicate=present)
        .execute()
    )


def insert_missing_held(path: str, held: HeldRows, key: tuple[str, ...]) -> None:
    """Insert the rows ``held`` whose ``key`` (equal, not null-safe) the table at ``path``
    lacks, from the driver with ``deltalake`` (no Spark job), in one commit marked as
    ``held`` says; nothing without rows."""
    if held.rows.num_rows == 0:
        return
    same = " AND ".join(f"t.{_sql_name(k)} = s.{_sql_name(k)}" for k in key)
    commit = CommitProperties(custom_metadata={"userMetadata": held.mark})
    (
        DeltaLakeTable(path)
        .merge(held.rows, same, source_alias="s", target_alias="t", commit_properties=commit)
        .when_not_matched_insert_all()
        .execute()
    )


def read_table(spark: SparkSession, path: str) -> DataFrame:
    """The table at ``path`` as a frame: read by ``deltalake`` on the driver if it is a local
    table of at most :data:`HELD_ROWS` rows (counted in its log's file statistics) that
    ``deltalake`` reads, which takes no Spark job and computes no Delta snapshot in Spark (a
    table the driver writes would need one each batch); else by Spark."""
    held = _held(path)
    if held is None:
        return spark.read.format("delta").load(path)
    rows, schema = held
    # Spark takes no Arrow table without chunks (that of an empty table).
    return (
        spark.createDataFrame(rows, schema) if rows.num_rows else spark.createDataFrame([], schema)
    )


def read_held(path: str, columns: Sequence[str] | None = None) -> pa.Table | None:
    """The rows (their ``columns``, or all) of the table at ``path`` read by ``deltalake`` on
    the driver if it is a local table of at most :data:`HELD_ROWS` rows that ``deltalake``
    reads: no Spark job. None: Spark must read it."""
    held = _held(path, columns)
    return None if held is None else held[0]


def _held(path: str, columns: Sequence[str] | None = None) -> tuple[pa.Table, StructType] | None:
    """See :func:`read_held`; with the table's schema as Spark's."""
    if is_uri(path):
        return None
    try:
        table = DeltaLakeTable(path)
        counts = pa.table(table.get_add_actions(flatten=True)).column("num_records")
        if counts.null_count or (pc.sum(counts).as_py() or 0) > HELD_ROWS:
            return None
        rows = table.to_pyarrow_table(columns=None if columns is None else list(columns))
        return rows, _spark_schema(table)
    except (DeltaError, pa.ArrowException) as error:
        _log.info("deltalake cannot read %s (%s): Spark does", path, error)
        return None


def read_files(
    spark: SparkSession, path: str, version: int, names: Sequence[str]
) -> DataFrame | None:
    """The rows of the data files ``names`` (by file name) of the table at ``path`` as of
    ``version``, read by ``deltalake`` on the driver when it is a local, unpartitioned table
    without reader features (deletion vectors, column mapping) and the files hold at most
    :data:`HELD_ROWS` rows: no Delta snapshot is computed in Spark and no job lists its
    files. The frame is an RDD's (its plans run in Spark's tasks, compiled, not evaluated on
    the driver as a local relation's are). None: Spark reads them."""
    if is_uri(path):
        return None
    wanted = set(names)
    try:
        table = DeltaLakeTable(path, version=version)
        protocol = table.protocol()
        if protocol.min_reader_version > 1 or table.metadata().partition_columns:
            return None
        dataset = table.to_pyarrow_dataset()
        chosen = [f for f in dataset.get_fragments() if unquote(basename(f.path)) in wanted]
        files = ds.FileSystemDataset(chosen, dataset.schema, dataset.format, dataset.filesystem)
        if files.count_rows() > HELD_ROWS:
            return None
        rows = files.to_table()
        schema = _spark_schema(table)
    except (DeltaError, pa.ArrowException, OSError) as error:
        _log.info("deltalake cannot read %s (%s): Spark does", path, error)
        return None
    if not rows.num_rows:
        return spark.createDataFrame([], schema)
    with session_setting(spark, "spark.sql.execution.arrow.localRelationThreshold", "0"):
        return spark.createDataFrame(rows, schema)


def _spark_schema(table: DeltaLakeTable) -> StructType:
    """The schema of a table ``deltalake`` opened, as Spark's (Delta logs Spark's JSON form)."""
    return StructType.fromJson(json.loads(table.schema().to_json()))


def _sql_name(name: str) -> str:
    """``name`` as an identifier of ``deltalake``'s SQL (double quotes, doubled inside)."""
    return '"' + name.replace('"', '""') + '"'


def _marked(spark: SparkSession, path: str, app_id: str, batch_id: int) -> bool:
    """Whether the newest commit marked for ``app_id`` in the table at ``path`` is of batch
    ``batch_id`` or a later one (read from the newest commit back, in pages)."""
    if not table_exists(spark, path):
        return False
    prefix = BATCH_MARK.format(app_id, "")
    limit = 16
    while True:
        rows = DeltaTable.forPath(spark, path).history(limit).select("userMetadata").collect()
        for row in rows:  # newest first
            if (row.userMetadata or "").startswith(prefix):
                return int(row.userMetadata[len(prefix) :]) >= batch_id
        if len(rows) < limit:
            return False
        limit *= 4


#: Table property that lets Delta widen column types in place (see :mod:`lakehouse_core.widening`).
TYPE_WIDENING_PROPERTY = "delta.enableTypeWidening"
#: Table property that lets DML mark replaced rows in deletion vectors instead of rewriting
#: their files.
DELETION_VECTORS_PROPERTY = "delta.enableDeletionVectors"


def ensure_table(
    spark: SparkSession,
    path: str,
    schema: StructType,
    change_feed: bool,
    widening: TypeWidening = "in_place",
    deletion_vectors: bool = False,
    defaults: Mapping[str, Column] | None = None,
) -> None:
    """Make the table at ``path`` able to take rows of ``schema``: create it if missing; add
    the columns it lacks; widen the columns whose type in ``schema`` is a Delta type widening
    of the table's, and rewrite those that become text (integers, booleans, dates: their
    values as their text; :mod:`lakehouse_core.widening`) in one overwrite commit whatever
    ``widening`` says. Narrower or incompatible types are left as they are. Columns keep the
    metadata ``schema`` gives them when they are created or added.

    ``defaults``: an added column named here gets that value (a literal expression) in every
    row the table holds, in one overwrite commit that also makes every other change (so no
    reader sees the column without it, and a crash leaves all or nothing).

    A table a kill left half created (:func:`half_created`) is created again.
    Tables are created without Delta's type widening feature, so every Delta reader opens
    them. The first widening either turns the feature on (``in_place``: no data is rewritten,
    a warning names the table) or rewrites the table in the wider types (``rewrite``: one
    overwrite commit; its change feed shows every row deleted and inserted again).
    ``deletion_vectors``: the table gets (or keeps) Delta's deletion vectors; a warning names
    it when they are turned on.
    """
    if not table_exists(spark, path):
        discard_half_created(spark, path)
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
        if change_feed:
            builder = builder.property("delta.enableChangeDataFeed", "true")
        if deletion_vectors:
            builder = builder.property(DELETION_VECTORS_PROPERTY, "true")
        builder.execute()
        if deletion_vectors:
            _warn_deletion_vectors(path)
        return
    if deletion_vectors and not has_deletion_vectors(spark, path):
        spark.sql(
            f"ALTER TABLE {quoted_path(path)} "
            f"SET TBLPROPERTIES ('{DELETION_VECTORS_PROPERTY}' = 'true')"
        )
        _warn_deletion_vectors(path)
    current = spark.read.format("delta").load(path)
    changes = table_changes(current.schema, schema)
    fills = {f.name: (defaults or {})[f.name] for f in changes.added if f.name in (defaults or {})}
    # A column becoming text is no Delta widening: only a rewrite changes it.
    if fills or changes.retyped or ((changes.widened or changes.altered) and widening == "rewrite"):
        _rewrite_wider(current, path, changes, fills)
        return
    if changes.widened or changes.altered:
        _enable_type_widening(spark, path)
    if changes.added or changes.widened:
        # One commit adds the columns and applies the widenings Delta's schema evolution takes.
        empty = spark.createDataFrame([], StructType([*changes.added, *changes.widened]))
        empty.write.format("delta").mode("append").option("mergeSchema", "true").save(path)
    for field in changes.altered:
        spark.sql(
            f"ALTER TABLE {quoted_path(path)} ALTER COLUMN "
            f"{quote_identifier(field.name, 'column name')} TYPE {field.dataType.simpleString()}"
        )


class EnsuredTables:
    """The schema a streaming query last made each of its tables able to take
    (:func:`ensure_table`), so that its next micro-batches of the same schema skip the check.

    Only the query writes its tables while it runs, so a table that took a schema still takes
    it; a new query starts with an empty memo."""

    def __init__(self) -> None:
        self._schemas: dict[str, StructType] = {}

    def ensure(
        self,
        spark: SparkSession,
        path: str,
        schema: StructType,
        change_feed: bool,
        widening: TypeWidening = "in_place",
        deletion_vectors: bool = False,
        defaults: Mapping[str, Column] | None = None,
    ) -> bool:
        """:func:`ensure_table` unless the table already took ``schema`` in this query or
        takes it as it is (checked from the driver); returns whether the table was checked."""
        if self._schemas.get(path) == schema:
            return False
        if not _takes_already(path, schema, deletion_vectors):
            ensure_table(spark, path, schema, change_feed, widening, deletion_vectors, defaults)
        self._schemas[path] = schema
        return True


def _takes_already(path: str, schema: StructType, deletion_vectors: bool) -> bool:
    """Whether the local table at ``path`` exists and takes rows of ``schema`` as it is (with
    deletion vectors, if asked), read by ``deltalake`` on the driver: no Spark job, no Delta
    snapshot. False when unsure (:func:`ensure_table` decides)."""
    if is_uri(path):
        return False
    try:
        table = DeltaLakeTable(path)
        current = _spark_schema(table)
        properties = table.metadata().configuration
    except DeltaError:
        return False
    if deletion_vectors and properties.get(DELETION_VECTORS_PROPERTY) != "true":
        return False
    return not table_changes(current, schema)


def _rewrite_wider(
    current: DataFrame,
    path: str,
    changes: TableChanges,
    fills: Mapping[str, Column] | None = None,
) -> None:
    """Overwrite the table with its rows in the wider types and the added columns (null, or
    their value in ``fills``)."""
    wider = {f.name: f for f in (*changes.widened, *changes.altered, *changes.retyped)}

    def column(name: str) -> Column:
        kept = F.col("`" + name.replace("`", "``") + "`")
        if name not in wider:
            return kept
        return kept.cast(wider[name].dataType).alias(name, metadata=current.schema[name].metadata)

    def added(field: StructField) -> Column:
        value = (fills or {}).get(field.name, F.lit(None))
        return value.cast(field.dataType).alias(field.name, metadata=field.metadata)

    columns = [column(name) for name in current.columns]
    columns += [added(f) for f in changes.added]
    (
        current.select(*columns)
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .save(path)
    )


def has_deletion_vectors(spark: SparkSession, path: str) -> bool:
    """Whether DML on the table at ``path`` writes deletion vectors."""
    return table_flag(spark, path, DELETION_VECTORS_PROPERTY)


def purge_deletion_vectors(spark: SparkSession, path: str) -> None:
    """Rewrite the table at ``path`` without the rows its deletion vectors mark deleted (until
    then they are still in its files; a later VACUUM removes the old files): its current rows
    written again as a rearrangement (``dataChange`` false: no change feed, streams skip it).

    Not ``REORG TABLE ... APPLY (PURGE)``: Delta 4.0.0's fails on Spark 4.0.3 with a
    NoSuchMethodError; nor OPTIMIZE, which leaves a file alone in its bin as it is."""
    rows = spark.read.format("delta").load(path)
    rows.write.format("delta").mode("overwrite").option("dataChange", "false").save(path)


def _warn_deletion_vectors(path: str) -> None:
    _log.warning(
        "Delta table %s uses deletion vectors (deletion_vectors = true): readers need the "
        "deletionVectors table feature (delta-rs's SQL reader has it; its pyarrow and pandas "
        "conversions, and so Polars, refuse the table). Leave deletion_vectors off for tables "
        "every Delta reader must open.",
        path,
    )


def _enable_type_widening(spark: SparkSession, path: str) -> None:
    if not table_flag(spark, path, TYPE_WIDENING_PROPERTY):
        spark.sql(
            f"ALTER TABLE {quoted_path(path)} "
            f"SET TBLPROPERTIES ('{TYPE_WIDENING_PROPERTY}' = 'true')"
        )
        _log.warning(
            "Delta table %s now uses type widening (a column type was widened in place): "
            "readers without the typeWidening table feature, such as delta-rs, can no longer "
            'open it (type_widening = "in_place"). Leave type_widening at its default, '
            '"rewrite", to widen by rewriting the table instead.',
            path,
        )
