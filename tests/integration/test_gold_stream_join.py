"""Property: a gold table with a time-bounded stream join (each order with its customer's
clicks of the 30 minutes before it) equals, after every committed run, its declaration
evaluated by the plain-Python oracle over the current silver tables
(:func:`tests.gold_oracle.stream_joined`); a change on either side, early, late, in another
micro-batch than the rows it matches, corrects the gold rows it reaches.

Hypothesis draws small histories of an orders table (inserts, updates that move the order's
time, customer or channel, deletes) and of a clicks table (the same, for a click's time,
user, page and session), whose records are spread over a few micro-batches and duplicated at
times, so a higher sequence often arrives first and a click often arrives after the order it
belongs to. All histories run together through the real pipeline (file source -> bronze ->
silver -> gold, ``run_once``). ``_final`` is checked against the oracle's watermark and
``gold.late_events`` against the oracle's late images of both sides. Then ``lakehouse
verify`` agrees, ``lakehouse replay`` rebuilds gold equal, and a stream join that names a
missing table, a missing column or a column of another type stops with one clear error.
Reproduce with ``GOLD_STREAM_JOIN_SEED=<seed>``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from cdc.records import Record
from cdc.sources import SourceSpec
from gold.finality import FINAL
from gold.jobs import start_gold
from lakehouse.ops.audit import verify_warehouse
from lakehouse.ops.replay import replay
from lakehouse.run.pipeline import run_once
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.errors import ConfigError
from lakehouse_core.gold_tables import GoldTable, Measure, StreamJoin, Window
from lakehouse_core.layout import LATE_EVENTS, Warehouse
from lakehouse_core.streaming import Trigger
from tests import gold_oracle
from tests.draws import (
    MINUTE,
    boundary_time,
    delivery,
    draw_examples,
    example_count,
    property_seed,
)
from tests.helpers import deliver, table_rows

pytestmark = pytest.mark.integration

ORDERS, CLICKS = "test.orders", "test.clicks"
TABLES = (
    TableSpec(
        name="orders",
        topic=ORDERS,
        format="events",
        keys=("order_id",),
        sequence_by=("seq",),
        schema="order_id bigint, customer_id bigint, channel string, ts timestamp, "
        "seq bigint, deleted boolean",
        apply_as_deletes="deleted = true",
    ),
    TableSpec(
        name="clicks",
        topic=CLICKS,
        format="events",
        keys=("click_id",),
        sequence_by=("seq",),
        schema="click_id bigint, user_id bigint, page string, session string, ts timestamp, "
        "seq bigint, deleted boolean",
        apply_as_deletes="deleted = true",
    ),
)
WITHIN = 30
#: Both sides name their event time ``ts``: the join keeps them apart.
TABLE = GoldTable(
    name="attribution",
    source="orders",
    event_time="ts",
    window=Window("row"),
    measures=(
        Measure("clicks", "count"),
        Measure("pages", "count_distinct", "page"),
        Measure("last_page", "last", "page"),
        Measure("session", "last", "session"),
        Measure("first_click", "min", "ts"),
    ),
    group_by=("order_id", "customer_id"),
    filter="channel <> 'test' OR channel IS NULL",
    watermark_delay="20 minutes",
    stream_join=StreamJoin("clicks", (("customer_id", "user_id"),), "ts", f"{WITHIN} minutes"),
)
CONFIG = PipelineConfig(tables=TABLES, gold_tables=(TABLE,))
EXAMPLES = example_count(12)
BATCHES = 2
KEY_SPACE = 100
USERS = 3
BASE = datetime(2026, 1, 1)
CHANNELS = ("web", "app", "test", None)
PAGES = ("/a", "/b", "/c", None)
SESSIONS = ("s1", "s2", None)
#: Times run from BASE to BASE + SPAN (µs), mostly on boundaries (tests.draws.boundary_time):
#: multiples of the bound and the watermark delay, and 1 µs or 1 ms off; a click is often
#: exactly the bound before an order of its user (in), 1 µs earlier (out), or at its time.
SPAN = 120 * MINUTE
STEPS = (10 * MINUTE, 20 * MINUTE, WITHIN * MINUTE)


@dataclass(frozen=True)
class Change:
    """One event of an order (``page``/``session`` None) or of a click."""

    key: int
    user: int | None
    micros: int  # after BASE
    channel: str | None
    page: str | None
    session: str | None
    deleted: bool
    batches: tuple[int, ...]


def _batches(draw: st.DrawFn) -> tuple[int, ...]:
    return delivery(draw, BATCHES)


@st.composite
def history_strategy(draw: st.DrawFn) -> tuple[list[Change], list[Change]]:
    orders: list[Change] = []
    for _ in range(draw(st.integers(1, 6))):
        key, user = draw(st.integers(0, 3)), draw(st.sampled_from([0, 0, 1, 2, None]))
        earlier = [o.micros for o in orders]
        orders.append(
            Change(
                key=key,
                user=user,
                micros=boundary_time(draw, STEPS, SPAN, earlier),
                channel=draw(st.sampled_from(CHANNELS)),
                page=None,
                session=None,
                deleted=draw(st.integers(0, 6)) == 0,
                batches=_batches(draw),
            )
        )
    clicks: list[Change] = []
    for _ in range(draw(st.integers(0, 10))):
        key, user = draw(st.integers(0, 6)), draw(st.sampled_from([0, 0, 0, 1, 2, None]))
        # Near the times of the orders of its user: at one, or the bound before one.
        near = [o.micros for o in orders if o.user == user]
        clicks.append(
            Change(
                key=key,
                user=user,
                micros=boundary_time(draw, STEPS, SPAN, near, (WITHIN * MINUTE,)),
                channel=None,
                page=draw(st.sampled_from(PAGES)),
                session=draw(st.sampled_from(SESSIONS)),
                deleted=draw(st.integers(0, 6)) == 0,
                batches=_batches(draw),
            )
        )
    return orders, clicks


Histories = list[tuple[list[Change], list[Change]]]


def batch_records(histories: Histories) -> list[list[Record]]:
    """The records of every history, per micro-batch, with offsets unique per topic."""
    batches: list[list[Record]] = [[] for _ in range(BATCHES)]
    offsets = {ORDERS: 0, CLICKS: 0}

    def add(topic: str, key: dict[str, Any], value: dict[str, Any], change: Change) -> None:
        for batch in change.batches:
            batches[batch].append(Record(topic, 0, offsets[topic], 0, key, value))
            offsets[topic] += 1

    for index, (orders, clicks) in enumerate(histories):
        for seq, change in enumerate(orders, start=1):
            order_id = index * KEY_SPACE + change.key
            value = {
                "order_id": order_id,
                "customer_id": None if change.user is None else index * USERS + change.user,
                "channel": change.channel,
                "ts": (BASE + timedelta(microseconds=change.micros)).isoformat() + "Z",
                "seq": seq,
                "deleted": change.deleted,
            }
            add(ORDERS, {"order_id": order_id}, value, change)
        for seq, change in enumerate(clicks, start=1):
            click_id = index * KEY_SPACE + change.key
            value = {
                "click_id": click_id,
                "user_id": None if change.user is None else index * USERS + change.user,
                "page": change.page,
                "session": change.session,
                "ts": (BASE + timedelta(microseconds=change.micros)).isoformat() + "Z",
                "seq": seq,
                "deleted": change.deleted,
            }
            add(CLICKS, {"click_id": click_id}, value, change)
    return batches


def gold_state(spark: SparkSession, warehouse: Warehouse) -> Counter[tuple[Any, ...]]:
    found = table_rows(spark, warehouse.table("gold", TABLE.name))
    return Counter(tuple(r[c] for c in (*TABLE.columns, FINAL)) for r in found)


def late_key(row: dict[str, Any]) -> tuple[Any, ...]:
    groups = tuple(sorted((row["group_values"] or {}).items()))
    return (row["window_start"], groups, row["change_type"], row["event_time"])


def assert_mistakes_stop_the_job(spark: SparkSession, warehouse: Warehouse) -> None:
    """A stream join's mistakes that need the silver schemas stop the job with one error."""
    joined = TABLE.stream_join
    assert joined is not None
    mistakes = {
        StreamJoin("nobody", joined.on, "ts", "1 hour"): (
            "stream-joins silver.nobody, which does not exist"
        ),
        StreamJoin("clicks", joined.on, "when", "1 hour"): (
            "stream-joins column 'when', which silver.clicks does not have"
        ),
        StreamJoin("clicks", (("customer_id", "page"),), "ts", "1 hour"): (
            r"stream-joins silver.orders.customer_id \(bigint\) with silver.clicks.page "
            r"\(string\): the types differ"
        ),
        StreamJoin("clicks", joined.on, "page", "1 hour"): (
            "the stream join's event_time silver.clicks.page is string, not a timestamp"
        ),
    }
    for stream_join, message in mistakes.items():
        wrong = GoldTable(
            "wrong",
            "orders",
            "ts",
            Window("row"),
            (Measure("n", "count"),),
            group_by=("customer_id",),
            stream_join=stream_join,
        )
        with pytest.raises(ConfigError, match=message):
            start_gold(spark, warehouse, Trigger(), wrong)


