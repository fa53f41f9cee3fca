"""Property: after every committed run, each declared gold table equals the declaration
evaluated by the plain-Python oracle (tests/gold_oracle.py) over the current silver table.

Hypothesis draws small histories of an events table (inserts, updates by a higher sequence,
deletes through ``apply_as_deletes``, nulls in the measured and grouped columns) and delivers
each record into one of a few micro-batches (so higher sequences often arrive first) with
at-least-once duplicates. Every history has its own keys and users, so all of them run together:
micro-batch ``i`` of the run is one file holding every history's batch ``i``, processed by the
real pipeline (file source -> bronze -> silver -> gold, ``run_once``), and all window kinds
and measures are declared over the same table. ``_final`` is checked against the oracle's
watermark (the latest event time silver has held, minus the delay) and ``gold.late_events``
against the oracle's late row images of each batch (the silver rows it changed). At the end,
``lakehouse replay`` rebuilds gold equal, ``_final`` and ``_finalized_at`` included, and keeps
``gold.late_events``. Reproduce with ``GOLD_PROPERTY_SEED=<seed>``.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc.records import Record
from cdc.sources import SourceSpec
from gold.aggregates import evaluate
from gold.finality import FINAL, FINALIZED_AT
from lakehouse.ops.audit import verify_warehouse
from lakehouse.ops.replay import replay
from lakehouse.run.pipeline import run_once
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.gold_tables import GoldTable, Measure, Window
from lakehouse_core.layout import LATE_EVENTS, Warehouse
from tests import gold_oracle
from tests.draws import MINUTE, boundary_time, draw_examples, example_count, property_seed

pytestmark = pytest.mark.integration

TOPIC = "test.sales"
SOURCE = TableSpec(
    name="sales",
    topic=TOPIC,
    format="events",
    keys=("event_id",),
    sequence_by=("seq",),
    schema="event_id bigint, user_id bigint, amount bigint, page string, ts timestamp, "
    "seq bigint, deleted boolean",
    apply_as_deletes="deleted = true",
)
EVERY_MEASURE = (
    Measure("n", "count"),
    Measure("amounts", "count", "amount"),
    Measure("total", "sum", "amount"),
    Measure("mean", "avg", "amount"),
    Measure("low", "min", "amount"),
    Measure("high", "max", "amount"),
    Measure("pages", "count_distinct", "page"),
    Measure("p75", "approx_percentile", "amount", 0.75),
    Measure("span", "span_seconds", "ts"),
    Measure("last_page", "last", "page"),
)
SOME = (Measure("n", "count"), Measure("total", "sum", "amount"), Measure("high", "max", "amount"))
DECLARED = (
    GoldTable(
        "t_tumbling",
        "sales",
        "ts",
        Window("tumbling", size="10 minutes"),
        EVERY_MEASURE,
        group_by=("user_id",),
        filter="page <> 'skip' OR page IS NULL",
        watermark_delay="10 minutes",
    ),
    GoldTable(  # no group_by: the time windows of the whole table
        "t_hopping",
        "sales",
        "ts",
        Window("hopping", size="20 minutes", slide="10 minutes"),
        (*SOME, Measure("pages", "count_distinct", "page")),
        watermark_delay="10 minutes",  # the latest time is often SPAN: windows end on it
    ),
    GoldTable(
        "t_session",
        "sales",
        "ts",
        Window("session", gap="15 minutes"),
        EVERY_MEASURE,
        group_by=("user_id",),
        watermark_delay="1 minute",
    ),
    GoldTable(
        "t_sliding",
        "sales",
        "ts",
        Window("sliding", lookback="30 minutes"),
        SOME,
        group_by=("user_id",),
        filter="NOT deleted = true",
        watermark_delay="20 minutes",
    ),
    GoldTable(  # no group_by: the whole table is one group, recomputed on any change
        "t_count",
        "sales",
        "ts",
        Window("count", count=4),
        (*SOME, Measure("p50", "approx_percentile", "amount")),
        watermark_delay="2 minutes",
    ),
)
CONFIG = PipelineConfig(tables=(SOURCE,), gold_tables=DECLARED)

EXAMPLES = example_count(40)
BATCHES = 3
KEY_SPACE = 100  # event id = history index * 100 + k
USERS = 3  # user id = history index * 3 + u (or null)
BASE = datetime(2026, 1, 1)
PAGES = ("home", "cart", "skip", None)
#: Event times run from BASE to BASE + SPAN (µs), drawn mostly on the declarations' boundaries:
#: multiples of every size, slide, gap, lookback and watermark delay, and 1 µs or 1 ms off.
SPAN = 90 * MINUTE
STEPS = tuple(n * MINUTE for n in (1, 2, 5, 10, 15, 20, 30))
GAP = 15 * MINUTE  # t_session's
#: Distances drawn exactly between two events of a history: t_session's gap (most often),
#: t_sliding's lookback.
APART = (GAP, GAP, 30 * MINUTE)


@dataclass(frozen=True)
class Change:
    """One event of a history (its position is its sequence) and the batches it lands in."""

    key: int
    user: int | None
    micros: int  # after BASE
    amount: int | None
    page: str | None
    deleted: bool
    batches: tuple[int, ...]


@st.composite
def history_strategy(draw: st.DrawFn) -> list[Change]:
    keys = draw(st.integers(1, 6))
    size = draw(st.integers(1, 12))
    changes: list[Change] = []
    for _ in range(size):
        first = draw(st.integers(0, BATCHES - 1))
        again = draw(st.sampled_from([(), (), (), (), (0,), (BATCHES - 1,)]))
        key = draw(st.integers(0, keys - 1))
        user = draw(st.sampled_from([0, 0, 1, 1, 2, None]))
        earlier = [c.micros for c in changes if c.user == user]  # the same group's
        changes.append(
            Change(
                key=key,
                user=user,
                micros=boundary_time(draw, STEPS, SPAN, earlier, APART),
                amount=draw(st.one_of(st.none(), st.integers(0, 50), st.integers(0, 50))),
                page=draw(st.sampled_from(PAGES)),
                deleted=draw(st.integers(0, 5)) == 0,
                batches=(first, *again),
            )
        )
    return changes


def _fixed(key: int, user: int, micros: int, batch: int) -> Change:
    return Change(key, user, micros, 1, "home", False, (batch,))


#: One fixed history that puts times exactly on the watermark. Its event at SPAN in batch 0
#: is the latest time of the run until batch 1 brings SPAN + 5 minutes and batch 2 SPAN + 10
#: minutes (the drawn times are at most SPAN), so each table's watermark after batch 0 is
#: SPAN minus its delay. Batch 1 then brings events whose earliest window ends exactly there:
#: 70 minutes (tumbling and hopping [70, 80) and [60, 80), sliding [40, 70]), 74 minutes
#: (session [74, 89)) and 88 minutes (count), each beside one 1 µs later that is not late
#: for that kind. User 1's events are exactly the gap apart: three sessions. User 3's session
#: ends at 94 minutes, the session watermark after batch 1. User 4's are 1 µs less than the
#: gap apart: one session. The sliding row of 80 minutes (batch 2) ends at its watermark.
FIXED: list[Change] = [
    _fixed(0, 0, SPAN, 0),
    _fixed(1, 0, 70 * MINUTE, 1),
    _fixed(2, 0, 70 * MINUTE + 1, 1),
    _fixed(3, 2, 74 * MINUTE, 1),
    _fixed(4, 2, 74 * MINUTE + 1, 1),
    _fixed(5, 0, 88 * MINUTE, 1),
    _fixed(6, 0, 88 * MINUTE + 1, 1),
    _fixed(7, 1, 44 * MINUTE, 0),
    _fixed(8, 1, 59 * MINUTE, 0),
    _fixed(9, 1, 74 * MINUTE, 1),
    _fixed(10, 3, 79 * MINUTE, 0),
    _fixed(11, 4, 10 * MINUTE, 0),
    _fixed(12, 4, 25 * MINUTE - 1, 0),
    _fixed(13, 4, 40 * MINUTE - 2, 0),
    _fixed(14, 0, SPAN + 5 * MINUTE, 1),
    _fixed(15, 0, SPAN + 10 * MINUTE, 2),
    _fixed(16, 0, 80 * MINUTE, 2),
]


def batch_records(histories: list[list[Change]]) -> list[list[Record]]:
    """The records of every history, per micro-batch, with offsets unique in the run."""
    batches: list[list[Record]] = [[] for _ in range(BATCHES)]
    offset = 0
    for index, history in enumerate(histories):
        for seq, change in enumerate(history, start=1):
            event_id = index * KEY_SPACE + change.key
            user = None if change.user is None else index * USERS + change.user
            moment = BASE + timedelta(microseconds=change.micros)
            value = {
                "event_id": event_id,
                "user_id": user,
                "amount": change.amount,
                "page": change.page,
                "ts": moment.isoformat() + "Z",
                "seq": seq,
                "deleted": change.deleted,
            }
            for batch in change.batches:
                batches[batch].append(Record(TOPIC, 0, offset, 0, {"event_id": event_id}, value))
                offset += 1
    return batches


def normalized(value: Any) -> Any:
    if isinstance(value, float | Decimal):
        return round(float(value), 6)
    return value


Key = tuple[Any, ...]


@dataclass
class Oracle:
    """What the oracle knows after each batch: the silver rows by key, the latest event time
    silver has held, and the late events so far."""

    silver: dict[int, dict[str, Any]]
    seen: datetime | None
    late: Counter[tuple[Any, ...]]
    #: Late events whose earliest window ends exactly at the watermark, per gold table.
    on_mark: Counter[str] = field(default_factory=Counter)
    #: Gold rows whose window ends exactly at the watermark (after each batch), per table.
    ends_on_mark: Counter[str] = field(default_factory=Counter)
    #: :func:`boundary_cases` of the silver rows after each batch.
    cases: Counter[str] = field(default_factory=Counter)

    def advance(self, silver: list[dict[str, Any]]) -> None:
        """Take the silver rows after a batch: record its late row images, then its times."""
        now = {row["event_id"]: row for row in silver}
        images: list[tuple[str, dict[str, Any]]] = []
        for key in sorted(set(self.silver) | set(now)):
            before, after = self.silver.get(key), now.get(key)
            if before == after:
                continue
            if before is None:
                assert after is not None
                images.append(("insert", after))
            elif after is None:
                images.append(("delete", before))
            else:
                images += [("update_preimage", before), ("update_postimage", after)]
        for table in DECLARED:
            mark = gold_oracle.watermark(self.seen, table)
            late = gold_oracle.late_events(images, table, mark)
            self.late.update(late_key(r) for r in late)
            self.on_mark.update(table.name for r in late if r["window_end"] == mark)
        times = [row["ts"] for row in silver if row["ts"] is not None]
        self.seen = max([*times, *([self.seen] if self.seen else [])], default=None)
        self.silver = now
        self.cases.update(boundary_cases(silver))
        for table in DECLARED:
            mark = gold_oracle.watermark(self.seen, table)
            ends = (r[table.window.end_as] for r in gold_oracle.evaluate(silver, table))
            self.ends_on_mark.update(table.name for end in ends if end == mark)


def boundary_cases(silver: list[dict[str, Any]]) -> Counter[str]:
    """How often the silver rows hold times on the boundaries the draws aim at: per user,
    consecutive times exactly the session gap apart (or 1 µs less), equal times, and times on
    a 10-minute boundary or 1 µs either side of a minute."""
    found: Counter[str] = Counter()
    by_user: dict[Any, list[int]] = {}
    for row in silver:
        if row["ts"] is not None:
            micros = (row["ts"] - BASE) // timedelta(microseconds=1)
            by_user.setdefault(row["user_id"], []).append(micros)
    for times in by_user.values():
        times.sort()
        found["equal times"] += len(times) - len(set(times))
        steps = [b - a for a, b in pairwise(times)]
        found["gap apart"] += steps.count(GAP)
        found["gap - 1 µs apart"] += steps.count(GAP - 1)
        found["on 10 minutes"] += sum(t % (10 * MINUTE) == 0 for t in times)
        found["1 µs off a minute"] += sum(t % MINUTE in (1, MINUTE - 1) for t in times)
    return found


def late_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (
        row["gold_table"],
        row["window_start"],
        row["window_end"],
        tuple(sorted((row["group_values"] or {}).items())),
        row["change_type"],
        row["event_time"],
        row["bronze_offset"],
        round(row["late_by_seconds"], 6),
    )


def gold_rows(spark: SparkSession, warehouse: Warehouse, table: GoldTable) -> list[dict[str, Any]]:
    path = warehouse.table("gold", table.name)
    return [r.asDict() for r in spark.read.format("delta").load(path).collect()]


def assert_gold_equals_oracle(
    spark: SparkSession,
    warehouse: Warehouse,
    oracle: Oracle,
    when: str,
    previous: dict[str, dict[Key, dict[str, Any]]],
) -> dict[str, dict[Key, dict[str, Any]]]:
    """Gold (with ``_final``) and gold.late_events equal the oracle's; a row final before
    keeps its ``_finalized_at`` while its values stay. Returns gold's rows by key."""
    silver = list(oracle.silver.values())
    now: dict[str, dict[Key, dict[str, Any]]] = {}
    for table in DECLARED:
        gold = gold_rows(spark, warehouse, table)
        columns = (*table.columns, FINAL)
        got = Counter(tuple(normalized(row[c]) for c in columns) for row in gold)
        mark = gold_oracle.watermark(oracle.seen, table)
        want = Counter(
            (*(normalized(row[c]) for c in table.columns), gold_oracle.is_final(row, table, mark))
            for row in gold_oracle.evaluate(silver, table)
        )
        missing, extra = want - got, got - want
        assert not missing and not extra, (
            f"{when}: gold.{table.name} (watermark {mark}) differs from the oracle; missing "
            f"{list(missing)[:3]}, unexpected {list(extra)[:3]} (GOLD_PROPERTY_SEED={SEED})"
        )
        now[table.name] = {tuple(row[k] for k in table.key): row for row in gold}
        for key, row in now[table.name].items():
            assert (row[FINALIZED_AT] is not None) == row[FINAL], (table.name, row)
            old = previous.get(table.name, {}).get(key)
            if old and old[FINAL] and all(old[c] == row[c] for c in table.columns):
                assert row[FINALIZED_AT] == old[FINALIZED_AT], (when, table.name, row, old)
    late = spark.read.format("delta").load(warehouse.table("gold", LATE_EVENTS)).collect()
    got_late = Counter(late_key(r.asDict()) for r in late)
    missing_late, extra_late = oracle.late - got_late, got_late - oracle.late
    assert not missing_late and not extra_late, (
        f"{when}: gold.late_events differs from the oracle; missing {list(missing_late)[:3]}, "
        f"unexpected {list(extra_late)[:3]} (GOLD_PROPERTY_SEED={SEED})"
    )
    return now


