"""The public API's pipeline handle and tables: ``Lakehouse.start`` returns at once with a
running pipeline that other code queries, waits on (``process_all_available``) and stops; a
restart continues exactly once; a failure surfaces through the handle; tables are Delta tables
with time travel, history and a listing from their logs.

Gold is compared with the independent oracle (``tests/gold_oracle.py``) over silver's rows,
bronze with the records the files held."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from expectations.validate import PeriodicValidation
from lakehouse import Lakehouse
from lakehouse.run.lease import PipelineRunningError
from lakehouse_core.errors import ExpectationFailedError, LakehouseError
from lakehouse_core.gold_tables import GoldTable
from lakehouse_demo import generate_workload
from tests import gold_oracle

pytestmark = pytest.mark.integration

#: The shop's clickstream as an events table, and one gold table over orders.
CONFIG = """
[[tables]]
name = "clickstream"
topic = "shop.clickstream"
format = "events"
keys = ["event_id"]
sequence_by = ["ts"]
schema = "event_id string, user_id bigint, page string, action string, ts timestamp"

[[gold]]
name = "revenue_per_minute"
source = "orders"
event_time = "created_at"
window = { kind = "tumbling", size = "1 minute" }
measures = [
  { name = "revenue", fn = "sum", column = "total" },
  { name = "orders", fn = "count" },
]
"""
PARTS = 3
#: How often the handle's run looks for new tables (short: the test waits on its passes).
POLL_SECONDS = 0.2


def _normalized(value: Any) -> Any:
    return round(float(value), 6) if isinstance(value, float | Decimal) else value


def assert_gold_is_the_oracles(lh: Lakehouse, when: str) -> None:
    """gold.revenue_per_minute holds exactly what the oracle computes from silver.orders."""
    table: GoldTable = next(
        t for t in lh.config.gold_declarations if t.name == "revenue_per_minute"
    )
    silver = [row.asDict() for row in lh.table("silver.orders").collect()]
    gold = [row.asDict() for row in lh.table("gold.revenue_per_minute").collect()]
    got = Counter(tuple(_normalized(row[c]) for c in table.columns) for row in gold)
    want = Counter(
        tuple(_normalized(row[c]) for c in table.columns)
        for row in gold_oracle.evaluate(silver, table)
    )
    assert got == want and gold, f"{when}: missing {want - got}, unexpected {got - want}"


def bronze_rows(lh: Lakehouse) -> int:
    return sum(lh.table(t.name).count() for t in lh.tables() if t.layer == "bronze")


def lines(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


@pytest.fixture
def shop(tmp_path: Path) -> tuple[Lakehouse, Path, list[Path]]:
    """A lakehouse with the config above, its (empty) source directory, and the workload's
    parts waiting to arrive in it one at a time."""
    arrivals, source = tmp_path / "arrivals", tmp_path / "source"
    source.mkdir()
    generate_workload(arrivals, events=600, seed=11, malformed_rate=0.0, parts=PARTS)
    config = tmp_path / "pipeline.toml"
    config.write_text(CONFIG, encoding="utf-8")
    lh = Lakehouse(tmp_path / "warehouse", config=config)
    return lh, source, sorted(arrivals.glob("part-*.jsonl"))


def test_a_handle_runs_in_the_background_and_restarts_exactly_once(
    spark: SparkSession, shop: tuple[Lakehouse, Path, list[Path]]
) -> None:
    lh, source, parts = shop
    arrived = 0

    def arrive(part: Path) -> None:
        nonlocal arrived
        arrived += lines(part)
        part.rename(source / part.name)

    arrive(parts[0])
    p = lh.start(f"files:{source}", trigger="1 second", poll_seconds=POLL_SECONDS)
    try:
        assert p.is_active and p.exception() is None
        assert p.await_termination(timeout=0.1) is False  # it runs on
        refused = r"stop it first \(p\.stop\(\)\) before lh\.start\.$"
        with pytest.raises(PipelineRunningError, match=refused):
            lh.start(f"files:{source}", trigger="1 second")
        with pytest.raises(PipelineRunningError, match=r"before lh\.run\.$"):
            lh.run(f"files:{source}")

        p.process_all_available()
        assert bronze_rows(lh) == arrived
        assert_gold_is_the_oracles(lh, "first part")
        status = p.status()
        assert status.running is not None and status.running.alive
        assert status.running.mode == "continuous"
        batches = p.last_batches()
        assert batches.count() > 0
        assert "bronze" in {row.query for row in batches.collect()}
        first_version = lh.delta_table("silver.orders").history(1).first().version
        first_orders = sorted(map(tuple, lh.table("silver.orders").collect()))

        arrive(parts[1])
        p.process_all_available()  # returns only once gold holds the second part too
        assert bronze_rows(lh) == arrived
        assert_gold_is_the_oracles(lh, "second part")
    finally:
        p.stop()
    assert not p.is_active and p.exception() is None
    assert p.await_termination(timeout=0) is True
    assert p.status().running is None  # the heartbeat went with the run
    with pytest.raises(LakehouseError, match=r"was stopped: start it again"):
        p.process_all_available()

    arrive(parts[2])
    again = lh.start(f"files:{source}", trigger="1 seconds", poll_seconds=POLL_SECONDS)
    with again:
        again.process_all_available()
    assert not again.is_active and again.exception() is None
    assert bronze_rows(lh) == arrived == sum(lines(source / part.name) for part in parts)
    assert_gold_is_the_oracles(lh, "after the restart")
    assert lh.verify().ok

    assert_time_travel(lh, first_version, first_orders)
    assert_tables_listed(lh)


def assert_time_travel(
    lh: Lakehouse, first_version: int, first_orders: list[tuple[Any, ...]]
) -> None:
    """silver.orders at ``first_version`` (and at that version's time) is what it held then;
    its history lists the versions newest first."""
    then = lh.table("silver.orders", version=first_version)
    assert sorted(map(tuple, then.collect())) == first_orders
    assert sorted(map(tuple, lh.table("silver.orders").collect())) != first_orders
    history = lh.history("silver.orders")
    versions = [row.version for row in history.select("version").collect()]
    assert versions == sorted(versions, reverse=True) and first_version in versions
    at = history.where(f"version = {first_version}").first().timestamp
    assert sorted(map(tuple, lh.table("silver.orders", timestamp=at).collect())) == first_orders
    assert isinstance(lh.delta_table("gold.revenue_per_minute"), DeltaTable)


def assert_tables_listed(lh: Lakehouse) -> None:
    """``tables()`` lists every table with the rows and version Spark reads."""
    now = datetime.now(UTC)
    listed = {t.name: t for t in lh.tables()}
    assert {"silver.orders", "silver.customers", "silver.clickstream"} <= set(listed)
    assert "gold.revenue_per_minute" in listed
    for name, info in listed.items():
        assert info.layer == name.partition(".")[0]
        assert info.rows == lh.table(name).count(), name
        assert info.version == lh.delta_table(name).history(1).first().version, name
        assert info.last_modified <= now
    assert listed["silver.orders"].freshness_seconds is not None
    assert listed["gold.revenue_per_minute"].freshness_seconds is None


def test_a_failure_that_stops_the_run_surfaces_through_the_handle(
    spark: SparkSession,
    shop: tuple[Lakehouse, Path, list[Path]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``fail`` expectation breaking in a periodic validation stops a continuous run: the
    handle ends, ``exception()`` and ``await_termination`` give the error, waiting for data
    raises it, and the lease is free for the next start."""
    lh, source, parts = shop
    parts[0].rename(source / parts[0].name)
    broke = ExpectationFailedError("silver.orders.positive_total broke (fail)")
    calls = []

    def validate(*_: object) -> None:
        calls.append(1)
        if len(calls) > 1:  # after the first pass
            raise broke

    monkeypatch.setattr(PeriodicValidation, "run_if_due", validate)
    p = lh.start(f"files:{source}", trigger="1 second", poll_seconds=POLL_SECONDS)
    try:
        with pytest.raises(ExpectationFailedError, match=r"positive_total broke"):
            p.await_termination(timeout=300)
        assert p.exception() is broke and not p.is_active
        with pytest.raises(ExpectationFailedError):
            p.process_all_available()
    finally:
        p.stop()
    monkeypatch.undo()
    with lh.start(f"files:{source}", trigger="1 second", poll_seconds=POLL_SECONDS) as again:
        again.process_all_available()
    assert bronze_rows(lh) == lines(source / parts[0].name)
