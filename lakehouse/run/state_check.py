"""Start-up checks of the state a warehouse keeps, before a command writes it.

Two jobs, each one pass over the warehouse:

- :func:`discard_half_created_tables`: a table a kill interrupted before its first commit
  (:func:`lakehouse_core.delta_io.half_created`) is deleted, so the run creates it again instead of
  failing with ``DELTA_TABLE_NOT_FOUND`` forever;
- :func:`check_damage`: a table whose newest commit is missing, a streaming checkpoint file
  that is cut short, a damaged watermark, heartbeat or history log raises one
  :class:`DamagedStateError` line naming it and the fix, instead of a Java trace or a silent
  ``done`` with wrong results.

The tables of a warehouse are ``<root>/<layer>/<name>`` and ``<root>/_system/<kind>/<entity>``
(or ``<root>/_system/<name>`` for one table of a kind, like the event log); checkpoints are
``<root>/_system/checkpoints/<query>`` (see :class:`lakehouse_core.layout.Warehouse`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from lakehouse_core import storage
from lakehouse_core.checkpoints import POINTER_SUFFIX
from lakehouse_core.delta_io import committed_log, discard_half_created
from lakehouse_core.errors import LakehouseError
from lakehouse_core.layout import HISTORY_SUFFIX, LAYERS, Warehouse, is_uri
from lakehouse_core.streaming import APP_ID_FILE

#: ``_system`` folders that hold no tables (checkpoints, watermarks and the recorded
#: declarations are files; a replay's staging is a whole warehouse that
#: :mod:`lakehouse.run.recovery` finishes or discards).
_NOT_TABLES = frozenset({"checkpoints", "watermarks", "declarations", "replay"})


def table_dirs(spark: SparkSession, root: str) -> Iterator[str]:
    """Every directory of ``root`` where the pipeline keeps a Delta table (existing or half
    created): ``<layer>/<name>``, ``_system/<kind>`` when it is a table itself, else
    ``_system/<kind>/<entity>``."""
    for layer in LAYERS:
        for name in storage.subdirectories(spark, f"{root}/{layer}"):
            if not name.startswith("."):
                yield f"{root}/{layer}/{name}"
    system = f"{root}/_system"
    for kind in storage.subdirectories(spark, system):
        if kind in _NOT_TABLES or kind.startswith("."):
            continue
        entries = storage.names(spark, f"{system}/{kind}")
        if "_delta_log" in entries or any(e.startswith("part-") for e in entries):
            yield f"{system}/{kind}"
            continue
        for entity in storage.subdirectories(spark, f"{system}/{kind}"):
            if not entity.startswith("."):
                yield f"{system}/{kind}/{entity}"


def discard_half_created_tables(spark: SparkSession, root: str) -> list[str]:
    """Delete every table of ``root`` a kill left half created; return their paths relative
    to ``root``. Nothing committed is touched: such a table has no committed version."""
    discarded = []
    for path in table_dirs(spark, root):
        if discard_half_created(spark, path):
            discarded.append(path.removeprefix(f"{root}/"))
    return discarded


class DamagedStateError(LakehouseError):
    """A piece of the warehouse's state is damaged; the message names it and the fix."""


#: A commit file, checksum or checkpoint of a ``_delta_log``, by version.
_LOG_FILE = re.compile(r"^(\d{20})\.(json|crc|checkpoint(?:\.\d+\.\d+)?\.parquet)$")


def table_name(root: str, path: str) -> str:
    """``silver.orders`` for ``<root>/silver/orders``, ``_system.tombstones.orders`` ..."""
    return path.removeprefix(f"{root}/").replace("/", ".")


def rebuild_advice(root: str, path: str) -> str:
    """How to rebuild the table at ``path`` (the fix that exists for its layer)."""
    parts = path.removeprefix(f"{root}/").split("/")
    if parts[0] == "bronze":
        return (
            "bronze is the system of record and cannot be rebuilt from the warehouse: restore "
            "the missing file from a backup, or replay its source into a new warehouse "
            "(lakehouse run --warehouse NEW --source ...)"
        )
    if parts[0] == "silver" or (parts[0] == "_system" and len(parts) == 3):
        entity = parts[-1].removesuffix(HISTORY_SUFFIX)
        return f"rebuild it from bronze: lakehouse replay --table {entity}"
    if parts[0] == "gold":
        return "rebuild it from bronze: lakehouse replay"
    return f"move {path} aside; the next run creates it again (its old rows are not used again)"


