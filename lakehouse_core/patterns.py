"""Declared patterns across events (``[[patterns]]``, docs/patterns.md): the settings, their
checks, the output columns and the match id. The matching itself is :mod:`gold.patterns`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Literal, get_args

from lakehouse_core.conditions import (
    Condition,
    UnknownQualifier,
    condition_columns,
    parse_condition,
)
from lakehouse_core.durations import duration_micros, require_duration
from lakehouse_core.errors import ConfigError
from lakehouse_core.gold_tables import settings_of
from lakehouse_core.identifiers import require_identifier

AfterMatch = Literal["skip_past_last", "skip_to_next"]
AFTER_MATCH: tuple[AfterMatch, ...] = get_args(AfterMatch)
Contiguity = Literal["relaxed", "strict"]
CONTIGUITY: tuple[Contiguity, ...] = get_args(Contiguity)
PatternFn = Literal["first", "last", "count", "min", "max", "sum"]
PATTERN_FNS: tuple[PatternFn, ...] = get_args(PatternFn)

MATCH_ID = "match_id"
MATCH_START = "match_start"
MATCH_END = "match_end"
#: Columns every pattern table has besides its partition columns and measures.
MATCH_COLUMNS = (MATCH_ID, MATCH_START, MATCH_END)
#: A step's condition when it names none: every event.
EVERY_EVENT = "TRUE"

_TIMES = re.compile(r"(\d+)(?:(\+)|\.\.(\d+))?")
#: MATCH_RECOGNIZE's optional quantifiers: their (minimum, maximum).
_OPTIONAL: dict[str, tuple[int, int | None]] = {"?": (0, 1), "*": (0, None)}


def times_range(times: object, where: str) -> tuple[int, int | None]:
    """The (minimum, maximum or None for no maximum) of a step's ``times``: ``1``, ``3``,
    ``"3"``, ``"3+"``, ``"2..5"``, or optional: ``"?"`` (``"0..1"``), ``"*"`` (``"0+"``),
    ``"0..5"``.

    Raises:
        ConfigError: anything else, or a maximum below 1 or below the minimum.
    """
    text = str(times) if isinstance(times, int) and not isinstance(times, bool) else times
    if isinstance(text, str) and text in _OPTIONAL:
        return _OPTIONAL[text]
    found = _TIMES.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ConfigError(
            f"Invalid times {times!r} for {where}: write a count (1, 3), at least a count "
            '("3+"), a range ("2..5") or an optional step ("?", "*", "0..2").'
        )
    low = int(found.group(1))
    high = None if found.group(2) else int(found.group(3) or low)
    if high is not None and high < max(low, 1):
        raise ConfigError(
            f"Invalid times {times!r} for {where}: the maximum must be at least 1 and at least "
            "the minimum."
        )
    return low, high


@dataclass(frozen=True)
class Step:
    """One step of a pattern: ``times`` events of the match satisfying ``condition`` (default:
    every event), which may read an earlier step's columns as ``step.column``. ``contiguity``
    (None: the pattern's): ``relaxed``, other events may come before each of the step's
    events; ``strict``, each directly follows the match's previous event."""

    name: str
    condition: str = EVERY_EVENT
    times: int | str = 1
    contiguity: Contiguity | None = None
    parsed: Condition | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        require_identifier(self.name, "step name")
        times_range(self.times, f"step {self.name!r}")
        if self.contiguity is not None:
            _require_contiguity(self.contiguity, f"step {self.name!r}")

    @property
    def least(self) -> int:
        """The fewest events the step takes."""
        return times_range(self.times, self.name)[0]

    @property
    def most(self) -> int | None:
        """The most events the step takes (None: no limit)."""
        return times_range(self.times, self.name)[1]


@dataclass(frozen=True)
class Absent:
    """No event satisfying ``condition`` may come less than ``within`` after the match's last
    event (its last step's, however many that step took; both checked by the pattern that has
    it)."""

    condition: str
    within: str
    parsed: Condition | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def within_micros(self) -> int:
        """The absence window in microseconds."""
        return duration_micros(self.within)


@dataclass(frozen=True)
class PatternMeasure:
    """``name`` = ``fn`` of ``column`` over the events of ``step`` in a match (every event of
    the match when ``step`` is None); ``count`` without a column counts events."""

    name: str
    fn: PatternFn
    column: str | None = None
    step: str | None = None

    def __post_init__(self) -> None:
        require_identifier(self.name, "measure name")
        if self.fn not in PATTERN_FNS:
            raise ConfigError(
                f"Unknown function {self.fn!r} for pattern measure {self.name!r}: use one of "
                f"{', '.join(PATTERN_FNS)}."
            )
        if self.column is None and self.fn != "count":
            raise ConfigError(
                f'Pattern measure {self.name!r} ({self.fn}) needs a column: add column = "...".'
            )
        if self.column is not None:
            require_identifier(self.column, f"column of pattern measure {self.name!r}")
        if self.step is not None:
            require_identifier(self.step, f"step of pattern measure {self.name!r}")


@dataclass(frozen=True)
class Pattern:
    """A declared pattern (``gold.<name>``): per ``partition_by`` values of the ``source``
    silver table's rows, in ``event_time`` order, the matches of ``steps`` spanning less than
    ``within`` (and, with ``absent``, followed by no absence event); see docs/patterns.md."""

    name: str
    source: str
    event_time: str
    steps: tuple[Step, ...]
    within: str
    partition_by: tuple[str, ...] = ()
    absent: Absent | None = None
    after_match: AfterMatch = "skip_past_last"
    measures: tuple[PatternMeasure, ...] = ()
    watermark_delay: str = "10 minutes"
    alert: bool = False
    contiguity: Contiguity = "relaxed"

    def __post_init__(self) -> None:
        require_identifier(self.name, "pattern name")
        where = f"pattern {self.name!r}"
        require_identifier(self.source, f"source of {where}")
        require_identifier(self.event_time, f"event_time of {where}")
        object.__setattr__(self, "partition_by", tuple(self.partition_by))
        object.__setattr__(self, "steps", tuple(self.steps))
        object.__setattr__(self, "measures", tuple(self.measures))
        for column in self.partition_by:
            require_identifier(column, f"partition_by column of {where}")
        owner = f"Pattern {self.name!r}"
        require_duration(self.within, "within", owner=owner)
        require_duration(self.watermark_delay, "watermark_delay", owner=owner)
        if self.absent is not None:
            require_duration(self.absent.within, "absent.within", owner=owner)
        if self.after_match not in AFTER_MATCH:
            raise ConfigError(
                f"Invalid after_match {self.after_match!r} for {where}: use "
                f"{' or '.join(AFTER_MATCH)}."
            )
        _require_contiguity(self.contiguity, where)
        if not isinstance(self.alert, bool):
            raise ConfigError(f"alert of {where} must be true or false, not {self.alert!r}.")
        if not self.steps:
            raise ConfigError(
                f"{where.capitalize()} has no steps: add at least one, e.g. "
                'steps = [{ name = "first", condition = "..." }].'
            )
        if all(step.least == 0 for step in self.steps):
            raise ConfigError(
                f"Every step of {where} is optional, so a match could have no event: make one "
                "step required (times 1 or more)."
            )
        self._check_steps(where)
        self._check_measures(where)

    def _check_steps(self, where: str) -> None:
        names = [step.name for step in self.steps]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ConfigError(
                f"Step names of {where} must be unique; repeated: {', '.join(repeated)}."
            )
        for index, step in enumerate(self.steps):
            try:
                condition = parse_condition(
                    step.condition, f"step {step.name!r} of {where}", frozenset(names)
                )
            except UnknownQualifier as unknown:
                raise self._undeclared(f"step {step.name!r}", unknown, " before it") from None
            _require_earlier(condition, names[:index], f"step {step.name!r} of {where}")
            object.__setattr__(step, "parsed", condition)
        if self.absent is not None:
            try:
                condition = parse_condition(
                    self.absent.condition, f"absent of {where}", frozenset(names)
                )
            except UnknownQualifier as unknown:
                raise self._undeclared("absent", unknown) from None
            object.__setattr__(self.absent, "parsed", condition)

    def _undeclared(self, part: str, unknown: UnknownQualifier, before: str = "") -> ConfigError:
        """The error of a condition of ``part`` (``step 'hot'``, ``absent``) that reads a step
        the pattern does not declare."""
        return ConfigError(
            f"Pattern {self.name!r} {part}: {unknown.column!r} reads step {unknown.qualifier!r}, "
            f"which the pattern does not declare{before}; its steps are "
            f"{', '.join(step.name for step in self.steps)}."
        )

    def _check_measures(self, where: str) -> None:
        steps = {step.name for step in self.steps}
        outputs = [*self.partition_by, *MATCH_COLUMNS, *(m.name for m in self.measures)]
        repeated = sorted({n for n in outputs if outputs.count(n) > 1})
        if repeated:
            raise ConfigError(
                f"{where.capitalize()} would have the column(s) {', '.join(repeated)} twice "
                f"(partition_by, {', '.join(MATCH_COLUMNS)} and measure names share one "
                "table): rename the measure."
            )
        for measure in self.measures:
            if measure.step is not None and measure.step not in steps:
                raise ConfigError(
                    f"Measure {measure.name!r} of {where} reads step {measure.step!r}, which "
                    f"it does not have. Steps: {', '.join(s.name for s in self.steps)}."
                )

    @property
    def strict(self) -> tuple[bool, ...]:
        """Per step, whether its events must directly follow the match's previous event."""
        return tuple((s.contiguity or self.contiguity) == "strict" for s in self.steps)

    @property
    def within_micros(self) -> int:
        """The longest span of a match in microseconds (exclusive)."""
        return duration_micros(self.within)

    @property
    def delay_micros(self) -> int:
        """The watermark delay in microseconds."""
        return duration_micros(self.watermark_delay)

    @property
    def reach_micros(self) -> int:
        """How far before a changed event a match it can change may start."""
        return self.within_micros + (0 if self.absent is None else self.absent.within_micros)

    @property
    def columns(self) -> tuple[str, ...]:
        """The table's columns, without the finality columns (:mod:`gold.finality`)."""
        return (*self.partition_by, *MATCH_COLUMNS, *(m.name for m in self.measures))

    @property
    def reads(self) -> tuple[str, ...]:
        """The source columns the pattern reads (references to steps left out)."""
        read = [*self.partition_by, self.event_time]
        conditions = [s.parsed for s in self.steps]
        if self.absent is not None:
            conditions.append(self.absent.parsed)
        for condition in conditions:
            assert condition is not None
            read += [c for c in condition_columns(condition) if "." not in c]
        read += [m.column for m in self.measures if m.column is not None]
        return tuple(dict.fromkeys(read))

    def check_columns(self, available: Sequence[str]) -> None:
        """Raise ConfigError naming a column the pattern reads that ``available`` lacks."""
        for column in self.reads:
            if column not in available:
                raise ConfigError(
                    f"Pattern {self.name!r} reads column {column!r}, which silver.{self.source} "
                    f"does not have. Columns: {', '.join(sorted(available))}."
                )


def _require_contiguity(contiguity: object, where: str) -> None:
    """Raise ConfigError unless ``contiguity`` is one of :data:`CONTIGUITY`."""
    if contiguity not in CONTIGUITY:
        raise ConfigError(
            f"Invalid contiguity {contiguity!r} for {where}: use {' or '.join(CONTIGUITY)}."
        )


def _require_earlier(condition: Condition, earlier: Sequence[str], where: str) -> None:
    """Raise ConfigError if ``condition`` reads a step that is not among ``earlier``."""
    for column in condition_columns(condition):
        step, dot, _ = column.partition(".")
        if dot and step not in earlier:
            raise ConfigError(
                f"The condition of {where} reads {column!r}, but step {step!r} does not come "
                f"before it: a condition may read only earlier steps "
                f"({', '.join(earlier) or 'none here'})."
            )


def match_id(partition: Sequence[Any], identity: Sequence[Any]) -> str:
    """The id of the match whose partition values are ``partition`` and whose first event has
    the identity values ``identity``: 32 hex digits of the SHA-256 of their canonical JSON."""
    text = json.dumps([[_canonical(v) for v in partition], [_canonical(v) for v in identity]])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _canonical(value: Any) -> Any:
    """A value as JSON: numbers and text as they are (a Decimal as its digits), instants as
    epoch microseconds, dates as ISO text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return _epoch_micros(value)
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def _epoch_micros(moment: datetime) -> int:
    """Microseconds since the epoch of a naive-UTC or aware ``moment``."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    delta = aware - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def pattern_to_mapping(pattern: Pattern) -> dict[str, Any]:
    """``pattern`` as its ``[[patterns]]`` entry (what :func:`lakehouse_core.loader.pattern_from`
    reads back to an equal declaration): settings left at their defaults are left out."""
    return settings_of(pattern)


def check_patterns(patterns: Sequence[Pattern], taken: Mapping[str, str]) -> None:
    """Raise ConfigError if two patterns share a name or one takes a gold name ``taken``
    (each with what holds it)."""
    names = [p.name for p in patterns]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"Pattern names must be unique; repeated: {', '.join(repeated)}.")
    for pattern in patterns:
        if pattern.name in taken:
            raise ConfigError(
                f"Pattern {pattern.name!r} would write gold.{pattern.name}, which is "
                f"{taken[pattern.name]}: pick another name."
            )
