"""The public Python API refuses bad calls with one clear LakehouseError, before Spark starts,
and reads one ``trigger=`` argument. (Its handle, tables and time travel: the integration
tests in ``tests/integration/test_api_handle.py``.)"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import lakehouse
from lakehouse import Lakehouse
from lakehouse.api import parse_trigger
from lakehouse.run.pipeline import LoopPasses
from lakehouse.run.queries import RunningQueries
from lakehouse_core.errors import ConfigError, StatementRefusedError
from lakehouse_core.streaming import Trigger
from lakehouse_demo import generate_workload
from tests.cli import run_demo_cli

pytestmark = pytest.mark.unit


def test_the_package_exports_the_api() -> None:
    for name in lakehouse.__all__:
        assert getattr(lakehouse, name) is not None
    with pytest.raises(AttributeError):
        _ = lakehouse.no_such_name  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda lh: lh.table("orders"), ConfigError, r"^Invalid table name 'orders': write "),
        (lambda lh: lh.table("platinum.x"), ConfigError, r"^Invalid table name 'platinum.x'"),
        (lambda lh: lh.sql("DELETE FROM gold.x"), StatementRefusedError, r"--allow-writes"),
        (
            lambda lh: lh.sql("DROP TABLE bronze.x", allow_writes=True),
            StatementRefusedError,
            r"bronze",
        ),
        (lambda lh: lh.run("ftp:/x"), ConfigError, r"^Invalid source 'ftp:/x'"),
        (lambda lh: lh.run("files:/x", trigger="soon"), ConfigError, r"^Invalid trigger 'soon'"),
        (lambda lh: lh.start("files:/x", trigger="soon"), ConfigError, r"^Invalid trigger"),
        (
            lambda lh: lh.start("files:/x", trigger="available_now"),
            ConfigError,
            r"^start runs until stopped: give it a processing time, e\.g\. trigger='10 seconds'",
        ),
        (lambda lh: lh.start("ftp:/x"), ConfigError, r"^Invalid source 'ftp:/x'"),
        (
            lambda lh: lh.run("files:/x", one_hop=False),
            ConfigError,
            r"^one_hop=False is for continuous runs",
        ),
        (
            lambda lh: lh.table("silver.x", version=1, timestamp="2026-01-01"),
            ConfigError,
            r"^table\('silver\.x'\) takes either version= or timestamp=, not both",
        ),
        (lambda lh: lh.table("silver.x", version=-1), ConfigError, r"^Invalid version -1"),
        (lambda lh: lh.table("silver.x", version=True), ConfigError, r"^Invalid version True"),
        (lambda lh: lh.delta_table("orders"), ConfigError, r"^Invalid table name 'orders'"),
        (lambda lh: lh.history("gold"), ConfigError, r"^Invalid table name 'gold'"),
        (lambda lh: lh.fit(), ConfigError, r"^No alert to fit: declare one in an \[\[alerts\]\]"),
    ],
)
def test_bad_calls_are_refused_before_spark_starts(
    tmp_path: Path, call: Callable[[Lakehouse], object], error: type[Exception], message: str
) -> None:
    lh = Lakehouse(tmp_path / "wh")
    with pytest.raises(error, match=message):
        call(lh)
    assert lh._spark is None


@pytest.mark.parametrize(
    ("text", "processing_time"),
    [
        ("available_now", None),
        (" Available_Now ", None),
        ("10 seconds", "10 seconds"),
        ("10s", "10 seconds"),
        ("10 S", "10 seconds"),
        ("500ms", "500 milliseconds"),
        ("1 minute", "1 minute"),
        ("2m", "2 minutes"),
        ("3 hours", "3 hours"),
        ("1 day", "24 hours"),
        ("2 days", "48 hours"),
    ],
)
def test_a_trigger_is_available_now_or_a_processing_time(
    text: str, processing_time: str | None
) -> None:
    """The forms of ``lakehouse_core.streaming.Trigger.parse`` and the gold duration grammar's
    spelling (``'<n> <unit>'``, days too) name the same processing time."""
    trigger = parse_trigger(text)
    assert trigger == Trigger(processing_time)
    assert trigger.once is (processing_time is None)


@pytest.mark.parametrize(
    "text", ["", "soon", "availableNow", "once", "10", "ten seconds", "-5s", "1 week", None, 10]
)
def test_anything_else_is_one_config_error(text: object) -> None:
    message = (
        f"Invalid trigger {text!r}: write 'available_now' (process what has arrived, then stop) "
        "or a processing time such as '10 seconds', '10s' or '1 minute'."
    )
    with pytest.raises(ConfigError) as raised:
        parse_trigger(text)  # type: ignore[arg-type]
    assert str(raised.value) == message


def test_a_run_until_interrupted_needs_the_main_thread(tmp_path: Path) -> None:
    """Signals reach only the main thread: elsewhere a run on a processing time could never
    stop, so it is refused (the handle of ``start`` is the way there)."""
    lh = Lakehouse(tmp_path / "wh")
    raised: list[BaseException] = []

    def run() -> None:
        try:
            lh.run("files:/x", trigger="10 seconds")
        except ConfigError as error:
            raised.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert [str(e) for e in raised] == [
        "lh.run with trigger='10 seconds' stops on Ctrl-C or SIGTERM, which only the main thread "
        "gets: call it there, or use p = lh.start(...) and p.stop()."
    ]
    assert lh._spark is None


def test_a_handle_waits_for_a_pass_of_the_loop_begun_after_it_asked() -> None:
    """The loop of a continuous run pauses an hour between passes here: only a wanted pass
    (or the stop) wakes it, and ``next`` returns after a pass that began after the call."""
    passes, stop, running = LoopPasses(), threading.Event(), RunningQueries()
    begun: list[int] = []

    def loop() -> None:
        while not stop.is_set():
            begun.append(len(begun))
            passes.finished(running)
            passes.pause(stop, 3600.0)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    assert passes.next(lambda: True, whole=False) is running
    asked = len(begun)
    assert passes.next(lambda: True) is running
    assert len(begun) >= asked + 1  # a pass began after the call
    stop.set()
    passes.wake()
    thread.join()
    assert passes.next(lambda: False) is None  # the run ended: no pass comes


def test_the_session_getter_only_returns_the_session_given(tmp_path: Path) -> None:
    """Reading ``lh.spark`` registers no catalog name (``register_tables`` does): a session
    given is returned as it is, and nothing is asked of it."""

    class Untouchable:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"lh.spark used the session's {name}")

    session = Untouchable()
    lh = Lakehouse(tmp_path / "wh", spark=session)  # type: ignore[arg-type]
    assert lh.spark is session
    assert lh.spark is session


def test_the_tables_of_a_warehouse_without_tables_are_none(tmp_path: Path) -> None:
    lh = Lakehouse(tmp_path / "wh")
    assert lh.tables() == []
    assert lh._spark is None  # read from the Delta logs: no session started


def test_a_missing_config_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^Config file .*missing.toml not found\.$"):
        Lakehouse(tmp_path, config=tmp_path / "missing.toml")


def test_a_workload_in_parts_keeps_every_record_in_delivery_order(tmp_path: Path) -> None:
    whole = generate_workload(tmp_path / "whole", events=300, seed=3, late_rate=0.05)
    split = generate_workload(tmp_path / "split", events=300, seed=3, late_rate=0.05, parts=3)
    files = sorted((tmp_path / "split").glob("part-*.jsonl"))
    assert whole == split and len(files) == 3
    joined = "".join(f.read_text(encoding="utf-8") for f in files)
    assert joined == (tmp_path / "whole" / "part-00000.jsonl").read_text(encoding="utf-8")

    result = run_demo_cli(
        "generate",
        "--out",
        tmp_path / "cli",
        "--events",
        "300",
        "--seed",
        "3",
        "--late-rate",
        "0.05",
        "--parts",
        "3",
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.read_text() for p in (tmp_path / "cli").glob("*.jsonl")) == sorted(
        f.read_text() for f in files
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"parts": 0}, r"^parts must be a whole number"), ({"late_rate": 0.9}, r"late_rate")],
)
def test_bad_workload_settings_are_refused(
    tmp_path: Path, settings: dict[str, float], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        generate_workload(tmp_path, events=10, **settings)  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())
