"""Start-up checks of the state a warehouse keeps, before a command writes it.

Two jobs, each one pass over the warehouse:

- :func:`discard_half_created_tables`: a table a kill interrupted before its first commit
  (:func:`lakehouse_core.delta_io.half_created`) is deleted, so the run creates it again instead of
  failing with ``DELTA_TABLE_NOT_FOUND`` forever;
- :func:`check_damage`: a table whose newest commit is missing, a streaming checkpoint file
  that is cut short, a damaged watermark, heartbeat or history log raises one
  :class:`DamagedStateError` line naming it and the fix, instead of a Java trace or a silent
  ``done`` with wrong results.

A table's log is behind what was committed when a version newer than its newest commit file is
named by its own log (a checksum, a checkpoint), by a stream that read it (a Delta source's
offset in a checkpoint names the table's id and the version read) or by the versions the
warehouse recorded at the end of the last run (:func:`record_versions`: each table's id and
newest version, in ``_system/table_versions.json``). A table's version only grows while its id
stays (a replay installs tables of new ids; maintenance, forget and a reset checkpoint add
commits), so a table older than its record lost commits: a bad sync, a restore of its
directory from an older copy. The checks read log listings and small files on the driver.

The tables of a warehouse are ``<root>/<layer>/<name>`` and ``<root>/_system/<kind>/<entity>``
(or ``<root>/_system/<name>`` for one table of a kind, like the event log); checkpoints are
``<root>/_system/checkpoints/<query>`` (see :class:`lakehouse_core.layout.Warehouse`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from gold.progress import APPLIED_SUFFIX
from lakehouse_core import storage
from lakehouse_core.checkpoints import POINTER_SUFFIX
from lakehouse_core.delta_io import committed_log, discard_half_created
from lakehouse_core.errors import LakehouseError
from lakehouse_core.layout import HISTORY_SUFFIX, LAYERS, QUARANTINE_TABLE, Warehouse, is_uri
from lakehouse_core.streaming import APP_ID_FILE

#: Where :func:`record_versions` keeps the newest version of every table, under ``_system``.
VERSIONS_FILE = "table_versions.json"

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


def rebuild_advice(root: str, path: str, reads: str | None = None) -> str:
    """How to rebuild the table at ``path`` (the fix that exists for its layer); ``reads``: the
    silver entity a gold table's query reads, if known (its replay rebuilds the gold table)."""
    parts = path.removeprefix(f"{root}/").split("/")
    if parts[0] == "bronze":
        return (
            "bronze is the system of record and cannot be rebuilt from the warehouse: restore "
            "the missing file from a backup, or replay its source into a new warehouse "
            "(lakehouse run --warehouse NEW --source ...)"
        )
    if parts[:2] == ["silver", QUARANTINE_TABLE]:  # shared: every entity's replay rebuilds it
        return "rebuild it from bronze: lakehouse replay"
    if parts[0] == "silver" or (parts[0] == "_system" and len(parts) == 3):
        entity = parts[-1].removesuffix(HISTORY_SUFFIX)
        return f"rebuild it from bronze: lakehouse replay --table {entity}"
    if parts[0] == "gold" and reads is not None:
        return f"rebuild it from bronze: lakehouse replay --table {reads}"
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


