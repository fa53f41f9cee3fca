"""Hand cases for the plain-Python pattern oracle (tests/pattern_oracle.py), each with its
expected matches written out from the definition in docs/patterns.md; some are examples ported
from published descriptions of Flink CEP and SQL's MATCH_RECOGNIZE, adapted to our rules
(relaxed contiguity, greedy quantifiers, one match per start)."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from lakehouse_core.patterns import Absent, Pattern, PatternMeasure, Step, match_id
from tests.pattern_oracle import Match, is_final, matches, micros, times_bounds

pytestmark = pytest.mark.unit

BASE = datetime(2026, 1, 1)
MICRO = timedelta(microseconds=1)
TYPES = {
    "id": "bigint",
    "key": "string",
    "ts": "timestamp",
    "kind": "string",
    "country": "string",
    "amount": "bigint",
    "price": "double",
    "cost": "decimal(10,2)",
    "rank": "bigint",
}
#: Measures every pattern here carries, so that a match shows which events it took.
SPAN = (
    PatternMeasure("first_id", "first", column="id"),
    PatternMeasure("last_id", "last", column="id"),
    PatternMeasure("n", "count"),
)


def at(minutes: float, micros_off: int = 0) -> datetime:
    return BASE + timedelta(minutes=minutes) + micros_off * MICRO


def ev(event_id: int, moment: datetime | float | None, kind: str, **extra: Any) -> dict[str, Any]:
    """A silver row of the events table the cases read."""
    row: dict[str, Any] = {
        "id": event_id,
        "key": "k",
        "ts": at(moment) if isinstance(moment, int | float) else moment,
        "kind": kind,
        "country": None,
        "amount": None,
        "price": None,
        "cost": None,
        "rank": event_id,
    }
    row.update(extra)
    return row


def pattern(
    *steps: Step,
    within: str = "10 minutes",
    measures: tuple[PatternMeasure, ...] = SPAN,
    **settings: Any,
) -> Pattern:
    return Pattern(
        name="p",
        source="events",
        partition_by=("key",),
        event_time="ts",
        within=within,
        steps=steps,
        measures=measures,
        **settings,
    )


def spans(found: list[Match]) -> list[tuple[Any, Any, Any]]:
    """(first event id, last event id, events) of each match, in the oracle's order."""
    return [(m["first_id"], m["last_id"], m["n"]) for m in found]


def run(p: Pattern, rows: list[dict[str, Any]], identity: tuple[str, ...] = ("id",)) -> list[Match]:
    return matches(rows, p, identity, TYPES)


A = Step("a", "kind = 'a'")
B = Step("b", "kind = 'b'")


# --------------------------------------------------------------------------------------------
# Ported examples
# --------------------------------------------------------------------------------------------


def test_relaxed_contiguity_takes_the_first_b_after_a() -> None:
    # Flink CEP documentation, "Contiguity" (Combining Patterns): for the pattern "a b" and the
    # events "a", "c", "b1", "b2", relaxed contiguity (followedBy) gives {a b1}; strict gives
    # nothing and non-deterministic relaxed gives {a b1}, {a b2}. Ours is relaxed.
    rows = [ev(1, 0, "a"), ev(2, 1, "c"), ev(3, 2, "b"), ev(4, 3, "b")]
    assert spans(run(pattern(A, B), rows)) == [(1, 3, 2)]


def test_a_looping_step_is_greedy_and_skips_other_events() -> None:
    # Flink CEP documentation, looping patterns: "a+ b" over "a1", "c", "a2", "b" gives, with
    # relaxed contiguity, {a1 b} and {a1 a2 b}. Ours keeps one match per start, the greedy
    # one: {a1 a2 b}; with skip_to_next the attempt from a2 also matches: {a2 b}.
    rows = [ev(1, 0, "a"), ev(2, 1, "c"), ev(3, 2, "a"), ev(4, 3, "b")]
    a_plus = Step("a", "kind = 'a'", times="1+")
    assert spans(run(pattern(a_plus, B), rows)) == [(1, 4, 3)]
    both = run(pattern(a_plus, B, after_match="skip_to_next"), rows)
    assert spans(both) == [(1, 4, 3), (3, 4, 2)]


