"""Gold maintenance per micro-batch (``make bench``, after the main run): the time one gold
job takes for a batch of 1k and of 10k silver changes against a gold table over a silver
table of ``--rows`` rows (default 1,000,000), per window kind.

The silver table is synthetic (an events table with the silver metadata columns, change feed
on): ``--rows`` events of ``rows / 100`` users over 30 days. Per window kind, one declaration
is first built over the whole table (its first micro-batch, timed as ``initial``), then each
batch of changes (updates of random rows' amount and event time, in one silver MERGE) is
applied and the job's next micro-batch timed. Writes ``results/gold-<date>.json`` and
``results/latest-gold.json``.

First (unless ``--sharing no``) it runs :mod:`benchmarks.gold_sharing`: 1 against 12
declarations over one source (shared query, and one query per declaration), and gold against
Spark's own windowed aggregation.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from benchmarks import gold_sharing
from benchmarks.recording import write_results
from gold.jobs import start_gold
from lakehouse_core.gold_tables import GoldTable, Measure, Window
from lakehouse_core.layout import Warehouse
from lakehouse_core.spark import get_spark
from lakehouse_core.streaming import Trigger, run_to_end

WORK = Path(__file__).parent / "work" / "gold"
DAYS = 30
MEASURES = (
    Measure("n", "count"),
    Measure("total", "sum", "amount"),
    Measure("top", "max", "amount"),
)
KINDS = (
    Window("tumbling", size="1 hour"),
    Window("hopping", size="1 hour", slide="15 minutes"),
    Window("session", gap="30 minutes"),
    Window("sliding", lookback="1 hour"),
    Window("count", count=10),
)


def silver_rows(spark: SparkSession, rows: int, seed: int) -> Any:
    """``rows`` synthetic silver events (event_id, user_id, amount, ts, bronze coordinates)."""
    span = DAYS * 86_400_000_000
    return spark.range(rows).select(
        F.col("id").alias("event_id"),
        (F.col("id") % F.lit(max(1, rows // 100))).alias("user_id"),
        (F.rand(seed) * 100).cast("bigint").alias("amount"),
        F.timestamp_micros(
            F.lit(1_767_225_600_000_000) + (F.rand(seed + 1) * span).cast("bigint")
        ).alias("ts"),
        F.lit(0).alias("_bronze_partition"),
        F.col("id").alias("_bronze_offset"),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--kinds", nargs="+", default=[w.kind for w in KINDS])
    parser.add_argument(
        "--sharing",
        choices=("also", "only", "no"),
        default="also",
        help="also (default), only or not the shared-query and baseline parts "
        "(benchmarks/gold_sharing.py, its own defaults)",
    )
    args = parser.parse_args()
    spark = get_spark(mode="local-jars")
    spark.sparkContext.setLogLevel("ERROR")
    if args.sharing != "no":
        gold_sharing.run(spark)
    if args.sharing == "only":
        return
    shutil.rmtree(WORK, ignore_errors=True)
    results = []
    for number, window in enumerate(w for w in KINDS if w.kind in args.kinds):
        warehouse = Warehouse.from_path(WORK / window.kind)
        path = warehouse.table("silver", "events")
        silver_rows(spark, args.rows, number).write.format("delta").option(
            "delta.enableChangeDataFeed", "true"
        ).save(path)
        table = GoldTable(
            f"bench_{window.kind}", "events", "ts", window, MEASURES, group_by=("user_id",)
        )

        def batch(table: GoldTable = table, warehouse: Warehouse = warehouse) -> float:
            started = time.perf_counter()
            run_to_end(lambda: start_gold(spark, warehouse, Trigger(), table))
            return time.perf_counter() - started

        row: dict[str, Any] = {"kind": window.kind, "initial_seconds": round(batch(), 2)}
        for size in args.batches:
            gold_sharing.change(spark, path, args.rows, size, seed=size + number)
            row[f"batch_{size}_seconds"] = round(batch(), 2)
        gold = spark.read.format("delta").load(warehouse.table("gold", table.name)).count()
        row["gold_rows"] = gold
        print(json.dumps(row), flush=True)
        results.append(row)
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "silver_rows": args.rows,
        "machine": f"{platform.machine()}, {platform.system()}",
        "results": results,
    }
    write_results(result, "gold")
    print(f"\ngold maintenance per micro-batch over {args.rows:,} silver rows (seconds):")
    print(f"{'window':<10}{'initial':>10}" + "".join(f"{f'{s:,} chg':>12}" for s in args.batches))
    for row in results:
        cells = "".join(f"{row[f'batch_{s}_seconds']:>12.1f}" for s in args.batches)
        print(f"{row['kind']:<10}{row['initial_seconds']:>10.1f}{cells}")


if __name__ == "__main__":
    main()
