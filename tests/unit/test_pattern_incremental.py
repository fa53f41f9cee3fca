"""The pattern job's per-partition recomputation (``gold.pattern_jobs._rematch``), in plain
Python: after any change to a partition's events, replacing the stored matches from where the
change can reach them gives the matches of all the events, matched from the start.

The job's Spark part only selects the rows given to ``_rematch`` (events and stored matches
from the partition's earliest changed time less ``reach + within``) and applies its output;
this test does the same selection and application by hand, over random histories whose times
sit on the pattern's edges, and compares with :meth:`gold.patterns.Matcher.matches` over
every event (the engine's own full evaluation; ``tests/pattern_oracle.py``, written apart,
checks that one).
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from gold.aggregates import PRESENT
from gold.pattern_jobs import CHANGED_FROM, _rematch
from gold.patterns import Matcher, match_row, ordered
from lakehouse_core.patterns import MATCH_ID, MATCH_START, Absent, Pattern, PatternMeasure, Step

pytestmark = pytest.mark.unit

MINUTE = 60_000_000
TYPES = {"id": "bigint", "user": "bigint", "kind": "string", "amount": "bigint", "ts": "timestamp"}
PATTERNS = (
    Pattern(
        "two_step",
        "events",
        "ts",
        (Step("a", "kind = 'a'"), Step("b", "kind = 'b' AND amount > a.amount")),
        "10 minutes",
        partition_by=("user",),
        measures=(PatternMeasure("n", "count"), PatternMeasure("first_a", "first", "amount", "a")),
    ),
    Pattern(
        "greedy",
        "events",
        "ts",
        (Step("a", "kind = 'a'", times="2+"), Step("b", "kind <> 'a'")),
        "10 minutes",
        partition_by=("user",),
        measures=(PatternMeasure("total", "sum", "amount"),),
    ),
    Pattern(
        "ranged_last",
        "events",
        "ts",
        (Step("a", "kind = 'b'"), Step("more", "amount >= 2", times="2..3")),
        "5 minutes",
        partition_by=("user",),
    ),
    Pattern(
        "absence",
        "events",
        "ts",
        (Step("a", "kind = 'a'"),),
        "5 minutes",
        partition_by=("user",),
        absent=Absent("kind = 'c'", "10 minutes"),
    ),
    Pattern(
        "looping_absence",
        "events",
        "ts",
        (Step("a", "kind = 'a'"), Step("more", "kind <> 'c'", times="2+")),
        "5 minutes",
        partition_by=("user",),
        absent=Absent("kind = 'c' AND amount >= more.amount", "3 minutes"),
        measures=(PatternMeasure("n", "count"),),
    ),
    Pattern(
        "strict",
        "events",
        "ts",
        (Step("a", "kind = 'a'", times="1+"), Step("b", "kind <> 'a'", contiguity="relaxed")),
        "5 minutes",
        partition_by=("user",),
        absent=Absent("kind = 'c'", "2 minutes"),
        contiguity="strict",
    ),
    Pattern(
        "optional",
        "events",
        "ts",
        (
            Step("a", "kind = 'a'", times="*"),
            Step("b", "kind = 'b'"),
            Step("c", "amount >= 2", times="?"),
        ),
        "5 minutes",
        partition_by=("user",),
        measures=(PatternMeasure("n", "count"),),
    ),
    Pattern(
        "overlapping",
        "events",
        "ts",
        (Step("a", "amount >= 1", times=2),),
        "5 minutes",
        partition_by=("user",),
        after_match="skip_to_next",
    ),
)
IDENTITY = ("id",)
SCHEMA = pa.schema(
    [
        ("user", pa.int64()),
        ("match_id", pa.string()),
        ("match_start", pa.int64()),
        ("match_end", pa.int64()),
        ("n", pa.int64()),
        ("first_a", pa.int64()),
        ("total", pa.int64()),
        (PRESENT, pa.bool_()),
    ]
)


def draw_event(rng: random.Random, event_id: int) -> dict[str, Any]:
    """An event whose time is mostly on a multiple of a minute, or 1 µs off one."""
    minute = rng.randrange(0, 40) * MINUTE
    return {
        "id": event_id,
        "user": 1,
        "kind": rng.choice("aabc"),
        "amount": rng.randrange(0, 4),
        "ts": minute + rng.choice((0, 0, 0, 1, -1)),
    }


def all_matches(events: list[dict[str, Any]], pattern: Pattern) -> dict[str, dict[str, Any]]:
    rows = ordered(events, pattern.event_time, IDENTITY)
    found = Matcher(pattern, TYPES).matches(rows)
    return {m[MATCH_ID]: m for m in (match_row(pattern, rows, f, IDENTITY) for f in found)}


def table(rows: list[dict[str, Any]], changed_from: int) -> pa.Table:
    if not rows:
        return pa.table({CHANGED_FROM: pa.array([], pa.int64())})
    names = [*rows[0], CHANGED_FROM]
    return pa.Table.from_pylist([{**r, CHANGED_FROM: changed_from} for r in rows]).select(names)


def recomputed(
    pattern: Pattern,
    events: list[dict[str, Any]],
    stored: dict[str, dict[str, Any]],
    changed_from: int,
) -> dict[str, dict[str, Any]]:
    """``stored`` after the job's recomputation for a change at ``changed_from``."""
    back = pattern.reach_micros + pattern.within_micros
    given = [e for e in events if e["ts"] >= changed_from - back]
    kept = [m for m in stored.values() if m[MATCH_START] >= changed_from - back]
    columns = [f.name for f in SCHEMA if f.name in (*pattern.columns, PRESENT)]
    out = _rematch(
        table(given, changed_from),
        table(kept, changed_from),
        pattern=pattern,
        types=TYPES,
        identity=IDENTITY,
        out=pa.schema([SCHEMA.field(c) for c in columns]),
    )
    after = dict(stored)
    for row in out.to_pylist():
        present = row.pop(PRESENT)
        if present:
            after[row[MATCH_ID]] = row
        else:
            after.pop(row[MATCH_ID], None)
    return after


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.name)
def test_recomputing_from_the_reach_of_a_change_gives_every_match(pattern: Pattern) -> None:
    rng = random.Random(f"pattern-incremental-{pattern.name}")
    changes_checked = 0
    for _ in range(150):
        events = [draw_event(rng, i) for i in range(rng.randrange(0, 25))]
        stored = all_matches(events, pattern)
        next_id = 1000
        for _ in range(rng.randrange(1, 4)):
            before = {e["id"]: e for e in events}
            kind = rng.choice(("insert", "delete", "update"))
            if kind == "insert" or not events:
                event = draw_event(rng, next_id)
                next_id += 1
                events.append(event)
                times = [event["ts"]]
            elif kind == "delete":
                event = events.pop(rng.randrange(len(events)))
                times = [event["ts"]]
            else:
                index = rng.randrange(len(events))
                old = events[index]
                events[index] = {**draw_event(rng, old["id"]), "id": old["id"]}
                times = [old["ts"], events[index]["ts"]]
            assert before != {e["id"]: e for e in events} or kind == "update"
            stored = recomputed(pattern, events, stored, min(times))
            want = all_matches(events, pattern)
            assert stored == want, (pattern.name, kind, sorted(events, key=lambda e: e["ts"]))
            changes_checked += 1
    assert changes_checked >= 250