def test_c_a_plus_b_takes_every_a_before_b() -> None:
    # Flink CEP documentation, consecutive(): pattern "c a+ b" over C D A1 A2 A3 D A4 B gives,
    # without consecutive(), {C A1 B}, {C A1 A2 B}, {C A1 A2 A3 B} and {C A1 A2 A3 A4 B}.
    # Greedy, ours is the last of them: the D's are skipped, every A is taken.
    rows = [
        ev(1, 0, "c"),
        ev(2, 1, "d"),
        ev(3, 2, "a"),
        ev(4, 3, "a"),
        ev(5, 4, "a"),
        ev(6, 5, "d"),
        ev(7, 6, "a"),
        ev(8, 7, "b"),
    ]
    steps = (Step("c", "kind = 'c'"), Step("a", "kind = 'a'", times="1+"), B)
    measures = (*SPAN, PatternMeasure("as", "count", step="a"))
    found = run(pattern(*steps, measures=measures), rows)
    assert spans(found) == [(1, 8, 6)] and found[0]["as"] == 4


def test_after_match_skip_past_last_row_and_to_next_row() -> None:
    # Trino and Oracle MATCH_RECOGNIZE documentation, AFTER MATCH SKIP: PAST LAST ROW resumes
    # at the row after the match's last row (no overlap); TO NEXT ROW at the row after its
    # first row (matches overlap). "a b+" over a1 a2 b1 b2 c a3 b3: past last row gives
    # {a1 b1 b2}, {a3 b3}; to next row also {a2 b1 b2} (b3 is past the 10 minutes of a1, a2).
    rows = [
        ev(1, 0, "a"),
        ev(2, 1, "a"),
        ev(3, 2, "b"),
        ev(4, 3, "b"),
        ev(5, 4, "c"),
        ev(6, 11, "a"),
        ev(7, 12, "b"),
    ]
    b_plus = Step("b", "kind = 'b'", times="1+")
    assert spans(run(pattern(A, b_plus), rows)) == [(1, 4, 3), (6, 7, 2)]
    overlapping = run(pattern(A, b_plus, after_match="skip_to_next"), rows)
    assert spans(overlapping) == [(1, 4, 3), (2, 4, 3), (6, 7, 2)]


def test_strict_contiguity_takes_only_the_next_event() -> None:
    # The same Flink example: with strict contiguity (next(), MATCH_RECOGNIZE's default) "a b"
    # over "a", "c", "b1", "b2" gives nothing; over "a", "b1", "b2" it gives {a b1}.
    strict = pattern(A, B, contiguity="strict")
    assert run(strict, [ev(1, 0, "a"), ev(2, 1, "c"), ev(3, 2, "b"), ev(4, 3, "b")]) == []
    assert spans(run(strict, [ev(1, 0, "a"), ev(3, 2, "b"), ev(4, 3, "b")])) == [(1, 3, 2)]