#: What :func:`_read` gives for a file that cannot be read: no JSON document, no id.
_UNREADABLE = "\x00 unreadable"


def _read(spark: SparkSession, uri: str) -> str | None:
    """The text of ``uri`` (None: no such file); :data:`_UNREADABLE` where reading fails, as
    Hadoop's local file system does on a file that no longer matches its ``.crc``."""
    try:
        return storage.read_text(spark, uri)
    except Exception:
        return _UNREADABLE


def _log_versions(names: list[str]) -> tuple[int, int]:
    """The newest commit file's version in a ``_delta_log`` listing, and the newest version
    any of its files (checksum, checkpoint, ``_last_checkpoint``) says was committed."""
    newest_json, newest_known = -1, -1
    for name in names:
        matched = _LOG_FILE.match(name)
        if matched:
            version = int(matched.group(1))
            newest_known = max(newest_known, version)
            if matched.group(2) == "json":
                newest_json = max(newest_json, version)
    return newest_json, newest_known


def _json_lines(text: str | None) -> list[Any] | None:
    """The JSON documents of ``text``, one a line (a ``-`` line is None), or None if any line
    is not JSON."""
    if text is None:
        return None
    documents: list[Any] = []
    for line in text.strip().splitlines():
        if line.strip() == "-":
            documents.append(None)
            continue
        try:
            documents.append(json.loads(line))
        except ValueError:
            return None
    return documents


def _check_table(spark: SparkSession, root: str, path: str, required: int) -> tuple[str, int]:
    """Check one table's log; returns its id and newest commit version.

    Raises:
        DamagedStateError: its newest commit is missing (a checksum, checkpoint, or a stream
            that read it, ``required``, says a later version was committed) or cut short.
    """
    log = f"{path}/_delta_log"
    names = storage.names(spark, log)
    newest, known = _log_versions(names)
    if "_last_checkpoint" in names:
        pointer = _json_lines(_read(spark, f"{log}/_last_checkpoint"))
        if not pointer or not isinstance(pointer[0], dict):
            raise DamagedStateError(
                f"{table_name(root, path)} is damaged ({log}/_last_checkpoint is not JSON); "
                "delete that file: Delta then reads the log without it"
            )
        known = max(known, int(pointer[0].get("version", -1)))
    known = max(known, required)
    if newest < known:
        raise DamagedStateError(
            f"{table_name(root, path)} is damaged (its newest commit, version {known}, is "
            f"missing); {rebuild_advice(root, path)}"
        )
    text = _read(spark, f"{log}/{newest:020d}.json")
    if _json_lines(text) is None:
        raise DamagedStateError(
            f"{table_name(root, path)} is damaged (its newest commit, version {newest}, is cut "
            f"short); {rebuild_advice(root, path)}"
        )
    table_id = ""
    first = _json_lines(_read(spark, f"{log}/{0:020d}.json")) or []
    for action in first:
        if isinstance(action, dict) and "metaData" in action:
            table_id = str(action["metaData"].get("id", ""))
    return table_id, newest


def _check_checkpoint(spark: SparkSession, checkpoint: str) -> dict[str, int]:
    """Check the files Spark reads of one streaming checkpoint; returns, per Delta table id
    the query reads, the newest version its offsets say it read.

    Raises:
        DamagedStateError: its newest ``offsets``/``commits`` file (or a source's start file)
            is cut short or not JSON; the message names the file and the fix.
    """
    query = checkpoint.rsplit("/", 1)[-1]
    read: dict[str, int] = {}
    metadata = f"{checkpoint}/metadata"
    if storage.exists(spark, metadata) and not _json_lines(_read(spark, metadata)):
        raise DamagedStateError(_checkpoint_advice(query, metadata, "metadata", 0))
    for kind in ("commits", "offsets"):
        batches = sorted(
            int(n) for n in storage.names(spark, f"{checkpoint}/{kind}") if n.isdigit()
        )
        for batch in batches[-2:] if kind == "offsets" else batches[-1:]:
            file = f"{checkpoint}/{kind}/{batch}"
            text = _read(spark, file) or ""
            version, _, rest = text.partition("\n")
            documents = _json_lines(rest)
            minimum = 2 if kind == "offsets" else 1
            if not re.fullmatch(r"v\d+", version) or documents is None or len(documents) < minimum:
                raise DamagedStateError(_checkpoint_advice(query, file, kind, batch))
            for offset in documents[1:] if kind == "offsets" else []:
                if isinstance(offset, dict) and "reservoirId" in offset:
                    version = int(offset["reservoirVersion"]) - (offset.get("index", -1) == -1)
                    read[offset["reservoirId"]] = max(read.get(offset["reservoirId"], -1), version)
    return read


