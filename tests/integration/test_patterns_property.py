"""Property: after every committed run, each declared pattern's ``gold.<name>`` equals the
plain-Python oracle (tests/pattern_oracle.py) over the current silver table, ``_final`` included.

Hypothesis draws small histories of an events table of card events (uses, payments, carts,
purchases; inserts, re-sent keys with changed values, deletes through ``apply_as_deletes``,
NULL event times and NULL cards) with event times mostly on the patterns' boundaries (multiples
of ``within``, ``absent.within`` and the watermark delays, exactly or 1 µs off), and delivers
each record into one of a few micro-batches (so higher sequences often arrive first) with
at-least-once duplicates. Every history has its own keys and cards, so all of them run
together through the real pipeline (file source -> bronze -> silver -> patterns, ``run_once``)
and four declarations read the same table: a two-step pattern whose second step reads the
first (``country <> first.country``), a ``"2..3"`` first step, a fixed-count step with
``absent``, and a ``skip_to_next`` pattern with a looping last step. ``_final`` is checked
against the oracle's watermark (the latest event time silver has held, minus the delay). One
fixed history puts matches exactly on ``within``, ``absent.within`` and each pattern's
finality edge; another has a match lose both its events (its partition left empty).
Reproduce with ``PATTERN_PROPERTY_SEED=<seed>``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from cdc.records import Record
from cdc.sources import SourceSpec
from gold.finality import FINAL, FINALIZED_AT
from lakehouse.run.pipeline import run_once
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.durations import duration_micros
from lakehouse_core.layout import LATE_EVENTS, Warehouse
from lakehouse_core.patterns import Absent, Pattern, PatternMeasure, Step
from tests import pattern_oracle
from tests.draws import (
    MINUTE,
    boundary_time,
    delivery,
    draw_examples,
    example_count,
    property_seed,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(2400)]  # slow on a loaded machine

TOPIC = "test.card_events"
SOURCE = TableSpec(
    name="card_events",
    topic=TOPIC,
    format="events",
    keys=("event_id",),
    sequence_by=("seq",),
    schema="event_id bigint, card bigint, kind string, country string, amount bigint, "
    "ts timestamp, seq bigint, deleted boolean",
    apply_as_deletes="deleted = true",
)
TYPES = {
    "event_id": "bigint",
    "card": "bigint",
    "kind": "string",
    "country": "string",
    "amount": "bigint",
    "ts": "timestamp",
    "seq": "bigint",
    "deleted": "boolean",
}
IDENTITY = ("event_id",)

PATTERNS = (
    Pattern(  # a card used in two countries within 10 minutes
        name="p_two",
        source="card_events",
        event_time="ts",
        partition_by=("card",),
        within="10 minutes",
        steps=(
            Step("first", "kind = 'use'"),
            Step("elsewhere", "kind = 'use' AND country <> first.country"),
        ),
        measures=(
            PatternMeasure("n", "count"),
            PatternMeasure("home", "first", column="country", step="first"),
            PatternMeasure("away", "last", column="country", step="elsewhere"),
            PatternMeasure("spent", "sum", column="amount"),
            PatternMeasure("top", "max", column="amount"),
        ),
        watermark_delay="5 minutes",
    ),
    Pattern(  # two or three uses, then a payment at least the last use's amount (if known)
        name="p_burst",
        source="card_events",
        event_time="ts",
        partition_by=("card",),
        within="20 minutes",
        steps=(
            Step("uses", "kind = 'use'", times="2..3"),
            Step("paid", "kind = 'pay' AND (amount >= uses.amount OR uses.amount IS NULL)"),
        ),
        measures=(
            PatternMeasure("uses_n", "count", step="uses"),
            PatternMeasure("amounts", "count", column="amount"),
            PatternMeasure("low", "min", column="amount"),
            PatternMeasure("last_country", "last", column="country"),
        ),
        watermark_delay="2 minutes",
    ),
    Pattern(  # two carts and no purchase within 5 minutes of the second
        name="p_cart",
        source="card_events",
        event_time="ts",
        partition_by=("card",),
        within="10 minutes",
        steps=(Step("cart", "kind = 'cart'", times=2),),
        absent=Absent(
            "kind = 'buy' AND (country = cart.country OR cart.country IS NULL)", "5 minutes"
        ),
        measures=(
            PatternMeasure("n", "count"),
            PatternMeasure("total", "sum", column="amount"),
            PatternMeasure("first_country", "first", column="country"),
        ),
        watermark_delay="1 minute",
    ),
    Pattern(  # a use and every payment within 5 minutes; overlapping matches
        name="p_next",
        source="card_events",
        event_time="ts",
        partition_by=("card",),
        within="5 minutes",
        steps=(Step("start", "kind = 'use'"), Step("pays", "kind = 'pay'", times="1+")),
        after_match="skip_to_next",
        measures=(
            PatternMeasure("n", "count"),
            PatternMeasure("paid", "sum", column="amount", step="pays"),
            PatternMeasure("high", "max", column="amount"),
        ),
        watermark_delay="10 minutes",
    ),
)

EXAMPLES = example_count(50)
BATCHES = 3
KEY_SPACE = 100  # event id = history index * 100 + k
CARDS = 3  # card = history index * CARDS + c (or NULL); the fixed history uses more
BASE = datetime(2026, 1, 1)
KINDS = ("use", "use", "use", "pay", "pay", "pay", "cart", "cart", "buy", "other")
COUNTRIES = ("US", "US", "FR", None)
#: Event times run from BASE to BASE + SPAN (µs), mostly on multiples of the patterns'
#: durations and 1 µs or 1 ms off, or one of them apart from an earlier time of the card.
SPAN = 60 * MINUTE
STEPS = tuple(n * MINUTE for n in (1, 2, 5, 10, 15))
APART = tuple(n * MINUTE for n in (5, 5, 10, 20))


@dataclass(frozen=True)
class Change:
    """One event of a history (its position is its sequence) and the batches it lands in."""

    key: int
    card: int | None
    micros: int | None  # after BASE
    kind: str
    country: str | None
    amount: int | None
    deleted: bool
    batches: tuple[int, ...]


@st.composite
def history_strategy(draw: st.DrawFn) -> list[Change]:
    size = draw(st.integers(2, 24))
    changes: list[Change] = []
    fresh = 0
    for _ in range(size):
        card = draw(st.sampled_from([0, 0, 0, 1, 1, None]))
        if changes and draw(st.integers(0, 3)) == 0:  # re-sent with new values
            key = draw(st.sampled_from(sorted({c.key for c in changes})))
        else:
            key, fresh = fresh, fresh + 1
        earlier = [c.micros for c in changes if c.card == card and c.micros is not None]
        way = draw(st.integers(0, 19))
        if way == 0:
            micros = None
        elif way < 11 and earlier:  # soon after one of the card's events
            micros = min(draw(st.sampled_from(earlier)) + draw(st.integers(0, 6 * MINUTE)), SPAN)
        else:
            micros = boundary_time(draw, STEPS, SPAN, earlier, APART)
        changes.append(
            Change(
                key=key,
                card=card,
                micros=micros,
                kind=draw(st.sampled_from(KINDS)),
                country=draw(st.sampled_from(COUNTRIES)),
                amount=draw(st.one_of(st.none(), *[st.integers(0, 9)] * 4)),
                deleted=draw(st.integers(0, 9)) == 0,
                batches=delivery(draw, BATCHES),
            )
        )
    return changes


def _at(minutes: int, off: int = 0) -> int:
    return minutes * MINUTE + off


def _fixed(
    key: int, card: int, micros: int, kind: str, batch: int, country: str | None = "US"
) -> Change:
    amount = 5 if kind == "pay" else 1
    return Change(key, card, micros, kind, country, amount, False, (batch,))


#: Card 0's match (US then FR, at the end of the drawn span: open until it goes) loses both
#: its events in batch 1: its partition then has no events and no match.
GONE: list[Change] = [
    Change(0, 0, SPAN - _at(1), "use", "US", 1, False, (0,)),
    Change(1, 0, SPAN, "use", "FR", 1, False, (0,)),
    Change(0, 0, SPAN - _at(1), "use", "US", 1, True, (1,)),
    Change(1, 0, SPAN, "use", "FR", 1, True, (1,)),
]


#: Times on every edge. Card 9's events set the latest time: SPAN in batch 0, so the
#: watermarks after batch 0 are 55 (p_two), 58 (p_burst), 59 (p_cart) and 50 minutes (p_next);
#: then SPAN + 2 and + 5 minutes (so drawn matches stay open for a batch or two). Cards 0/1:
#: p_two matches starting exactly ``within`` before its watermark (final; batch 1 deletes its
#: second event: a final match removed) and 1 µs later (not final). Cards 2/3: a second
#: country exactly ``within`` after the first (no match) and 1 µs sooner. Cards 4/5: a purchase
#: exactly ``absent.within`` after the second cart (still a match) and 1 µs sooner (none).
#: Cards 6/7: p_cart's absence window ends exactly on its watermark (final) and 1 µs after.
#: Cards 8/10: p_next starts ``within`` before its watermark (final) and 1 µs after. Cards
#: 11/12: the same for p_burst.
FIXED: list[Change] = [
    _fixed(0, 9, SPAN, "other", 0),
    _fixed(1, 9, SPAN + _at(2), "other", 1),
    _fixed(2, 9, SPAN + _at(5), "other", 2),
    _fixed(3, 0, _at(45), "use", 0),
    _fixed(4, 0, _at(50), "use", 0, "FR"),
    Change(4, 0, _at(50), "use", "FR", 1, True, (1,)),
    _fixed(5, 1, _at(45, 1), "use", 0),
    _fixed(6, 1, _at(50), "use", 0, "FR"),
    _fixed(8, 2, _at(20), "use", 0),
    _fixed(9, 2, _at(30), "use", 0, "FR"),
    _fixed(10, 3, _at(20), "use", 0),
    _fixed(11, 3, _at(30, -1), "use", 0, "FR"),
    _fixed(12, 4, _at(10), "cart", 0),
    _fixed(13, 4, _at(12), "cart", 0),
    _fixed(14, 4, _at(17), "buy", 1),
    _fixed(15, 5, _at(10), "cart", 0),
    _fixed(16, 5, _at(12), "cart", 0),
    _fixed(17, 5, _at(17, -1), "buy", 1),
    _fixed(18, 6, _at(50), "cart", 0),
    _fixed(19, 6, _at(54), "cart", 0),
    _fixed(20, 7, _at(50), "cart", 0),
    _fixed(21, 7, _at(54, 1), "cart", 0),
    _fixed(22, 8, _at(45), "use", 0),
    _fixed(23, 8, _at(46), "pay", 0),
    _fixed(24, 10, _at(45, 1), "use", 0),
    _fixed(25, 10, _at(46), "pay", 0),
    _fixed(26, 11, _at(38), "use", 0),
    _fixed(27, 11, _at(39), "use", 0),
    _fixed(28, 11, _at(45), "pay", 0),
    _fixed(29, 12, _at(38, 1), "use", 0),
    _fixed(30, 12, _at(39), "use", 0),
    _fixed(31, 12, _at(45), "pay", 0),
]


def batch_records(histories: list[list[Change]]) -> list[list[Record]]:
    """The records of every history, per micro-batch, with offsets unique in the run."""
    batches: list[list[Record]] = [[] for _ in range(BATCHES)]
    offset = 0
    for index, history in enumerate(histories):
        for seq, change in enumerate(history, start=1):
            event_id = index * KEY_SPACE + change.key
            card = None if change.card is None else index * CARDS + change.card
            moment = None
            if change.micros is not None:
                moment = (BASE + timedelta(microseconds=change.micros)).isoformat() + "Z"
            value = {
                "event_id": event_id,
                "card": card,
                "kind": change.kind,
                "country": change.country,
                "amount": change.amount,
                "ts": moment,
                "seq": seq,
                "deleted": change.deleted,
            }
            for batch in change.batches:
                batches[batch].append(Record(TOPIC, 0, offset, 0, {"event_id": event_id}, value))
                offset += 1
    return batches


def columns(pattern: Pattern) -> tuple[str, ...]:
    """The columns of ``gold.<name>`` besides the finality ones."""
    named = (m.name for m in pattern.measures)
    return (*pattern.partition_by, "match_id", "match_start", "match_end", *named)


def normalized(value: Any) -> Any:
    if isinstance(value, float | Decimal):
        return round(float(value), 6)
    return value


@dataclass
class Oracle:
    """What the oracle knows after each batch: the latest event time silver has held (epoch
    µs), each pattern's matches with their finality, the ``gold.late_events`` rows so far, and
    counts of the cases the run covered."""

    patterns: tuple[Pattern, ...]
    seen: int | None = None
    #: Per pattern, match id -> (the gold row's values, final).
    now: dict[str, dict[str, tuple[tuple[Any, ...], bool]]] = field(default_factory=dict)
    late: Counter[tuple[Any, ...]] = field(default_factory=Counter)
    cases: Counter[str] = field(default_factory=Counter)

    def advance(self, silver: list[dict[str, Any]]) -> None:
        """Take the silver rows after a batch: its matches, and the late events for the final
        matches (under the watermark before it) it removed or changed."""
        times = [pattern_oracle.micros(r["ts"]) for r in silver if r["ts"] is not None]
        self.seen = max([*times, *([] if self.seen is None else [self.seen])], default=None)
        for pattern in self.patterns:
            mark = self.watermark(pattern)
            rows: dict[str, tuple[tuple[Any, ...], bool]] = {}
            for match in pattern_oracle.matches(silver, pattern, IDENTITY, TYPES):
                final = pattern_oracle.is_final(match, pattern, mark)
                rows[match["match_id"]] = (tuple(match[c] for c in columns(pattern)), final)
                self.cases[f"{pattern.name} {'final' if final else 'open'}"] += 1
                if mark is not None and _edge(match, pattern) in (mark, mark + 1):
                    self.cases[f"{pattern.name} on its finality edge"] += 1
            for match_id, (values, final) in self.now.get(pattern.name, {}).items():
                if final and (match_id not in rows or rows[match_id][0] != values):
                    kind = "match_removed" if match_id not in rows else "match_changed"
                    self.late[
                        late_key(pattern, kind, dict(zip(columns(pattern), values, strict=True)))
                    ] += 1
                    self.cases[f"{pattern.name} {kind}"] += 1
            self.now[pattern.name] = rows

    def watermark(self, pattern: Pattern) -> int | None:
        if self.seen is None:
            return None
        return self.seen - duration_micros(pattern.watermark_delay)

    def expected(self, pattern: Pattern) -> Counter[tuple[Any, ...]]:
        """The oracle's rows of ``gold.<name>``, normalized, each with its ``_final``."""
        return Counter(
            (*(normalized(v) for v in values), final)
            for values, final in self.now[pattern.name].values()
        )