def test_strict_contiguity_ends_a_looping_step_at_the_first_other_event() -> None:
    # Flink CEP, consecutive(): "c a+ b" over C D A1 A2 A3 D A4 B with strict contiguity in
    # the loop: the D after A3 ends the loop. Strict steps throughout, nothing matches (the D
    # after C is skipped); a relaxed "b" step takes B after the loop's A1 A2 A3.
    rows = [
        ev(1, 0, "c"),
        ev(2, 1, "a"),
        ev(3, 2, "a"),
        ev(4, 3, "a"),
        ev(5, 4, "d"),
        ev(6, 5, "a"),
        ev(7, 6, "b"),
    ]
    loop = Step("a", "kind = 'a'", times="1+")
    steps = (Step("c", "kind = 'c'"), loop, B)
    assert spans(run(pattern(*steps, contiguity="strict"), rows)) == []
    relaxed_b = Step("b", "kind = 'b'", contiguity="relaxed")
    found = run(pattern(steps[0], loop, relaxed_b, contiguity="strict"), rows)
    assert spans(found) == [(1, 7, 5)]
    # Relaxed pattern, strict loop: the loop's events follow C and each other directly (D ends
    # it; relaxed B then skips A4); with a D between C and A1 the loop cannot start.
    strict_loop = Step("a", "kind = 'a'", times="1+", contiguity="strict")
    assert spans(run(pattern(steps[0], strict_loop, B), rows)) == [(1, 7, 5)]
    with_gap = [ev(1, 0, "c"), ev(8, at(0, 1), "d"), *rows[1:]]
    assert run(pattern(steps[0], strict_loop, B), with_gap) == []


def test_strict_contiguity_with_a_looping_step_and_absent() -> None:
    # Three failures in a row and no success within 5 minutes of the last: a success between
    # failures ends the strict step, and the window after it then holds that success.
    failed = Step("failed", "kind = 'failed'", times="3+")
    p = pattern(failed, absent=Absent("kind = 'ok'", "5 minutes"), contiguity="strict")
    rows = [*(ev(i, i - 1, "failed") for i in (1, 2, 3)), ev(4, 3, "ok"), ev(5, 4, "failed")]
    assert run(p, rows) == []
    assert spans(run(p, [*rows[:3], ev(4, 3, "view"), ev(5, 9, "ok")])) == [(1, 3, 3)]
    # Relaxed, the same events match (the success is skipped; see the absence cases).
    assert spans(run(pattern(failed, absent=Absent("kind = 'ok'", "5 minutes")), rows)) == [
        (1, 5, 4)
    ]


def test_an_optional_step_is_passed_over_when_the_next_step_takes_the_event() -> None:
    # MATCH_RECOGNIZE's PATTERN (A B? C): "a c" matches with B empty, "a b c" with B; "a b b
    # c" takes one b (its maximum), skips the second (relaxed) and takes c.
    opt_b = Step("b", "kind = 'b'", times="?")
    c = Step("c", "kind = 'c'")
    measures = (*SPAN, PatternMeasure("bs", "count", step="b"))
    p = pattern(A, opt_b, c, measures=measures)
    found = run(p, [ev(1, 0, "a"), ev(2, 1, "c")])
    assert spans(found) == [(1, 2, 2)] and found[0]["bs"] == 0
    rows = [ev(1, 0, "a"), ev(2, 1, "b"), ev(3, 2, "b"), ev(4, 3, "c")]
    found = run(p, rows)
    assert spans(found) == [(1, 4, 3)] and found[0]["bs"] == 1
    # Strict: the second b is neither b (full) nor c, so the attempt ends before c.
    assert run(pattern(A, opt_b, c, contiguity="strict"), rows) == []


def test_optional_first_and_last_steps() -> None:
    # PATTERN (A* B C*): an attempt may start at a b; the trailing c's are taken while they
    # come (greedy) and the match needs none of them.
    p = pattern(
        Step("a", "kind = 'a'", times="*"),
        B,
        Step("c", "kind = 'c'", times="*"),
        measures=(*SPAN, PatternMeasure("cs", "count", step="c")),
    )
    rows = [ev(1, 0, "b"), ev(2, 1, "c"), ev(3, 2, "c"), ev(4, 3, "a"), ev(5, 4, "b")]
    found = run(p, rows)
    assert spans(found) == [(1, 3, 3), (4, 5, 2)] and [m["cs"] for m in found] == [2, 0]
    # An event no reachable step takes is skipped; a required step cannot be passed over.
    assert run(p, [ev(1, 0, "a"), ev(2, 1, "c"), ev(3, 2, "a")]) == []


