"""The matcher of declared patterns (docs/patterns.md, "What a match is"): pure Python over
one partition's events, as a job's grouped Arrow function runs it on the executors.

Events are dicts of plain values (instants as epoch microseconds, dates as days since the
epoch), conditions the checked trees of :mod:`lakehouse_core.patterns`, evaluated by
:func:`lakehouse_core.conditions.python.holds`, the plain-Python evaluator that agrees with
Spark's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from lakehouse_core.conditions import Condition, condition_columns
from lakehouse_core.conditions.python import holds
from lakehouse_core.patterns import Pattern, PatternMeasure, match_id

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Match:
    """One match: its events (indexes into the partition's ordered events), each with the
    index of the step that took it."""

    taken: tuple[tuple[int, int], ...]

    @property
    def first(self) -> int:
        return self.taken[0][1]

    @property
    def last(self) -> int:
        return self.taken[-1][1]


def identity_key(values: Sequence[Any]) -> tuple[tuple[int, Any], ...]:
    """A sort key for identity values: in value order, NULLs last."""
    return tuple((1, 0) if v is None else (0, v) for v in values)


def ordered(events: Sequence[Row], event_time: str, identity: Sequence[str]) -> list[Row]:
    """``events`` with an event time, in event-time order, ties in identity order."""
    timed = [e for e in events if e[event_time] is not None]
    return sorted(timed, key=lambda e: (e[event_time], identity_key([e[c] for c in identity])))


class Matcher:
    """The matches of one pattern over a partition's ordered events. ``types``: the Spark type
    name of each source column (a step reference ``step.column`` has its column's)."""

    def __init__(self, pattern: Pattern, types: Mapping[str, str]) -> None:
        self.pattern = pattern
        names = [step.name for step in pattern.steps]
        self.types = dict(types) | {f"{s}.{c}": t for s in names for c, t in types.items()}
        conditions: list[Condition | None] = [step.parsed for step in pattern.steps]
        self.conditions = conditions
        self.strict = pattern.strict
        self.absent = None if pattern.absent is None else pattern.absent.parsed
        self.references = {
            id(c): [n.partition(".")[::2] for n in condition_columns(c) if "." in n]
            for c in [*conditions, self.absent]
            if c is not None
        }

    def _holds(self, condition: Condition | None, event: Row, latest: Mapping[str, Row]) -> bool:
        """Whether ``event`` satisfies ``condition``, reading the steps' ``latest`` events."""
        assert condition is not None
        references = self.references[id(condition)]
        row = event
        if references:
            row = dict(event)
            for step, column in references:
                taken = latest.get(step)
                row[f"{step}.{column}"] = None if taken is None else taken[column]
        return holds(condition, row, self.types) is True

    def attempt(self, events: Sequence[Row], start: int) -> Match | None:
        """The match of the attempt that starts at ``events[start]``, None if it does not
        match (docs/patterns.md, rules 1 to 4; a strict step takes no event after a skipped
        one; an optional step may be passed over)."""
        pattern, steps = self.pattern, self.pattern.steps
        event_time = pattern.event_time
        entered = self._next(-1, events[start], {}, skipped=False)
        if entered is None:
            return None
        step = entered
        taken = [(step, start)]
        latest = {steps[step].name: events[start]}
        count = 1
        limit = events[start][event_time] + pattern.within_micros
        last = len(steps) - 1

        def full() -> bool:
            most = steps[step].most
            return most is not None and count >= most

        index, skipped = start, False
        while not (step == last and full()):
            index += 1
            if index >= len(events) or events[index][event_time] >= limit:
                break
            event = events[index]
            here = not full() and not (skipped and self.strict[step])
            ahead = None if count < steps[step].least else self._next(step, event, latest, skipped)
            if here and self._holds(self.conditions[step], event, latest):
                count += 1
            elif ahead is not None:
                step, count = ahead, 1
            else:
                skipped = True
                later = self._reachable(step) if count >= steps[step].least else []
                if (full() or self.strict[step]) and all(self.strict[j] for j in later):
                    break  # no step can take an event any more
                continue
            skipped = False
            taken.append((step, index))
            latest[steps[step].name] = event
        if count < steps[step].least or any(s.least for s in steps[step + 1 :]):
            return None
        match = Match(tuple(taken))
        if self.absent is not None and self._cancelled(events, match, latest):
            return None
        return match

    def _reachable(self, step: int) -> list[int]:
        """The steps that may take the event after ``step`` has its minimum: the next one,
        and past each optional step the one after it."""
        out = []
        for later in range(step + 1, len(self.pattern.steps)):
            out.append(later)
            if self.pattern.steps[later].least:
                break
        return out

    def _next(self, step: int, event: Row, latest: Mapping[str, Row], skipped: bool) -> int | None:
        """The first step after ``step`` (-1: before the first) that may take ``event``: one
        of :meth:`_reachable` whose condition it satisfies (a strict one only if no event was
        skipped), or None."""
        for later in self._reachable(step):
            if skipped and self.strict[later]:
                continue
            if self._holds(self.conditions[later], event, latest):
                return later
        return None

    def _cancelled(self, events: Sequence[Row], match: Match, latest: Mapping[str, Row]) -> bool:
        """Whether an event after ``match`` and inside its absence window satisfies the
        absence condition."""
        assert self.pattern.absent is not None
        event_time = self.pattern.event_time
        end = events[match.last][event_time] + self.pattern.absent.within_micros
        for event in events[match.last + 1 :]:
            if event[event_time] >= end:
                return False
            if self._holds(self.absent, event, latest):
                return True
        return False

    def matches(self, events: Sequence[Row], first: int = 0) -> list[Match]:
        """The matches among ``events`` (ordered) of attempts from ``events[first]`` on."""
        found = []
        index = first
        while index < len(events):
            match = self.attempt(events, index)
            if match is None:
                index += 1
                continue
            found.append(match)
            index = match.last + 1 if self.pattern.after_match == "skip_past_last" else index + 1
        return found


def measure_value(
    measure: PatternMeasure, events: Sequence[Row], match: Match, steps: Sequence[str]
) -> Any:
    """The value of ``measure`` over ``match``'s events (``steps``: the pattern's step names)."""
    chosen = [
        events[index]
        for step, index in match.taken
        if measure.step is None or steps[step] == measure.step
    ]
    if measure.fn == "count" and measure.column is None:
        return len(chosen)
    assert measure.column is not None
    values = [event[measure.column] for event in chosen]
    if measure.fn == "first":
        return values[0] if values else None
    if measure.fn == "last":
        return values[-1] if values else None
    present = [v for v in values if v is not None]
    if measure.fn == "count":
        return len(present)
    if not present:
        return None
    if measure.fn == "min":
        return min(present)
    if measure.fn == "max":
        return max(present)
    return sum(present, Decimal(0) if isinstance(present[0], Decimal) else 0)


def match_row(
    pattern: Pattern, events: Sequence[Row], match: Match, identity: Sequence[str]
) -> dict[str, Any]:
    """The gold row of ``match``: partition values, match id, start, end and measures."""
    first, last = events[match.first], events[match.last]
    partition = [first[c] for c in pattern.partition_by]
    steps = [step.name for step in pattern.steps]
    return {
        **dict(zip(pattern.partition_by, partition, strict=True)),
        "match_id": match_id(partition, [first[c] for c in identity]),
        "match_start": first[pattern.event_time],
        "match_end": last[pattern.event_time],
        **{m.name: measure_value(m, events, match, steps) for m in pattern.measures},
    }