def late_key(pattern: Pattern, change: str, match: dict[str, Any]) -> tuple[Any, ...]:
    """What the property compares of a ``gold.late_events`` row for a final match (docs/
    patterns.md): the table, the change, the match's start and end (as before the change)
    and its partition values (as strings)."""
    groups = tuple(
        sorted((c, None if match[c] is None else str(match[c])) for c in pattern.partition_by)
    )
    return (pattern.name, change, match["match_start"], match["match_end"], groups)


def _edge(match: pattern_oracle.Match, pattern: Pattern) -> int:
    """The watermark at which ``match`` turns final."""
    if pattern.absent is not None:
        return pattern_oracle.micros(match["match_end"]) + duration_micros(pattern.absent.within)
    return pattern_oracle.micros(match["match_start"]) + duration_micros(pattern.within)


def gold_rows(spark: SparkSession, warehouse: Warehouse, name: str) -> list[dict[str, Any]]:
    path = warehouse.table("gold", name)
    return [r.asDict() for r in spark.read.format("delta").load(path).collect()]


def assert_patterns_equal_oracle(
    spark: SparkSession,
    warehouse: Warehouse,
    oracle: Oracle,
    when: str,
    patterns: tuple[Pattern, ...] = PATTERNS,
) -> dict[str, list[dict[str, Any]]]:
    """Each ``gold.<name>`` (with ``_final``) equals the oracle's; returns gold's rows."""
    now: dict[str, list[dict[str, Any]]] = {}
    for pattern in patterns:
        gold = gold_rows(spark, warehouse, pattern.name)
        got = Counter((*(normalized(row[c]) for c in columns(pattern)), row[FINAL]) for row in gold)
        want = oracle.expected(pattern)
        missing, extra = want - got, got - want
        assert not missing and not extra, (
            f"{when}: gold.{pattern.name} (watermark {oracle.watermark(pattern)} µs) differs "
            f"from the oracle; missing {sorted(missing, key=repr)[:3]}, unexpected "
            f"{sorted(extra, key=repr)[:3]} (PATTERN_PROPERTY_SEED={SEED})"
        )
        for row in gold:
            assert (row[FINALIZED_AT] is not None) == row[FINAL], (pattern.name, row)
        now[pattern.name] = gold
    names = {p.name for p in patterns}
    late = spark.read.format("delta").load(warehouse.table("gold", LATE_EVENTS)).collect()
    got_late = Counter(
        (
            r["gold_table"],
            r["change_type"],
            r["window_start"],
            r["window_end"],
            tuple(sorted((r["group_values"] or {}).items())),
        )
        for r in late
        if r["gold_table"] in names
    )
    missing_late, extra_late = oracle.late - got_late, got_late - oracle.late
    assert not missing_late and not extra_late, (
        f"{when}: gold.late_events differs from the oracle; missing {list(missing_late)[:3]}, "
        f"unexpected {list(extra_late)[:3]} (PATTERN_PROPERTY_SEED={SEED})"
    )
    return now