def test_a_reference_to_an_optional_step_that_took_nothing_is_null() -> None:
    # "amount > b.amount" with b empty is NULL, not true: c is skipped then.
    p = pattern(
        A,
        Step("b", "kind = 'b'", times="?"),
        Step("c", "kind = 'c' AND (amount > b.amount OR b.amount IS NULL)"),
    )
    assert spans(run(p, [ev(1, 0, "a"), ev(2, 1, "c", amount=1)])) == [(1, 2, 2)]
    rows = [ev(1, 0, "a"), ev(2, 1, "b", amount=5), ev(3, 2, "c", amount=1)]
    assert run(p, rows) == []


# --------------------------------------------------------------------------------------------
# within, ordering, NULLs
# --------------------------------------------------------------------------------------------


def test_an_event_exactly_within_after_the_first_is_not_taken() -> None:
    exactly = [ev(1, 0, "a"), ev(2, 10, "b")]
    assert run(pattern(A, B), exactly) == []
    just_before = [ev(1, 0, "a"), ev(2, at(10, -1), "b")]
    assert spans(run(pattern(A, B), just_before)) == [(1, 2, 2)]


def test_within_ends_the_attempt_and_the_next_attempt_starts_at_the_next_event() -> None:
    # a1 at 0 has no b before 10; its attempt ends at b (12 minutes); a2 at 5 takes it.
    rows = [ev(1, 0, "a"), ev(2, 5, "a"), ev(3, 12, "b")]
    assert spans(run(pattern(A, B), rows)) == [(2, 3, 2)]


def test_within_ends_a_looping_last_step_which_still_matches() -> None:
    a_plus = Step("a", "kind = 'a'", times="2+")
    rows = [ev(1, 0, "a"), ev(2, 4, "a"), ev(3, at(10, -1), "a"), ev(4, 10, "a"), ev(5, 11, "a")]
    found = run(pattern(a_plus), rows)
    # 1..3 (4 is exactly 10 minutes later); the next attempt starts at 4: 4, 5.
    assert spans(found) == [(1, 3, 3), (4, 5, 2)]
    assert not any(m.last_full for m in found)


def test_ties_in_event_time_are_ordered_by_identity() -> None:
    same = at(3)
    in_order = [ev(2, same, "b"), ev(1, same, "a")]
    assert spans(run(pattern(A, B), in_order)) == [(1, 2, 2)]
    reversed_ids = [ev(1, same, "b"), ev(2, same, "a")]
    assert run(pattern(A, B), reversed_ids) == []


def test_null_identity_values_sort_last() -> None:
    same = at(3)
    rows = [ev(1, same, "b", rank=None), ev(2, same, "a", rank=7)]
    assert spans(run(pattern(A, B), rows, identity=("rank",))) == [(2, 1, 2)]
    rows = [ev(1, same, "b", rank=7), ev(2, same, "a", rank=None)]
    assert run(pattern(A, B), rows, identity=("rank",)) == []


def test_events_without_an_event_time_take_no_part() -> None:
    rows = [ev(1, 0, "a"), ev(2, None, "b"), ev(3, None, "a"), ev(4, 5, "b")]
    assert spans(run(pattern(A, B), rows)) == [(1, 4, 2)]
    assert run(pattern(A, B), [ev(1, 0, "a"), ev(2, None, "b")]) == []


def test_null_partition_values_form_their_own_partition() -> None:
    rows = [
        ev(1, 0, "a", key=None),
        ev(2, 1, "a", key="x"),
        ev(3, 2, "b", key=None),
        ev(4, 3, "b", key="y"),
    ]
    found = run(pattern(A, B), rows)
    assert [(m["key"], m["first_id"], m["last_id"]) for m in found] == [(None, 1, 3)]


# --------------------------------------------------------------------------------------------
# Steps: references, quantifiers, greed
# --------------------------------------------------------------------------------------------


