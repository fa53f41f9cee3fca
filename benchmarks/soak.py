"""Soak: a continuous run at a steady rate for a long time, watching what must stay flat.

``make soak`` (``SOAK_MINUTES``, default 30) starts ``lakehouse run --processing-time`` on the
embedded file source, writes a new file of the workload every ``--file-seconds`` (a steady
``--rate`` of records per second), and every ``--sample-seconds`` samples the resident memory
of the driver (the Python process and its Spark JVM) and of the Python workers, the files of
each table (``_delta_log`` entries and data files), the checkpoints' size and files. At the end
it lets the run catch up, stops it with SIGTERM to its process group (exit 0 expected), brings
every layer to the end with a ``--once`` run, runs ``lakehouse verify``
(exit 0 expected), and checks bronze against what was produced: one row per line written, no
record twice. Per-batch times come from the run's event log. Each series gets its least-squares
slope per hour; everything goes to ``benchmarks/results/soak-<date>.json`` (and
``latest-soak.json``), and a short table is printed.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from deltalake import DeltaTable

from benchmarks.recording import write_results
from lakehouse_demo.generator import WorkloadConfig, generate

WORK = Path(__file__).parent / "work" / "soak"
#: The demo shop's settings (its clickstream and gold tables), which the workload needs.
SHOP_TOML = Path(__file__).resolve().parent.parent / "examples" / "shop.toml"
LAKEHOUSE = Path(sys.executable).parent / "lakehouse"
#: How long the run may take to read what was written before it is stopped.
CATCH_UP_SECONDS = 600.0


@dataclass
class Samples:
    """Time series: seconds since the start, and one value per sample per metric."""

    seconds: list[float] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, at: float, sample: dict[str, float]) -> None:
        index = len(self.seconds)
        self.seconds.append(at)
        for name, value in sample.items():
            series = self.values.setdefault(name, [float("nan")] * index)
            series.append(value)
        for series in self.values.values():
            if len(series) <= index:
                series.append(float("nan"))


def slope_per_hour(seconds: Iterable[float], values: Iterable[float]) -> float | None:
    """The least-squares slope of ``values`` over ``seconds``, per hour (None: under 2 points)."""
    points = [(t, v) for t, v in zip(seconds, values, strict=True) if not math.isnan(v)]
    if len(points) < 2:
        return None
    mean_t = sum(t for t, _ in points) / len(points)
    mean_v = sum(v for _, v in points) / len(points)
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return None
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / spread * 3600


def memory(run: psutil.Process) -> dict[str, float]:
    """Resident MB of the driver's Python process, its Spark JVM, and the Python workers."""
    sample = {"driver_python_mb": run.memory_info().rss / 2**20}
    jvm = workers = 0.0
    for child in run.children(recursive=True):
        try:
            rss = child.memory_info().rss / 2**20
            name = child.name()
        except psutil.Error:
            continue
        if "java" in name:
            jvm += rss
        elif "python" in name:
            workers += rss
    sample["driver_jvm_mb"] = jvm
    sample["python_workers_mb"] = workers
    return sample


def table_files(warehouse: Path) -> dict[str, float]:
    """Per Delta table of the warehouse: its ``_delta_log`` entries and its data files; and the
    checkpoints' total files and MB."""
    sample: dict[str, float] = {}
    for log in sorted(warehouse.glob("**/_delta_log")):
        table = log.parent.relative_to(warehouse).as_posix()
        if table.startswith("_system/checkpoints"):
            continue
        sample[f"log_files:{table}"] = sum(1 for _ in log.iterdir())
        data = [p for p in log.parent.rglob("*.parquet") if "_delta_log" not in p.parts]
        sample[f"data_files:{table}"] = len(data)
    checkpoints = [p for p in (warehouse / "_system" / "checkpoints").rglob("*") if p.is_file()]
    sample["checkpoint_files"] = len(checkpoints)
    sample["checkpoint_mb"] = sum(p.stat().st_size for p in checkpoints) / 2**20
    return sample