def test_a_session_splits_where_the_next_event_is_exactly_gap_later(spark: SparkSession) -> None:
    """Bids of one user 10.000 s apart under a 10 s gap are two sessions, not one (Spark's
    ``session_window`` merges them); 1 µs less than the gap still merges, equal times are
    one session, and a session's end is its last event plus the gap."""
    table = GoldTable(
        "bids",
        "sales",
        "ts",
        Window("session", gap="10 seconds"),
        (Measure("n", "count"), Measure("total", "sum", "amount")),
        group_by=("user_id",),
    )
    second, micro = timedelta(seconds=1), timedelta(microseconds=1)
    # User 1: bids at 0 s and 5 s, then 9 more from 15 s (exactly 10 s after 5 s) 1 s apart.
    # User 2: bids at 0 s, 10 s - 1 µs, and twice at 20 s - 1 µs (exactly 10 s later).
    times = {
        1: [0 * second, 5 * second, *(n * second for n in range(15, 24))],
        2: [0 * second, 10 * second - micro, 20 * second - micro, 20 * second - micro],
    }
    rows = [
        {"event_id": user * 100 + n, "user_id": user, "amount": 1, "ts": BASE + offset}
        for user, offsets in times.items()
        for n, offset in enumerate(offsets)
    ]
    frame = spark.createDataFrame(
        rows, "event_id bigint, user_id bigint, amount bigint, ts timestamp"
    )
    got = sorted(tuple(r) for r in evaluate(frame, table).collect())
    want = sorted(tuple(row[c] for c in table.columns) for row in gold_oracle.evaluate(rows, table))
    assert got == want
    end = BASE + 23 * second + 10 * second
    assert [r for r in want if r[0] == 1] == [
        (1, BASE, BASE + 15 * second, 2, 2),
        (1, BASE + 15 * second, end, 9, 9),
    ]
    assert [r for r in want if r[0] == 2] == [
        (2, BASE, BASE + 20 * second - micro, 2, 2),
        (2, BASE + 20 * second - micro, BASE + 30 * second - micro, 2, 2),
    ]