def test_a_step_reads_an_earlier_step() -> None:
    # Issue 43's card used in two countries: US, US, FR gives {US(1) FR(3)}.
    first = Step("first_use")
    elsewhere = Step("elsewhere", "country <> first_use.country")
    rows = [
        ev(1, 0, "use", country="US"),
        ev(2, 1, "use", country="US"),
        ev(3, 2, "use", country="FR"),
    ]
    assert spans(run(pattern(first, elsewhere), rows)) == [(1, 3, 2)]
    # A NULL country is not different (unknown), so it is skipped.
    rows = [ev(1, 0, "use", country="US"), ev(2, 1, "use"), ev(3, 2, "use", country="FR")]
    assert spans(run(pattern(first, elsewhere), rows)) == [(1, 3, 2)]


def test_a_reference_reads_the_latest_event_of_a_looping_step() -> None:
    logins = Step("s", "kind = 'login'", times="1+")
    other = Step("t", "country <> s.country")
    rows = [
        ev(1, 0, "login", country="A"),
        ev(2, 1, "login", country="B"),
        ev(3, 2, "other", country="B"),  # B <> s.country (B, the latest login): skipped
        ev(4, 3, "other", country="A"),
    ]
    assert spans(run(pattern(logins, other), rows)) == [(1, 4, 3)]


def test_a_range_takes_at_most_its_maximum_then_moves_on() -> None:
    a_range = Step("a", "kind = 'a'", times="2..5")
    rows = [*(ev(i, i, "a") for i in range(1, 7)), ev(7, 7, "b")]
    measures = (*SPAN, PatternMeasure("as", "count", step="a"))
    found = run(pattern(a_range, B, measures=measures), rows)
    # a1..a5 fill the range; a6 is neither a nor (yet) b: skipped; b7 ends it.
    assert spans(found) == [(1, 7, 6)] and found[0]["as"] == 5
    assert found[0].last_full
    # Below the minimum, the next step cannot start.
    assert run(pattern(a_range, B), [ev(1, 0, "a"), ev(2, 1, "b"), ev(3, 2, "a")]) == []


def test_a_full_last_step_ends_the_attempt_at_once() -> None:
    a_range = Step("a", "kind = 'a'", times="2..3")
    rows = [ev(i, i, "a") for i in range(1, 8)]
    found = run(pattern(a_range), rows)
    assert spans(found) == [(1, 3, 3), (4, 6, 3)]
    assert all(m.last_full for m in found)
    fixed = run(pattern(Step("a", "kind = 'a'", times=2)), rows)
    assert spans(fixed) == [(1, 2, 2), (3, 4, 2), (5, 6, 2)]
    assert spans(run(pattern(Step("a", "kind = 'a'", times="2")), rows))[0] == (1, 2, 2)


def test_at_least_three_failures_then_a_success() -> None:
    failed = Step("failed", "kind = 'failed'", times="3+")
    ok = Step("ok", "kind = 'ok'")
    measures = (*SPAN, PatternMeasure("failures", "count", step="failed"))
    p = pattern(failed, ok, measures=measures)
    two = [ev(1, 0, "failed"), ev(2, 1, "failed"), ev(3, 2, "ok")]
    assert run(p, two) == []
    four = [*(ev(i, i, "failed") for i in range(1, 5)), ev(5, 5, "ok")]
    found = run(p, four)
    assert spans(found) == [(1, 5, 5)] and found[0]["failures"] == 4


def test_greed_keeps_an_event_in_the_looping_step_when_both_conditions_hold() -> None:
    small = Step("small", "amount > 0", times="1+")
    big = Step("big", "amount > 5")
    rows = [ev(1, 0, "x", amount=1), ev(2, 1, "x", amount=7), ev(3, 2, "x", amount=3)]
    assert run(pattern(small, big), rows) == []
    rows.append(ev(4, 3, "x", amount=0))  # not small: big may take it? no: 0 > 5 is false
    assert run(pattern(small, big), rows) == []


