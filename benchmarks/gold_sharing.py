"""What declarations over one silver source cost per micro-batch when they share one query, and
what gold costs against the streaming aggregation a user would write (``make bench`` runs it
through ``benchmarks/gold_bench.py --sharing``, or ``python -m benchmarks.gold_sharing``).

(a) **Sharing.** The same silver table (``--rows`` synthetic events) and the same batch of
``--changes`` updates, kept by 1 declaration and by 12 (every window kind, different group-bys
and measures): the seconds of the micro-batch that applies the changes, median of
``--repeats`` batches, for the 12 in one shared query (:func:`gold.jobs.start_shared`) and in
one query per declaration (each a query of its own, run together as the pipeline ran them
before queries were shared), and their ratio to the one declaration.

(c) **Baseline.** ``--events`` insert-only events appended in ``--appends`` commits, each
followed by one ``availableNow`` run: a gold declaration (tumbling 1 minute per user, count and
sum, 10 minutes watermark delay) against Spark's own windowed aggregation with a watermark in
update mode writing a Delta table through a foreachBatch MERGE. Events per second of each and
the ratio of their costs. Spark's drops the events behind its watermark; gold corrects them.

Writes ``results/gold-sharing-<date>.json`` and ``results/latest-gold-sharing.json``. Timings
are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks.recording import write_results
from gold.jobs import start_gold, start_shared
from lakehouse_core.gold_tables import GoldTable, Measure, Window
from lakehouse_core.layout import Warehouse
from lakehouse_core.spark import get_spark
from lakehouse_core.streaming import Trigger, finish_all, run_to_end

WORK = Path(__file__).parent / "work" / "gold_sharing"
START_MICROS = 1_767_225_600_000_000  # 2026-01-01
DAYS = 7
N, TOTAL, TOP, LOW, MEAN = (
    Measure("n", "count"),
    Measure("total", "sum", "amount"),
    Measure("top", "max", "amount"),
    Measure("low", "min", "amount"),
    Measure("mean", "avg", "amount"),
)
#: Twelve declarations over silver ``events``: every window kind, three group-bys.
TWELVE = (
    GoldTable("d01", "events", "ts", Window("tumbling", size="1 hour"), (N, TOTAL), ("user_id",)),
    GoldTable("d02", "events", "ts", Window("tumbling", size="15 minutes"), (N, TOP), ("country",)),
    GoldTable("d03", "events", "ts", Window("tumbling", size="1 day"), (N, MEAN)),
    GoldTable(
        "d04",
        "events",
        "ts",
        Window("hopping", size="1 hour", slide="15 minutes"),
        (N, TOTAL, LOW),
        ("country",),
    ),
    GoldTable("d05", "events", "ts", Window("hopping", size="2 hours", slide="1 hour"), (N, TOP)),
    GoldTable("d06", "events", "ts", Window("session", gap="30 minutes"), (N, TOTAL), ("user_id",)),
    GoldTable("d07", "events", "ts", Window("sliding", lookback="1 hour"), (N, TOP), ("user_id",)),
    GoldTable("d08", "events", "ts", Window("count", count=10), (N, MEAN), ("user_id",)),
    GoldTable(
        "d09",
        "events",
        "ts",
        Window("tumbling", size="1 hour"),
        (N, LOW, TOP),
        ("country", "user_id"),
        filter="amount > 10",
    ),
    GoldTable("d10", "events", "ts", Window("tumbling", size="6 hours"), (N, TOTAL), ("country",)),
    GoldTable("d11", "events", "ts", Window("sliding", lookback="30 minutes"), (N,), ("country",)),
    GoldTable("d12", "events", "ts", Window("count", count=5), (N, TOTAL, TOP), ("country",)),
)


def silver_rows(spark: SparkSession, rows: int, seed: int, first_id: int = 0) -> DataFrame:
    """``rows`` synthetic silver events from id ``first_id``: user, country, amount, event
    time over :data:`DAYS` days, bronze coordinates."""
    span = DAYS * 86_400_000_000
    return spark.range(first_id, first_id + rows).select(
        F.col("id").alias("event_id"),
        (F.col("id") % F.lit(max(1, rows // 50))).alias("user_id"),
        (F.col("id") % F.lit(7)).cast("string").alias("country"),
        (F.rand(seed) * 100).cast("bigint").alias("amount"),
        F.timestamp_micros(F.lit(START_MICROS) + (F.rand(seed + 1) * span).cast("bigint")).alias(
            "ts"
        ),
        F.lit(0).alias("_bronze_partition"),
        F.col("id").alias("_bronze_offset"),
    )


def change(spark: SparkSession, path: str, rows: int, count: int, seed: int) -> None:
    """Update ``count`` random rows (new amount, event time moved by up to an hour)."""
    picked = (
        spark.range(count)
        .select((F.rand(seed) * rows).cast("bigint").alias("event_id"))
        .distinct()
        .select(
            "event_id",
            (F.rand(seed + 7) * 100).cast("bigint").alias("amount"),
            ((F.rand(seed + 8) - 0.5) * 7_200_000_000).cast("bigint").alias("shift"),
        )
    )
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(picked.alias("s"), "t.event_id = s.event_id")
        .whenMatchedUpdate(
            set={
                "amount": F.col("s.amount"),
                "ts": F.timestamp_micros(F.unix_micros(F.col("t.ts")) + F.col("s.shift")),
            }
        )
        .execute()
    )


def timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def _shared(spark: SparkSession, warehouse: Warehouse, tables: Sequence[GoldTable]) -> None:
    run_to_end(lambda: start_shared(spark, warehouse, Trigger(), tables))


def _separate(spark: SparkSession, warehouse: Warehouse, tables: Sequence[GoldTable]) -> None:
    starts = [lambda t=t: start_gold(spark, warehouse, Trigger(), t) for t in tables]
    failed = [e.failure for e in finish_all(starts) if e.failure is not None]
    if failed:
        raise RuntimeError(failed[0].line)


def sharing(spark: SparkSession, rows: int, changes: int, repeats: int) -> dict[str, Any]:
    """Part (a): seconds per micro-batch of 1 declaration, of 12 shared, of 12 separate."""
    template = WORK / "template"
    silver_rows(spark, rows, 1).write.format("delta").option(
        "delta.enableChangeDataFeed", "true"
    ).save(str(template))
    ways: dict[str, tuple[Callable[..., None], Sequence[GoldTable]]] = {
        "one": (_shared, TWELVE[:1]),
        "twelve_shared": (_shared, TWELVE),
        "twelve_separate": (_separate, TWELVE),
    }
    result: dict[str, Any] = {"silver_rows": rows, "changes": changes}
    for name, (way, tables) in ways.items():
        warehouse = Warehouse.from_path(WORK / name)
        path = warehouse.table("silver", "events")
        shutil.copytree(template, path)
        initial = timed(partial(way, spark, warehouse, tables))
        seconds = []
        for repeat in range(repeats):
            change(spark, path, rows, changes, seed=100 + repeat)
            seconds.append(timed(partial(way, spark, warehouse, tables)))
        result[name] = {
            "initial_seconds": round(initial, 2),
            "batch_seconds": [round(s, 2) for s in seconds],
            "median_seconds": round(statistics.median(seconds), 2),
        }
        print(json.dumps({name: result[name]}), flush=True)
    one = result["one"]["median_seconds"]
    result["ratio_shared_to_one"] = round(result["twelve_shared"]["median_seconds"] / one, 2)
    result["ratio_separate_to_one"] = round(result["twelve_separate"]["median_seconds"] / one, 2)
    return result


BASELINE_TABLE = GoldTable(
    "per_minute",
    "events",
    "ts",
    Window("tumbling", size="1 minute"),
    (N, TOTAL),
    ("user_id",),
    watermark_delay="10 minutes",
)


def _spark_aggregation(spark: SparkSession, source: str, target: str, checkpoint: str) -> None:
    """One availableNow run of Spark's windowed aggregation with a watermark, in update mode,
    MERGEd into the Delta table at ``target``."""

    def merge(batch: DataFrame, batch_id: int) -> None:
        rows = batch.select("user_id", F.col("window.start").alias("window_start"), "n", "total")
        if not DeltaTable.isDeltaTable(spark, target):
            rows.limit(0).write.format("delta").save(target)
        (
            DeltaTable.forPath(spark, target)
            .alias("t")
            .merge(
                rows.alias("s"),
                "t.user_id <=> s.user_id AND t.window_start = s.window_start",
            )
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )

    stream = (
        spark.readStream.format("delta")
        .load(source)
        .withWatermark("ts", "10 minutes")
        .groupBy(F.window("ts", "1 minute"), "user_id")
        .agg(F.count(F.lit(1)).alias("n"), F.sum("amount").alias("total"))
    )
    query = (
        stream.writeStream.outputMode("update")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(merge)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def baseline(spark: SparkSession, events: int, appends: int) -> dict[str, Any]:
    """Part (c): events per second of gold and of Spark's streaming aggregation over the
    same insert-only appends."""
    warehouse = Warehouse.from_path(WORK / "baseline")
    ours = warehouse.table("silver", "events")
    theirs = str(WORK / "baseline_spark" / "source")
    per = events // appends
    gold_seconds, spark_seconds = [], []
    for number in range(appends):
        rows = silver_rows(spark, per, number, first_id=number * per)
        # Event time advances append by append, with the disorder inside one append.
        rows = rows.withColumn(
            "ts",
            F.timestamp_micros(
                F.lit(START_MICROS + number * 3_600_000_000)
                + (F.rand(number + 3) * 3_600_000_000).cast("bigint")
            ),
        ).localCheckpoint()
        writer = rows.write.format("delta").mode("append")
        writer.option("delta.enableChangeDataFeed", "true").save(ours)
        rows.write.format("delta").mode("append").save(theirs)
        gold_seconds.append(timed(lambda: _shared(spark, warehouse, [BASELINE_TABLE])))
        spark_seconds.append(
            timed(
                lambda: _spark_aggregation(
                    spark,
                    theirs,
                    str(WORK / "baseline_spark" / "target"),
                    str(WORK / "baseline_spark" / "checkpoint"),
                )
            )
        )
    # The first run of each starts its query's state; the rates count the later ones.
    gold_rate = per * (appends - 1) / sum(gold_seconds[1:])
    spark_rate = per * (appends - 1) / sum(spark_seconds[1:])
    return {
        "events": events,
        "appends": appends,
        "gold_seconds": [round(s, 2) for s in gold_seconds],
        "spark_seconds": [round(s, 2) for s in spark_seconds],
        "gold_events_per_second": round(gold_rate, 1),
        "spark_events_per_second": round(spark_rate, 1),
        "cost_ratio_gold_to_spark": round(spark_rate / gold_rate, 2),
    }


def run(
    spark: SparkSession,
    rows: int = 100_000,
    changes: int = 1_000,
    repeats: int = 2,
    events: int = 100_000,
    appends: int = 4,
) -> dict[str, Any]:
    """Both parts; writes the results files and prints a summary."""
    shutil.rmtree(WORK, ignore_errors=True)
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {platform.system()}",
        "sharing": sharing(spark, rows, changes, repeats),
        "baseline": baseline(spark, events, appends),
    }
    write_results(result, "gold-sharing")
    shared, base = result["sharing"], result["baseline"]
    print(
        f"\nper micro-batch of {changes:,} changes over {rows:,} silver rows (median seconds): "
        f"1 declaration {shared['one']['median_seconds']}, 12 shared "
        f"{shared['twelve_shared']['median_seconds']} ({shared['ratio_shared_to_one']}x), "
        f"12 separate {shared['twelve_separate']['median_seconds']} "
        f"({shared['ratio_separate_to_one']}x)"
    )
    print(
        f"insert-only events per second: gold {base['gold_events_per_second']}, Spark's "
        f"windowed aggregation {base['spark_events_per_second']} (gold costs "
        f"{base['cost_ratio_gold_to_spark']}x)"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--appends", type=int, default=4)
    args = parser.parse_args()
    spark = get_spark(mode="local-jars")
    spark.sparkContext.setLogLevel("ERROR")
    run(spark, args.rows, args.changes, args.repeats, args.events, args.appends)


if __name__ == "__main__":
    main()