SEED = property_seed("GOLD_PROPERTY_SEED")


def test_every_gold_table_equals_the_oracle_after_every_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    histories = [*draw_examples(history_strategy(), SEED, EXAMPLES), FIXED]
    changes = [c for h in histories for c in h]
    # Coverage guards: the draws hold what the property is about.
    assert sum(c.deleted for c in changes) >= 10
    assert sum(len(c.batches) > 1 for c in changes) >= 10
    assert sum(c.amount is None for c in changes) >= 10 and any(c.user is None for c in changes)
    updated = sum(len(h) - len({c.key for c in h}) for h in histories)
    assert updated >= 20
    late = sum(
        1
        for h in histories
        for i, c in enumerate(h)
        for d in h[i + 1 :]
        if d.key == c.key and min(d.batches) < min(c.batches)
    )
    assert late >= 5  # a higher sequence delivered before a lower one

    source = tmp_path / "source"
    source.mkdir()
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    spec = SourceSpec.parse(f"files:{source}")
    sizes = []
    oracle = Oracle(silver={}, seen=None, late=Counter())
    gold: dict[str, dict[Key, dict[str, Any]]] = {}
    for number, records in enumerate(batch_records(histories)):
        lines = "".join(record.to_line() + "\n" for record in records)
        hidden = source / f".batch-{number}.jsonl"
        hidden.write_text(lines, encoding="utf-8")
        hidden.rename(source / f"batch-{number}.jsonl")
        run_once(spark, spec, warehouse, CONFIG)
        silver = spark.read.format("delta").load(warehouse.table("silver", "sales")).collect()
        oracle.advance([r.asDict() for r in silver])
        gold = assert_gold_equals_oracle(spark, warehouse, oracle, f"after batch {number}", gold)
        sizes.append({t.name: len(gold[t.name]) for t in DECLARED})  # rows equal the oracle's
    assert all(count > 0 for count in sizes[-1].values()), sizes
    # Coverage guards: every window kind has final rows and late events; most have rows not
    # final yet.
    flags = {t.name: {row[FINAL] for row in gold[t.name].values()} for t in DECLARED}
    assert all(True in f for f in flags.values()) and sum(False in f for f in flags.values()) >= 3
    assert {key[0] for key in oracle.late} == {t.name for t in DECLARED}, oracle.late
    assert {key[4] for key in oracle.late} >= {"insert", "update_preimage", "update_postimage"}
    # ... and times on the boundaries: late events whose window ends exactly at the
    # watermark in every table, sessions split exactly at the gap, equal times.
    assert set(oracle.on_mark) == {t.name for t in DECLARED}, oracle.on_mark
    assert set(oracle.ends_on_mark) >= {"t_tumbling", "t_hopping", "t_session", "t_sliding"}
    assert all(n >= 3 for n in oracle.cases.values()) and len(oracle.cases) == 5, oracle.cases

    # lakehouse verify checks each gold table against its declaration over silver, and sees
    # a gold row that went missing.
    checks = {f"{c.layer}.{c.table}": c for c in verify_warehouse(spark, warehouse, CONFIG)}
    assert {f"gold.{t.name}" for t in DECLARED} < set(checks)
    assert all(c.ok for c in checks.values()), [c.differences for c in checks.values()]

    # Replay rebuilds every gold table equal (the watermark kept, so _final and _finalized_at
    # too) and keeps gold.late_events as the live jobs recorded it.
    replay(spark, warehouse, CONFIG)
    for table in DECLARED:
        rebuilt = {tuple(r[k] for k in table.key): r for r in gold_rows(spark, warehouse, table)}
        assert rebuilt == gold[table.name], f"replay changed gold.{table.name}"
    assert_gold_equals_oracle(spark, warehouse, oracle, "after replay", gold)

    # lakehouse verify sees a gold row that went missing, and a wrong _final.
    path = warehouse.table("gold", "t_session")
    DeltaTable.forPath(spark, path).delete(F.col("n") == F.lit(1))
    path = warehouse.table("gold", "t_count")
    DeltaTable.forPath(spark, path).update(set={FINAL: ~F.col(FINAL)})
    broken = {c.table: c for c in verify_warehouse(spark, warehouse, CONFIG) if not c.ok}
    assert set(broken) == {"t_session", "t_count"}, broken
    assert broken["t_session"].differences[0].startswith("missing row {")
    assert "'_final'" in broken["t_count"].differences[0]
    if os.environ.get("GOLD_PROPERTY_VERBOSE"):
        print(sizes)