def test_skip_to_next_gives_overlapping_matches() -> None:
    rows = [ev(1, 0, "a"), ev(2, 1, "a"), ev(3, 2, "b"), ev(4, 3, "b")]
    assert spans(run(pattern(A, B), rows)) == [(1, 3, 2)]
    assert spans(run(pattern(A, B, after_match="skip_to_next"), rows)) == [(1, 3, 2), (2, 3, 2)]


def test_after_skip_past_last_the_search_resumes_after_the_last_event() -> None:
    # a1 b2 match; a3 is inside nothing; the attempt from a3 takes b4.
    rows = [ev(1, 0, "a"), ev(2, 1, "b"), ev(3, 2, "a"), ev(4, 3, "b"), ev(5, 4, "b")]
    assert spans(run(pattern(A, B), rows)) == [(1, 2, 2), (3, 4, 2)]


# --------------------------------------------------------------------------------------------
# Absence
# --------------------------------------------------------------------------------------------

CART = Step("cart", "kind = 'add_to_cart'")
NO_PURCHASE = Absent("kind = 'purchase'", "30 minutes")


def test_an_absence_event_exactly_absent_within_after_does_not_cancel() -> None:
    p = pattern(CART, within="30 minutes", absent=NO_PURCHASE)
    on_the_end = [ev(1, 0, "add_to_cart"), ev(2, 30, "purchase")]
    assert spans(run(p, on_the_end)) == [(1, 1, 1)]
    just_before = [ev(1, 0, "add_to_cart"), ev(2, at(30, -1), "purchase")]
    assert run(p, just_before) == []
    other = [ev(1, 0, "add_to_cart"), ev(2, 5, "view")]
    assert spans(run(p, other)) == [(1, 1, 1)]


def test_an_absence_event_at_the_same_time_counts_only_when_ordered_after() -> None:
    # "after its last event" is in the event order: equal times are ordered by identity.
    p = pattern(CART, within="30 minutes", absent=NO_PURCHASE)
    assert run(p, [ev(1, 0, "add_to_cart"), ev(2, 0, "purchase")]) == []
    assert spans(run(p, [ev(2, 0, "add_to_cart"), ev(1, 0, "purchase")])) == [(2, 2, 1)]


def test_a_cancelled_attempt_lets_the_next_event_start_one() -> None:
    p = pattern(CART, within="30 minutes", absent=NO_PURCHASE)
    rows = [ev(1, 0, "add_to_cart"), ev(2, 10, "add_to_cart"), ev(3, 20, "purchase")]
    assert run(p, rows) == []
    rows.append(ev(4, 25, "add_to_cart"))
    assert spans(run(p, rows)) == [(4, 4, 1)]


def test_the_absence_condition_reads_the_steps() -> None:
    # No refund of the same country within 5 minutes after a use then a use elsewhere.
    steps = (Step("first_use"), Step("elsewhere", "country <> first_use.country"))
    refund = Absent("kind = 'refund' AND country = first_use.country", "5 minutes")
    p = pattern(*steps, absent=refund)
    rows = [
        ev(1, 0, "use", country="US"),
        ev(2, 1, "use", country="FR"),
        ev(3, 2, "refund", country="FR"),
    ]
    assert spans(run(p, rows)) == [(1, 2, 2)]
    # A US refund cancels {1 2}; the attempt from the next event then matches {FR(2) US(4)}
    # (FR's refund came before its last event).
    rows.append(ev(4, 3, "refund", country="US"))
    assert spans(run(p, rows)) == [(2, 4, 2)]


FAILED_3 = Step("failed", "kind = 'failed'", times="3+")
NO_OK = Absent("kind = 'ok'", "5 minutes")