SEED = property_seed("GOLD_STREAM_JOIN_SEED")
#: One fixed example. Orders 0 (minute 60) and 1 (minute 80) of customer 0 and the clicks at
#: minutes 35 (/a) and 50 (/b) come first. Then: a click at 20 (outside both bounds), one at
#: 80 and one at 55 (after their orders), the click at 50 moved to /c, the one at 35 deleted,
#: and order 1 deleted. On order 0's bounds: clicks at 30 minutes (exactly the bound before
#: it: in), 1 µs before that (out) and at 60 minutes (its own time: in). Customer 1's order
#: at SPAN (batch 0) is the latest time, so the watermark is 100 minutes when its order at
#: 100 minutes arrives (batch 1): late, and its row ends exactly at the watermark (final).
FIXED: tuple[list[Change], list[Change]] = (
    [
        Change(0, 0, 60 * MINUTE, "web", None, None, False, (0,)),
        Change(1, 0, 80 * MINUTE, "app", None, None, False, (0,)),
        Change(1, 0, 80 * MINUTE, "app", None, None, True, (1,)),
        Change(2, 1, SPAN, "web", None, None, False, (0,)),
        Change(3, 1, 100 * MINUTE, "web", None, None, False, (1,)),
    ],
    [
        Change(0, 0, 35 * MINUTE, None, "/a", "s1", False, (0,)),
        Change(1, 0, 50 * MINUTE, None, "/b", "s1", False, (0,)),
        Change(5, 0, 30 * MINUTE, None, "/a", None, False, (0,)),
        Change(6, 0, 30 * MINUTE - 1, None, "/b", None, False, (0,)),
        Change(7, 0, 60 * MINUTE, None, "/c", None, False, (0,)),
        Change(2, 0, 20 * MINUTE, None, "/c", "s2", False, (1,)),
        Change(3, 0, 80 * MINUTE, None, "/c", "s2", False, (1,)),
        Change(4, 0, 55 * MINUTE, None, "/b", None, False, (1,)),
        Change(1, 0, 50 * MINUTE, None, "/c", "s2", False, (1,)),
        Change(0, 0, 35 * MINUTE, None, "/a", "s1", True, (1,)),
    ],
)


