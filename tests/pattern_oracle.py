"""An independent plain-Python evaluation of a pattern declaration over a silver snapshot.

Written from the definition in docs/patterns.md ("What a match is", "Final, late, and when a
match shows"), not from the engine: rows are dicts (event times naive UTC ``datetime``),
conditions are parsed here and evaluated by :func:`lakehouse_core.conditions.python.holds`,
and each attempt is an explicit walk over the partition's events. The property tests compare
``gold.<name>`` with :func:`matches` over the current silver rows and its ``_final`` flags
with :func:`is_final`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from lakehouse_core.conditions import Condition, parse_condition
from lakehouse_core.conditions.python import holds
from lakehouse_core.durations import duration_micros

Row = dict[str, Any]

#: A step's ``times`` without an upper bound (``"3+"``).
UNBOUNDED = 1 << 62
_EPOCH = datetime(1970, 1, 1)


class Match(dict[str, Any]):
    """One match: a dict of the gold row's columns (partition columns, ``match_id``,
    ``match_start``, ``match_end``, the measures) that also knows whether its last step is
    full (took its maximum), which :func:`is_final` needs and gold does not store. Equality is
    the dict's."""

    last_full: bool = False


@dataclass(frozen=True)
class _Step:
    name: str
    condition: Condition | None
    least: int
    most: int
    #: Its events must each be the partition's next event after the match's previous one.
    adjacent: bool


@dataclass(frozen=True)
class _Event:
    time: datetime
    row: Row


def times_bounds(times: Any) -> tuple[int, int]:
    """The (minimum, maximum) events of a step's ``times``: ``1``, ``3``, ``"3"``, ``"3+"``
    (maximum :data:`UNBOUNDED`), ``"2..5"``, ``"?"`` (0 or 1) or ``"*"`` (0 or more)."""
    if isinstance(times, int):
        return times, times
    text = str(times).strip()
    if text in ("?", "*"):  # MATCH_RECOGNIZE's optional quantifiers
        return 0, 1 if text == "?" else UNBOUNDED
    if text.endswith("+"):
        return int(text[:-1]), UNBOUNDED
    if ".." in text:
        low, _, high = text.partition("..")
        return int(low), int(high)
    return int(text), int(text)


def _steps(pattern: Any) -> list[_Step]:
    out: list[_Step] = []
    default = getattr(pattern, "contiguity", "relaxed")
    for step in pattern.steps:
        earlier = frozenset(s.name for s in out)
        text = getattr(step, "condition", None)
        condition = None if text is None else parse_condition(text, "the oracle", earlier)
        least, most = times_bounds(getattr(step, "times", 1))
        contiguity = getattr(step, "contiguity", None) or default
        out.append(_Step(step.name, condition, least, most, contiguity == "strict"))
    return out


def _typed(types: Mapping[str, str] | None, steps: Sequence[_Step]) -> dict[str, str] | None:
    """The column types with each ``step.column`` typed as its column."""
    if types is None:
        return None
    out = dict(types)
    for step in steps:
        out.update({f"{step.name}.{column}": kind for column, kind in types.items()})
    return out


def _null_last(value: Any) -> tuple[bool, Any]:
    return (value is None, 0 if value is None else value)


def _in_scope(row: Row, taken: Sequence[tuple[str, Row | None]]) -> Row:
    """``row`` with ``step.column`` entries for the latest event taken into each step (NULLs
    for a step that took none)."""
    scoped = dict(row)
    for name, latest in taken:
        source = dict.fromkeys(row) if latest is None else latest
        scoped.update({f"{name}.{column}": value for column, value in source.items()})
    return scoped


def _latest(
    events: Sequence[_Event], taken: Sequence[list[int]], steps: Sequence[_Step]
) -> list[tuple[str, Row | None]]:
    """Each step's latest event so far (None: none yet, or passed over)."""
    out: list[tuple[str, Row | None]] = []
    for k, step in enumerate(steps):
        took = taken[k] if k < len(taken) else []
        out.append((step.name, events[took[-1]].row if took else None))
    return out


def _true(condition: Condition | None, row: Row, types: Mapping[str, str] | None) -> bool:
    return condition is None or holds(condition, row, types) is True


def _attempt(
    events: Sequence[_Event],
    begin: int,
    steps: Sequence[_Step],
    within: timedelta,
    types: Mapping[str, str] | None,
) -> list[list[int]] | None:
    """The event indexes each step took in the attempt from ``events[begin]`` (rules 1-4 of
    the definition; a strict step takes only the event right after the match's latest; an
    event the current step does not take goes to the first later step that takes it, passing
    over optional steps only), or None when it did not start or did not reach every
    minimum."""
    taken: list[list[int]] = []
    opening = _in_scope(events[begin].row, _latest(events, taken, steps))
    for k, step in enumerate(steps):
        if _true(step.condition, opening, types):
            taken = [[] for _ in range(k)] + [[begin]]
            break
        if step.least > 0:
            return None
    if not taken:
        return None
    limit = events[begin].time + within
    latest_index = begin

    def full() -> bool:
        return len(taken) == len(steps) and len(taken[-1]) >= steps[-1].most

    index = begin + 1
    while not full() and index < len(events):
        event = events[index]
        if event.time >= limit:
            break
        current = len(taken) - 1
        scope = _in_scope(event.row, _latest(events, taken, steps))
        next_to_latest = index == latest_index + 1
        if (
            len(taken[current]) < steps[current].most
            and (next_to_latest or not steps[current].adjacent)
            and _true(steps[current].condition, scope, types)
        ):
            taken[current].append(index)
            latest_index = index
        elif len(taken[current]) >= steps[current].least:
            for k in range(current + 1, len(steps)):
                if (next_to_latest or not steps[k].adjacent) and _true(
                    steps[k].condition, scope, types
                ):
                    taken.extend([] for _ in range(current + 1, k))
                    taken.append([index])
                    latest_index = index
                    break
                if steps[k].least > 0:
                    break
        index += 1
    current = len(taken) - 1
    if len(taken[current]) < steps[current].least:
        return None
    if any(step.least > 0 for step in steps[current + 1 :]):
        return None
    return taken + [[] for _ in range(current + 1, len(steps))]


