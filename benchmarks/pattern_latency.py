"""How soon a pattern's match shows in ``gold.<name>`` after its last event arrives, in a
``lakehouse run --processing-time`` run fed at a steady rate.

A writer thread lands one file of ``--rate`` events every second in the run's source
directory (an events table of users' clicks); among them, users' ``a`` events and, 10 s of
event time later, their ``b`` events, which complete a match of the two-step pattern. A
poller reads ``gold.<name>`` with delta-rs (no Spark) every 0.2 s and notes when each
expected match id first shows. The latency of a match is that moment less the arrival (the
file's landing) of its ``b`` event. The figures are p50, p99 and max over the matches, next
to the trigger interval (a match is meant to show within one trigger of its last event).

    python -m benchmarks.pattern_latency --rate 1000 --seconds 60 --trigger 5s
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from benchmarks.recording import write_results
from cdc.records import Record
from lakehouse_core.patterns import match_id

TOPIC = "bench.clicks"
PATTERN = "a_then_b"
CONFIG = f"""
[[tables]]
name = "clicks"
topic = "{TOPIC}"
format = "events"
keys = ["event_id"]
sequence_by = ["ts"]
schema = "event_id bigint, user_id bigint, kind string, ts timestamp"

[[gold]]
name = "clicks_per_minute"
source = "clicks"
event_time = "ts"
window = {{ kind = "tumbling", size = "1 minute" }}
measures = [{{ name = "clicks", fn = "count" }}]

[[patterns]]
name = "{PATTERN}"
source = "clicks"
partition_by = ["user_id"]
event_time = "ts"
within = "1 minute"
steps = [{{ name = "a", condition = "kind = 'a'" }}, {{ name = "b", condition = "kind = 'b'" }}]
"""
BASE = datetime(2026, 1, 1, tzinfo=UTC)


class Feed:
    """Writes a file of ``rate`` events every second; remembers when each match completes."""

    def __init__(self, directory: Path, rate: int, seconds: int, seed: int) -> None:
        self.directory, self.rate, self.seconds = directory, rate, seconds
        self.rng = random.Random(seed)
        self.completed: dict[str, float] = {}  # match id -> arrival of its last event
        self.pending: list[tuple[int, int]] = []  # (user, event id of its a) awaiting b
        self.next_id = 0

    def _event(self, user: int, kind: str, second: int) -> tuple[int, Record]:
        self.next_id += 1
        moment = BASE + timedelta(seconds=second, microseconds=self.next_id % 1_000_000)
        value = {
            "event_id": self.next_id,
            "user_id": user,
            "kind": kind,
            "ts": moment.isoformat().replace("+00:00", "Z"),
        }
        return self.next_id, Record(TOPIC, 0, self.next_id, 0, {"event_id": self.next_id}, value)

    def run(self) -> None:
        start = time.monotonic()
        for second in range(self.seconds):
            records, finishing = [], []
            for user, first in self.pending:  # b, 10 s of event time after a
                _, record = self._event(user, "b", second)
                records.append(record)
                finishing.append(match_id([user], [first]))
            self.pending = []
            users = self.rng.sample(range(1_000_000), max(1, self.rate // 50))
            for user in users:  # a, completed next second
                event_id, record = self._event(user, "a", second)
                records.append(record)
                self.pending.append((user, event_id))
            while len(records) < self.rate:
                records.append(self._event(self.rng.randrange(1_000_000), "c", second)[1])
            hidden = self.directory / f".part-{second:05d}.jsonl"
            hidden.write_text("".join(r.to_line() + "\n" for r in records), encoding="utf-8")
            hidden.rename(self.directory / f"part-{second:05d}.jsonl")
            landed = time.monotonic()
            for ident in finishing:
                self.completed[ident] = landed
            time.sleep(max(0.0, start + second + 1 - time.monotonic()))


def watch(table: Path, feed: Feed, seen: dict[str, float], stop: threading.Event) -> None:
    """Note when each match id first shows in the pattern table."""
    while not stop.is_set():
        try:
            ids = DeltaTable(str(table)).to_pyarrow_table(columns=["match_id"]).column(0)
            now = time.monotonic()
            for ident in ids.to_pylist():
                seen.setdefault(ident, now)
        except Exception:  # the table may not exist yet
            pass
        stop.wait(0.2)


def measure(rate: int, seconds: int, trigger: str, seed: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="pattern-latency-"))
    source, warehouse = root / "source", root / "warehouse"
    source.mkdir()
    config = root / "pipeline.toml"
    config.write_text(CONFIG, encoding="utf-8")
    lakehouse = Path(sys.executable).with_name("lakehouse")
    run = subprocess.Popen(
        [
            *(str(lakehouse), "run", "--source", f"files:{source}", "--warehouse", str(warehouse)),
            *("--config", str(config), "--processing-time", trigger),
            *("--max-files-per-trigger", "1000"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    feed = Feed(source, rate, seconds, seed)
    seen: dict[str, float] = {}
    stop = threading.Event()
    watcher = threading.Thread(
        target=watch, args=(warehouse / "gold" / PATTERN, feed, seen, stop), daemon=True
    )
    watcher.start()
    try:
        feed.run()
        deadline = time.monotonic() + 300
        while set(feed.completed) - set(seen) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        stop.set()
        os.killpg(run.pid, signal.SIGTERM)
        run.wait(timeout=300)
    latencies = sorted(seen[i] - t for i, t in feed.completed.items() if i in seen)
    missing = len(feed.completed) - len(latencies)
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    return {
        "rate_events_per_second": rate,
        "seconds": seconds,
        "trigger": trigger,
        "matches": len(feed.completed),
        "matches_not_seen": missing,
        "latency_p50_s": round(quantiles[49], 2),
        "latency_p99_s": round(quantiles[98], 2),
        "latency_max_s": round(latencies[-1], 2) if latencies else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=int, default=1000, help="events per second")
    parser.add_argument("--seconds", type=int, default=60, help="how long the feed runs")
    parser.add_argument("--trigger", default="5s", help="the run's processing time")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    result = measure(args.rate, args.seconds, args.trigger, args.seed)
    result["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    write_results(result, "pattern-latency")
    print(
        f"pattern latency at {args.rate} events/s, trigger {args.trigger}: "
        f"p50 {result['latency_p50_s']} s, p99 {result['latency_p99_s']} s, "
        f"max {result['latency_max_s']} s over {result['matches']} matches "
        f"({result['matches_not_seen']} not seen)"
    )


if __name__ == "__main__":
    main()