def test_a_looping_last_step_then_absent_starts_the_window_at_its_last_event() -> None:
    # Flink CEP's "failed".oneOrMore() (times(3).orMore()) then notFollowedBy("ok"): three or
    # more failures, and no success within 5 minutes after the last of them.
    p = pattern(FAILED_3, absent=NO_OK)
    rows = [ev(1, 0, "failed"), ev(2, 1, "failed"), ev(3, 2, "failed"), ev(4, 8, "ok")]
    assert spans(run(p, rows)) == [(1, 3, 3)]  # the window [2, 7) has no success
    # A fourth failure at 5 is taken (greedy, before 0 + within): the window moves to [5, 10)
    # and the success at 8 cancels; the attempts from 2 and 3 then have too few failures.
    assert run(p, [*rows, ev(5, 5, "failed")]) == []
    # A success at the window's end does not cancel; one before its end does.
    assert spans(run(p, [*rows[:3], ev(4, 7, "ok")])) == [(1, 3, 3)]
    assert run(p, [*rows[:3], ev(4, at(7, -1), "ok")]) == []


def test_a_looping_last_step_skips_an_absence_event_between_its_events() -> None:
    # Relaxed contiguity: the success at 3 is neither a failure nor after the last one, so it
    # is skipped like any other event; the window starts at the failure at 4.
    p = pattern(FAILED_3, absent=NO_OK)
    rows = [*(ev(i, i - 1, "failed") for i in (1, 2, 3)), ev(4, 3, "ok"), ev(5, 4, "failed")]
    found = run(p, rows)
    assert spans(found) == [(1, 5, 4)] and found[0]["match_end"] == at(4)


def test_a_looping_last_step_then_absent_is_final_once_both_windows_have_passed() -> None:
    p = pattern(FAILED_3, absent=NO_OK)
    (m,) = run(p, [ev(1, 0, "failed"), ev(2, 1, "failed"), ev(3, 2, "failed")])
    # Until 0 + within (10) another failure on time could join it and move its window.
    assert not is_final(m, p, micros(at(10)) - 1) and is_final(m, p, micros(at(10)))
    (m,) = run(p, [ev(1, 0, "failed"), ev(2, 1, "failed"), ev(3, 9, "failed")])
    assert not is_final(m, p, micros(at(14)) - 1) and is_final(m, p, micros(at(14)))


# --------------------------------------------------------------------------------------------
# Measures and identity
# --------------------------------------------------------------------------------------------


def test_measures_over_the_match_and_over_one_step() -> None:
    steps = (Step("a", "kind = 'a'", times="1+"), Step("b", "kind = 'b'", times="2"))
    measures = (
        PatternMeasure("n", "count"),
        PatternMeasure("amounts", "count", column="amount"),
        PatternMeasure("total", "sum", column="amount"),
        PatternMeasure("a_total", "sum", step="a", column="amount"),
        PatternMeasure("low", "min", column="amount"),
        PatternMeasure("high", "max", step="b", column="amount"),
        PatternMeasure("first_b", "first", step="b", column="id"),
        PatternMeasure("last_a", "last", step="a", column="amount"),
        PatternMeasure("price", "sum", column="price"),
        PatternMeasure("cost", "sum", column="cost"),
        PatternMeasure("no_cost", "sum", step="a", column="cost"),
        PatternMeasure("no_price", "min", step="b", column="price"),
        PatternMeasure("country", "first", column="country"),
    )
    rows = [
        ev(1, 0, "a", amount=3, price=0.5, country="US"),
        ev(2, 1, "a", amount=None, price=0.25),
        ev(3, 2, "z", amount=100),
        ev(4, 3, "b", amount=7, cost=Decimal("1.10")),
        ev(5, 4, "b", amount=-2, cost=Decimal("2.05")),
    ]
    found = run(pattern(*steps, measures=measures), rows)
    assert len(found) == 1
    m = found[0]
    assert dict(m) == {
        "key": "k",
        "match_id": match_id(("k",), (1,)),
        "match_start": at(0),
        "match_end": at(4),
        "n": 4,
        "amounts": 3,
        "total": 8,
        "a_total": 3,
        "low": -2,
        "high": 7,
        "first_b": 4,
        "last_a": None,
        "price": 0.75,
        "cost": Decimal("3.15"),
        "no_cost": None,
        "no_price": None,
        "country": "US",
    }
    assert type(m["total"]) is int and type(m["price"]) is float
    assert isinstance(m["cost"], Decimal)


