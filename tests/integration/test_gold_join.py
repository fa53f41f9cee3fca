"""Property: a gold table with an enrichment join equals, after every committed run, its
declaration evaluated by the plain-Python oracle over the current silver tables joined
(tests/gold_oracle.py); an entity change, early, late or in another micro-batch than the
rows it enriches, corrects the gold rows it affects.

Hypothesis draws small histories of a sales events table, of a users table (the joined
entity: its segment and level change, users are deleted and come back) and of a Debezium
accounts table kept with SCD type 2 history (its name changes at source commit times, it is
deleted), whose records are spread over a few micro-batches, duplicated at times, so an
account change with an older commit time can arrive after newer ones; all histories run
together through the real pipeline (file source -> bronze -> silver -> gold). Three
declarations: tumbling windows grouped by and filtered on the joined segment, sliding windows
per user measuring the joined level, and tumbling windows grouped by the account's name in
force at the sale's time (an as-of join: its oracle takes the versions folded from the
account events delivered so far, not from silver). Then ``lakehouse verify`` agrees,
``lakehouse replay`` rebuilds gold equal, and a join that names a missing entity, column, a
column of another type or not a key stops with one clear error. Reproduce with
``GOLD_JOIN_SEED=<seed>``.
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
from lakehouse_core.gold_tables import GoldTable, Join, Measure, Window
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
from tests.helpers import deliver, pg_envelope, pg_key, table_rows

pytestmark = pytest.mark.integration

SALES, USERS, ACCOUNTS = "test.sales", "test.users", "test.accounts"
TABLES = (
    TableSpec(
        name="sales",
        topic=SALES,
        format="events",
        keys=("event_id",),
        sequence_by=("seq",),
        schema="event_id bigint, user_id bigint, amount bigint, ts timestamp, seq bigint, "
        "deleted boolean",
        apply_as_deletes="deleted = true",
    ),
    TableSpec(
        name="users",
        topic=USERS,
        format="events",
        keys=("user_id",),
        sequence_by=("seq",),
        schema="user_id bigint, segment string, level bigint, seq bigint, deleted boolean",
        apply_as_deletes="deleted = true",
    ),
    TableSpec(name="accounts", topic=ACCOUNTS, stored_as_scd_type=2),
)
JOIN = Join("users", (("user_id", "user_id"),), ("segment", "level"), prefix="u_")
DECLARED: tuple[GoldTable, ...] = (
    GoldTable(
        "by_segment",
        "sales",
        "ts",
        Window("tumbling", size="10 minutes"),
        (
            Measure("n", "count"),
            Measure("total", "sum", "amount"),
            Measure("top", "max", "u_level"),
        ),
        group_by=("u_segment",),
        filter="u_segment <> 'skip' OR u_segment IS NULL",
        watermark_delay="10 minutes",
        join=JOIN,
    ),
    GoldTable(
        "user_level",
        "sales",
        "ts",
        Window("sliding", lookback="30 minutes"),
        (Measure("n", "count"), Measure("low", "min", "u_level")),
        group_by=("user_id",),
        watermark_delay="20 minutes",
        join=JOIN,
    ),
    # As of event time: the config finds that accounts keeps SCD type 2 history.
    GoldTable(
        name="by_account_name",
        source="sales",
        event_time="ts",
        join=Join("accounts", (("user_id", "id"),), ("name",), prefix="a_"),
        group_by=("a_name",),
        window=Window("tumbling", size="10 minutes"),
        measures=(Measure("n", "count"), Measure("total", "sum", "amount")),
    ),
)
CONFIG = PipelineConfig(tables=TABLES, gold_tables=DECLARED)
#: The declarations as the config resolved them (the accounts join is as of event time).
DECLARED = CONFIG.gold_declarations
EXAMPLES = example_count(12)
BATCHES = 2
KEY_SPACE = 100
USER_SPACE = 3
BASE = datetime(2026, 1, 1)
SEGMENTS = ("a", "b", "skip", None)
NAMES = ("x", "y", None)
#: Sale times run from BASE to BASE + SPAN (µs), mostly on boundaries (tests.draws.boundary_time):
#: multiples of the windows and delays, an account change's commit time of the sale's user, or
#: a step from it, exactly or 1 µs / 1 ms off (so a sale often falls exactly where a version
#: starts or ends: it takes the new one, 1 µs earlier the old one).
SPAN = 90 * MINUTE
STEPS = (10 * MINUTE, 20 * MINUTE, 30 * MINUTE)


@dataclass(frozen=True)
class Change:
    """One event of a sales history, of a users history (``user`` is None) or of an accounts
    history (``at``: its source commit time, whole minutes)."""

    key: int
    user: int | None
    at: int  # µs after BASE
    amount: int | None
    segment: str | None
    level: int | None
    deleted: bool
    batches: tuple[int, ...]


def _batches(draw: st.DrawFn) -> tuple[int, ...]:
    return delivery(draw, BATCHES)


@st.composite
def history_strategy(draw: st.DrawFn) -> tuple[list[Change], list[Change], list[Change]]:
    users = [
        Change(
            key=draw(st.integers(0, USER_SPACE - 1)),
            user=None,
            at=0,
            amount=None,
            segment=draw(st.sampled_from(SEGMENTS)),
            level=draw(st.one_of(st.none(), st.integers(1, 5))),
            deleted=draw(st.integers(0, 5)) == 0,
            batches=_batches(draw),
        )
        for _ in range(draw(st.integers(0, 6)))
    ]
    accounts = [
        Change(
            key=draw(st.integers(0, USER_SPACE - 1)),
            user=None,
            at=draw(st.integers(0, 90)) * MINUTE,
            amount=None,
            segment=draw(st.sampled_from(NAMES)),
            level=None,
            deleted=draw(st.integers(0, 4)) == 0,
            batches=_batches(draw),
        )
        for _ in range(draw(st.integers(1, 6)))
    ]
    sales: list[Change] = []
    for _ in range(draw(st.integers(1, 8))):
        key, user = draw(st.integers(0, 4)), draw(st.sampled_from([0, 0, 1, 2, None]))
        changes = [a.at for a in accounts if a.key == user]  # of the account the sale joins
        sales.append(
            Change(
                key=key,
                user=user,
                at=boundary_time(draw, STEPS, SPAN, changes),
                amount=draw(st.one_of(st.none(), st.integers(0, 50))),
                segment=None,
                level=None,
                deleted=draw(st.integers(0, 7)) == 0,
                batches=_batches(draw),
            )
        )
    return sales, users, accounts


Histories = list[tuple[list[Change], list[Change], list[Change]]]


def account_events(histories: Histories) -> list[tuple[int, int, datetime, Change]]:
    """Every account change as (account id, LSN, source commit time, change): the LSN follows
    the commit time (ties: the order drawn), whatever the batch the change arrives in."""
    events = []
    for index, (_, _, accounts) in enumerate(histories):
        for position, change in enumerate(accounts):
            lsn = change.at // MINUTE * 1000 + position + 1
            moment = BASE + timedelta(microseconds=change.at)
            events.append((index * USER_SPACE + change.key, lsn, moment, change))
    return events


def account_versions(histories: Histories, delivered: int) -> list[dict[str, Any]]:
    """The accounts' SCD type 2 versions folded from the account changes delivered in batches
    0 to ``delivered``: an upsert starts a version when the name differs from the version in
    force or after a delete; a version is valid from its first upsert's commit time to that of
    the next change of another name or of a delete."""
    by_id: dict[int, dict[int, tuple[datetime, Change]]] = {}
    for account, lsn, moment, change in account_events(histories):
        if min(change.batches) <= delivered:
            by_id.setdefault(account, {})[lsn] = (moment, change)
    versions: list[dict[str, Any]] = []
    for account, events in by_id.items():
        current: dict[str, Any] | None = None
        for lsn in sorted(events):
            moment, change = events[lsn]
            if current is not None and (change.deleted or change.segment != current["name"]):
                current["valid_to"], current = moment, None
            if current is None and not change.deleted:
                current = {"id": account, "name": change.segment, "order": lsn}
                current.update(valid_from=moment, valid_to=None)
                versions.append(current)
    return versions


def batch_records(histories: Histories) -> list[list[Record]]:
    batches: list[list[Record]] = [[] for _ in range(BATCHES)]
    offsets = {SALES: 0, USERS: 0, ACCOUNTS: 0}

    def add(topic: str, key: dict[str, Any], value: dict[str, Any], change: Change) -> None:
        for batch in change.batches:
            batches[batch].append(Record(topic, 0, offsets[topic], 0, key, value))
            offsets[topic] += 1

    for index, (sales, users, _) in enumerate(histories):
        for seq, change in enumerate(sales, start=1):
            event_id = index * KEY_SPACE + change.key
            moment = BASE + timedelta(microseconds=change.at)
            value = {
                "event_id": event_id,
                "user_id": None if change.user is None else index * USER_SPACE + change.user,
                "amount": change.amount,
                "ts": moment.isoformat() + "Z",
                "seq": seq,
                "deleted": change.deleted,
            }
            add(SALES, {"event_id": event_id}, value, change)
        for seq, change in enumerate(users, start=1):
            user_id = index * USER_SPACE + change.key
            value = {
                "user_id": user_id,
                "segment": change.segment,
                "level": change.level,
                "seq": seq,
                "deleted": change.deleted,
            }
            add(USERS, {"user_id": user_id}, value, change)
    for account, lsn, moment, change in account_events(histories):
        row = {"id": account, "name": change.segment, "notes": None}
        millis = round((moment - datetime(1970, 1, 1)).total_seconds() * 1000)
        envelope = pg_envelope(
            "d" if change.deleted else "u",
            (lsn, lsn),
            after=None if change.deleted else row,
            before={**row, "name": None} if change.deleted else None,
            ts_ms=millis,
        )
        add(ACCOUNTS, pg_key(account), envelope, change)
    return batches


def normalized(value: Any) -> Any:
    return round(float(value), 6) if isinstance(value, float) else value


def late_key(row: dict[str, Any]) -> tuple[Any, ...]:
    groups = tuple(sorted((row["group_values"] or {}).items()))
    return (row["gold_table"], row["window_start"], groups, row["change_type"], row["event_time"])


def gold_state(spark: SparkSession, warehouse: Warehouse) -> dict[str, Counter[tuple[Any, ...]]]:
    state = {}
    for table in DECLARED:
        found = table_rows(spark, warehouse.table("gold", table.name))
        columns = (*table.columns, FINAL)
        state[table.name] = Counter(tuple(normalized(r[c]) for c in columns) for r in found)
    return state


def oracle_late(
    before: dict[Any, dict[str, Any]],
    now: dict[Any, dict[str, Any]],
    entities: dict[str, list[dict[str, Any]]],
    seen: datetime | None,
) -> list[tuple[Any, ...]]:
    """The oracle's late events of a batch that took the sales rows from ``before`` to
    ``now``: its row images joined with the entity's rows (or versions) after the batch
    (``entities``: per gold table)."""
    images = gold_oracle.row_images(before, now)
    found = []
    for table in DECLARED:
        mark = gold_oracle.watermark(seen, table)
        enriched = gold_oracle.joined([r for _, r in images], table, entities[table.name])
        pairs = list(zip([kind for kind, _ in images], enriched, strict=True))
        found += [late_key(r) for r in gold_oracle.late_events(pairs, table, mark)]
    return found


def assert_join_mistakes_stop_the_job(spark: SparkSession, warehouse: Warehouse) -> None:
    """A join's mistakes that need the silver schemas stop the job with one clear error."""
    mistakes = {
        Join("nobody", JOIN.on, JOIN.columns, "u_"): "joins silver.nobody, which does not exist",
        Join("users", JOIN.on, ("tier",), "u_"): "joins column 'tier', which silver.users",
        Join("users", (("ts", "user_id"),), JOIN.columns, "u_"): (
            "joins silver.sales.ts (timestamp) with silver.users.user_id (bigint): the types"
        ),
        Join("users", (("user_id", "segment"),), ("level",), "u_"): "the types differ",
        Join("users", (("amount", "level"),), ("segment",), "u_"): (
            "joins silver.users on level, but several of its rows have level="
        ),
    }
    for join, message in mistakes.items():
        wrong = GoldTable(
            "wrong", "sales", "ts", DECLARED[0].window, (Measure("n", "count"),), join=join
        )
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            start_gold(spark, warehouse, Trigger(), wrong)