def run_and_compare(
    spark: SparkSession,
    tmp_path: Path,
    histories: list[list[Change]],
    patterns: tuple[Pattern, ...],
) -> tuple[Oracle, list[dict[str, set[str]]], list[dict[str, Counter[Any]]]]:
    """Run ``histories`` through the pipeline declaring ``patterns``, batch by batch, and
    compare each pattern's table with the oracle after each; returns the oracle, each
    batch's match ids per pattern and its matches per card per pattern."""
    source = tmp_path / "source"
    source.mkdir()
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    spec = SourceSpec.parse(f"files:{source}")
    config = PipelineConfig(tables=(SOURCE,), patterns=patterns)
    oracle = Oracle(patterns)
    ids: list[dict[str, set[str]]] = []
    cards: list[dict[str, Counter[Any]]] = []
    previous: dict[tuple[str, str], dict[str, Any]] = {}
    for number, records in enumerate(batch_records(histories)):
        lines = "".join(record.to_line() + "\n" for record in records)
        hidden = source / f".batch-{number}.jsonl"
        hidden.write_text(lines, encoding="utf-8")
        hidden.rename(source / f"batch-{number}.jsonl")
        run_once(spark, spec, warehouse, config)
        silver = spark.read.format("delta").load(warehouse.table("silver", "card_events"))
        oracle.advance([r.asDict() for r in silver.collect()])
        when = f"after batch {number}"
        gold = assert_patterns_equal_oracle(spark, warehouse, oracle, when, patterns)
        for name, rows in gold.items():
            for row in rows:  # a match final before keeps its _finalized_at while it stays
                old = previous.get((name, row["match_id"]))
                if old and old[FINAL] and all(old[c] == row[c] for c in old if c != FINAL):
                    assert row[FINALIZED_AT] == old[FINALIZED_AT], (when, name, row, old)
        previous = {
            (name, row["match_id"]): {
                **{c: row[c] for c in columns(pattern)},
                FINAL: row[FINAL],
                FINALIZED_AT: row[FINALIZED_AT],
            }
            for pattern in patterns
            for name, rows in gold.items()
            if name == pattern.name
            for row in rows
        }
        ids.append({name: {r["match_id"] for r in rows} for name, rows in gold.items()})
        cards.append({name: Counter(r["card"] for r in rows) for name, rows in gold.items()})
    return oracle, ids, cards