def test_the_match_id_stays_while_later_events_extend_the_match() -> None:
    a_plus = Step("a", "kind = 'a'", times="1+")
    rows = [ev(10, 0, "a"), ev(11, 1, "a")]
    before = run(pattern(a_plus), rows)
    after = run(pattern(a_plus), [*rows, ev(12, 2, "a")])
    assert before[0]["match_id"] == after[0]["match_id"] == match_id(("k",), (10,))
    assert (before[0]["match_end"], after[0]["match_end"]) == (at(1), at(2))


def test_partitions_by_several_columns_and_by_none() -> None:
    p = Pattern(
        name="p",
        source="events",
        partition_by=("key", "country"),
        event_time="ts",
        within="10 minutes",
        steps=(A, B),
        measures=SPAN,
    )
    rows = [ev(1, 0, "a", country="US"), ev(2, 1, "b", country="FR"), ev(3, 2, "b", country="US")]
    found = run(p, rows)
    assert [(m["key"], m["country"], m["match_id"]) for m in found] == [
        ("k", "US", match_id(("k", "US"), (1,)))
    ]
    whole = Pattern(
        name="p", source="events", partition_by=(), event_time="ts", within="10 minutes",
        steps=(A, B), measures=SPAN,
    )  # fmt: skip
    assert [m["match_id"] for m in run(whole, rows)] == [match_id((), (1,))]


def test_times_bounds() -> None:
    assert times_bounds(1) == (1, 1) and times_bounds("3") == (3, 3)
    assert times_bounds("2..5") == (2, 5) and times_bounds("3+")[0] == 3


# --------------------------------------------------------------------------------------------
# Finality at its edges
# --------------------------------------------------------------------------------------------


def test_an_absence_match_is_final_once_its_window_has_passed() -> None:
    p = pattern(CART, within="30 minutes", absent=NO_PURCHASE)
    (m,) = run(p, [ev(1, 5, "add_to_cart")])
    window_end = micros(at(35))
    assert is_final(m, p, window_end) and not is_final(m, p, window_end - 1)
    assert not is_final(m, p, None)


def test_a_match_without_absent_is_final_once_within_after_its_start_has_passed() -> None:
    # Full last step or not: an earlier attempt could still take an on-time event until then.
    for last in (B, Step("b", "kind = 'b'", times="1+"), Step("b", "kind = 'b'", times="1..2")):
        p = pattern(A, last)
        (m,) = run(p, [ev(1, 2, "a"), ev(2, 3, "b")])
        closed = micros(at(12))
        assert is_final(m, p, closed) and not is_final(m, p, closed - 1)


def test_no_event_on_time_removes_a_final_absence_match() -> None:
    """An absence match is final only once an earlier attempt still open (its start +
    ``within`` not passed) can no longer take on-time events, match, and skip past it."""
    b_twice = Step("b", "kind = 'b' AND country = a.country", times=2)
    p = pattern(A, b_twice, absent=Absent("kind = 'x'", "1 minute"))
    rows = [
        ev(1, 0, "a", country="US"),
        ev(2, 1, "a", country="FR"),
        ev(3, 2, "b", country="FR"),
        ev(4, at(2.5), "b", country="FR"),
    ]
    (m,) = run(p, rows)
    assert (m["first_id"], m["last_id"]) == (2, 4)
    watermark = micros(at(4))  # its absence window ended at 3.5 minutes; a1's is open
    later = [*rows, ev(5, 5, "b", country="US"), ev(6, 6, "b", country="US")]
    assert all(micros(r["ts"]) >= watermark for r in later[4:])  # on time, not late
    # a1's attempt (still open until 10 minutes) takes them and skips past the match.
    assert spans(run(p, later)) == [(1, 6, 3)]
    assert not is_final(m, p, watermark)
    assert is_final(m, p, micros(at(11))) and not is_final(m, p, micros(at(11)) - 1)
