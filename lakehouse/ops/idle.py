"""Whether a ``run --once`` would find nothing to do, decided from the warehouse's files and
the source alone, before Spark starts: a scheduled run with nothing new then costs the reading
of a few small files, not a JVM's start and a query per table.

Nothing is new when the run's declarations are the ones the warehouse last ran with, no replay
is left to finish, no table was left half created or lost a commit, no other run holds the
warehouse and this user may write it, the source holds no record bronze has not read, every
query the run would start has a checkpoint whose last planned micro-batch committed and whose
Delta inputs have no commit since that changes data (or their schema), every declaration of a
shared gold query has applied what its query read (one that failed is tried again by a whole
run), and every SQL model is current. The check answers "nothing new" only when all of that
is read and holds: anything it cannot read, or a warehouse that is not local, means "maybe",
and the run goes the whole way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

from cdc.kafka_offsets import from_json
from cdc.sources import SourceSpec
from gold.progress import Applied, applied_location
from lakehouse.ops.status import bronze_topics, checkpoint_place
from lakehouse.run.declarations import comparable, newest_recorded
from lakehouse.run.lease import HISTORY_WINDOW, holder_of, is_free, lease_path
from lakehouse.run.state_check import local_table_id, local_tables_behind
from lakehouse.run.swap import STAGING
from lakehouse_core.config import PipelineConfig
from lakehouse_core.delta_io import COMMIT_FILE, commit_user_metadata
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import Layer, Warehouse, is_uri


@dataclass(frozen=True)
class Query:
    """A streaming query a ``run --once`` would start after bronze's: its name and the Delta
    tables it reads."""

    name: str
    inputs: tuple[str, ...]
    #: The declarations sharing the query, each with a place of its own in its first input's
    #: change feed (one that failed stays behind the query and catches up in a whole run).
    members: tuple[str, ...] = ()


#: The name of a silver query, before its entity's.
SILVER_QUERY = "silver_"
#: The layers whose tables streaming queries read.
LAYERS_READ: tuple[Layer, ...] = ("bronze", "silver")


class Input(NamedTuple):
    """A table a streaming query reads: where, and whether as a change feed (silver's)."""

    path: str
    change_feed: bool


@dataclass(frozen=True)
class NothingNew:
    """What a ``run --once`` that finds nothing new would have read: the entities of its silver
    queries (each reads no record)."""

    silver: tuple[str, ...]


def nothing_new(
    source: SourceSpec, warehouse: Warehouse, config: PipelineConfig
) -> NothingNew | None:
    """What a ``run --once`` of ``config`` from ``source`` into ``warehouse`` would read if it
    finds nothing to do (see the module docstring); None whenever that is not certain."""
    if is_uri(warehouse.root) or not Path(warehouse.root).is_dir():
        return None
    root = Path(warehouse.root)
    try:
        recorded = newest_recorded(warehouse)
        if recorded is None or recorded.config != comparable(config):
            return None
        if (root / STAGING).exists() or _half_created(root) or not _lease_free(warehouse):
            return None
        if not _writable(root) or local_tables_behind(root):
            return None  # the run names it
        queries = _queries(warehouse, config)
        if queries is None or not _source_read(source, warehouse):
            return None
        tables = {
            local_table_id(path): Input(path, change_feed=layer == "silver")
            for layer in LAYERS_READ
            for path in _tables(warehouse, layer)
        }
        if not all(_caught_up(warehouse, q, tables) for q in queries):
            return None
        if not _models_current(warehouse, config):
            return None
    except Exception:  # anything unexpected: the whole run finds out, and says it
        return None
    silver = (q.name.removeprefix(SILVER_QUERY) for q in queries if q.name.startswith(SILVER_QUERY))
    return NothingNew(tuple(sorted(silver)))


def _queries(warehouse: Warehouse, config: PipelineConfig) -> list[Query] | None:
    """The queries after bronze's that the run would start (None: that cannot be told without
    Spark: a bronze topic neither declared nor with a silver table yet)."""
    from gold.alerts import alert_jobs
    from gold.registry import gold_jobs

    queries: dict[str, Query] = {}
    declared = {table.topic for table in config.tables}
    for topic in bronze_topics(warehouse):
        spec = config.spec_for_topic(topic)
        if topic not in declared and not _is_table(warehouse.table("silver", spec.name)):
            return None  # plain events left undeclared, or a new entity: Spark tells
        bronze = warehouse.table("bronze", table_name_for_topic(spec.topic))
        queries[SILVER_QUERY + spec.name] = Query(SILVER_QUERY + spec.name, (bronze,))
    for job in gold_jobs(config):
        paths = tuple(warehouse.table("silver", name) for name in (job.input, *job.joins))
        if all(map(_is_table, paths)):
            query = queries.setdefault(job.query, Query(job.query, paths))
            if job.shared:
                queries[job.query] = replace(query, members=(*query.members, job.table))
    for alert in alert_jobs(config):
        path = warehouse.table("silver", alert.input)
        if _is_table(path) and _is_table(warehouse.table("gold", alert.baseline)):
            queries[alert.query] = Query(alert.query, (path,))
    return list(queries.values())


def _caught_up(warehouse: Warehouse, query: Query, tables: Mapping[str, Input]) -> bool:
    """Whether ``query``'s checkpoint committed its last planned micro-batch and none of the
    tables it read (by id, in ``tables``) has a commit since that the query would read."""
    place = checkpoint_place(warehouse.checkpoint(query.name))
    committed = _last_committed(Path(place.location))
    if committed is None:  # a fresh checkpoint: caught up if a replay or one hop handed it
        return (  # over after its one input's newest change
            place.starting_version > 0
            and len(query.inputs) == 1
            and not _changes_after(query.inputs[0], place.starting_version - 1)
        )
    offsets = [json.loads(line) for line in committed[2:]]
    read_through = {}
    for offset in offsets:
        read = tables.get(str(offset.get("reservoirId")))
        if read is None:
            return False
        read_through[read.path] = _read_through(offset, read)
        if _changes_after(read.path, read_through[read.path]):
            return False
    source = read_through.get(query.inputs[0], -1)
    return bool(offsets) and all(_member_at(warehouse, m, source) for m in query.members)


def _member_at(warehouse: Warehouse, member: str, version: int) -> bool:
    """Whether the declaration ``member`` of a shared query has applied its source's changes
    through ``version`` and has no failed attempt to do again."""
    place = Path(applied_location(warehouse, member))
    if not place.exists():
        return False
    applied = Applied.of_json(place.read_text())
    return applied.pending is None and applied.through is not None and applied.through >= version


def _read_through(offset: Mapping[str, Any], read: Input) -> int:
    """The newest version of its table a Delta source offset ``(v, index)`` has read whole:
    index -1 points before ``v``. A change feed is admitted a whole commit at a time, so an
    index into ``v`` ends after it; a plain read (bronze's) may stop inside ``v``: it has read
    ``v`` once the index reaches the last of its files (a first snapshot's are not counted
    here: not read whole, to be sure)."""
    version, index = int(offset["reservoirVersion"]), int(offset.get("index", -1))
    if index < 0 or offset.get("isStartingVersion", False):
        return version - 1
    if read.change_feed:
        return version
    added = sum(1 for action in _actions(read.path, version) if _data_file(action, "add"))
    return version if index >= added - 1 else version - 1


def _changes_after(path: str, version: int) -> bool:
    """Whether the table at ``path`` may have a commit after ``version`` that a stream of it
    reads: one that adds, removes or changes data or the schema; or one not in its log's JSON
    files; or it is older than ``version`` (a lost commit: the run names it)."""
    versions = _commit_versions(Path(path) / "_delta_log")
    if not versions or max(versions) < version:
        return True
    newer = sorted(v for v in versions if v > version)
    if newer != list(range(version + 1, version + 1 + len(newer))):
        return True
    return any(
        "metaData" in action or any(_data_file(action, kind) for kind in ("add", "remove", "cdc"))
        for number in newer
        for action in _actions(path, number)
    )


def _actions(path: str, version: int) -> Iterator[dict[str, Any]]:
    """The actions of commit ``version`` of the table at ``path``."""
    text = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
    return (json.loads(line) for line in text.splitlines() if line.strip())


def _data_file(action: Mapping[str, Any], kind: str) -> bool:
    """Whether ``action`` is a file action of ``kind`` that changes data (a ``cdc`` file always
    does; an ``add`` or ``remove`` of a compaction does not)."""
    return kind in action and bool(action[kind].get("dataChange", True))


def _source_read(source: SourceSpec, warehouse: Warehouse) -> bool:
    """Whether bronze's query committed its last planned micro-batch and ``source`` holds no
    record after it."""
    if source.kafka_format is not None:
        return False  # Spark's own Kafka source: its offsets are its own
    place = checkpoint_place(warehouse.checkpoint("bronze"))
    committed = _last_committed(Path(place.location))
    if committed is None or len(committed) != 3:
        return False
    if source.kind == "files":
        seen = set(_seen_files(Path(place.location) / "sources" / "0"))
        return all(str(path) in seen for path in _source_files(Path(source.location)))
    from cdc.kafka_options import parse_options
    from cdc.kafka_source import KafkaStreamReader
    from cdc.sources import kafka_stream_options

    reader = KafkaStreamReader(parse_options(kafka_stream_options(source)))
    try:
        return not reader.has_unread(from_json(json.loads(committed[2])))
    finally:
        reader.stop()


def _seen_files(log: Path) -> Iterator[str]:
    """The files a file stream source's metadata log at ``log`` lists (as local paths)."""
    for entry in log.iterdir() if log.is_dir() else ():
        if entry.name.startswith("."):
            continue
        for line in entry.read_text().splitlines()[1:]:
            if line.strip():
                yield unquote(urlparse(json.loads(line)["path"]).path)


def _source_files(directory: Path) -> Iterator[Path]:
    """The ``*.jsonl`` files under a file source's directory, as Spark lists them (it leaves
    out names starting with ``.`` or ``_``)."""
    top = directory.resolve()
    for path in top.rglob("*.jsonl"):
        if not any(part[0] in "._" for part in path.relative_to(top).parts):
            yield path


def _last_committed(checkpoint: Path) -> list[str] | None:
    """The lines of the offsets file of the checkpoint's last micro-batch if it committed
    (None: no batch, or the last planned one did not commit)."""
    planned = _numbered(checkpoint / "offsets")
    if not planned or max(planned) not in _numbered(checkpoint / "commits"):
        return None
    return (checkpoint / "offsets" / str(max(planned))).read_text().strip().splitlines()


def _numbered(directory: Path) -> set[int]:
    return {int(name) for name in _names(directory) if name.isdigit()}


def _models_current(warehouse: Warehouse, config: PipelineConfig) -> bool:
    """Whether every SQL model whose inputs all exist was last refreshed from their versions
    now (one whose inputs do not exist waits, in the run too)."""
    from gold.models import ModelState, input_name, is_current, state_path

    for model in config.models:
        paths = {input_name(s, t): warehouse.table(s, t) for s, t in model.inputs}  # type: ignore[arg-type]
        if not all(map(_is_table, paths.values())):
            continue
        inputs = {
            name: (local_table_id(path), max(_commit_versions(Path(path) / "_delta_log")))
            for name, path in paths.items()
        }
        state_file = Path(state_path(warehouse, model.name))
        text = state_file.read_text() if state_file.exists() else None
        if not is_current(ModelState.from_json(text, model.name), model, inputs):
            return False
    return True


def _lease_free(warehouse: Warehouse) -> bool:
    """Whether no other run holds the warehouse's lease now."""
    log = Path(lease_path(warehouse)) / "_delta_log"
    newest = sorted(_commit_versions(log), reverse=True)[:HISTORY_WINDOW]
    commits = [(v, commit_user_metadata((log / f"{v:020d}.json").read_text())) for v in newest]
    return is_free(holder_of(commits), datetime.now(UTC))


def _writable(root: Path) -> bool:
    """Whether this user may write the warehouse (a run says so in one line if not)."""
    return all(os.access(folder, os.W_OK | os.X_OK) for folder in (root, root / "_system"))


def _half_created(root: Path) -> bool:
    """Whether a table directory of the warehouse has a ``_delta_log`` without a commit."""
    for directory, folders, _ in os.walk(root):
        if "_delta_log" in folders:
            if not _commit_versions(Path(directory) / "_delta_log"):
                return True
            folders.clear()  # a table: below it are its partitions and its log
        else:
            folders[:] = [f for f in folders if f != "checkpoints"]
    return False


def _tables(warehouse: Warehouse, layer: Layer) -> list[str]:
    """The paths of the tables of ``layer``."""
    folder = Path(warehouse.table(layer, "x")).parent
    return [str(folder / n) for n in sorted(_names(folder)) if _is_table(str(folder / n))]


def _is_table(path: str) -> bool:
    return bool(_commit_versions(Path(path) / "_delta_log"))


def _commit_versions(log: Path) -> list[int]:
    """The versions of the commit files in the ``_delta_log`` folder ``log``."""
    return [int(m[1]) for m in map(COMMIT_FILE.match, _names(log)) if m]


def _names(directory: Path) -> list[str]:
    return os.listdir(directory) if directory.is_dir() else []
