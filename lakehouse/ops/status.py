"""What a warehouse's pipeline has done and is doing: per table how far each layer has applied
its input, the last micro-batch, freshness, quarantine, gold's watermark and late changes, and
whether a pipeline runs now.

Read without Spark (no JVM starts): Delta tables through their logs with ``deltalake``, the
other files (checkpoints, heartbeat, gold's places and watermarks) through ``pyarrow.fs``. Row
counts and the newest times come from the log's per-file statistics (``numRecords``, the
maximum of a column), never from a scan of the data; the rows a query has not applied yet from
the operation metrics of the commits after its place.

How far a streaming query has read is taken from its checkpoint: the offsets of its last
committed micro-batch name the last version of its Delta input it has read. The last
micro-batch comes from the event log (:mod:`lakehouse.run.event_log`; only its narrow columns are
read, never the traces), whether a pipeline runs from its heartbeat. The tables failing are
those a running pipeline's heartbeat lists (retried with backoff), else those whose newest row
in the event log is a failure.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from bronze.table import TOPIC_PROPERTY
from gold.progress import Applied, applied_location
from gold.watermarks import SEEN, Delayed, watermark_of
from lakehouse.run.type_changes import INCOMPATIBLE
from lakehouse_core import checkpoints
from lakehouse_core.columns import RESCUED
from lakehouse_core.config import PipelineConfig
from lakehouse_core.errors import ConfigError
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import LATE_EVENTS, QUARANTINE_TABLE, Warehouse, is_uri

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: A heartbeat older than this many of its intervals means the run that wrote it has died.
STALE_INTERVALS = 3
#: Delta operations that add records to a table (bronze appends; streaming writes).
ADDING_OPERATIONS = ("WRITE", "STREAMING UPDATE")
#: Delta operations that change a silver table's rows (what its change feed carries).
CHANGING_OPERATIONS = ("MERGE", "WRITE", "DELETE", "UPDATE", "STREAMING UPDATE")


@dataclass(frozen=True)
class LastBatch:
    """A query's newest micro-batch in the event log."""

    batch_id: int
    at: datetime
    duration_ms: int
    input_rows: int


@dataclass(frozen=True)
class SilverStatus:
    """One silver table and the bronze table it is applied from."""

    table: str
    bronze_table: str
    bronze_version: int | None
    bronze_records: int
    newest_record: datetime | None  # the newest bronze record's source (Kafka) time
    applied_version: int | None  # the newest bronze version the silver query has applied
    records_behind: int  # bronze records added after ``applied_version``
    rows: int
    newest_applied_event: datetime | None  # the newest ``_source_ts`` in silver
    freshness_seconds: float | None  # now - newest_applied_event
    quarantined: int
    last_batch: LastBatch | None
    #: Rows holding values their columns' types do not hold in ``_rescued_data``.
    rescued: int = 0
    #: Quarantined records per reason ``incompatible type for column ...`` (a type change
    #: no type holds with the table's), most common reason first.
    type_changes: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class GoldStatus:
    """One gold table (a declaration's or a pattern's) and the silver table whose change feed
    it reads; ``query``: the streaming query its batches run in (a shared one's name for the
    declarations over one source); ``last_batch``: that query's newest batch this table took
    part in."""

    table: str
    input: str
    input_version: int | None
    applied_version: int | None
    versions_behind: int  # silver commits that changed rows after ``applied_version``
    rows: int
    watermark: datetime | None  # windows ending at or before it are final (``_final``)
    late_changes: int  # rows of ``gold.late_events`` for this table
    last_batch: LastBatch | None
    query: str = ""


@dataclass(frozen=True)
class ModelStatus:
    """One SQL model's table, the tables its query reads, and how many commits those have had
    since its last refresh (``inputs_behind``; None: never refreshed, or an input is another
    table now); ``last_batch``: its newest refresh in the event log."""

    table: str
    inputs: list[str]
    inputs_behind: int | None
    rows: int
    last_batch: LastBatch | None
    query: str = ""


@dataclass(frozen=True)
class HeldTable:
    """A gold table the pipeline keeps beside its declarations' (the alerts, an alert's
    baseline, the log of late changes): its rows and ``what`` it holds."""

    table: str
    rows: int
    what: str


@dataclass(frozen=True)
class OrphanedTable:
    """A silver or gold table the warehouse holds that no current declaration makes: kept as
    it is, neither read nor written by a run."""

    table: str
    rows: int


