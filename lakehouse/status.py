"""What a warehouse's pipeline has done and is doing: per table how far each layer has applied
its input, the last micro-batch, freshness, quarantine, gold's watermark and late changes, and
whether a pipeline runs now.

How far a streaming query has read is taken from its checkpoint: the offsets of its last
committed micro-batch name the last version of its Delta input it has read. The records it has
not applied yet are the rows that the newer versions of that input added (from the Delta log's
operation metrics, without reading the data). The last micro-batch comes from the event log
(:mod:`lakehouse.event_log`), whether a pipeline runs from its heartbeat. The tables failing are
those a running pipeline's heartbeat lists (retried with backoff), else those whose newest row
in the event log is a failure.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from core import checkpoints
from core.config import PipelineConfig
from core.delta_io import table_exists
from core.gold_tables import LATE_EVENTS
from core.identifiers import table_name_for_topic
from core.layout import QUARANTINE_TABLE, Warehouse
from core.storage import read_text
from gold.jobs import gold_jobs
from gold.progress import applied_location, read_applied
from gold.watermarks import seen_micros, watermark_of
from lakehouse.entities import entity_specs

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


@dataclass(frozen=True)
class GoldStatus:
    """One gold table and the silver table whose change feed it reads."""

    table: str
    input: str
    input_version: int | None
    applied_version: int | None
    versions_behind: int  # silver commits that changed rows after ``applied_version``
    rows: int
    watermark: datetime | None  # windows ending at or before it are final (``_final``)
    late_changes: int  # rows of ``gold.late_events`` for this table
    last_batch: LastBatch | None


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

    def to_json(self) -> dict[str, Any]:
        """The status as JSON values (times in ISO 8601): what ``lakehouse status --json``
        prints."""
        return status_json(self)


def status_json(report: PipelineStatus) -> dict[str, Any]:
    """``report`` as JSON values (times in ISO 8601), the object ``lakehouse status --json``
    prints: every field of :class:`PipelineStatus`, nested dataclasses as objects."""
    return _jsonable(asdict(report))  # type: ignore[no-any-return]


def pipeline_status(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig, now: datetime
) -> PipelineStatus:
    """The status of ``warehouse`` at ``now`` (timezone-aware)."""
    last, log_rows, failed_last = _last_batches(spark, warehouse)
    quarantine = _rows_per(spark, warehouse.table("silver", QUARANTINE_TABLE), "entity")
    silver = []
    for spec in entity_specs(spark, warehouse, config):
        bronze_name = table_name_for_topic(spec.topic)
        bronze = warehouse.table("bronze", bronze_name)
        place = checkpoints.current(spark, warehouse.checkpoint(f"silver_{spec.name}"))
        applied = applied_version(spark, place.location)
        if applied is None and place.starting_version:  # handed over by one hop
            applied = place.starting_version - 1
        versions = _versions(spark, bronze, ADDING_OPERATIONS)
        records = (
            spark.read.format("delta")
            .load(bronze)
            .agg(F.count(F.lit(1)).alias("n"), F.unix_micros(F.max("timestamp")).alias("newest"))
        )
        totals = records.first()
        assert totals is not None
        path = warehouse.table("silver", spec.name)
        rows, newest_event = 0, None
        if table_exists(spark, path):
            stats = (
                spark.read.format("delta")
                .load(path)
                .agg(
                    F.count(F.lit(1)).alias("n"), F.unix_micros(F.max("_source_ts")).alias("newest")
                )
            )
            first = stats.first()
            assert first is not None
            rows, newest_event = int(first.n), _instant(first.newest)
        silver.append(
            SilverStatus(
                table=f"silver.{spec.name}",
                bronze_table=f"bronze.{bronze_name}",
                bronze_version=max(versions, default=None),
                bronze_records=int(totals.n),
                newest_record=_instant(totals.newest),
                applied_version=applied,
                records_behind=sum(
                    added
                    for version, added in versions.items()
                    if applied is None or version > applied
                ),
                rows=rows,
                newest_applied_event=newest_event,
                freshness_seconds=(now - newest_event).total_seconds() if newest_event else None,
                quarantined=quarantine.get(spec.name, 0),
                last_batch=last.get(f"silver_{spec.name}"),
            )
        )
    late = _rows_per(spark, warehouse.table("gold", LATE_EVENTS), "gold_table")
    declared = {table.name: table for table in config.gold_declarations}
    gold = []
    for job in gold_jobs(config):
        source = warehouse.table("silver", job.input)
        if not table_exists(spark, source):
            continue
        applied = applied_version(
            spark, checkpoints.current(spark, warehouse.checkpoint(job.query)).location
        )
        own = read_applied(spark, applied_location(warehouse, job.table))
        if job.shared or own is not None:  # its own place in a shared query's feed
            applied = None if own is None else own.through
        versions = _versions(spark, source, CHANGING_OPERATIONS)
        path = warehouse.table("gold", job.table)
        gold.append(
            GoldStatus(
                table=f"gold.{job.table}",
                input=f"silver.{job.input}",
                input_version=_latest_version(spark, source),
                applied_version=applied,
                versions_behind=sum(1 for v in versions if applied is None or v > applied),
                rows=spark.read.format("delta").load(path).count()
                if table_exists(spark, path)
                else 0,
                watermark=_instant(
                    watermark_of(
                        seen_micros(spark, warehouse.watermark(job.table)), declared[job.table]
                    )
                ),
                late_changes=late.get(job.table, 0),
                last_batch=last.get(job.query),
            )
        )
    run = running(spark, warehouse, now)
    return PipelineStatus(
        warehouse=warehouse.root,
        at=now,
        running=run,
        bronze_last_batch=last.get("bronze"),
        silver=silver,
        gold=gold,
        event_log_rows=log_rows,
        quality=quality_status(spark, warehouse),
        failing=run.failing if run is not None and run.alive else failed_last,
    )


def applied_version(spark: SparkSession, checkpoint: str) -> int | None:
    """The newest version of its Delta input a streaming query has applied in full: from the
    offsets of its last committed micro-batch (None: it has committed none).

    A Delta source offset ``(reservoirVersion, index)`` with index -1 points just before
    version ``reservoirVersion``; otherwise into it: its first snapshot (``isStartingVersion``)
    is read whole, a later version counts as read only once the offset has passed it.
    """
    last = checkpoints.last_committed_batch(spark, checkpoint)
    if last is None:
        return None
    text = read_text(spark, f"{checkpoint}/offsets/{last}")
    if text is None:
        return None
    offset = json.loads(text.strip().splitlines()[-1])
    version = int(offset["reservoirVersion"])
    if offset.get("index", -1) == -1 or not offset.get("isStartingVersion", False):
        return version - 1
    return version


def running(spark: SparkSession, warehouse: Warehouse, now: datetime) -> Running | None:
    """The heartbeat of the pipeline run of ``warehouse``, if one was left (None: none runs)."""
    text = read_text(spark, warehouse.heartbeat)
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
    """A failing table as a heartbeat lists it (:meth:`core.failures.TableFailure.to_json`)."""
    retry_at = failed.get("retry_at")
    return Failing(
        table=str(failed["table"]),
        query=str(failed["query"]),
        error=str(failed["error"]),
        at=datetime.fromisoformat(failed["at"]),
        attempts=int(failed.get("attempts", 1)),
        retry_at=None if retry_at is None else datetime.fromisoformat(retry_at),
    )


def _last_batches(
    spark: SparkSession, warehouse: Warehouse
) -> tuple[dict[str, LastBatch], int, list[Failing]]:
    """Each query's newest micro-batch in the event log, the log's row count, and the
    queries whose newest row is a failure."""
    if not table_exists(spark, warehouse.event_log):
        return {}, 0, []
    log = spark.read.format("delta").load(warehouse.event_log)
    progress = F.col("event") == "progress"
    newest = (
        log.groupBy("query")
        .agg(
            F.max_by(
                F.struct(
                    "batch_id",
                    F.unix_micros("timestamp").alias("at"),
                    "duration_ms",
                    "input_rows",
                ),
                F.when(progress, F.col("timestamp")),
            ).alias("b"),
            F.max_by(
                F.struct("event", "error", F.unix_micros("timestamp").alias("at")), "timestamp"
            ).alias("last"),
        )
        .collect()
    )
    batches = {
        row.query: LastBatch(
            int(row.b.batch_id), _at(row.b.at), int(row.b.duration_ms), int(row.b.input_rows)
        )
        for row in newest
        if row.b is not None
    }
    failed = [
        Failing(_table_of(row.query), row.query, row.last.error or "", _at(row.last.at))
        for row in newest
        if row.last.event == "failed"
    ]
    return batches, log.count(), sorted(failed, key=lambda f: f.table)


def _table_of(query: str) -> str:
    """The table a query keeps, as a run names it: ``silver_orders`` is ``silver.orders``."""
    layer, _, name = query.partition("_")
    return f"{layer}.{name}" if layer in ("silver", "gold") and name else query


def quality_status(spark: SparkSession, warehouse: Warehouse) -> list[QualityStatus]:
    """Per table and expectation, the sums of the quality metrics (empty: none recorded)."""
    if not table_exists(spark, warehouse.quality()):
        return []
    rows = (
        spark.read.format("delta")
        .load(warehouse.quality())
        .groupBy("table", "expectation", "action")
        .agg(
            F.sum("rows_counted").alias("checked"),
            F.sum("rows_failed").alias("failed"),
            F.sum("rows_dropped").alias("dropped"),
            F.count_if(~F.col("held")).alias("broken"),
        )
        .orderBy("table", "expectation")
        .collect()
    )
    return [
        QualityStatus(
            table=str(r.table),
            expectation=str(r.expectation),
            action=str(r.action),
            checked=int(r.checked or 0),
            failed=int(r.failed or 0),
            dropped=int(r.dropped or 0),
            broken_batches=int(r.broken),
        )
        for r in rows
    ]


def _rows_per(spark: SparkSession, path: str, column: str) -> dict[str, int]:
    """Rows of the table at ``path`` per value of ``column`` (none if it does not exist)."""
    if not table_exists(spark, path):
        return {}
    counts = spark.read.format("delta").load(path).groupBy(column).count().collect()
    return {str(row[column]): int(row["count"]) for row in counts}


def _versions(spark: SparkSession, path: str, operations: tuple[str, ...]) -> dict[int, int]:
    """Rows added per version of the table, for its commits of ``operations``."""
    history = (
        DeltaTable.forPath(spark, path).history().select("version", "operation", "operationMetrics")
    )
    result = {}
    for row in history.collect():
        if row.operation in operations:
            metrics = row.operationMetrics or {}
            added = int(metrics.get("numOutputRows", 0))
            result[int(row.version)] = added
    return result


def _latest_version(spark: SparkSession, path: str) -> int:
    row = DeltaTable.forPath(spark, path).history(1).select("version").first()
    return int(row.version) if row is not None else 0


def _instant(micros: int | None) -> datetime | None:
    """Microseconds since the epoch (``unix_micros``: independent of time zones) as UTC."""
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
