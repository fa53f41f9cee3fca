"""Failures are isolated per table, as Databricks isolates flows: a ``--once`` run finishes the
work of every table but the failed ones, then exits non-zero with one line per failed table
(the user's error, or an internal error and where its trace is); a continuous run starts a
failed table again with backoff while the others go on, and says so in the heartbeat that
``lakehouse status`` reads. The event log keeps each failure's real class, message and trace.

One table fails by the user's doing (a ``fail`` expectation breaks), another by a bug (its
batches raise ``ZeroDivisionError``, injected into :func:`silver.job.apply_batch`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import lakehouse.run.event_log
import silver.job
import silver.one_hop
from cdc.records import Record
from cdc.sources import SourceSpec
from lakehouse.cli.common import print_failures
from lakehouse.ops.status import Failing, running
from lakehouse.run.pipeline import Backoff, run_continuously
from lakehouse.run.summary import RunSummary
from lakehouse_core.config import load_config
from lakehouse_core.errors import ConfigError
from lakehouse_core.failures import Failure, TableFailure
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import Trigger
from tests.cli import run_cli
from tests.logs import logged

pytestmark = pytest.mark.integration

TABLES = """
[[tables]]
name = "{name}"
topic = "app.{name}"
format = "events"
keys = ["id"]
sequence_by = ["seq"]
schema = "id bigint, seq bigint, amount int, at timestamp"
"""
GOLD = """
[[gold]]
name = "accounts_per_minute"
source = "accounts"
event_time = "at"
window = { kind = "tumbling", size = "1 minute" }
measures = [{ name = "accounts", fn = "count" }, { name = "total", fn = "sum", column = "amount" }]
"""
#: silver.users may not hold an amount above 100; its ``fail`` action stops its batch.
SUITE = {
    "name": "silver.users",
    "expectations": [
        {
            "type": "expect_column_values_to_be_between",
            "kwargs": {"column": "amount", "max_value": 100},
            "meta": {"name": "amount_at_most_100", "action": "fail"},
        }
    ],
}
NOW = datetime(2026, 1, 1, tzinfo=UTC)
INTERNAL_LINE = (
    "error: internal error in silver.payments: ZeroDivisionError: division by zero; its whole "
    "trace is in the event log (system.event_log, column trace, query silver_payments), or "
    "rerun with --debug"
)


def event(table: str, offset: int, id_: int, seq: int, amount: int) -> Record:
    value = {"id": id_, "seq": seq, "amount": amount, "at": "2026-01-01T00:00:30"}
    return Record(f"app.{table}", 0, offset, 1_000 + offset, None, value)


#: accounts 1 and 2 (1 updated: amount 15), a user over the limit, two payments.
RECORDS = [
    event("accounts", 0, 1, 1, 10),
    event("accounts", 1, 2, 1, 20),
    event("accounts", 2, 1, 2, 15),
    event("users", 0, 7, 1, 50),
    event("users", 1, 8, 1, 500),
    event("payments", 0, 3, 1, 5),
    event("payments", 1, 4, 1, 6),
]


def arrive(source: Path, records: list[Record]) -> None:
    source.mkdir(parents=True, exist_ok=True)
    lines = "".join(record.to_line() + "\n" for record in records)
    (source / "part-00000.jsonl").write_text(lines, encoding="utf-8")


def failing_payments(
    monkeypatch: pytest.MonkeyPatch, modules: tuple[Any, ...], release: threading.Event
) -> list[int]:
    """Make every micro-batch of silver.payments raise ZeroDivisionError until ``release`` is
    set (in the modules' ``apply_batch``); the ids of the batches that raised."""
    original = silver.job.apply_batch
    raised: list[int] = []

    def apply_batch(batch: Any, batch_id: int, spec: Any, *args: Any, **kwargs: Any) -> Any:
        if spec.name == "payments" and not release.is_set():
            raised.append(batch_id)
            return 1 / 0
        return original(batch, batch_id, spec, *args, **kwargs)

    for module in modules:
        monkeypatch.setattr(module, "apply_batch", apply_batch)
    return raised


def rows(spark: SparkSession, path: str, *columns: str) -> list[tuple[Any, ...]]:
    return sorted(
        tuple(r) for r in spark.read.format("delta").load(path).select(*columns).collect()
    )


def test_a_once_run_finishes_the_other_tables_and_names_each_failed_one(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, root, suites = tmp_path / "source", tmp_path / "warehouse", tmp_path / "suites"
    (suites / "silver").mkdir(parents=True)
    (suites / "silver" / "users.json").write_text(json.dumps(SUITE), encoding="utf-8")
    config = tmp_path / "pipeline.toml"
    tables = "".join(TABLES.format(name=name) for name in ("users", "payments", "accounts"))
    quality = f"[quality]\nsuites = {json.dumps(str(suites))}\n"
    config.write_text(tables + GOLD + quality, encoding="utf-8")
    arrive(source, RECORDS)
    failing_payments(monkeypatch, (silver.job,), threading.Event())
    args = ("run", "--source", f"files:{source}", "--warehouse", root, "--once", "--config", config)

    ran = run_cli(*args)

    assert ran.returncode == 1, ran.stdout + ran.stderr  # 1: an internal error among them
    assert "Traceback" not in ran.stderr, ran.stderr
    lines = sorted(ran.stderr.splitlines())
    assert len(lines) == 2 and lines[0] == INTERNAL_LINE, ran.stderr
    assert lines[1].startswith(
        "error: silver.users: Expectation amount_at_most_100 (expect_column_values_to_be_between"
        ", action fail) of silver.users broke in micro-batch 0: 1 of 2 rows, e.g. id=8, "
        "amount=500"
    ), lines[1]
    # The other silver table and the gold table over it did all their work.
    warehouse = Warehouse.from_path(root)
    assert rows(spark, warehouse.table("silver", "accounts"), "id", "amount") == [(1, 15), (2, 20)]
    gold = warehouse.table("gold", "accounts_per_minute")
    assert rows(spark, gold, "accounts", "total") == [(2, 35)]
    assert "payments" not in warehouse.table_names("silver", spark)
    # The event log keeps the real errors: class, message and whole trace.
    log = spark.read.format("delta").load(warehouse.event_log).where("event = 'failed'")
    failed = {row.query: row for row in log.collect()}
    assert set(failed) == {"silver_users", "silver_payments"}
    assert failed["silver_payments"].error == "ZeroDivisionError: division by zero"
    assert failed["silver_users"].error.startswith(
        "lakehouse_core.errors.ExpectationFailedError: Expectation amount_at_most_100"
    )
    for row in failed.values():
        assert row.trace.startswith("Traceback (most recent call last):"), row.trace
        assert row.error.split(":")[0].rpartition(".")[2] in row.trace.splitlines()[-1]
    assert "in apply_batch" in failed["silver_payments"].trace
    # Status names them (from the event log: no run is going on).
    status = json.loads(run_cli("status", "--warehouse", root, "--json", "--config", config).stdout)
    assert [(f["table"], f["error"].split(":")[0]) for f in status["failing"]] == [
        ("silver.payments", "ZeroDivisionError"),
        ("silver.users", "lakehouse_core.errors.ExpectationFailedError"),
    ]


def test_an_internal_error_prints_its_trace_with_debug(capsys: pytest.CaptureFixture[str]) -> None:
    """``lakehouse run --debug``: an internal error's line says the trace follows, and it does;
    a user's error is its line alone."""
    try:
        1 / 0  # noqa: B018
    except ZeroDivisionError as error:
        internal = TableFailure("silver_payments", "silver.payments", Failure.of(error), NOW)
    user = TableFailure("silver_users", "silver.users", Failure.of(ConfigError("Fix it.")), NOW)

    assert print_failures([internal, user], debug=True) == 1
    assert print_failures([user]) == 2

    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == (
        "error: internal error in silver.payments: ZeroDivisionError: division by zero; its "
        "whole trace follows"
    )
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[-3:] == [
        "ZeroDivisionError: division by zero",
        *["error: silver.users: Fix it."] * 2,
    ]


#: How long the continuous run may take; every wait of the test is bounded by it.
CONTINUOUS_BUDGET_SECONDS = 300


class Watcher(threading.Thread):
    """Watches a continuous run: waits until the heartbeat shows silver.payments failing twice
    in a row and silver.accounts holds every record, releases the payments fault, waits until
    silver.payments holds its records, then stops the run with SIGTERM, as a user would."""

    def __init__(self, spark: SparkSession, warehouse: Warehouse, release: threading.Event):
        super().__init__(daemon=True)
        self.spark, self.warehouse, self.release = spark, warehouse, release
        self.deadline = time.monotonic() + CONTINUOUS_BUDGET_SECONDS
        self.seen: list[Failing] = []
        self.outcome: dict[str, bool] = {}

    def run(self) -> None:
        try:
            self.outcome["failing"] = self.wait_for(self.payments_failing_twice)
            self.outcome["accounts"] = self.wait_for(
                lambda: self.rows("accounts", "id", "amount") == [(1, 15), (2, 20)]
            )
            self.release.set()
            self.outcome["payments"] = self.wait_for(
                lambda: self.rows("payments", "id") == [(3,), (4,)]
            )
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    def wait_for(self, condition: Callable[[], bool]) -> bool:
        while time.monotonic() < self.deadline:
            with contextlib.suppress(Exception):  # a table not there yet
                if condition():
                    return True
            time.sleep(0.2)
        return False

    def payments_failing_twice(self) -> bool:
        beat = running(self.spark, self.warehouse, datetime.now(UTC))
        self.seen = [] if beat is None else beat.failing
        return any(f.table == "silver.payments" and f.attempts >= 2 for f in self.seen)

    def rows(self, table: str, *columns: str) -> list[tuple[Any, ...]]:
        return rows(self.spark, self.warehouse.table("silver", table), *columns)


def test_a_continuous_run_retries_a_failed_table_with_backoff_while_the_others_go_on(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """silver.payments fails in its one-hop batch, then in its own query, until the heartbeat
    (``lakehouse status``) has shown it failing twice in a row while silver.accounts has
    applied everything; then its next attempt applies its records and the run stops."""
    source = tmp_path / "source"
    config_file = tmp_path / "pipeline.toml"
    config_file.write_text(
        "".join(TABLES.format(name=name) for name in ("accounts", "payments")), encoding="utf-8"
    )
    arrive(source, [r for r in RECORDS if not r.topic.endswith("users")])
    warehouse = Warehouse.from_path(tmp_path / "warehouse")
    release = threading.Event()
    raised = failing_payments(monkeypatch, (silver.job, silver.one_hop), release)
    monkeypatch.setattr(lakehouse.run.event_log, "HEARTBEAT_SECONDS", 0.2)
    summary = RunSummary()
    watcher = Watcher(spark, warehouse, release)
    watcher.start()
    try:
        with logged() as said:
            run_continuously(
                spark,
                SourceSpec("files", str(source)),
                warehouse,
                load_config(config_file),
                Trigger("1 second"),
                poll_seconds=0.2,
                summary=summary,
                backoff=Backoff(first_seconds=0.5, max_seconds=1.0),
            )
    finally:
        release.set()
        watcher.join(timeout=CONTINUOUS_BUDGET_SECONDS)
    assert watcher.outcome == {"failing": True, "accounts": True, "payments": True}, said
    assert watcher.seen[0].error == "ZeroDivisionError: division by zero"
    assert watcher.seen[0].retry_at is not None
    assert len(raised) >= 2  # in the hop, then in its own query
    failures = [line for line in said if line.startswith("silver.payments: failed")]
    assert failures[:2] == [
        "silver.payments: failed (ZeroDivisionError: division by zero); the other tables go "
        f"on; attempt {n + 1} in {delay} s"
        for n, delay in ((1, "0.5"), (2, "1"))
    ], said
    assert all(line.endswith("in 1 s") for line in failures[1:]), failures  # at most 1 s
    assert "silver.payments: running again" in "\n".join(said), said
    assert summary.failing_now() == []
    assert not any(line.startswith(("silver.accounts: failed", "bronze: failed")) for line in said)
    log = spark.read.format("delta").load(warehouse.event_log)
    failed = log.where("query = 'silver_payments' AND event = 'failed'").collect()
    assert len(failed) == len(failures), failed
    assert all("ZeroDivisionError" in row.trace for row in failed)