def _check_query_file(spark: SparkSession, checkpoints: str, name: str) -> None:
    """Check a file kept beside a query's checkpoint: its idempotency id
    (``<query>._lakehouse_app_id``), a gold query's applied-batch record
    (``<query>.applied.json``) or the pointer to its checkpoint's generation on an object store
    (``<query>.current``, :mod:`lakehouse_core.checkpoints`).

    Raises:
        DamagedStateError: the file is empty or not what it should be.
    """
    query, _, kind = name.partition(".")
    if kind not in (APP_ID_FILE, "applied.json", POINTER_SUFFIX.lstrip(".")):
        return
    text = _read(spark, f"{checkpoints}/{name}") or ""
    if kind == APP_ID_FILE:
        whole = re.fullmatch(r"\s*[\w-]{8,}\s*", text) is not None
    else:
        documents = _json_lines(text) or [None]
        whole = isinstance(documents[0], dict) and (
            kind == "applied.json" or "generation" in documents[0]
        )
    if not whole:
        fix = (
            "replay the source into a new warehouse (lakehouse run --warehouse NEW --source ...)"
            if query == "bronze"
            else "rebuild from bronze: lakehouse replay"
        )
        raise DamagedStateError(
            f"the state of query {query} is damaged ({checkpoints}/{name} is empty or cut "
            f"short); {fix}"
        )


def _checkpoint_advice(query: str, file: str, kind: str, batch: int) -> str:
    if kind == "commits":
        fix = (
            f"delete that file: batch {batch} then runs again, exactly once (its writes carry "
            "Delta transaction ids)"
        )
    elif query == "bronze":
        fix = (
            "bronze's position in its source is lost: replay the source into a new warehouse "
            "(lakehouse run --warehouse NEW --source ...)"
        )
    else:
        fix = "rebuild from bronze: lakehouse replay (it starts fresh checkpoints)"
    return (
        f"the checkpoint of query {query} is damaged ({file} is cut short, unreadable or not "
        f"JSON); {fix}"
    )


def check_damage(spark: SparkSession, root: str) -> None:
    """Check the state of the warehouse ``root`` a run reads: every table's Delta log (its
    newest commit there and whole, not older than a checksum, a checkpoint or any stream that
    read it says), the files Spark reads of every streaming checkpoint, the gold watermarks
    and the heartbeat; and that the warehouse can be written.

    Raises:
        DamagedStateError: the first damaged piece, named with its fix, in one line.
    """
    _check_writable(root)
    checkpoints = f"{root}/_system/checkpoints"
    read: dict[str, int] = {}
    for query in storage.subdirectories(spark, checkpoints):
        for table_id, version in _check_checkpoint(spark, f"{checkpoints}/{query}").items():
            read[table_id] = max(read.get(table_id, -1), version)
    for name in storage.names(spark, checkpoints):
        _check_query_file(spark, checkpoints, name)
    for path in table_dirs(spark, root):
        if not committed_log(spark, path):
            continue
        table_id, newest = _check_table(spark, root, path, -1)
        if read.get(table_id, -1) > newest:
            _check_table(spark, root, path, read[table_id])
    watermarks = f"{root}/_system/watermarks"
    for name in storage.names(spark, watermarks):
        damaged = _json_lines(_read(spark, f"{watermarks}/{name}")) is None
        if name.endswith(".json") and not name.startswith(".") and damaged:
            raise DamagedStateError(
                f"the watermark of gold.{name.removesuffix('.json')} is damaged "
                f"({watermarks}/{name} is not JSON); rebuild gold from bronze: lakehouse replay"
            )
    heartbeat = Warehouse(root).heartbeat
    if storage.exists(spark, heartbeat) and _json_lines(_read(spark, heartbeat)) is None:
        raise DamagedStateError(
            f"the pipeline heartbeat {heartbeat} is damaged (not JSON); delete it: the next run "
            "writes it again"
        )


def _check_writable(root: str) -> None:
    """A local warehouse must be writable by this user (a URI's store says so on write)."""
    if is_uri(root) or not Path(root).exists():
        return
    for folder in (Path(root), Path(root) / "_system"):
        if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
            raise DamagedStateError(
                f"the warehouse {root} is read-only for this user (Permission denied on "
                f"{folder}); run as a user who may write it, or run on a writable copy"
            )
