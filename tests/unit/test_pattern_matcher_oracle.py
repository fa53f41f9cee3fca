"""Property: the engine's matcher (:class:`gold.patterns.Matcher`, what each pattern job and
``lakehouse verify`` run per partition) gives the matches of the plain-Python oracle
(tests/pattern_oracle.py, written from docs/patterns.md) for any pattern shape and events.

Hypothesis draws the pattern too: one to three steps with conditions over the events (some
reading an earlier step), every form of ``times`` (fixed, at least, range, optional), with or
without ``absent`` (after a looping last step too), both ``after_match`` readings, strict or
relaxed contiguity for the pattern and for single steps, and events whose times sit on the
pattern's edges (minutes apart, exactly or 1 µs off). No Spark: the jobs'
Spark part (which rows reach the matcher) is checked by test_pattern_incremental and the
integration property.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gold.patterns import Matcher, match_row, ordered
from lakehouse_core.patterns import Absent, Pattern, PatternMeasure, Step
from tests import pattern_oracle

pytestmark = pytest.mark.unit

BASE = datetime(2026, 1, 1)
TYPES = {"id": "bigint", "key": "string", "kind": "string", "amount": "bigint", "ts": "timestamp"}
IDENTITY = ("id",)
CONDITIONS = ("kind = 'a'", "kind = 'b'", "kind <> 'c'", "amount >= 2", "TRUE")
TIMES: tuple[int | str, ...] = (1, 1, 2, "1+", "2+", "3+", "1..2", "2..3", "?", "*", "0..2")
MEASURES = (
    PatternMeasure("first_id", "first", column="id"),
    PatternMeasure("last_id", "last", column="id"),
    PatternMeasure("n", "count"),
    PatternMeasure("total", "sum", column="amount"),
    PatternMeasure("high", "max", column="amount"),
)


@st.composite
def patterns(draw: st.DrawFn) -> Pattern:
    """A pattern of one to three steps over the events table."""
    steps: list[Step] = []
    for index in range(draw(st.integers(1, 3))):
        condition = draw(st.sampled_from(CONDITIONS))
        if steps and draw(st.booleans()):
            earlier = draw(st.sampled_from([s.name for s in steps]))
            condition = f"amount > {earlier}.amount OR kind = 'b'"
        contiguity = draw(st.sampled_from((None, None, "strict", "relaxed")))
        times = draw(st.sampled_from(TIMES))
        steps.append(Step(f"s{index}", condition, times=times, contiguity=contiguity))
    if all(step.least == 0 for step in steps):  # refused: a match needs an event
        steps[-1] = Step(steps[-1].name, steps[-1].condition, 1, steps[-1].contiguity)
    absent = None
    if draw(st.booleans()):
        condition = draw(
            st.sampled_from(("kind = 'c'", "kind = 'a'", f"amount = {steps[-1].name}.amount"))
        )
        absent = Absent(condition, draw(st.sampled_from(("2 minutes", "5 minutes"))))
    return Pattern(
        name="p",
        source="events",
        event_time="ts",
        steps=tuple(steps),
        within=draw(st.sampled_from(("3 minutes", "5 minutes", "10 minutes"))),
        partition_by=("key",),
        absent=absent,
        after_match=draw(st.sampled_from(("skip_past_last", "skip_to_next"))),
        contiguity=draw(st.sampled_from(("relaxed", "strict"))),
        measures=(*MEASURES, PatternMeasure("in_first", "count", step=steps[0].name)),
    )


@st.composite
def events(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Up to 16 events of two keys, a minute or so apart, some at the same time."""
    out = []
    for event_id in range(draw(st.integers(0, 16))):
        minute = draw(st.integers(0, 14))
        off = draw(st.sampled_from((0, 0, 0, 1, -1)))
        out.append(
            {
                "id": event_id,
                "key": draw(st.sampled_from(("x", "x", "x", "y"))),
                "kind": draw(st.sampled_from("aaabbc")),
                "amount": draw(st.one_of(st.none(), st.integers(0, 3))),
                "ts": BASE + timedelta(minutes=minute, microseconds=off),
            }
        )
    return out


def engine(pattern: Pattern, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The engine's matches, times as naive UTC datetimes as the oracle gives them."""
    found = []
    for key in sorted({r["key"] for r in rows}):
        plain = [{**r, "ts": pattern_oracle.micros(r["ts"])} for r in rows if r["key"] == key]
        events_ = ordered(plain, "ts", IDENTITY)
        for match in Matcher(pattern, TYPES).matches(events_):
            row = match_row(pattern, events_, match, IDENTITY)
            for column in ("match_start", "match_end"):
                row[column] = BASE + timedelta(
                    microseconds=row[column] - pattern_oracle.micros(BASE)
                )
            found.append(row)
    return found


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=patterns(), rows=events())
def test_the_matcher_gives_the_oracles_matches(
    pattern: Pattern, rows: list[dict[str, Any]]
) -> None:
    want = sorted(
        (dict(m) for m in pattern_oracle.matches(rows, pattern, IDENTITY, TYPES)),
        key=lambda m: (m["key"], m["match_start"], m["match_id"]),
    )
    got = sorted(engine(pattern, rows), key=lambda m: (m["key"], m["match_start"], m["match_id"]))
    assert got == want