def _absence_holds(
    events: Sequence[_Event],
    last: int,
    taken: list[list[int]],
    steps: Sequence[_Step],
    absent: Any,
    types: Mapping[str, str] | None,
) -> bool:
    """True when no event after ``events[last]`` and less than ``absent.within`` after it
    satisfies the absence condition (which may read every step's latest event)."""
    condition = parse_condition(absent.condition, "the oracle", frozenset(s.name for s in steps))
    end = events[last].time + timedelta(microseconds=duration_micros(absent.within))
    refs = _latest(events, taken, steps)
    for event in events[last + 1 :]:
        if event.time >= end:
            break
        if holds(condition, _in_scope(event.row, refs), types) is True:
            return False
    return True


def _measure(measure: Any, chosen: Sequence[Row]) -> Any:
    fn: str = measure.fn
    column: str | None = getattr(measure, "column", None)
    if fn == "count":
        return len(chosen) if column is None else sum(r[column] is not None for r in chosen)
    if fn in ("first", "last"):
        assert column is not None, f"measure {measure.name!r} needs a column"
        if not chosen:
            return None
        return (chosen[0] if fn == "first" else chosen[-1])[column]
    assert column is not None, f"measure {measure.name!r} needs a column"
    values = [r[column] for r in chosen if r[column] is not None]
    if not values:
        return None
    if fn == "min":
        return min(values)
    if fn == "max":
        return max(values)
    if fn == "sum":
        if isinstance(values[0], Decimal):
            return sum(values, Decimal(0))
        if isinstance(values[0], float):
            return float(sum(values))
        return int(sum(values))
    raise ValueError(f"unknown measure function {fn!r}")


def matches(
    rows: Iterable[Row],
    pattern: Any,
    identity_columns: Sequence[str],
    types: Mapping[str, str] | None = None,
) -> list[Match]:
    """The rows of ``gold.<pattern.name>`` over the silver ``rows``: per partition (NULL a
    value of its own), the events with an event time in event-time order, ties by the values of
    ``identity_columns`` (NULLs last), searched from each event in turn. ``types``: the Spark
    type of each source column (see :func:`lakehouse_core.conditions.python.holds`)."""
    from lakehouse_core.patterns import match_id

    steps = _steps(pattern)
    typed = _typed(types, steps)
    within = timedelta(microseconds=duration_micros(pattern.within))
    absent = getattr(pattern, "absent", None)
    skip_to_next = getattr(pattern, "after_match", "skip_past_last") == "skip_to_next"
    time = pattern.event_time
    partitions: dict[tuple[Any, ...], list[_Event]] = defaultdict(list)
    for row in rows:
        if row[time] is not None:
            key = tuple(row[c] for c in pattern.partition_by)
            partitions[key].append(_Event(row[time], dict(row)))
    out: list[Match] = []
    for key, unordered in partitions.items():
        events = sorted(
            unordered,
            key=lambda e: (e.time, *(_null_last(e.row[c]) for c in identity_columns)),
        )
        begin = 0
        while begin < len(events):
            taken = _attempt(events, begin, steps, within, typed)
            last = -1 if taken is None else max(i for t in taken for i in t)
            if (
                taken is not None
                and absent is not None
                and not _absence_holds(events, last, taken, steps, absent, typed)
            ):
                taken = None
            if taken is None:
                begin += 1
                continue
            everything = sorted(i for t in taken for i in t)
            by_step = {
                s.name: [events[i].row for i in t] for s, t in zip(steps, taken, strict=True)
            }
            match = Match(zip(pattern.partition_by, key, strict=True))
            first = events[everything[0]].row
            match["match_id"] = match_id(key, tuple(first[c] for c in identity_columns))
            match["match_start"] = events[everything[0]].time
            match["match_end"] = events[everything[-1]].time
            for measure in pattern.measures:
                step = getattr(measure, "step", None)
                chosen = [events[i].row for i in everything] if step is None else by_step[step]
                match[measure.name] = _measure(measure, chosen)
            match.last_full = len(taken[-1]) >= steps[-1].most
            out.append(match)
            begin = begin + 1 if skip_to_next else last + 1
    return out


def micros(moment: datetime) -> int:
    """Microseconds since the epoch of a naive UTC time."""
    return (moment - _EPOCH) // timedelta(microseconds=1)


def is_final(match: Match, pattern: Any, watermark_micros: int | None) -> bool:
    """Whether ``match`` is final under the watermark (µs since the epoch; None: no event
    seen yet): once ``within`` after its start has passed, and with ``absent`` also its
    absence window (docs/patterns.md)."""
    if watermark_micros is None:
        return False
    start_closed = micros(match["match_start"]) + duration_micros(pattern.within)
    absent = getattr(pattern, "absent", None)
    if absent is not None:
        window_closed = micros(match["match_end"]) + duration_micros(absent.within)
        return max(start_closed, window_closed) <= watermark_micros
    return start_closed <= watermark_micros
