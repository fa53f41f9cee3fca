"""Spark jobs and Delta commits of one steady ``run --once`` of the demo's whole pipeline (its
three sources, every gold declaration, both patterns), counted exactly, with the run's wall
time (``make bench`` runs it; or ``python -m benchmarks.batch_jobs``).

One generated shop workload in parts: the first ``--setup`` parts arrive together (the tables
are created, the queries' first batches run), then one part per run. The runs measured: a
warm-up delivery, ``--steady`` deliveries of about ``--records`` records each, and a run with
nothing new. For each: the Spark jobs the session started (Spark's event log, so the jobs of
every query thread and side-by-side task are counted, each attributed to the query that ran
it), the new commits of every Delta table under the warehouse, and the seconds it took.

Then the command line's run with nothing new, as a scheduler starts it (a new process each
time, ``--idle-runs`` times): on the warehouse's path, where it ends before Spark starts
(:mod:`lakehouse.ops.idle`), and on its ``file://`` URI, where that check does not apply and
the run goes the whole way (Spark's start, the lease, a query per table that finds nothing);
the median seconds of each and their ratio.

Jobs and commits are exact; seconds on a shared machine are not. Writes
``results/batch-jobs-<date>.json`` and ``results/latest-batch-jobs.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from benchmarks.recording import write_results
from cdc.sources import SourceSpec
from lakehouse.run.pipeline import run_once
from lakehouse_core.config import PipelineConfig
from lakehouse_core.layout import Warehouse
from lakehouse_core.spark import get_spark
from lakehouse_demo.generator import WorkloadConfig
from lakehouse_demo.job import DEMO_CONFIG, write_workload

WORK = Path(__file__).parent / "work" / "batch_jobs"


@dataclass
class RunCount:
    """What one ``run --once`` cost: Spark jobs (in all, and per query or 'driver' for the
    jobs no streaming query ran), new Delta commits (in all, and per table) and seconds."""

    label: str
    records: int
    jobs: int = 0
    commits: int = 0
    seconds: float = 0.0
    jobs_by_query: dict[str, int] = field(default_factory=dict)
    commits_by_table: dict[str, int] = field(default_factory=dict)


def delta_commits(root: Path) -> Counter[str]:
    """The number of commit files of each Delta table under ``root`` (by its path below it)."""
    counts: Counter[str] = Counter()
    for log_dir in root.rglob("_delta_log"):
        table = str(log_dir.parent.relative_to(root))
        counts[table] = sum(1 for f in log_dir.glob("*.json") if f.stem.isdigit())
    return counts


class JobLog:
    """The jobs Spark's event log recorded, read as it grows: each job's query name (or
    'driver')."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lines_read = 0

    def new_jobs(self) -> Counter[str]:
        """The jobs started since the last call, counted per query name."""
        files = [p for p in self.directory.rglob("*") if p.is_file() and p.name[0] != "."]
        assert len(files) == 1, f"expected one event log, found {files}"
        lines = files[0].read_text().splitlines()
        new, self._lines_read = lines[self._lines_read :], len(lines)
        jobs: Counter[str] = Counter()
        for line in new:
            if '"SparkListenerJobStart"' not in line:
                continue
            properties = json.loads(line).get("Properties", {})
            jobs[_query_of(properties)] += 1
        return jobs


def _query_of(properties: dict[str, Any]) -> str:
    """The streaming query a job ran in (from Spark's job properties; Delta puts ``Delta: ``
    before the description of the jobs it starts), else 'driver'."""
    if not any(key.endswith("queryId") for key in properties):
        return "driver"
    description = (properties.get("spark.job.description") or "").split("\n", 1)[0]
    while description.startswith("Delta: "):
        description = description.removeprefix("Delta: ")
    return description.split(" id = ", 1)[0].strip() or "query"


def measure(
    spark: SparkSession,
    jobs: JobLog,
    source: SourceSpec,
    warehouse: Warehouse,
    config: PipelineConfig,
    label: str,
    records: int,
) -> RunCount:
    """One ``run --once`` and what it cost."""
    root = Path(warehouse.root)
    before = delta_commits(root)
    jobs.new_jobs()
    started = time.monotonic()
    run_once(spark, source, warehouse, config)
    seconds = time.monotonic() - started
    time.sleep(1)  # the event log's writer flushes its queue
    by_query = jobs.new_jobs()
    after = delta_commits(root)
    by_table = {t: after[t] - before.get(t, 0) for t in after if after[t] != before.get(t, 0)}
    return RunCount(
        label,
        records,
        jobs=sum(by_query.values()),
        commits=sum(by_table.values()),
        seconds=round(seconds, 2),
        jobs_by_query=dict(sorted(by_query.items())),
        commits_by_table=dict(sorted(by_table.items())),
    )


