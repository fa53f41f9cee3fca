"""What a fresh read of a silver table costs against a plain read of it, in the same run.

A silver ``orders`` table of ``--rows`` keys (:data:`batch_cost.SEED_ROWS` keys applied as
Debezium records, the rest copies of key 0's row, as ``batch_cost --load bulk`` builds it), and
``--pending`` Debezium updates of random keys appended to its bronze table that silver has not
applied. Each round reads the table whole (every row and column, written to Spark's ``noop``
sink) plainly, then fresh twice (:func:`lakehouse.ops.fresh.fresh_read_after`: pinning the
pair and building the read included): ``fresh_first`` with nothing kept from earlier reads
(the whole tail decoded and folded), ``fresh_repeated`` the same read again (the tail and its
fold kept: a repeated read of the same pinned pair pays only the read of the rows), and
counts the Spark jobs of each (a job group around it), and of making the read alone (for a
fresh read: pinning, decoding and folding the tail; the rest is the read of its rows). Prints
every round and the medians of the rounds after ``--warmup``; the goal is a fresh read at most
:data:`GOAL` times the plain one. ``--json`` (``make bench``: ``latest-fresh-cost.json`` in
``benchmarks/results``) writes the figures.

    .venv/bin/python -m benchmarks.fresh_cost --rows 1000000 --pending 10000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from benchmarks.batch_cost import CHUNK, SEED_ROWS, SPEC, _clone_rows, _Workload
from benchmarks.recording import write_results
from bronze.table import with_ingestion_metadata
from cdc.files import lines_to_records
from cdc.records import Record
from lakehouse.ops.fresh import forget_kept_tails, fresh_read_after
from lakehouse_core.config import PipelineConfig
from lakehouse_core.delta_io import current_version
from lakehouse_core.layout import Warehouse
from lakehouse_core.spark import get_spark
from silver.job import QueryState, apply_batch, bronze_path, entity_tables

#: The goal: a fresh read at most this many times a plain read of the same table.
GOAL = 2.0
#: The reads of each round: plain, fresh with nothing kept, the same fresh read again.
KINDS = ("plain", "fresh_first", "fresh_repeated")


def _append_bronze(spark: SparkSession, records: list[Record], path: str, batch_id: int) -> None:
    """Append ``records`` to the bronze table at ``path`` as the bronze query appends them (one
    commit per :data:`CHUNK` records)."""
    for start in range(0, len(records), CHUNK):
        lines = [(r.to_line(), "bench") for r in records[start : start + CHUNK]]
        frame = spark.createDataFrame(lines, "value string, _source string")
        bronze = with_ingestion_metadata(lines_to_records(frame), batch_id)
        bronze.write.format("delta").mode("append").save(path)


def build(
    spark: SparkSession, root: Path, rows: int, pending: int, seed: int
) -> tuple[Warehouse, int]:
    """A warehouse whose ``silver.orders`` holds ``rows`` keys and whose bronze table holds
    ``pending`` updates silver has not applied; returns it and the bronze version silver has
    applied."""
    warehouse = Warehouse.from_path(root / "warehouse")
    tables, bronze = entity_tables(warehouse, SPEC), bronze_path(warehouse, SPEC)
    workload = _Workload(rows, seed)
    seeds = next(workload.initial(min(rows, SEED_ROWS)))
    _append_bronze(spark, seeds, bronze, 1)
    applied = current_version(spark, bronze)
    apply_batch(
        spark.read.format("delta").load(bronze), 1, SPEC, tables, "bench", None, QueryState()
    )
    _clone_rows(spark, tables.silver, SEED_ROWS, rows)
    _append_bronze(spark, workload.batch(pending, 0.0), bronze, 2)
    return warehouse, applied


def _timed(spark: SparkSession, group: str, read: Callable[[], DataFrame]) -> dict[str, Any]:
    """Build the frame ``read`` returns and write all of it to the ``noop`` sink: the wall
    time and the Spark jobs of both (``ms``, ``jobs``), and of building the frame alone
    (``build_ms``, ``build_jobs``: for a fresh read, pinning, decoding and folding the tail;
    the rest is the read of the rows)."""
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup(group, group)
    start = time.perf_counter()
    try:
        frame = read()
        built, build_jobs = time.perf_counter(), len(tracker.getJobIdsForGroup(group))
        frame.write.format("noop").mode("overwrite").save()
    finally:
        end = time.perf_counter()
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return {
        "ms": round((end - start) * 1000),
        "jobs": len(tracker.getJobIdsForGroup(group)),
        "build_ms": round((built - start) * 1000),
        "build_jobs": build_jobs,
    }


def measure(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    """Build the warehouse, then ``--rounds`` rounds of a plain and a fresh read."""
    root = Path(tempfile.mkdtemp(prefix="fresh-cost-"))
    load_before = list(os.getloadavg())
    try:
        started = time.perf_counter()
        warehouse, applied = build(spark, root, args.rows, args.pending, args.seed)
        print(f"built in {time.perf_counter() - started:.1f} s", flush=True)
        config = PipelineConfig(tables=(SPEC,))
        silver = entity_tables(warehouse, SPEC).silver

        def plain() -> DataFrame:
            return spark.read.format("delta").load(silver)

        def fresh() -> DataFrame:
            return fresh_read_after(spark, warehouse, config, SPEC, applied).rows

        rounds = []
        for n in range(args.rounds):
            forget_kept_tails()
            figure = {
                "plain": _timed(spark, f"fresh-cost-plain-{n}", plain),
                "fresh_first": _timed(spark, f"fresh-cost-first-{n}", fresh),
                "fresh_repeated": _timed(spark, f"fresh-cost-repeated-{n}", fresh),
            }
            rounds.append(figure)
            print(json.dumps(figure), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    steady = rounds[args.warmup :] or rounds
    medians = {
        kind: {
            f"median_{figure}": statistics.median(r[kind][figure] for r in steady)
            for figure in ("ms", "jobs", "build_ms", "build_jobs")
        }
        for kind in KINDS
    }
    plain_ms = medians["plain"]["median_ms"]
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load_average_before": load_before,
        "load_average": list(os.getloadavg()),
        "rows": args.rows,
        "pending": args.pending,
        "rounds": rounds,
        **medians,
        "first_vs_plain": round(medians["fresh_first"]["median_ms"] / plain_ms, 2),
        "repeated_vs_plain": round(medians["fresh_repeated"]["median_ms"] / plain_ms, 2),
        "goal_fresh_vs_plain": GOAL,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--seed", type=int, default=60)
    parser.add_argument("--json", action="store_true", help="write benchmarks/results JSON")
    args = parser.parse_args()

    spark = get_spark(mode="local-jars")
    spark.sparkContext.setLogLevel("ERROR")
    result = measure(spark, args)
    plain, first, again = (result[kind] for kind in KINDS)
    print(
        f"{args.rows:,}-row table, {args.pending:,} pending records: plain read "
        f"{plain['median_ms']:.0f} ms ({plain['median_jobs']:.0f} jobs); fresh read, first "
        f"{first['median_ms']:.0f} ms ({first['median_jobs']:.0f} jobs; making it "
        f"{first['median_build_ms']:.0f} ms, {first['median_build_jobs']:.0f} jobs): "
        f"{result['first_vs_plain']:.2f}x; repeated {again['median_ms']:.0f} ms "
        f"({again['median_jobs']:.0f} jobs): {result['repeated_vs_plain']:.2f}x "
        f"(goal <= {GOAL:.0f}x; load average {result['load_average'][0]:.1f})"
    )
    if args.json:
        write_results(result, "fresh-cost")


if __name__ == "__main__":
    main()
