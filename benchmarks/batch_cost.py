"""What one steady-state silver micro-batch costs: Spark jobs, Delta commits and milliseconds.

A silver ``orders`` table of ``--rows`` keys (inserted in order, in micro-batches of
``--load-batch`` keys), then ``--batches`` micro-batches of ``--events`` Debezium Postgres
updates (each with a few redeliveries of events already applied) of random keys, or with
``--keys recent`` of keys among the newest :data:`RECENT` of the table (as most updates of an
orders table are), applied one by one with ``silver.job.apply_batch`` on a
warm session, each read from its own small bronze Delta table as a stream's batch would be.
Per batch: the Spark jobs it ran (a job group around the call), the Delta commits it added
(versions of every table under the warehouse) and its wall time. Prints the figures of every
batch and the median of the batches after the first ``--warmup``; ``--json`` writes them.

``--load bulk`` builds the table fast: a thousand keys applied as Debezium records, the rest
copies of key 0's row written in key order, files of a million rows (about what ``maintain``
leaves). ``--sizes`` (``make bench``) measures tables of each size so built, first as they are,
then with the ``deletion_vectors`` setting turned on, and compares the largest with the
smallest (goal: within 2x).

    .venv/bin/python -m benchmarks.batch_cost --rows 100000 --events 2000
    .venv/bin/python -m benchmarks.batch_cost --rows 1000000 --load-batch 100000 --keys recent
    .venv/bin/python -m benchmarks.batch_cost --sizes 100000,1000000,10000000
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bronze.table import with_ingestion_metadata
from cdc.files import lines_to_records
from cdc.records import Record
from lakehouse_core.config import TableSpec
from lakehouse_core.delta_io import versions
from lakehouse_core.layout import Warehouse
from lakehouse_core.spark import get_spark
from lakehouse_demo.shop import (
    ORDER_COLUMNS,
    decimal_b64,
    envelope_schema,
    key_schema,
    zoned_timestamp,
)
from silver.job import BatchReport, QueryState, apply_batch, ensure_shared_tables, entity_tables

TOPIC = "shop.public.orders"
SPEC = TableSpec(name="orders", topic=TOPIC)
_VALUE_SCHEMA = envelope_schema("shop.public.orders", ORDER_COLUMNS)
_KEY_SCHEMA = key_schema("shop.public.orders", ORDER_COLUMNS)
_STATUSES = ("new", "paid", "shipped", "cancelled")


def _record(offset: int, key: int, lsn: int, op: str) -> Record:
    micros = 1_767_225_600_000_000 + lsn
    row = {
        "id": key,
        "customer_id": key % 997,
        "status": _STATUSES[lsn % 4],
        "total": decimal_b64(lsn % 100_000),
        "items": '[{"qty": 1, "sku": "A-1", "price": "1.00"}]',
        "created_at": micros,
        "updated_at": zoned_timestamp(micros),
    }
    payload = {
        "before": None,
        "after": row,
        "source": {
            "version": "3.1.2.Final",
            "connector": "postgresql",
            "name": "shop",
            "ts_ms": micros // 1000,
            "snapshot": "false",
            "db": "shop",
            "sequence": json.dumps([str(lsn - 1), str(lsn)]),
            "schema": "public",
            "table": "orders",
            "txId": lsn,
            "lsn": lsn,
        },
        "transaction": None,
        "op": op,
        "ts_ms": micros // 1000 + 5,
    }
    key_doc = {"schema": _KEY_SCHEMA, "payload": {"id": key}}
    value = {"schema": _VALUE_SCHEMA, "payload": payload}
    return Record(TOPIC, 0, offset, micros // 1000, key_doc, value)


#: Keys per micro-batch of the initial load (a batch of ten million would not fit the driver).
LOAD_BATCH = 1_000_000
#: ``--keys recent``: the share of the table, its newest keys, that the updates touch.
RECENT = 0.01
#: Records per write of a bronze input: the driver holds one chunk's lines at a time (a million
#: Debezium envelopes with their schemas do not fit in its memory at once).
CHUNK = 50_000


def _write_bronze(spark: SparkSession, records: list[Record], path: str, batch_id: int) -> None:
    for start in range(0, len(records), CHUNK):
        lines = [(r.to_line(), "bench") for r in records[start : start + CHUNK]]
        frame = spark.createDataFrame(lines, "value string, _source string")
        bronze = with_ingestion_metadata(lines_to_records(frame), batch_id)
        bronze.write.format("delta").mode("overwrite" if start == 0 else "append").save(path)


#: ``--load bulk``: keys applied as Debezium records before the rest are copied from key 0's row.
SEED_ROWS = 1_000
#: ``--load bulk``: rows per data file of the copied keys (about what ``maintain`` leaves).
ROWS_PER_FILE = 1_000_000


def _clone_rows(spark: SparkSession, path: str, start: int, rows: int) -> None:
    """Append keys ``start`` to ``rows - 1`` to the silver table at ``path``, each a copy of
    key 0's row with its own key, customer and bronze offset, in key order."""
    if rows <= start:
        return
    table = spark.read.format("delta").load(path)
    template = table.where("id = 0").drop("id", "customer_id")
    copies = (
        spark.range(start, rows)
        .crossJoin(template.drop("_bronze_offset"))
        .withColumn("customer_id", F.col("id") % 997)
        .withColumn("_bronze_offset", F.col("id"))
        .select(*(F.col(f.name).cast(f.dataType) for f in table.schema.fields))
        .repartitionByRange(max(1, (rows - start) // ROWS_PER_FILE), "id")
        .sortWithinPartitions("id")
    )
    copies.write.format("delta").mode("append").save(path)


def _commits(spark: SparkSession, root: Path) -> int:
    tables = [p.parent for p in root.rglob("_delta_log") if p.is_dir()]
    return sum(len(versions(spark, str(t))) for t in tables)


def _one_batch(
    spark: SparkSession, batch: DataFrame, batch_id: int, apply: Applier, root: Path, verbose: bool
) -> dict[str, Any]:
    """Apply one batch; its wall time, Spark jobs and Delta commits under ``root``."""
    before = _commits(spark, root)
    group = f"batch-cost-{batch_id}"
    spark.sparkContext.setJobGroup(group, group)
    start = time.perf_counter()
    try:
        report = apply(batch, batch_id)
    finally:
        seconds = time.perf_counter() - start
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    tracker = spark.sparkContext.statusTracker()
    job_ids = sorted(tracker.getJobIdsForGroup(group))
    if verbose:
        for job_id in job_ids:
            info = tracker.getJobInfo(job_id)
            stages = [tracker.getStageInfo(s) for s in (info.stageIds if info else [])]
            print("  job", job_id, [s.name for s in stages if s is not None])
    return {
        "batch": batch_id,
        "ms": round(seconds * 1000),
        "jobs": len(job_ids),
        "commits": _commits(spark, root) - before,
        "applied": report.applied,
    }


Applier = Callable[[DataFrame, int], BatchReport]


class _Workload:
    """Initial inserts of ``rows`` keys, then batches of updates with some redeliveries."""

    def __init__(self, rows: int, seed: int, recent: bool = False) -> None:
        self.rows, self.rng = rows, random.Random(seed)
        self.lowest = rows - max(1, int(rows * RECENT)) if recent else 0
        self.lsn, self.offset = 1_000, 0
        self.applied: list[Record] = []

    def _next(self, key: int, op: str) -> Record:
        self.lsn += 2
        self.offset += 1
        return _record(self.offset, key, self.lsn, op)

    def initial(self, size: int) -> Iterator[list[Record]]:
        """The inserts of every key, ``size`` keys at a time."""
        for start in range(0, self.rows, size):
            yield [self._next(key, "r") for key in range(start, min(start + size, self.rows))]

    def batch(self, events: int, redelivered: float) -> list[Record]:
        stale = int(events * redelivered) if self.applied else 0
        records = self.rng.sample(self.applied, stale) if stale else []
        fresh = [
            self._next(self.rng.randrange(self.lowest, self.rows), "u")
            for _ in range(events - stale)
        ]
        self.applied = fresh
        records += fresh
        self.rng.shuffle(records)
        return records


def _load(spark: SparkSession, root: Path, workload: _Workload, args: argparse.Namespace) -> int:
    """The initial table: ``--load batches`` applies every key's insert in micro-batches of
    ``--load-batch``; ``--load bulk`` applies :data:`SEED_ROWS` keys, then copies key 0's row
    for the rest (:func:`_clone_rows`). Returns the id of the last batch applied."""
    warehouse = Warehouse.from_path(root / "warehouse")
    ensure_shared_tables(spark, warehouse)
    apply = _applier(warehouse, SPEC)
    started = time.perf_counter()
    size = min(workload.rows, SEED_ROWS) if args.load == "bulk" else args.load_batch
    loads = 0
    for loads, records in enumerate(workload.initial(size), start=1):
        path = str(root / "bronze_in" / str(loads))
        _write_bronze(spark, records, path, loads)
        apply(spark.read.format("delta").load(path), loads)
        if args.load == "bulk":
            _clone_rows(spark, entity_tables(warehouse, SPEC).silver, SEED_ROWS, workload.rows)
            break
    print(f"initial load of {workload.rows:,} rows: {time.perf_counter() - started:.1f} s")
    return loads


def _applier(warehouse: Warehouse, spec: TableSpec) -> Applier:
    """``apply_batch`` of one silver query (its state kept between batches)."""
    tables, state = entity_tables(warehouse, spec), QueryState()

    def apply(batch: DataFrame, batch_id: int) -> BatchReport:
        return apply_batch(batch, batch_id, spec, tables, "bench", None, state)

    return apply


def _measure(
    spark: SparkSession,
    root: Path,
    workload: _Workload,
    spec: TableSpec,
    batch_ids: range,
    args: argparse.Namespace,
) -> list[dict[str, Any]]:
    """Apply one batch of updates per id in ``batch_ids`` with a new query of ``spec``; the
    figures of each."""
    apply = _applier(Warehouse.from_path(root / "warehouse"), spec)
    figures = []
    for batch_id in batch_ids:
        path = str(root / "bronze_in" / str(batch_id))
        _write_bronze(spark, workload.batch(args.events, args.redelivered), path, batch_id)
        batch = spark.read.format("delta").load(path)
        batch.inputFiles()  # a stream's batch names its files: no snapshot job in the batch
        figure = _one_batch(spark, batch, batch_id, apply, root / "warehouse", args.verbose)
        figures.append(figure)
        print(json.dumps(figure), flush=True)
    return figures


def _summary(figures: list[dict[str, Any]], warmup: int) -> dict[str, Any]:
    """Medians of the batches after the first ``warmup``."""
    steady = figures[warmup:] or figures
    return {
        "median_ms": statistics.median(f["ms"] for f in steady),
        "median_jobs": statistics.median(f["jobs"] for f in steady),
        "median_commits": statistics.median(f["commits"] for f in steady),
        "batches": figures,
    }


def _one_size(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    """``--rows`` keys, then ``--batches`` batches with the table as it is (no deletion
    vectors unless ``--deletion-vectors``)."""
    root = Path(tempfile.mkdtemp(prefix="batch-cost-"))
    try:
        workload = _Workload(args.rows, args.seed, recent=args.keys == "recent")
        loaded = _load(spark, root, workload, args)
        spec = replace(SPEC, deletion_vectors=args.deletion_vectors)
        batch_ids = range(loaded + 1, loaded + args.batches + 1)
        figures = _measure(spark, root, workload, spec, batch_ids, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = {"rows": args.rows, "events": args.events, "keys": args.keys}
    return summary | _summary(figures, args.warmup)


#: ``--sizes``: the goal, a batch on the largest table within this factor of the smallest's.
SIZE_GOAL = 2.0


def size_curve(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    """Per table size of ``--sizes`` (loaded in bulk): ``--batches`` batches without deletion
    vectors, then the same with them (the setting turned on, as a user would on a grown
    table), each after ``--warmup`` unmeasured batches."""
    args.load = "bulk"
    curve: dict[str, Any] = {"events": args.events, "keys": args.keys, "sizes": {}}
    for rows in args.sizes:
        root = Path(tempfile.mkdtemp(prefix="batch-cost-"))
        try:
            workload = _Workload(rows, args.seed, recent=args.keys == "recent")
            next_id = _load(spark, root, workload, args) + 1
            by_mode = {}
            for mode, vectors in (("default", False), ("deletion_vectors", True)):
                count = args.warmup + args.batches
                batch_ids = range(next_id, next_id + count)
                spec = replace(SPEC, deletion_vectors=vectors)
                figures = _measure(spark, root, workload, spec, batch_ids, args)
                by_mode[mode] = _summary(figures, args.warmup)
                next_id += count
                print(f"{rows:,} rows, {mode}: {by_mode[mode]['median_ms']:.0f} ms", flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        curve["sizes"][str(rows)] = by_mode
    smallest, largest = (curve["sizes"][str(f(args.sizes))] for f in (min, max))
    curve["largest_vs_smallest"] = {
        mode: round(largest[mode]["median_ms"] / smallest[mode]["median_ms"], 2)
        for mode in ("default", "deletion_vectors")
    }
    curve["goal_largest_vs_smallest"] = SIZE_GOAL
    return curve


def print_curve(curve: dict[str, Any]) -> None:
    print(
        f"\nsilver batch of {curve['events']:,} updates ({curve['keys']} keys) vs table size, "
        "median ms (Spark jobs):"
    )
    print(f"{'rows':>12}{'default':>18}{'deletion vectors':>20}")
    for rows, modes in curve["sizes"].items():
        cells = [
            f"{modes[m]['median_ms']:>8.0f} ({modes[m]['median_jobs']:.0f} jobs)"
            for m in ("default", "deletion_vectors")
        ]
        print(f"{int(rows):>12,}{cells[0]:>18}{cells[1]:>20}")
    ratios = curve["largest_vs_smallest"]
    print(
        f"largest vs smallest: {ratios['default']:.1f}x default, "
        f"{ratios['deletion_vectors']:.1f}x with deletion vectors "
        f"(goal <= {curve['goal_largest_vs_smallest']:.0f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(n) for n in text.split(",")],
        default=None,
        help="comma-separated table sizes: the per-size curve, without and with deletion vectors",
    )
    parser.add_argument("--events", type=int, default=2_000)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--redelivered", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--load-batch", type=int, default=LOAD_BATCH)
    parser.add_argument("--load", choices=("batches", "bulk"), default="batches")
    parser.add_argument("--deletion-vectors", action="store_true")
    parser.add_argument("--keys", choices=("random", "recent"), default="random")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--verbose", action="store_true", help="print each job's stages")
    args = parser.parse_args()

    spark = get_spark(mode="local-jars")
    spark.sparkContext.setLogLevel("ERROR")
    if args.sizes:
        result = size_curve(spark, args)
        print_curve(result)
    else:
        result = _one_size(spark, args)
        print(
            f"steady state ({args.rows:,}-row table, {args.events:,} events, {args.keys} keys): "
            f"{result['median_ms']:.0f} ms, {result['median_jobs']:.0f} Spark jobs, "
            f"{result['median_commits']:.0f} commits"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
