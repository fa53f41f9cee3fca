"""The lease's rules without Spark: who may take a lease over, and the line a second run
prints (:mod:`lakehouse.run.lease`)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from lakehouse.run.lease import Holder, is_free

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 28, 10, 2, tzinfo=UTC)
HOST = socket.gethostname()


def holder(
    pid: int = 1, host: str = HOST, expires_in: float = 60, released: bool = False, run: str = "r"
) -> Holder:
    return Holder(
        run=run,
        pid=pid,
        host=host,
        command="run --once",
        started=NOW.isoformat(),
        expires=(NOW + timedelta(seconds=expires_in)).isoformat(),
        released=released,
    )


def ended_pid() -> int:
    """The pid of a process that has ended (and was reaped)."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout)


def test_a_free_lease() -> None:
    """None held it, it was released, or it expired: free, wherever its holder ran."""
    assert is_free(None, NOW)
    assert is_free(holder(host="elsewhere", released=True), NOW)
    assert is_free(holder(host="elsewhere", expires_in=-1), NOW)
    assert is_free(holder(host="elsewhere", expires_in=0), NOW)


def test_a_held_lease() -> None:
    """Live and unexpired elsewhere, or held by a live process here (pid 1 always runs)."""
    assert not is_free(holder(host="elsewhere"), NOW)
    assert not is_free(holder(pid=1), NOW)
    assert not is_free(holder(pid=os.getppid()), NOW)


def test_a_process_of_this_host_that_ended_frees_it_at_once() -> None:
    assert is_free(holder(pid=ended_pid()), NOW)
    # ... unless its Spark JVM still runs (it ends a moment after Python).
    still = Holder(**{**holder(pid=ended_pid()).__dict__, "jvm_pid": 1})
    assert not is_free(still, NOW)


def test_runs_of_this_process() -> None:
    """A run of this process holds it only while a block of this process holds it."""
    mine = holder(pid=os.getpid(), run="a")
    assert not is_free(mine, NOW, frozenset({"a"}))
    assert is_free(mine, NOW, frozenset({"b"}))


def test_round_trip_and_the_line() -> None:
    """The holder survives its commit's text; anything else is no holder; the line names pid,
    host and start (local time, hours and minutes)."""
    held = holder(pid=1234, host="h")
    assert Holder.from_text(held.to_text()) == held
    for text in (None, "", "lakehouse batch x 1", "[1]", '{"run": 1}'):
        assert Holder.from_text(text) is None
    started = NOW.astimezone().strftime("%H:%M")
    assert held.line() == (
        f"a pipeline (pid 1234 on host h, started {started}) is running on this warehouse; "
        "stop it or wait"
    )
    assert re.fullmatch(r"a pipeline \(pid 1234 on host h, started \d\d:\d\d\) .*", held.line())
