"""What long commands show while they run: a line per step, and on a terminal the running
step live below them (spinner, bar, elapsed time), gone when the command ends."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from lakehouse.cli import common

pytestmark = pytest.mark.unit


def shown(terminal: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    out = io.StringIO()
    monkeypatch.setattr(common, "console", Console(file=out, force_terminal=terminal, width=100))
    step = common.RunningStep()
    monkeypatch.setattr(common, "running_step", step)
    common.progress("replay: rebuilding orders")
    common.progress("silver: applying shop.orders to silver.orders")
    step.stop()  # its last refresh draws the running step, then erases it
    return out.getvalue()


def test_a_terminal_sees_the_running_step_live(monkeypatch: pytest.MonkeyPatch) -> None:
    output = shown(True, monkeypatch)
    assert "- replay: rebuilding orders" in output
    live = output.split("- silver: applying shop.orders to silver.orders", 1)[1]
    assert "silver: applying shop.orders to silver.orders" in live  # the running step
    assert "0:00:0" in live  # its elapsed time
    assert "\x1b[2K" in live  # erased at the end (transient)


def test_a_pipe_gets_the_step_lines_only(monkeypatch: pytest.MonkeyPatch) -> None:
    assert shown(False, monkeypatch).splitlines() == [
        "- replay: rebuilding orders",
        "- silver: applying shop.orders to silver.orders",
    ]