SEED = property_seed("GOLD_JOIN_SEED")
#: One fixed example: account 0 is x from minute 0 and y from minute 40; in the second batch
#: come z from minute 20 (older than y: a late change) and its delete at minute 70. Its sales
#: at minutes 10, 30, 50 and 80 take x, x then z, y, y then none; at 40 minutes exactly y,
#: 1 µs before it z (x before z arrives).
FIXED: tuple[list[Change], list[Change], list[Change]] = (
    [
        Change(n, 0, minute * MINUTE + micros, 1, None, None, False, (0,))
        for n, (minute, micros) in enumerate(
            ((10, 0), (30, 0), (50, 0), (80, 0), (40, -1), (40, 0))
        )
    ],
    [],
    [
        Change(0, None, 0 * MINUTE, None, "x", None, False, (0,)),
        Change(0, None, 40 * MINUTE, None, "y", None, False, (0,)),
        Change(0, None, 20 * MINUTE, None, "z", None, False, (1,)),
        Change(0, None, 70 * MINUTE, None, None, None, True, (1,)),
    ],
)


def test_joined_gold_tables_equal_the_oracle_after_every_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    histories = [*draw_examples(history_strategy(), SEED, EXAMPLES), FIXED]
    users = [c for _, h, _ in histories for c in h]
    # Coverage guards: entity changes of every kind, some in a later batch than the sales.
    assert sum(c.deleted for c in users) >= 3 and sum(c.segment is None for c in users) >= 2
    assert sum(len(h) - len({c.key for c in h}) for _, h, _ in histories) >= 5
    assert any(
        min(u.batches) > min(s.batches) for sales, us, _ in histories for s in sales for u in us
    )
    accounts = [c for _, _, h in histories for c in h]
    assert sum(c.deleted for c in accounts) >= 3
    late_accounts = [
        a
        for _, _, h in histories
        for a in h
        for b in h
        if a.key == b.key and a.at < b.at and min(a.batches) > min(b.batches)
    ]
    assert len(late_accounts) >= 2  # older commit times arriving after newer ones
    # Sales exactly at a commit time of their account (a version starts or ends there), and
    # 1 µs before one.
    pairs = [(s.at, a.at) for sales, _, h in histories for s in sales for a in h if s.user == a.key]
    assert sum(s == a for s, a in pairs) >= 3 and sum(s == a - 1 for s, a in pairs) >= 1

    source = tmp_path / "source"
    source.mkdir()
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    spec = SourceSpec.parse(f"files:{source}")
    seen: datetime | None = None
    before: dict[Any, dict[str, Any]] = {}
    late: Counter[tuple[Any, ...]] = Counter()
    changed_groups = 0
    previous: dict[str, Counter[tuple[Any, ...]]] = {}
    for number, records in enumerate(batch_records(histories)):
        deliver(source, number, records)
        run_once(spark, spec, warehouse, CONFIG)
        sales = table_rows(spark, warehouse.table("silver", "sales"))
        users_now = table_rows(spark, warehouse.table("silver", "users"))
        versions = account_versions(histories, number)
        entities = {
            t.name: versions if t.join is not None and t.join.at_event_time else users_now
            for t in DECLARED
        }
        now = {r["event_id"]: r for r in sales}
        late.update(oracle_late(before, now, entities, seen))
        times = [r["ts"] for r in sales if r["ts"] is not None]
        seen = max([*times, *([seen] if seen else [])], default=None)
        before = now
        got = gold_state(spark, warehouse)
        for table in DECLARED:
            mark = gold_oracle.watermark(seen, table)
            want = Counter(
                (
                    *(normalized(r[c]) for c in table.columns),
                    gold_oracle.is_final(r, table, mark),
                )
                for r in gold_oracle.evaluate(sales, table, entities[table.name])
            )
            missing, extra = want - got[table.name], got[table.name] - want
            assert not missing and not extra, (
                f"after batch {number}: gold.{table.name} differs from the oracle; missing "
                f"{list(missing)[:3]}, unexpected {list(extra)[:3]} (GOLD_JOIN_SEED={SEED})"
            )
            if table.name in previous and previous[table.name] != got[table.name]:
                changed_groups += 1
        previous = got
        recorded = Counter(
            late_key(r)
            for r in table_rows(spark, warehouse.table("gold", LATE_EVENTS))
            if r["gold_table"] in {t.name for t in DECLARED}
        )
        assert recorded == late, (number, recorded - late, late - recorded)
    assert all(previous[t.name] for t in DECLARED) and changed_groups >= 2

    checks = verify_warehouse(spark, warehouse, CONFIG)
    assert {f"gold.{t.name}" for t in DECLARED} < {f"{c.layer}.{c.table}" for c in checks}
    assert all(c.ok for c in checks), [c.differences for c in checks if not c.ok]

    replay(spark, warehouse, CONFIG)
    assert gold_state(spark, warehouse) == previous, "replay changed a joined gold table"

    assert_join_mistakes_stop_the_job(spark, warehouse)