SEED = property_seed("PATTERN_PROPERTY_SEED")


def test_every_pattern_equals_the_oracle_after_every_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    histories = [*draw_examples(history_strategy(), SEED, EXAMPLES), GONE, FIXED]
    changes = [c for h in histories for c in h]
    # Coverage guards: the draws hold what the property is about.
    assert sum(c.deleted for c in changes) >= 10
    assert sum(len(c.batches) > 1 for c in changes) >= 10
    assert sum(c.micros is None for c in changes) >= 3 and any(c.card is None for c in changes)
    assert sum(len(h) - len({c.key for c in h}) for h in histories) >= 20  # re-sent keys
    late = sum(
        1
        for h in histories
        for i, c in enumerate(h)
        for d in h[i + 1 :]
        if d.key == c.key and min(d.batches) < min(c.batches)
    )
    assert late >= 5  # a higher sequence delivered before a lower one

    oracle, ids, cards = run_and_compare(spark, tmp_path, histories, PATTERNS)

    # Coverage guards: every pattern has matches final and not yet final, matches that a
    # later batch removed, and matches on their finality edge.
    names = {p.name for p in PATTERNS}
    assert {f"{n} final" for n in names} | {f"{n} open" for n in names} <= set(oracle.cases), (
        oracle.cases
    )
    assert {f"{n} on its finality edge" for n in names} <= set(oracle.cases), oracle.cases
    removed = {n for n in names if any(ids[i][n] - ids[i + 1][n] for i in range(BATCHES - 1))}
    assert removed == names, removed
    # ... and final matches that a later batch removed or changed (gold.late_events).
    assert "p_two match_removed" in oracle.cases and sum(oracle.late.values()) >= 3, oracle.late
    # GONE's match goes with its events (GONE is the last history before FIXED, whose cards
    # reach past the range of its own index).
    gone = (len(histories) - 2) * CARDS
    assert [batch["p_two"][gone] for batch in cards] == [1, 0, 0], cards