def produce(
    source: Path,
    lines: list[str],
    per_file: int,
    every: float,
    stop: threading.Event,
    so_far: list[int],
) -> int:
    """Write ``per_file`` lines to a new file every ``every`` seconds until ``stop`` or the
    lines run out (each written under a hidden name, then renamed), keeping the count in
    ``so_far[0]``; return the lines written."""
    written = 0
    index = 0
    next_at = time.monotonic()
    while written < len(lines) and not stop.is_set():
        chunk = lines[written : written + per_file]
        hidden = source / f".part-{index:06d}.jsonl.tmp"
        hidden.write_text("\n".join(chunk) + "\n", encoding="utf-8")
        hidden.rename(source / f"part-{index:06d}.jsonl")
        written += len(chunk)
        so_far[0] = written
        index += 1
        next_at += every
        stop.wait(max(0.0, next_at - time.monotonic()))
    return written


def bronze_rows(warehouse: Path) -> tuple[int, int]:
    """Rows of all bronze tables, and how many of them repeat a record's coordinates (topic,
    partition, offset, file)."""
    rows = repeated = 0
    for log in (warehouse / "bronze").glob("*/_delta_log"):
        table = DeltaTable(str(log.parent)).to_pyarrow_table(
            columns=["topic", "partition", "offset", "_source"]
        )
        rows += table.num_rows
        seen: set[tuple[Any, ...]] = set()
        for row in zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True):
            if row[2] is None:
                continue
            if row in seen:
                repeated += 1
            seen.add(row)
    return rows, repeated


def batch_times(warehouse: Path, started: float) -> dict[str, tuple[list[float], list[float]]]:
    """Per query, (seconds since the start, duration in seconds) of each micro-batch the event
    log holds."""
    path = warehouse / "_system" / "event_log"
    if not (path / "_delta_log").is_dir():
        return {}
    table = DeltaTable(str(path)).to_pyarrow_table()
    names = set(table.column_names)
    columns = [
        c for c in ("query", "ended_at", "started_at", "timestamp", "duration_ms") if c in names
    ]
    series: dict[str, tuple[list[float], list[float]]] = {}
    for row in table.select(columns).to_pylist():
        at = row.get("ended_at") or row.get("timestamp") or row.get("started_at")
        duration = row.get("duration_ms")
        if at is None or duration is None:
            continue
        times, durations = series.setdefault(str(row["query"]), ([], []))
        times.append(at.timestamp() - started)
        durations.append(duration / 1000)
    return series


def read_the_rest(source: Path, warehouse: Path) -> int:
    """Bring every layer to the end of the input with a ``--once`` run (the stopped run may
    have left silver or gold behind bronze, which verify would report); its exit status."""
    args = ["run", "--config", str(SHOP_TOML), "--source", f"files:{source}"]
    args += ["--warehouse", str(warehouse), "--once"]
    return subprocess.run([str(LAKEHOUSE), *args], capture_output=True, check=False).returncode


