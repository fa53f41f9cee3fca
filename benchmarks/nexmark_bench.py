"""NEXMark end to end (``make bench``): the declared queries of benchmarks/nexmark.toml over a
generated stream, in events per second through bronze -> silver -> gold.

A stream of ``--events`` events (default 200,000; 1,000 events per second of event time, with
the generator's disorder, stragglers and 2% duplicates) is written as JSON-lines files, then:

1. ``bronze+silver``: one ``run_once`` with no gold table, timed;
2. per query group, a copy of that warehouse runs ``run_once`` with only the group's
   declarations (bronze and silver have nothing new: the time is the group's gold work), and
   a copy with only the SQL models (their first refresh);
3. ``all``: a new warehouse runs the whole pipeline with every declaration and model, timed.

Events per second are the stream's distinct events over the seconds of the step. Prints a
table and writes ``results/nexmark-<date>.json`` and ``results/latest-nexmark.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.nexmark import NexmarkConfig, deliver, generate, records
from benchmarks.recording import write_results
from cdc.sources import SourceSpec
from lakehouse.run.pipeline import run_once
from lakehouse_core.config import PipelineConfig, load_config
from lakehouse_core.layout import Warehouse
from lakehouse_core.spark import get_spark
from lakehouse_demo.generator import write_files

WORK = Path(__file__).parent / "work" / "nexmark"
TOML = Path(__file__).parent / "nexmark.toml"
#: The declared queries measured together: one read of a source's change feed serves a group.
GROUPS = {
    "q3 (auctions x persons join)": ("q3_local_item_suggestion",),
    "q5 q7 q11 (bid windows)": ("q5_hot_items", "q7_highest_bid", "q11_user_sessions"),
    "q15-q19 (bids per day)": (
        "q15_bidding_statistics",
        "q16_channel_statistics",
        "q17_auction_statistics",
        "q18_last_bid",
        "q19_auction_top10",
    ),
}


def timed_run(spark: Any, source: SourceSpec, root: Path, config: PipelineConfig) -> float:
    """Seconds of one ``run_once`` of ``config`` on the warehouse at ``root``."""
    started = time.perf_counter()
    run_once(spark, source, Warehouse(str(root)), config)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-groups", action="store_true", help="skip the per-group runs")
    args = parser.parse_args()
    stream = NexmarkConfig(events=args.events, seed=args.seed)
    shutil.rmtree(WORK, ignore_errors=True)
    started = time.perf_counter()
    delivered = deliver(generate(stream), stream)
    write_files(records(delivered, stream), WORK / "source")
    generated = time.perf_counter() - started
    print(f"generated {args.events:,} events ({len(delivered):,} records) in {generated:.1f} s")

    config = load_config(TOML)
    declared = {table.name: table for table in config.gold_declarations}
    spark = get_spark(mode="local-jars")
    spark.sparkContext.setLogLevel("ERROR")
    source = SourceSpec.parse(f"files:{WORK / 'source'}")
    steps: list[dict[str, Any]] = []

    def record(step: str, seconds: float, tables: int) -> None:
        row = {
            "step": step,
            "gold_tables": tables,
            "seconds": round(seconds, 1),
            "events_per_second": round(args.events / seconds),
        }
        print(json.dumps(row), flush=True)
        steps.append(row)

    base = WORK / "bronze_silver"
    bare = replace(config, gold_tables=(), models=())
    record("bronze+silver", timed_run(spark, source, base, bare), 0)
    if not args.no_groups:
        for group, names in GROUPS.items():
            copy = WORK / f"group-{len(steps)}"
            shutil.copytree(base, copy)
            subset = replace(bare, gold_tables=tuple(declared[n] for n in names))
            record(f"gold {group}", timed_run(spark, source, copy, subset), len(names))
        copy = WORK / "models"
        shutil.copytree(base, copy)
        models = replace(bare, models=config.models)
        record("SQL models", timed_run(spark, source, copy, models), len(config.models))
    record(
        "all (bronze -> silver -> gold)",
        timed_run(spark, source, WORK / "all", config),
        len(declared) + len(config.models),
    )
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "events": args.events,
        "records": len(delivered),
        "event_rate": stream.event_rate,
        "machine": f"{platform.machine()}, {platform.system()}, local[*]",
        "steps": steps,
    }
    write_results(result, "nexmark")
    print(f"\nNEXMark, {args.events:,} events ({len(delivered):,} records with duplicates):")
    print(f"{'step':<36}{'gold tables':>12}{'seconds':>10}{'events/s':>10}")
    for row in steps:
        print(
            f"{row['step']:<36}{row['gold_tables']:>12}{row['seconds']:>10.1f}"
            f"{row['events_per_second']:>10,}"
        )


if __name__ == "__main__":
    main()
