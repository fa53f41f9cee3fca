"""What long commands show while they run: the layers' log records as a line per step, and on
a terminal the running step live below them (spinner, bar, elapsed time), gone when the
command ends; warnings as ``warning: ...`` lines on stderr. And what the layers log, under
which logger, with nothing configured by the library itself."""

from __future__ import annotations

import io
import logging
import re

import pytest
from rich.console import Console

from gold.jobs import GoldIsolation
from gold.models import Outcome, Refreshed, _say
from lakehouse import LOGGERS
from lakehouse.cli import common
from lakehouse.run.pipeline import _gold_failures
from lakehouse.run.queries import Backoff, RunningQueries
from lakehouse.run.summary import RunSummary
from lakehouse_core.failures import Failure

pytestmark = pytest.mark.unit

REPLAY = "replay: rebuilding orders"
APPLY = "silver: applying shop.orders to silver.orders"


def shown(terminal: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """What a command prints (stdout, stderr) while two layers log a step each and a third
    a warning (and py4j, a debug line and a record of ours below INFO, nothing shown)."""
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(common, "console", Console(file=out, force_terminal=terminal, width=100))
    monkeypatch.setattr(common, "errors", Console(file=err, width=100))
    step = common.RunningStep()
    monkeypatch.setattr(common, "running_step", step)
    with common.showing_steps():
        logging.getLogger("lakehouse.ops.replay").info(REPLAY)
        logging.getLogger("py4j.clientserver").info("Closing down clientserver connection")
        logging.getLogger("gold.models").debug("not shown")
        logging.getLogger("lakehouse_core.delta_io").warning(
            "Delta table %s uses %s", "/wh/t", "DVs"
        )
        logging.getLogger("lakehouse.run.pipeline").info(APPLY)
    step.stop()  # its last refresh draws the running step, then erases it
    return out.getvalue(), err.getvalue()


def test_a_terminal_sees_the_running_step_live(monkeypatch: pytest.MonkeyPatch) -> None:
    output, _ = shown(True, monkeypatch)
    assert f"- {REPLAY}" in output
    live = output.split(f"- {APPLY}", 1)[1]
    assert APPLY in live  # the running step
    assert re.search(r"\d:\d\d:\d\d", live)  # its elapsed time
    assert "\x1b[2K" in live  # erased at the end (transient)


def test_a_pipe_gets_the_step_lines_only(monkeypatch: pytest.MonkeyPatch) -> None:
    output, errors = shown(False, monkeypatch)
    assert output.splitlines() == [f"- {REPLAY}", f"- {APPLY}"]
    assert errors.splitlines() == ["warning: Delta table /wh/t uses DVs"]


def test_the_command_lines_handler_is_gone_after_the_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loggers are as they were (a library leaves their configuration to the
    application: no level, no handler but at most a NullHandler, propagating)."""
    before = {name: _configured(name) for name in LOGGERS}
    shown(False, monkeypatch)
    assert {name: _configured(name) for name in LOGGERS} == before
    for name in LOGGERS:
        level, handlers, propagate = _configured(name)
        assert (level, propagate) == (logging.NOTSET, True), name
        assert all(kind is logging.NullHandler for kind in handlers), (name, handlers)


def _configured(name: str) -> tuple[int, list[type[logging.Handler]], bool]:
    logger = logging.getLogger(name)
    return logger.level, [type(h) for h in logger.handlers], logger.propagate


def test_the_command_lines_handler_keeps_records_from_the_roots_handlers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A handler on the root logger (an application's ``basicConfig``) does not print the
    command's lines a second time."""
    root = io.StringIO()
    handler = logging.StreamHandler(root)
    logging.getLogger().addHandler(handler)
    try:
        shown(False, monkeypatch)
    finally:
        logging.getLogger().removeHandler(handler)
    assert REPLAY not in root.getvalue()


def test_the_layers_log_under_their_own_loggers(caplog: pytest.LogCaptureFixture) -> None:
    """A query that fails to start, a shared gold query's declaration that failed and one
    that recovered, a model refreshed: INFO records of the module that did it, the lines the
    command line prints after ``- ``."""
    for package in ("lakehouse", "gold"):
        caplog.set_level(logging.INFO, logger=package)

    def broken() -> object:
        raise ValueError("boom")

    running = RunningQueries(backoff=Backoff(first_seconds=2.0, max_seconds=4.0))
    assert running.start("silver_orders", broken, "silver.orders") is None  # type: ignore[arg-type]
    isolation = GoldIsolation(retry=lambda attempts: 5.0 * attempts)
    isolation.failed("revenue", Failure.of(ZeroDivisionError("division by zero")))
    isolation.failed("sessions", Failure.of(ValueError("x")))
    _gold_failures(isolation, RunSummary())
    isolation.succeeded("sessions")
    _gold_failures(isolation, RunSummary())
    _say(Refreshed("avg_price", Outcome.WRITTEN, rows_changed=3), set())

    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        (
            "lakehouse.run.queries",
            logging.INFO,
            "silver.orders: failed (ValueError: boom); the other tables go on; attempt 2 in 2 s",
        ),
        (
            "lakehouse.run.pipeline",
            logging.INFO,
            "gold.revenue: failed (ZeroDivisionError: division by zero); the other tables go "
            "on; attempt 2 in 5 s",
        ),
        (
            "lakehouse.run.pipeline",
            logging.INFO,
            "gold.sessions: failed (ValueError: x); the other tables go on; attempt 2 in 5 s",
        ),
        ("lakehouse.run.pipeline", logging.INFO, "gold.sessions: running again"),
        ("gold.models", logging.INFO, "gold: model avg_price refreshed (3 rows changed)"),
    ]