def soak(
    minutes: float, rate: float, file_seconds: float, sample_seconds: float, trigger: str
) -> dict[str, Any]:
    """Run the soak; return its figures (see the module's doc)."""
    if WORK.exists():
        subprocess.run(["rm", "-rf", str(WORK)], check=True)
    source, warehouse = WORK / "source", WORK / "warehouse"
    source.mkdir(parents=True)
    total = max(1, round(minutes * 60 * rate))
    lines = [r.to_line() for r in generate(WorkloadConfig(events=total, seed=47))][:total]
    per_file = max(1, round(rate * file_seconds))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = (WORK / "run.log").open("w")
    run = subprocess.Popen(
        [
            str(LAKEHOUSE),
            "run",
            "--config",
            str(SHOP_TOML),
            "--source",
            f"files:{source}",
            "--warehouse",
            str(warehouse),
            "--processing-time",
            trigger,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    started_wall = time.time()
    started = time.monotonic()
    stop = threading.Event()
    produced: list[int] = []
    produced_so_far = [0]
    producer = threading.Thread(
        target=lambda: produced.append(
            produce(source, lines, per_file, file_seconds, stop, produced_so_far)
        ),
        daemon=True,
    )
    producer.start()
    samples = Samples()
    process = psutil.Process(run.pid)
    try:
        while time.monotonic() - started < minutes * 60:
            assert run.poll() is None, (WORK / "run.log").read_text()[-3000:]
            stop.wait(sample_seconds)
            behind = produced_so_far[0] - bronze_rows(warehouse)[0]
            sample = {**memory(process), **table_files(warehouse), "lag_records": behind}
            samples.add(time.monotonic() - started, sample)
            print(
                f"{samples.seconds[-1]:7.0f} s  "
                + "  ".join(
                    f"{k}={v[-1]:.0f}"
                    for k, v in samples.values.items()
                    if k.endswith("_mb") or k == "lag_records"
                ),
                flush=True,
            )
        stop.set()
        producer.join()
        written = produced[0] if produced else 0
        caught_up_by = time.monotonic() + CATCH_UP_SECONDS
        while bronze_rows(warehouse)[0] < written and time.monotonic() < caught_up_by:
            time.sleep(5)
        caught_up = bronze_rows(warehouse)[0] >= written  # bronze at least; gold may lag
        os.killpg(run.pid, signal.SIGTERM)  # as systemd stops a service
        code = run.wait(timeout=900)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        log.close()
    finished_by_once = read_the_rest(source, warehouse)
    rows, repeated = bronze_rows(warehouse)
    verify = subprocess.run(
        [str(LAKEHOUSE), "verify", "--config", str(SHOP_TOML), "--warehouse", str(warehouse)],
        capture_output=True,
        text=True,
        check=False,
    )
    batches = batch_times(warehouse, started_wall)
    slopes = {
        name: slope_per_hour(samples.seconds, series) for name, series in samples.values.items()
    }
    batch_slopes = {
        f"batch_seconds:{query}": slope_per_hour(times, durations)
        for query, (times, durations) in batches.items()
    }
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "minutes": minutes,
        "rate_records_per_s": rate,
        "file_seconds": file_seconds,
        "trigger": trigger,
        "records_produced": written,
        "bronze_rows": rows,
        "bronze_rows_repeated": repeated,
        "caught_up_before_stop": caught_up,
        "once_run_exit_after": finished_by_once,
        "run_exit": code,
        "verify_exit": verify.returncode,
        "verify_output": verify.stdout[-4000:] + verify.stderr[-2000:],
        "ok": code == 0
        and finished_by_once == 0
        and verify.returncode == 0
        and rows == written
        and repeated == 0,
        "samples": {"seconds": samples.seconds, **samples.values},
        "first_last": {k: (v[0], v[-1]) for k, v in samples.values.items() if v},
        "slopes_per_hour": {**slopes, **batch_slopes},
        "batches": {q: len(t) for q, (t, _) in batches.items()},
        "mean_batch_seconds": {q: sum(d) / len(d) for q, (_, d) in batches.items() if d},
    }


def print_table(result: dict[str, Any]) -> None:
    """The short table: each metric's first and last sample and its slope per hour."""
    print(
        f"soak {result['minutes']} min at {result['rate_records_per_s']} records/s: "
        f"produced {result['records_produced']}, bronze {result['bronze_rows']} "
        f"({result['bronze_rows_repeated']} repeated), run exit {result['run_exit']}, "
        f"verify exit {result['verify_exit']}: {'ok' if result['ok'] else 'FAILED'}"
    )
    print(f"{'metric':58} {'first':>9} {'last':>9} {'slope/h':>10}")
    for name, slope in result["slopes_per_hour"].items():
        first, last = result["first_last"].get(name, (float("nan"), float("nan")))
        if name.startswith("batch_seconds:"):
            first = last = result["mean_batch_seconds"].get(name.split(":", 1)[1], float("nan"))
        shown = "-" if slope is None else f"{slope:10.2f}"
        print(f"{name[:58]:58} {first:9.1f} {last:9.1f} {shown:>10}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "30"))
    )
    parser.add_argument("--rate", type=float, default=20.0, help="records per second")
    parser.add_argument("--file-seconds", type=float, default=5.0, help="seconds between files")
    parser.add_argument("--sample-seconds", type=float, default=15.0)
    parser.add_argument("--trigger", default="5s", help="the run's --processing-time")
    args = parser.parse_args()
    result = soak(args.minutes, args.rate, args.file_seconds, args.sample_seconds, args.trigger)
    write_results(result, "soak")
    print_table(result)
    if not result["ok"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
