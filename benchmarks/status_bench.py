"""How long ``lakehouse status --json`` takes (a new process each time, as an operator or a
monitor runs it), on a demo warehouse and on one whose silver table holds 10M rows, against
the way status worked before it read the Delta logs: a Spark session that counts and reads the
history of every table.

The 10M-row warehouse is written with ``deltalake`` and ``pyarrow`` (not through the pipeline):
a bronze table of the shop's orders topic, its silver table, the silver query's checkpoint,
an event log, quality metrics and quarantine (:func:`synthetic_warehouse`, which the tests use
too, with the figures a correct status shows).

    python -m benchmarks.status_bench [--rows 10000000] [--runs 3] [--demo PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from benchmarks.recording import write_results

WORK = Path(__file__).parent / "work" / "status"
LAKEHOUSE = Path(sys.executable).parent / "lakehouse"
#: The demo shop's settings: the synthetic warehouse is the shop's, its gold tables declared.
SHOP_TOML = Path(__file__).resolve().parent.parent / "examples" / "shop.toml"
#: The shop's orders topic: the default config's ``silver.orders``.
TOPIC = "shop.public.orders"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
QUERIES = ("bronze", "silver_orders", "silver_customers", "gold_revenue_per_minute")


@dataclass
class Expected:
    """What a correct status shows of a :func:`synthetic_warehouse` (a plain-Python model)."""

    bronze_records: int = 0
    bronze_version: int = 0
    applied_version: int | None = None
    records_behind: int = 0
    rows: int = 0
    newest_event: datetime | None = None
    quarantined: int = 0
    event_log_rows: int = 0
    last_batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    failing: list[tuple[str, str]] = field(default_factory=list)
    quality: list[dict[str, Any]] = field(default_factory=list)


def _micros(at: datetime) -> int:
    return (at - EPOCH) // timedelta(microseconds=1)


def synthetic_warehouse(root: Path, silver_rows: int, seed: int = 0) -> Expected:
    """Write a warehouse at ``root`` with a bronze and a silver table of orders (silver:
    ``silver_rows`` rows in a few files), the silver query's checkpoint part way through
    bronze, an event log, quality metrics and quarantine, all random by ``seed``; return what
    its status must show. Event times are whole milliseconds (Delta's statistics keep those)."""
    rng = random.Random(seed)
    expected = Expected()
    base = datetime(2026, 1, 1, tzinfo=UTC)
    for write in (_bronze, _silver, _quarantine, _event_log, _quality):
        write(root, rng, base, expected, silver_rows)
    return expected


def _bronze(
    root: Path, rng: random.Random, base: datetime, expected: Expected, silver_rows: int
) -> None:
    """The bronze table of orders in a few appends, and the silver query's checkpoint part
    way through it."""
    bronze = str(root / "bronze" / "shop_public_orders")
    appends = [rng.randint(1, 500) for _ in range(rng.randint(2, 8))]
    version_rows: dict[int, int] = {}
    offset = 0
    for i, count in enumerate(appends):
        times = [base + timedelta(milliseconds=rng.randint(0, 10**9)) for _ in range(count)]
        frame = pa.table(
            {
                "topic": [TOPIC] * count,
                "partition": pa.array([0] * count, pa.int32()),
                "offset": list(range(offset, offset + count)),
                "timestamp": pa.array(times, pa.timestamp("us", "UTC")),
                "value": pa.array([b"{}"] * count, pa.binary()),
            }
        )
        offset += count
        write_deltalake(bronze, frame, mode="append")
        version = DeltaTable(bronze).version()
        version_rows[version] = count
        if i == 0:  # as the bronze job marks its tables (a commit that adds no rows)
            DeltaTable(bronze).alter.set_table_properties(
                {"lakehouse.topic": TOPIC}, raise_if_not_exists=False
            )
    expected.bronze_records = sum(appends)
    expected.bronze_version = max(version_rows)
    applied = rng.choice(sorted(version_rows))
    expected.applied_version = applied
    expected.records_behind = sum(n for v, n in version_rows.items() if v > applied)
    checkpoint = root / "_system" / "checkpoints" / "silver_orders"
    for directory in ("commits", "offsets"):
        (checkpoint / directory).mkdir(parents=True, exist_ok=True)
    batches = rng.randint(1, 4)
    for batch in range(batches):
        (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
        offset_json = {"reservoirVersion": applied + 1, "index": -1, "isStartingVersion": False}
        (checkpoint / "offsets" / str(batch)).write_text(f"v1\n{{}}\n{json.dumps(offset_json)}\n")
    # An offset written for a batch that did not commit: not applied yet.
    unfinished = {"reservoirVersion": applied + 5, "index": -1, "isStartingVersion": False}
    (checkpoint / "offsets" / str(batches)).write_text(f"v1\n{{}}\n{json.dumps(unfinished)}\n")


def _silver(
    root: Path, rng: random.Random, base: datetime, expected: Expected, silver_rows: int
) -> None:
    """``silver_rows`` rows of silver orders, in files of at most 2M rows."""
    silver = str(root / "silver" / "orders")
    millis = [rng.randint(0, 10**9) for _ in range(1000)]  # event times, cycled over the rows
    for first in range(0, max(silver_rows, 1), 2_000_000):
        count = min(2_000_000, silver_rows - first)
        ids = pa.array(range(first, first + count), pa.int64())
        spread = pa.array([millis[i % len(millis)] for i in range(count)], pa.int64())
        at = pc.add(pc.multiply(spread, 1000), _micros(base)).cast(pa.timestamp("us", "UTC"))
        frame = pa.table({"id": ids, "amount": pc.multiply(ids, 3), "_source_ts": at})
        write_deltalake(silver, frame, mode="append")
    used = millis[: min(silver_rows, len(millis))]
    expected.rows = silver_rows
    expected.newest_event = base + timedelta(milliseconds=max(used)) if used else None


def _quarantine(
    root: Path, rng: random.Random, base: datetime, expected: Expected, silver_rows: int
) -> None:
    """Quarantined records of orders and of another entity."""
    held = rng.randint(0, 50)
    others = rng.randint(0, 20)
    write_deltalake(
        str(root / "silver" / "quarantine"),
        pa.table(
            {
                "entity": ["orders"] * held + ["customers"] * others,
                "reason": ["x"] * (held + others),
            }
        ),
    )
    expected.quarantined = held


def _event_log(
    root: Path, rng: random.Random, base: datetime, expected: Expected, silver_rows: int
) -> None:
    """Event-log rows of a few queries in random order, in two appends."""
    rows: list[dict[str, Any]] = []
    for query in QUERIES:
        for batch in range(rng.randint(0, 6)):
            failed = rng.random() < 0.25
            rows.append(
                {
                    "query": query,
                    "event": "failed" if failed else "progress",
                    "batch_id": batch,
                    "timestamp": base + timedelta(seconds=rng.randint(0, 10**6)),
                    "input_rows": rng.randint(0, 1000),
                    "duration_ms": rng.randint(1, 10**5),
                    "error": "ValueError: boom" if failed else None,
                    "trace": "Traceback ..." if failed else None,
                }
            )
    rng.shuffle(rows)
    log_schema = pa.schema(
        [
            ("query", pa.string()),
            ("event", pa.string()),
            ("batch_id", pa.int64()),
            ("timestamp", pa.timestamp("us", "UTC")),
            ("input_rows", pa.int64()),
            ("duration_ms", pa.int64()),
            ("error", pa.string()),
            ("trace", pa.string()),
        ]
    )
    cut = rng.randint(0, len(rows))
    for part in (rows[:cut], rows[cut:]):  # two appends, as a run's flushes
        write_deltalake(
            str(root / "_system" / "event_log"),
            pa.Table.from_pylist(part, log_schema),
            mode="append",
        )
    expected.event_log_rows = len(rows)
    by_query: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_query.setdefault(str(row["query"]), []).append(row)
    for query, own in by_query.items():
        # Distinct times per query make "the newest" one row.
        own.sort(key=lambda r: r["timestamp"])
        progress = [r for r in own if r["event"] == "progress"]
        if progress and (
            len(progress) < 2 or progress[-1]["timestamp"] != progress[-2]["timestamp"]
        ):
            last = progress[-1]
            expected.last_batches[query] = {
                "batch_id": last["batch_id"],
                "at": last["timestamp"].isoformat(),
                "duration_ms": last["duration_ms"],
                "input_rows": last["input_rows"],
            }
        if own[-1]["event"] == "failed":
            expected.failing.append((query, own[-1]["timestamp"].isoformat()))


def _quality(
    root: Path, rng: random.Random, base: datetime, expected: Expected, silver_rows: int
) -> None:
    """Quality metrics of three expectations over a few micro-batches."""
    metrics: list[dict[str, Any]] = []
    for table, expectation in (("silver.orders", "id_present"), ("silver.orders", "total_ok"),
                               ("bronze.shop_public_orders", "own_topic")):  # fmt: skip
        for batch in range(rng.randint(1, 5)):
            counted = rng.randint(0, 100)
            failed_rows = rng.randint(0, counted)
            metrics.append(
                {
                    "table": table,
                    "expectation": expectation,
                    "action": "drop",
                    "batch_id": batch,
                    "rows_counted": counted,
                    "rows_failed": failed_rows,
                    "rows_dropped": failed_rows,
                    "held": failed_rows == 0,
                }
            )
    write_deltalake(str(root / "_system" / "quality"), pa.Table.from_pylist(metrics))
    sums: dict[tuple[str, str], dict[str, Any]] = {}
    for m in metrics:
        entry = sums.setdefault(
            (m["table"], m["expectation"]),
            {"table": m["table"], "expectation": m["expectation"], "action": m["action"],
             "checked": 0, "failed": 0, "dropped": 0, "broken_batches": 0},
        )  # fmt: skip
        entry["checked"] += m["rows_counted"]
        entry["failed"] += m["rows_failed"]
        entry["dropped"] += m["rows_dropped"]
        entry["broken_batches"] += 0 if m["held"] else 1
    expected.quality = [sums[key] for key in sorted(sums)]


def time_status(root: Path, runs: int) -> tuple[list[float], list[float]]:
    """Seconds of ``lakehouse status --json`` in a new process, ``runs`` times: wall clock,
    and the CPU time (user + system) of the process, which the machine's load changes less."""
    seconds, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(
            [str(LAKEHOUSE), "status", "--config", str(SHOP_TOML), "--warehouse", str(root),
             "--json"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        seconds.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
    return seconds, cpu


def spark_baseline(root: str) -> None:
    """Status as it was read before: a Spark session, every table counted (silver's and
    bronze's newest times too), every table's history, the event log grouped by query and the
    quality metrics summed (run in a process of its own by :func:`time_baseline`)."""
    from delta.tables import DeltaTable as SparkDeltaTable
    from pyspark.sql import functions as F

    from lakehouse_core.spark import get_spark

    spark = get_spark()
    tables = [
        path
        for layer in ("bronze", "silver", "gold", "_system")
        for path in sorted(Path(root, layer).glob("*"))
        if (path / "_delta_log").is_dir()
    ]
    for path in tables:
        frame = spark.read.format("delta").load(str(path))
        newest = [c for c in ("_source_ts", "timestamp") if c in frame.columns]
        frame.agg(F.count(F.lit(1)), *(F.max(c) for c in newest)).collect()
        SparkDeltaTable.forPath(spark, str(path)).history().collect()
    log = Path(root, "_system", "event_log")
    if log.is_dir():
        frame = spark.read.format("delta").load(str(log))
        frame.groupBy("query").agg(F.max("timestamp")).collect()


def time_baseline(root: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.status_bench", "--baseline", str(root)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return time.perf_counter() - start


def demo_warehouse(path: Path | None) -> Path:
    """The warehouse of a demo run: ``path``'s, else one made now under :data:`WORK`."""
    if path is not None:
        return path
    target = WORK / "demo"
    if not (target / "warehouse" / "_system").is_dir():
        demo = [sys.executable, "-m", "lakehouse_demo", "demo", "--warehouse", str(target)]
        subprocess.run(demo, check=True, capture_output=True)
    return target / "warehouse"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--demo", type=Path, default=None, help="a demo run's warehouse")
    parser.add_argument("--baseline", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline:
        spark_baseline(args.baseline)
        return
    big = WORK / f"silver_{args.rows}"
    if not (big / "silver" / "orders").is_dir():
        synthetic_warehouse(big, args.rows)
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
    }
    for name, root in (("demo", demo_warehouse(args.demo)), (f"silver_{args.rows}", big)):
        seconds, cpu = time_status(root, args.runs)
        baseline = time_baseline(root)
        result[name] = {
            "warehouse": str(root),
            "status_seconds": [round(s, 2) for s in seconds],
            "status_median_seconds": round(statistics.median(seconds), 2),
            "status_cpu_seconds": [round(s, 2) for s in cpu],
            "spark_baseline_seconds": round(baseline, 2),
            "speedup": round(baseline / statistics.median(seconds), 1),
        }
        print(f"{name}: status {statistics.median(seconds):.2f} s (median of {args.runs}), "
              f"Spark baseline {baseline:.2f} s")  # fmt: skip
    write_results(result, "status")


if __name__ == "__main__":
    main()