def _check_table(
    spark: SparkSession, root: str, path: str, required: int, reads: str | None = None
) -> tuple[str, int]:
    """Check one table's log; returns its id and newest commit version.

    Raises:
        DamagedStateError: its newest commit is missing (a checksum, checkpoint, or what a
            stream read or the last run recorded, ``required``, says a later version was
            committed) or cut short; the fix names ``reads`` for a gold table, if given.
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
            f"missing); {rebuild_advice(root, path, reads)}"
        )
    text = _read(spark, f"{log}/{newest:020d}.json")
    if _json_lines(text) is None:
        raise DamagedStateError(
            f"{table_name(root, path)} is damaged (its newest commit, version {newest}, is cut "
            f"short); {rebuild_advice(root, path, reads)}"
        )
    return _table_id(spark, log, names), newest


def _table_id(spark: SparkSession, log: str, names: list[str]) -> str:
    """The id of the table of the ``_delta_log`` ``log`` (whose entries are ``names``): from
    the ``metaData`` of its first commit, or, once the log's cleanup removed that, of its
    newest checksum; "" if neither says."""
    return _id_in_log(partial(_read, spark), log, names)


def _id_in_log(read: Callable[[str], str | None], log: str, names: list[str]) -> str:
    """:func:`_table_id`, reading the log's files with ``read``."""
    first = f"{0:020d}.json"
    if first in names:
        for action in _json_lines(read(f"{log}/{first}")) or []:
            if isinstance(action, dict) and isinstance(action.get("metaData"), dict):
                return str(action["metaData"].get("id", ""))
    checksums = sorted(name for name in names if _LOG_FILE.match(name) and name.endswith(".crc"))
    if checksums:
        checksum = _json_lines(read(f"{log}/{checksums[-1]}")) or [None]
        if isinstance(checksum[0], dict) and isinstance(checksum[0].get("metadata"), dict):
            return str(checksum[0]["metadata"].get("id", ""))
    return ""


def _check_checkpoint(spark: SparkSession, checkpoint: str) -> dict[str, int]:
    """Check the files Spark reads of one streaming checkpoint; returns, per Delta table id
    the query reads (its Delta sources' ``reservoirId``), the newest version its offsets say it
    read.

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
    newest commit there and whole, not older than a checksum, a checkpoint, any stream that
    read it or the versions recorded at the end of the last run say: :func:`record_versions`),
    the files Spark reads of every streaming checkpoint, the gold watermarks and the heartbeat;
    and that the warehouse can be written.

    Raises:
        DamagedStateError: the first damaged piece, named with its fix, in one line.
    """
    _check_writable(root)
    checkpoints = f"{root}/_system/checkpoints"
    read: dict[str, int] = {}
    queries: dict[str, set[str]] = {}
    for query in storage.subdirectories(spark, checkpoints):
        for table_id, version in _check_checkpoint(spark, f"{checkpoints}/{query}").items():
            read[table_id] = max(read.get(table_id, -1), version)
            queries.setdefault(query, set()).add(table_id)
    for name in storage.names(spark, checkpoints):
        _check_query_file(spark, checkpoints, name)
    recorded = recorded_versions(spark, root)
    for path in table_dirs(spark, root):
        if not committed_log(spark, path):
            continue
        table_id, newest = _check_table(spark, root, path, -1)
        required = read.get(table_id, -1)
        record = recorded.get(path.removeprefix(f"{root}/"))
        if record is not None and table_id and record[0] == table_id:
            required = max(required, record[1])
        if required > newest:
            reads = _gold_reads(spark, root, path, queries)
            _check_table(spark, root, path, required, reads)
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


def _gold_reads(
    spark: SparkSession, root: str, path: str, queries: dict[str, set[str]]
) -> str | None:
    """The silver entity the query of the gold table at ``path`` reads (the first by name if it
    reads several), found through the table ids its checkpoint's offsets name (``queries``:
    the ids per query); its query is the one its applied place names (a shared query) or
    ``gold_<name>``. None: not a gold table, or not known."""
    parts = path.removeprefix(f"{root}/").split("/")
    if len(parts) != 2 or parts[0] != "gold":
        return None
    query = f"gold_{parts[1]}"
    place = _json_lines(_read(spark, f"{root}/_system/checkpoints/{query}{APPLIED_SUFFIX}"))
    if place and isinstance(place[0], dict) and isinstance(place[0].get("checkpoint"), str):
        query = place[0]["checkpoint"].rstrip("/").rsplit("/", 1)[-1]
    wanted = queries.get(query, set())
    entities = []
    for name in storage.subdirectories(spark, f"{root}/silver"):
        log = f"{root}/silver/{name}/_delta_log"
        if wanted and _table_id(spark, log, storage.names(spark, log)) in wanted:
            entities.append(name.removesuffix(HISTORY_SUFFIX))
    return min(entities, default=None)