def run(args: argparse.Namespace, say: Callable[[RunCount], None]) -> list[RunCount]:
    """The runs described in the module's docstring."""
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    events_dir = Path(tempfile.mkdtemp(prefix="eventlog-", dir=WORK))
    settings = dict(setting.split("=", 1) for setting in args.conf)
    spark = get_spark(
        extra_conf={
            **settings,
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events_dir.as_uri(),
            "spark.eventLog.compress": "false",
            "spark.eventLog.rolling.enabled": "false",
        }
    )
    parts_count = args.setup + 1 + args.steady
    arrivals, source_dir = WORK / "arrivals", WORK / "source"
    workload = WorkloadConfig(events=args.records * parts_count, seed=args.seed)
    write_workload(arrivals, workload, parts_count)
    parts = sorted(arrivals.glob("part-*.jsonl"))
    source_dir.mkdir()
    warehouse = Warehouse.from_path(WORK / "warehouse")
    source = SourceSpec("files", str(source_dir))
    config = replace(DEMO_CONFIG, alerts=())
    log_jobs = JobLog(events_dir)

    def deliver(count: int) -> int:
        lines = 0
        for part in parts[:count]:
            lines += sum(1 for _ in part.open())
            part.rename(source_dir / part.name)
        del parts[:count]
        return lines

    deliveries = [("setup", args.setup), ("warm-up", 1)]
    deliveries += [(f"steady {n}", 1) for n in range(1, args.steady + 1)]
    deliveries.append(("nothing new", 0))
    counts = []
    for label, parts_now in deliveries:
        records = deliver(parts_now)
        counts.append(measure(spark, log_jobs, source, warehouse, config, label, records))
        say(counts[-1])
    return counts


def idle_command_seconds(source: Path, warehouse: str, runs: int) -> float:
    """The median seconds of ``runs`` runs of ``lakehouse run --once`` (new processes) on
    ``warehouse`` from the file source ``source``, where nothing is new."""
    lakehouse = Path(sys.executable).parent / "lakehouse"
    command = [str(lakehouse), "run", "--once", "--source", f"files:{source}"]
    seconds = []
    for _ in range(runs):
        started = time.monotonic()
        subprocess.run([*command, "--warehouse", warehouse], check=True, capture_output=True)
        seconds.append(time.monotonic() - started)
    return round(statistics.median(seconds), 2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100, help="records per delivery")
    parser.add_argument("--setup", type=int, default=10, help="deliveries in the first run")
    parser.add_argument("--steady", type=int, default=2, help="steady runs measured")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting"
    )
    parser.add_argument("--verbose", action="store_true", help="jobs per query, commits per table")
    parser.add_argument(
        "--idle-runs", type=int, default=3, help="command-line runs with nothing new, each way"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    print(f"{'run':<12} {'records':>7} {'jobs':>5} {'commits':>7} {'seconds':>8}", flush=True)

    def say(c: RunCount) -> None:
        print(f"{c.label:<12} {c.records:>7} {c.jobs:>5} {c.commits:>7} {c.seconds:>8.1f}")
        if args.verbose:
            for query, n in c.jobs_by_query.items():
                print(f"    jobs    {n:>4}  {query}")
            for table, n in c.commits_by_table.items():
                print(f"    commits {n:>4}  {table}")
        print(end="", flush=True)

    counts = run(args, say)
    source, warehouse, runs = WORK / "source", WORK / "warehouse", args.idle_runs
    idle = {
        "checked_before_spark": idle_command_seconds(source, str(warehouse), runs),
        "whole_run": idle_command_seconds(source, warehouse.as_uri(), runs),
    }
    idle["ratio"] = round(idle["checked_before_spark"] / idle["whole_run"], 3)
    print(
        f"lakehouse run --once, nothing new (median of {args.idle_runs}): "
        f"{idle['checked_before_spark']:.1f} s, checked before Spark starts; "
        f"{idle['whole_run']:.1f} s the whole way; ratio {idle['ratio']}"
    )
    results = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.platform(),
        "args": vars(args),
        "runs": [asdict(c) for c in counts],
        "idle_command_seconds": idle,
    }
    write_results(results, "batch-jobs")


if __name__ == "__main__":
    main()
