"""Helpers for tests that run the ``lakehouse`` command line as killable processes and compare
the warehouses they leave."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from lakehouse_core.layout import Warehouse
from silver.verify import canonical_rows
from tests.warehouses import without_run_columns

PHASES = ("bronze", "silver", "gold")


@dataclass
class Run:
    """One ``lakehouse run`` in its own process group; its output is read by a thread."""

    args: list[str]
    process: subprocess.Popen[str] = field(init=False)
    lines: list[tuple[float, str]] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _reader: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        env = {**os.environ, "COLUMNS": "250", "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            self.args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def progress(self) -> list[tuple[float, str]]:
        """(time, phase) of each progress line so far."""
        with self._changed:
            return [
                (at, line[2:].split(":", 1)[0])
                for at, line in self.lines
                if line.startswith("- ") and line[2:].split(":", 1)[0] in PHASES
            ]

    def wait_for(self, phase: str, occurrence: int, deadline: float) -> float | None:
        """Time of the ``occurrence``-th progress line of ``phase``; None if the run ended first."""
        with self._changed:
            while True:
                seen = [at for at, p in self.progress() if p == phase]
                if len(seen) >= occurrence:
                    return seen[occurrence - 1]
                if not self._reader.is_alive():
                    return None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no '- {phase}' line in time:\n{self.output()}")
                self._changed.wait(1.0)

    def phase_now(self) -> str | None:
        progress = self.progress()
        return progress[-1][1] if progress else None

    def kill(self) -> None:
        """SIGKILL the whole process group (Python and the Spark JVM) and wait until it is gone."""
        pgid = self.process.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        self.process.wait(timeout=60)
        self._reader.join(timeout=60)
        deadline = time.monotonic() + 60
        while live_members(pgid):
            assert time.monotonic() < deadline, f"process group {pgid} survived SIGKILL"
            time.sleep(0.2)

    def finish(self, deadline: float) -> int:
        try:
            code = self.process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        self._reader.join(timeout=60)
        return code

    def output(self) -> str:
        with self._changed:
            return "\n".join(line for _, line in self.lines[-60:])


def live_members(pgid: int) -> list[int]:
    """Processes of a process group that still run (zombies excluded)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _ppid, group = stat.rsplit(")", 1)[1].split()[:3]
        if int(group) == pgid and state not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def load(spark: SparkSession, warehouse: Path, layer: Any, name: str) -> DataFrame:
    return spark.read.format("delta").load(Warehouse.from_path(warehouse).table(layer, name))


def row_multiset(frame: DataFrame) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(row.values()) for row in canonical_rows(frame))


def bronze_multiset(frame: DataFrame) -> Counter[tuple[Any, ...]]:
    return row_multiset(frame.select("topic", "partition", "offset", "key", "value"))


def described(counter: Counter[tuple[Any, ...]], limit: int = 5) -> list[str]:
    return [f"{count} x {row}" for row, count in list(counter.items())[:limit]]


def assert_same_rows(layer: str, name: str, want: DataFrame, got: DataFrame) -> None:
    """The table ``layer.name`` holds the same rows (schema included) in both runs, apart from
    the columns that record when each run computed it."""
    want, got = without_run_columns(layer, name, want), without_run_columns(layer, name, got)
    assert got.schema == want.schema, f"{layer}.{name}: {got.schema} != {want.schema}"
    want_rows, got_rows = row_multiset(want), row_multiset(got)
    assert got_rows == want_rows, (
        f"{layer}.{name}: missing {described(want_rows - got_rows)}, "
        f"extra {described(got_rows - want_rows)}"
    )