def coverage(histories: Histories) -> Counter[str]:
    """How many times each case the property must meet occurs in the drawn histories."""
    found: Counter[str] = Counter()
    for orders, clicks in histories:
        found["order deleted"] += sum(o.deleted for o in orders)
        found["click deleted"] += sum(c.deleted for c in clicks)
        found["click updated"] += len(clicks) - len({c.key for c in clicks})
        for order in orders:
            for click in clicks:
                if order.user is None or click.user != order.user:
                    continue
                bound = WITHIN * MINUTE
                found["click exactly the bound before"] += click.micros == order.micros - bound
                found["click 1 µs before the bound"] += click.micros == order.micros - bound - 1
                found["click at its order's time"] += click.micros == order.micros
                if order.micros - bound <= click.micros <= order.micros:
                    found["click in bound"] += 1
                    if min(click.batches) > min(order.batches):
                        found["click after its order"] += 1
                else:
                    found["click outside the bound"] += 1
    return found


def test_stream_joined_gold_table_equals_the_oracle_after_every_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    histories = [*draw_examples(history_strategy(), SEED, EXAMPLES), FIXED]
    cases = coverage(histories)
    wanted = (
        "order deleted",
        "click deleted",
        "click updated",
        "click in bound",
        "click after its order",
        "click outside the bound",
        "click exactly the bound before",
        "click at its order's time",
    )
    assert all(cases[case] >= 3 for case in wanted), cases
    assert cases["click 1 µs before the bound"] >= 1, cases

    source = tmp_path / "source"
    source.mkdir()
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    spec = SourceSpec.parse(f"files:{source}")
    seen: datetime | None = None
    orders_before: dict[Any, dict[str, Any]] = {}
    clicks_before: dict[Any, dict[str, Any]] = {}
    gold_before: list[dict[str, Any]] = []
    late: Counter[tuple[Any, ...]] = Counter()
    changed = on_mark = 0  # on_mark: gold rows whose window ends exactly at the watermark
    previous: Counter[tuple[Any, ...]] = Counter()
    for number, records in enumerate(batch_records(histories)):
        deliver(source, number, records)
        run_once(spark, spec, warehouse, CONFIG)
        orders = {r["order_id"]: r for r in table_rows(spark, warehouse.table("silver", "orders"))}
        clicks = {r["click_id"]: r for r in table_rows(spark, warehouse.table("silver", "clicks"))}
        mark = gold_oracle.watermark(seen, TABLE)
        late.update(
            late_key(r)
            for r in gold_oracle.late_events(
                gold_oracle.row_images(orders_before, orders), TABLE, mark
            )
        )
        late.update(
            late_key(r)
            for r in gold_oracle.stream_late_events(
                gold_oracle.row_images(clicks_before, clicks), gold_before, TABLE, mark
            )
        )
        times = [r["ts"] for r in orders.values() if r["ts"] is not None]
        seen = max([*times, *([seen] if seen else [])], default=None)
        mark = gold_oracle.watermark(seen, TABLE)
        evaluated = gold_oracle.stream_joined(orders.values(), TABLE, clicks.values())
        on_mark += sum(r[TABLE.window.end_as] == mark for r in evaluated)
        want = Counter(
            (*(r[c] for c in TABLE.columns), gold_oracle.is_final(r, TABLE, mark))
            for r in evaluated
        )
        got = gold_state(spark, warehouse)
        missing, extra = want - got, got - want
        assert not missing and not extra, (
            f"after batch {number}: gold.{TABLE.name} differs from the oracle; missing "
            f"{list(missing)[:3]}, unexpected {list(extra)[:3]} (GOLD_STREAM_JOIN_SEED={SEED})"
        )
        changed += previous != got
        recorded = Counter(
            late_key(r)
            for r in table_rows(spark, warehouse.table("gold", LATE_EVENTS))
            if r["gold_table"] == TABLE.name
        )
        assert recorded == late, (number, recorded - late, late - recorded)
        orders_before, clicks_before, gold_before, previous = orders, clicks, evaluated, got
    # Late changes of both sides: an order's own row, and clicks landing in final rows.
    late_clicks = sum(n for k, n in late.items() if k[3] != k[0] + timedelta(minutes=WITHIN))
    assert changed == BATCHES and late_clicks >= 3 and late.total() > late_clicks, late
    assert on_mark >= 1

    checks = verify_warehouse(spark, warehouse, CONFIG)
    assert f"gold.{TABLE.name}" in {f"{c.layer}.{c.table}" for c in checks}
    assert all(c.ok for c in checks), [c.differences for c in checks if not c.ok]

    replay(spark, warehouse, CONFIG)
    assert gold_state(spark, warehouse) == previous, "replay changed the stream-joined table"

    assert_mistakes_stop_the_job(spark, warehouse)