@dataclass(frozen=True)
class Failing:
    """A table whose query failed and has not done a micro-batch since: its query, the error
    (``Class: message``), when it failed, how many times in a row, and when the running
    pipeline starts it again (None: no running pipeline retries it)."""

    table: str
    query: str
    error: str
    at: datetime
    attempts: int = 1
    retry_at: datetime | None = None


@dataclass(frozen=True)
class Running:
    """The heartbeat of a pipeline run: who, since when, seen last when, the tables it
    retries; ``alive`` if it was refreshed recently enough."""

    alive: bool
    mode: str
    pid: int
    host: str
    started: datetime
    heartbeat: datetime
    failing: list[Failing] = field(default_factory=list)


@dataclass(frozen=True)
class QualityStatus:
    """One expectation of one table, summed over every micro-batch in ``system.quality``:
    rows checked, failed and dropped, and in how many micro-batches it did not hold."""

    table: str
    expectation: str
    action: str
    checked: int
    failed: int
    dropped: int
    broken_batches: int


@dataclass(frozen=True)
class PipelineStatus:
    warehouse: str
    at: datetime
    running: Running | None
    bronze_last_batch: LastBatch | None
    silver: list[SilverStatus] = field(default_factory=list)
    gold: list[GoldStatus] = field(default_factory=list)
    event_log_rows: int = 0
    quality: list[QualityStatus] = field(default_factory=list)
    failing: list[Failing] = field(default_factory=list)
    models: list[ModelStatus] = field(default_factory=list)
    orphaned: list[OrphanedTable] = field(default_factory=list)
    other_gold: list[HeldTable] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The status as JSON values (times in ISO 8601): what ``lakehouse status --json``
        prints."""
        return status_json(self)

    def lines(self, width: int = 100, wide: bool = False) -> list[str]:
        """The status as the plain lines ``lakehouse status`` prints, ``width`` columns wide
        (``wide``: every column)."""
        from lakehouse.ops.status_text import status_lines

        return status_lines(self, width, wide)

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        """The status as HTML tables (a notebook shows this)."""
        from lakehouse.ops.status_text import status_html

        return status_html(self)


def status_json(report: PipelineStatus) -> dict[str, Any]:
    """``report`` as JSON values (times in ISO 8601), the object ``lakehouse status --json``
    prints: every field of :class:`PipelineStatus`, nested dataclasses as objects."""
    return _jsonable(asdict(report))  # type: ignore[no-any-return]


def pipeline_status(
    spark: SparkSession | None, warehouse: Warehouse, config: PipelineConfig, now: datetime
) -> PipelineStatus:
    """The status of ``warehouse`` at ``now`` (timezone-aware), read without Spark: ``spark``
    is not used (callers holding a session may pass it; ``lakehouse status`` passes None).

    Raises:
        ConfigError: the warehouse is at a URI whose file system ``pyarrow`` cannot open.
    """
    from gold.registry import gold_jobs  # its Spark imports cost time only where gold is declared

    last, batches, log_rows, failed_last = _last_batches(_delta(warehouse.event_log))
    quarantine_table = _delta(warehouse.table("silver", QUARANTINE_TABLE))
    quarantine = _rows_per(quarantine_table, "entity")
    type_changes = _type_changes(quarantine_table)
    silver = []
    for topic in bronze_topics(warehouse):
        spec = config.spec_for_topic(topic)
        bronze_name = table_name_for_topic(spec.topic)
        bronze = _delta(warehouse.table("bronze", bronze_name))
        applied = silver_applied_version(warehouse, spec.name)
        versions = _versions(bronze, ADDING_OPERATIONS)
        bronze_files = _files(bronze)
        table = _delta(warehouse.table("silver", spec.name))
        files = _files(table)
        newest_event = _newest(table, files, "_source_ts")
        silver.append(
            SilverStatus(
                table=f"silver.{spec.name}",
                bronze_table=f"bronze.{bronze_name}",
                bronze_version=max(versions, default=None),
                bronze_records=_rows(bronze, bronze_files),
                newest_record=_newest(bronze, bronze_files, "timestamp"),
                applied_version=applied,
                records_behind=sum(
                    added
                    for version, added in versions.items()
                    if applied is None or version > applied
                ),
                rows=_rows(table, files),
                newest_applied_event=newest_event,
                freshness_seconds=(now - newest_event).total_seconds() if newest_event else None,
                quarantined=quarantine.get(spec.name, 0),
                last_batch=last.get(f"silver_{spec.name}"),
                rescued=_rescued_rows(files),
                type_changes=type_changes.get(spec.name, ()),
            )
        )
    late = _rows_per(_delta(warehouse.table("gold", LATE_EVENTS)), "gold_table")
    declared: dict[str, Delayed] = {t.name: t for t in config.gold_declarations}
    declared |= {p.name: p for p in config.patterns}
    gold = []
    for job in gold_jobs(config):
        source = _delta(warehouse.table("silver", job.input))
        if source is None:
            continue
        query_place = checkpoint_place(warehouse.checkpoint(job.query)).location
        applied = fed_version(query_place, str(source.metadata().id))
        batch = last.get(job.query)
        text = _read_text(applied_location(warehouse, job.table))
        own = Applied.of_json(text) if text is not None and text.strip() else None
        if job.shared or own is not None:  # its own place in a shared query's feed
            applied = None if own is None else own.through
            if own is not None and own.batch is not None and own.checkpoint == query_place:
                batch = batches.get((job.query, own.batch), batch)
        versions = _versions(source, CHANGING_OPERATIONS)
        table = _delta(warehouse.table("gold", job.table))
        gold.append(
            GoldStatus(
                table=f"gold.{job.table}",
                input=f"silver.{job.input}",
                input_version=source.version(),
                applied_version=applied,
                versions_behind=sum(1 for v in versions if applied is None or v > applied),
                rows=_rows(table, _files(table)),
                watermark=_instant(
                    watermark_of(_seen_micros(warehouse.watermark(job.table)), declared[job.table])
                ),
                late_changes=late.get(job.table, 0),
                last_batch=batch,
                query=job.query,
            )
        )
    run = running(None, warehouse, now)
    return PipelineStatus(
        warehouse=warehouse.root,
        at=now,
        running=run,
        bronze_last_batch=last.get("bronze"),
        silver=silver,
        gold=gold,
        event_log_rows=log_rows,
        quality=quality_status(None, warehouse),
        failing=run.failing if run is not None and run.alive else failed_last,
        models=_models(warehouse, config, last),
        orphaned=_orphaned(warehouse, config, [s.table for s in silver]),
        other_gold=_other_gold(warehouse, config, {g.table for g in gold}),
    )


def silver_applied_version(warehouse: Warehouse, entity: str) -> int | None:
    """The newest bronze version the silver query of ``entity`` has applied in full (None:
    none), from its checkpoint: :func:`applied_version`, or the version before the one one
    hop handed its fresh checkpoint over at."""
    place = checkpoint_place(warehouse.checkpoint(f"silver_{entity}"))
    applied = applied_version(None, place.location)
    if applied is None and place.starting_version:  # handed over by one hop
        applied = place.starting_version - 1
    return applied


def applied_version(spark: SparkSession | None, checkpoint: str) -> int | None:
    """The newest version of its Delta input a streaming query has applied in full: from the
    offsets of its last committed micro-batch (None: it has committed none). ``spark`` is not
    used (the checkpoint's files are read directly).

    A Delta source offset ``(reservoirVersion, index)`` with index -1 points just before
    version ``reservoirVersion``; otherwise into it: its first snapshot (``isStartingVersion``)
    is read whole, a later version counts as read only once the offset has passed it.
    """
    commits = [int(name) for name in _names(f"{checkpoint}/commits") if name.isdigit()]
    if not commits:
        return None
    text = _read_text(f"{checkpoint}/offsets/{max(commits)}")
    if text is None:
        return None
    offset = json.loads(text.strip().splitlines()[-1])
    version = int(offset["reservoirVersion"])
    if offset.get("index", -1) == -1 or not offset.get("isStartingVersion", False):
        return version - 1
    return version


def fed_version(checkpoint: str, table_id: str | None) -> int | None:
    """The newest version of the Delta table ``table_id`` (its metadata id) a change-feed
    query checkpointed at ``checkpoint`` has applied in full: from the offsets of its last
    committed micro-batch, the offset of that table among its sources (a joined query reads
    two; the first source when none has that id), None: it has committed none.

    The change feed is admitted a whole commit at a time (see
    :func:`gold.progress.offset_version`): an offset ``(v, index >= 0)`` ends after version
    ``v``, one with index -1 before it.
    """
    commits = [int(name) for name in _names(f"{checkpoint}/commits") if name.isdigit()]
    if not commits:
        return None
    text = _read_text(f"{checkpoint}/offsets/{max(commits)}")
    if text is None:
        return None
    offsets = [
        json.loads(line)
        for line in text.strip().splitlines()[2:]  # after the version and the batch metadata
        if line.startswith("{")
    ]
    if not offsets:
        return None
    offset = next((o for o in offsets if o.get("reservoirId") == table_id), offsets[0])
    version = int(offset["reservoirVersion"])
    return version - 1 if int(offset.get("index", -1)) == -1 else version


def _models(
    warehouse: Warehouse, config: PipelineConfig, last: dict[str, LastBatch]
) -> list[ModelStatus]:
    """The status of each SQL model of ``config``: its recorded state against the versions
    of its input tables now (read from their logs)."""
    if not config.models:
        return []
    from gold.models import ModelState, input_name, model_query, state_path, versions_behind

    found = []
    for model in config.models:
        inputs: dict[str, tuple[str, int]] = {}
        for schema, name in model.inputs:
            table = _delta(warehouse.table(schema, name))  # type: ignore[arg-type]
            if table is not None:
                inputs[input_name(schema, name)] = (str(table.metadata().id), table.version())
        state = ModelState.from_json(_read_text(state_path(warehouse, model.name)), model.name)
        behind = None
        if state is not None and len(inputs) == len(model.inputs):
            behind = versions_behind(state, inputs)
            if behind is not None and state.digest != model.digest:
                behind = None  # its SQL or key changed since: a refresh recomputes it
        own = _delta(warehouse.table("gold", model.name))
        found.append(
            ModelStatus(
                table=f"gold.{model.name}",
                inputs=[input_name(schema, name) for schema, name in model.inputs],
                inputs_behind=behind,
                rows=_rows(own, _files(own)),
                last_batch=last.get(model_query(model.name)),
                query=model_query(model.name),
            )
        )
    return found


def _other_gold(warehouse: Warehouse, config: PipelineConfig, shown: set[str]) -> list[HeldTable]:
    """The gold tables ``config`` makes that are not in ``shown`` (the declarations' and
    patterns' tables) nor SQL models: the alerts, the baselines, the late changes; each the
    warehouse holds, with what it holds."""
    found = []
    for name, what in sorted(config.taken_gold_names.items()):
        if f"gold.{name}" in shown:
            continue
        table = _delta(warehouse.table("gold", name))
        if table is not None:
            found.append(HeldTable(f"gold.{name}", _rows(table, _files(table)), what))
    return found


def _orphaned(
    warehouse: Warehouse, config: PipelineConfig, entities: Iterable[str]
) -> list[OrphanedTable]:
    """The silver and gold tables of ``warehouse`` that ``config`` does not make: a silver
    table that is no bronze topic's entity (``entities``), their history tables or the
    quarantine; a gold table no declaration, pattern, model or alert makes."""
    silver = {name.partition(".")[2] for name in entities} | {QUARANTINE_TABLE}
    silver |= {spec.history_name for spec in config.tables if spec.history_name is not None}
    gold = {*config.taken_gold_names, *(model.name for model in config.models)}
    found = []
    for layer, declared in (("silver", silver), ("gold", gold)):
        folder = warehouse.table(layer, "x").rpartition("/")[0]  # type: ignore[arg-type]
        for name in sorted(_names(folder)):
            if name.startswith(".") or name in declared:
                continue
            table = _delta(f"{folder}/{name}")
            if table is not None:
                found.append(OrphanedTable(f"{layer}.{name}", _rows(table, _files(table))))
    return found


def running(spark: SparkSession | None, warehouse: Warehouse, now: datetime) -> Running | None:
    """The heartbeat of the pipeline run of ``warehouse``, if one was left (None: none runs).
    ``spark`` is not used (the heartbeat file is read directly)."""
    text = _read_text(warehouse.heartbeat)
    if text is None:
        return None
    beat = json.loads(text)
    heartbeat = datetime.fromisoformat(beat["heartbeat"])
    stale_after = STALE_INTERVALS * float(beat.get("interval_seconds", 10))
    return Running(
        alive=(now - heartbeat).total_seconds() <= stale_after,
        mode=str(beat.get("mode", "")),
        pid=int(beat.get("pid", 0)),
        host=str(beat.get("host", "")),
        started=datetime.fromisoformat(beat["started"]),
        heartbeat=heartbeat,
        failing=[_failing(failed) for failed in beat.get("failing", [])],
    )


def _failing(failed: dict[str, Any]) -> Failing:
    """A failing table as a heartbeat lists it
    (:meth:`lakehouse_core.failures.TableFailure.to_json`)."""
    retry_at = failed.get("retry_at")
    return Failing(
        table=str(failed["table"]),
        query=str(failed["query"]),
        error=str(failed["error"]),
        at=datetime.fromisoformat(failed["at"]),
        attempts=int(failed.get("attempts", 1)),
        retry_at=None if retry_at is None else datetime.fromisoformat(retry_at),
    )


#: The event log's columns status reads (not the traces, offsets or ids).
_LOG_COLUMNS = ["query", "event", "batch_id", "timestamp", "duration_ms", "input_rows", "error"]


#: Micro-batches by query and batch id.
Batches = dict[tuple[str, int], LastBatch]


def _last_batches(
    log: DeltaTable | None,
) -> tuple[dict[str, LastBatch], Batches, int, list[Failing]]:
    """Each query's newest micro-batch in the event log, each (query, batch id)'s newest
    micro-batch of that id, the log's row count, and the queries whose newest row is a
    failure."""
    if log is None:
        return {}, {}, 0, []
    rows = log.to_pyarrow_dataset().to_table(columns=_LOG_COLUMNS)
    micros = pc.cast(pc.cast(rows["timestamp"], pa.timestamp("us", "UTC")), pa.int64())
    rows = rows.set_column(rows.schema.get_field_index("timestamp"), "timestamp", micros)
    rows = rows.sort_by([("query", "ascending"), ("timestamp", "ascending")])
    progress = rows.filter(pc.equal(rows["event"], "progress"))
    every: Batches = {}
    for row in progress.to_pylist():  # oldest first: a batch id run again keeps its newest
        every[(str(row["query"]), int(row["batch_id"]))] = LastBatch(
            int(row["batch_id"]),
            _at(row["timestamp"]),
            int(row["duration_ms"] or 0),
            int(row["input_rows"] or 0),
        )
    batches = {
        str(row["query"]): every[(str(row["query"]), int(row["batch_id"]))]
        for row in _newest_per_query(progress)
    }
    failed = [
        Failing(
            _table_of(str(row["query"])),
            str(row["query"]),
            row["error"] or "",
            _at(row["timestamp"]),
        )
        for row in _newest_per_query(rows)
        if row["event"] == "failed"
    ]
    return batches, every, _rows(log, _files(log)), sorted(failed, key=lambda f: f.table)


def _newest_per_query(rows: pa.Table) -> list[dict[str, Any]]:
    """The last row of each query in ``rows`` (sorted by query, then time)."""
    if rows.num_rows == 0:
        return []
    queries = rows["query"].combine_chunks()
    following = [*pc.not_equal(queries[:-1], queries[1:]).to_pylist(), True]
    last: list[dict[str, Any]] = rows.filter(pa.array(following)).to_pylist()
    return last


def _table_of(query: str) -> str:
    """The table a query keeps, as a run names it: ``silver_orders`` is ``silver.orders``."""
    layer, _, name = query.partition("_")
    return f"{layer}.{name}" if layer in ("silver", "gold") and name else query


def quality_status(spark: SparkSession | None, warehouse: Warehouse) -> list[QualityStatus]:
    """Per table and expectation, the sums of the quality metrics (empty: none recorded).
    ``spark`` is not used (the metrics table is read with ``deltalake``)."""
    table = _delta(warehouse.quality())
    if table is None:
        return []
    columns = ["table", "expectation", "action", "rows_counted", "rows_failed", "rows_dropped"]
    rows = table.to_pyarrow_dataset().to_table(columns=[*columns, "held"])
    rows = rows.append_column("broken", pc.cast(pc.invert(rows["held"]), pa.int64()))
    sums = rows.group_by(["table", "expectation", "action"], use_threads=False).aggregate(
        [
            ("rows_counted", "sum"),
            ("rows_failed", "sum"),
            ("rows_dropped", "sum"),
            ("broken", "sum"),
        ]
    )
    found = [
        QualityStatus(
            table=str(r["table"]),
            expectation=str(r["expectation"]),
            action=str(r["action"]),
            checked=int(r["rows_counted_sum"] or 0),
            failed=int(r["rows_failed_sum"] or 0),
            dropped=int(r["rows_dropped_sum"] or 0),
            broken_batches=int(r["broken_sum"] or 0),
        )
        for r in sums.to_pylist()
    ]
    return sorted(found, key=lambda q: (q.table, q.expectation))


def _rows_per(table: DeltaTable | None, column: str) -> dict[str, int]:
    """Rows of ``table`` per value of ``column`` (none if it does not exist): that one column
    is read (the quarantine and late-event tables hold no count per value elsewhere)."""
    if table is None:
        return {}
    values = table.to_pyarrow_dataset().to_table(columns=[column])[column]
    if len(values) == 0:
        return {}
    counts = pc.value_counts(values.combine_chunks()).to_pylist()
    return {str(c["values"]): int(c["counts"]) for c in counts}


def _type_changes(quarantine: DeltaTable | None) -> dict[str, tuple[tuple[str, int], ...]]:
    """Per entity, its quarantined records per incompatible-type reason (the reason names the
    column and both types), most first: the ``entity`` and ``reason`` columns of those rows."""
    if quarantine is None:
        return {}
    dataset = quarantine.to_pyarrow_dataset()
    found = dataset.to_table(
        columns=["entity", "reason"],
        filter=pc.starts_with(pc.field("reason"), INCOMPATIBLE),
    )
    counts: Counter[tuple[str, str]] = Counter(
        zip(found["entity"].to_pylist(), found["reason"].to_pylist(), strict=True)
    )
    per: dict[str, list[tuple[str, int]]] = {}
    for (entity, reason), records in counts.most_common():
        per.setdefault(str(entity), []).append((str(reason), records))
    return {entity: tuple(reasons) for entity, reasons in per.items()}


def _rescued_rows(files: pa.Table | None) -> int:
    """The rows of a silver table whose ``_rescued_data`` is not null, from its files'
    statistics (none: the table has no such column, or no statistics of it)."""
    nulls = f"null_count.{RESCUED}"
    if files is None or nulls not in files.column_names or files.num_rows == 0:
        return 0
    rows = pc.sum(files["num_records"]).as_py() or 0
    return max(0, int(rows) - int(pc.sum(files[nulls]).as_py() or 0))


def _versions(table: DeltaTable | None, operations: tuple[str, ...]) -> dict[int, int]:
    """Rows added per version of ``table``, for its commits of ``operations`` (from the commit
    metrics: Spark's ``numOutputRows``, delta-rs's ``num_added_rows``)."""
    if table is None:
        return {}
    result = {}
    for commit in table.history():
        if commit.get("operation") in operations and "version" in commit:
            metrics = commit.get("operationMetrics") or {}
            added = metrics.get("numOutputRows", metrics.get("num_added_rows", 0))
            result[int(commit["version"])] = int(added or 0)
    return result


def _files(table: DeltaTable | None) -> pa.Table | None:
    """The table's add actions with their statistics, one row per data file."""
    if table is None:
        return None
    return pa.table(table.get_add_actions(flatten=True))


def _rows(table: DeltaTable | None, files: pa.Table | None) -> int:
    """The rows of ``table``: the sum of its files' ``numRecords`` (less the rows their
    deletion vectors remove); a file without statistics is counted from its Parquet footer."""
    if table is None or files is None or files.num_rows == 0:
        return 0
    counts = files["num_records"]
    total = int(pc.sum(counts).as_py() or 0)
    deleted = "deletionVector.cardinality"
    if deleted in files.column_names:
        total -= int(pc.sum(files[deleted]).as_py() or 0)
    if counts.null_count:
        unknown = set(files.filter(pc.is_null(counts))["path"].to_pylist())
        dataset = table.to_pyarrow_dataset()
        total += sum(
            fragment.count_rows()
            for fragment in dataset.get_fragments()
            if any(fragment.path.endswith(path) for path in unknown)
        )
    return total


def _newest(table: DeltaTable | None, files: pa.Table | None, column: str) -> datetime | None:
    """The greatest value of the timestamp ``column`` of ``table``: from its files' maximum
    statistics (milliseconds, as Delta keeps them), else read from that column alone."""
    if table is None or files is None or files.num_rows == 0:
        return None
    stat = f"max.{column}"
    if stat in files.column_names and files[stat].null_count == 0:
        values = files[stat]
    else:
        dataset = table.to_pyarrow_dataset()
        if column not in dataset.schema.names:
            return None
        values = dataset.to_table(columns=[column])[column]
    newest = pc.max(pc.cast(pc.cast(values, pa.timestamp("us", "UTC")), pa.int64())).as_py()
    return _instant(newest)


def bronze_topics(warehouse: Warehouse) -> list[str]:
    """The topic of every bronze table, internal topics excepted."""
    layer = warehouse.table("bronze", "x").rpartition("/")[0]  # where bronze tables are
    found = []
    for name in sorted(_names(layer)):
        if name.startswith("."):
            continue
        table = _delta(f"{layer}/{name}")
        topic = "" if table is None else table.metadata().configuration.get(TOPIC_PROPERTY, "")
        if topic and not topic.startswith("_"):
            found.append(topic)
    return found


def checkpoint_place(base: str) -> checkpoints.CheckpointPlace:
    """The checkpoint a query with base location ``base`` uses now (its pointer read as
    :func:`lakehouse_core.checkpoints.current` reads it)."""
    text = _read_text(checkpoints.pointer(base))
    if text is None:
        return checkpoints.CheckpointPlace(base)
    document = json.loads(text)
    return checkpoints.CheckpointPlace(
        checkpoints.generation(base, str(document["generation"])),
        int(document.get("startingVersion", 0)),
    )


def _seen_micros(path: str) -> int | None:
    """The latest event time (epoch µs) a gold job has recorded at ``path`` (as
    :func:`gold.watermarks.seen_micros` reads it, an earlier warehouse's one-row table too)."""
    text = _read_text(path)
    if text is not None:
        return int(json.loads(text)[SEEN])
    earlier = _delta(path.removesuffix(".json")) if path.endswith(".json") else None
    if earlier is None:
        return None
    values = earlier.to_pyarrow_dataset().to_table(columns=[SEEN])[SEEN].to_pylist()
    return next((int(v) for v in values if v is not None), None)


#: Hadoop's names of file systems that ``pyarrow`` and ``deltalake`` know by another.
_SCHEMES = {"s3a": "s3", "s3n": "s3"}


def _location(uri: str) -> str:
    """``uri`` as ``pyarrow`` and ``deltalake`` name it: a local path for a local file."""
    if not is_uri(uri):
        return uri
    scheme, _, rest = uri.partition(":")
    if scheme == "file":
        return "/" + rest.lstrip("/")
    return f"{_SCHEMES.get(scheme, scheme)}:{rest}"


def _file_system(uri: str) -> tuple[pafs.FileSystem, str]:
    location = _location(uri)
    if not is_uri(location):
        return pafs.LocalFileSystem(), location
    try:
        return pafs.FileSystem.from_uri(location)  # type: ignore[no-any-return]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise ConfigError(
            f"'lakehouse status' reads the warehouse without Spark and cannot open {uri} "
            f"({error}): use a local path or an s3, gs, abfs or hdfs URI."
        ) from error


def _read_text(uri: str) -> str | None:
    """The UTF-8 text of the file at ``uri``, or None if there is none."""
    fs, path = _file_system(uri)
    try:
        with fs.open_input_stream(path) as stream:
            return bytes(stream.read()).decode("utf-8")
    except (FileNotFoundError, IsADirectoryError):
        return None


def _names(uri: str) -> list[str]:
    """Names of the entries of the directory ``uri`` (none if it does not exist)."""
    fs, path = _file_system(uri)
    infos: Iterable[pafs.FileInfo] = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return [info.base_name for info in infos]


def _delta(uri: str) -> DeltaTable | None:
    """The Delta table at ``uri`` (None: there is none)."""
    location = _location(uri)
    _file_system(uri)  # a file system pyarrow cannot open is the user's to fix
    try:
        return DeltaTable(location)
    except TableNotFoundError:
        return None


def _instant(micros: int | None) -> datetime | None:
    """Microseconds since the epoch (independent of time zones) as UTC."""
    return None if micros is None else _at(micros)


def _at(micros: int) -> datetime:
    return datetime.fromtimestamp(micros / 1_000_000, UTC)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
