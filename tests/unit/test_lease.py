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
from hypothesis import given
from hypothesis import strategies as st

from lakehouse.run.lease import Holder, holder_of, is_free

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


def test_the_holder_is_named_by_the_newest_commit_that_lands_right_after_what_it_follows() -> None:
    """A commit that follows an older version than the one just before it (its writer read the
    lease before another commit landed) does not count; nor does one that names no holder; a
    commit that names no version it follows (written by earlier releases) does."""
    a, b = holder(run="a"), holder(run="b")
    created = (0, None)
    assert holder_of([created]) is None
    assert holder_of([created, (1, a.to_text(follows=0))]) == a
    assert holder_of([created, (1, a.to_text(follows=0)), (2, b.to_text(follows=0))]) == a
    assert holder_of([(2, b.to_text(follows=1)), (1, a.to_text(follows=0)), created]) == b
    assert holder_of([(5, a.to_text()), (6, "lakehouse batch x 1")]) == a
    assert holder_of([created, (1, b.to_text(follows=3))]) is None
    assert Holder.from_text(a.to_text(follows=4)) == a


@given(st.lists(st.integers(min_value=0, max_value=3), max_size=40))
def test_of_claimers_racing_on_one_log_exactly_one_holds(turns: list[int]) -> None:
    """Four claimers, each: read the lease (the log's newest version and holder), commit a claim
    that follows the version read unless someone holds it, read it back. Delta's log is modelled
    as a list (a commit lands after the newest), the claimers' steps interleave as ``turns``
    says. However they interleave, exactly one of those that committed holds the lease."""
    log: list[tuple[int, str | None]] = [(0, None)]  # the table's creation
    steps = {claimer: 0 for claimer in range(4)}
    read: dict[int, int] = {}
    holds: set[str] = set()
    committed: set[str] = set()
    for claimer in [*turns, *[c for c in range(4) for _ in range(3)]]:  # then all finish
        me = holder(run=f"claimer {claimer}")
        step = steps[claimer]
        if step == 0:
            if holder_of(log) is not None:
                steps[claimer] = 3  # held: this claimer gives up
                continue
            read[claimer] = len(log) - 1
        elif step == 1:
            log.append((len(log), me.to_text(follows=read[claimer])))
            committed.add(me.run)
        elif step == 2 and holder_of(log) == me:
            holds.add(me.run)
        steps[claimer] = min(step + 1, 3)
    assert len(holds) == 1 and holds <= committed, (holds, log)
    assert holder_of(log) == holder(run=next(iter(holds)))