def record_versions(spark: SparkSession, root: str) -> None:
    """Record the id and newest version of every table of the warehouse ``root`` (a table
    without a commit is left out) in ``_system/table_versions.json``, replaced whole; a run
    does it when it ends, so that the next run's :func:`check_damage` finds a table whose log
    lost commits since. A table of the same id keeps the version recorded before if its log
    is older (a run refused for it records no less than was committed). Readable without
    Spark::

        {"recorded": "<UTC time>", "tables": {"silver/orders": {"id": "<table id>",
         "version": 7}, ...}}
    """
    before = recorded_versions(spark, root)
    tables = {}
    for path in table_dirs(spark, root):
        log = f"{path}/_delta_log"
        names = storage.names(spark, log)
        newest, _ = _log_versions(names)
        if newest < 0:
            continue
        relative = path.removeprefix(f"{root}/")
        table_id = _table_id(spark, log, names)
        old_id, old_version = before.get(relative, ("", -1))
        if table_id and old_id == table_id:
            newest = max(newest, old_version)
        tables[relative] = {"id": table_id, "version": newest}
    document = {"recorded": datetime.now(UTC).isoformat(), "tables": tables}
    storage.write_text(spark, f"{root}/_system/{VERSIONS_FILE}", json.dumps(document))


def recorded_versions(spark: SparkSession, root: str) -> dict[str, tuple[str, int]]:
    """The id and version of each table (by its path under ``root``) that
    :func:`record_versions` recorded last; none if nothing was recorded, or if the record cannot
    be read (a run then checks without it, and records anew when it ends)."""
    return _recorded(_read(spark, f"{root}/_system/{VERSIONS_FILE}"))


def _recorded(text: str | None) -> dict[str, tuple[str, int]]:
    """The tables of a record of :func:`record_versions` (none if ``text`` is not one)."""
    try:
        document = json.loads(text or "null")
    except ValueError:
        return {}
    tables = document.get("tables") if isinstance(document, dict) else None
    if not isinstance(tables, dict):
        return {}
    recorded = {}
    for path, table in tables.items():
        if isinstance(table, dict) and isinstance(table.get("version"), int):
            recorded[str(path)] = (str(table.get("id") or ""), int(table["version"]))
    return recorded


def _read_local(path: str) -> str | None:
    """The text of the local file ``path`` (None: none; unreadable: :data:`_UNREADABLE`)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return _UNREADABLE


def local_table_id(path: str | Path) -> str:
    """:func:`_table_id` of the local table at ``path``, read with plain file reads."""
    log = Path(path) / "_delta_log"
    names = [entry.name for entry in log.iterdir()] if log.is_dir() else []
    return _id_in_log(_read_local, str(log), names)


def local_tables_behind(root: str | Path) -> list[str]:
    """The tables of the local warehouse ``root`` whose log is older than the version
    :func:`record_versions` recorded for the same table id (``silver.orders``, ...), read with
    plain file reads, without Spark: a run that would otherwise end before Spark starts (nothing
    new to do) goes on when this names a table, so that :func:`check_damage` names it."""
    root = Path(root)
    behind = []
    recorded = _recorded(_read_local(str(root / "_system" / VERSIONS_FILE)))
    for relative, (table_id, version) in recorded.items():
        log = root / relative / "_delta_log"
        names = [entry.name for entry in log.iterdir()] if log.is_dir() else []
        newest, _ = _log_versions(names)
        if (
            0 <= newest < version
            and table_id
            and _id_in_log(_read_local, str(log), names) == table_id
        ):
            behind.append(table_name(str(root), str(root / relative)))
    return behind


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
