"""The one duration grammar of the project: gold windows, watermark delays, pattern bounds,
``validate_every`` and processing-time triggers all read a duration with :func:`parse_duration`.

A duration is a whole number and a unit, with one space or none between, in any letter case,
the unit spelled out (singular or plural), abbreviated (``min``/``mins``, ``hr``/``hrs``,
``sec``/``secs``, ``msec``/``msecs``) or short (ms, s, m, h, d): ``"1 hour"``, ``"1h"``,
``"1 hr"``, ``"90 minutes"``, ``"5 min"``, ``"5 mins"``, ``"10s"``, ``"30 sec"``, ``"500 ms"``,
``"2d"``. Its canonical text
(:attr:`Duration.text`, ``"<n> <unit>"`` with the unit spelled out) is what Spark's interval
parser reads too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lakehouse_core.errors import ConfigError

#: Each unit's microseconds, by its spelled-out singular name.
UNIT_MICROS = {
    "millisecond": 1_000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": 86_400_000_000,
}
#: Each unit's short form and abbreviation (None: none), by its singular name.
_ABBREVIATIONS = {
    "millisecond": ("ms", "msec"),
    "second": ("s", "sec"),
    "minute": ("m", "min"),
    "hour": ("h", "hr"),
    "day": ("d", None),
}
#: Every accepted spelling of a unit (lower case), to its singular name: the short form, the
#: abbreviation and its plural, the singular and the plural.
_SPELLINGS = {
    **{short: unit for unit, (short, _) in _ABBREVIATIONS.items()},
    **{a: unit for unit, (_, a) in _ABBREVIATIONS.items() if a is not None},
    **{f"{a}s": unit for unit, (_, a) in _ABBREVIATIONS.items() if a is not None},
    **{unit: unit for unit in UNIT_MICROS},
    **{f"{unit}s": unit for unit in UNIT_MICROS},
}
#: The examples every duration error ends with.
EXAMPLES = "5m, 5 min, 1 hour, 30 s or 500 ms"
#: A whole number, at most one space, a unit (spaces around the whole are ignored).
_DURATION = re.compile(r"\s*(\d+) ?([a-z]+)\s*")


@dataclass(frozen=True)
class Duration:
    """A duration: ``amount`` whole ``unit`` s (a singular unit name of :data:`UNIT_MICROS`)."""

    amount: int
    unit: str

    @property
    def micros(self) -> int:
        """The duration in microseconds."""
        return self.amount * UNIT_MICROS[self.unit]

    @property
    def seconds(self) -> float:
        """The duration in seconds."""
        return self.micros / 1_000_000

    @property
    def text(self) -> str:
        """The canonical text: ``"1 hour"``, ``"90 minutes"``, ``"500 milliseconds"``."""
        return f"{self.amount} {self.unit}{'' if self.amount == 1 else 's'}"


def parse_duration(
    text: object, setting: str = "value", *, owner: str | None = None, minimum: int = 1
) -> Duration:
    """The duration ``text`` reads (see the module docstring for the forms).

    ``setting`` names the setting and ``owner`` what has it (``"Gold table 'revenue'"``) in the
    error; ``minimum`` is the least amount allowed (0 for a processing time, which may be zero).

    Raises:
        ConfigError: ``text`` is not a string of that form (an unknown unit, a sign, a
            fraction), or its amount is below ``minimum``; one line naming the owner and the
            setting, with examples of the form.
    """
    found = _DURATION.fullmatch(text.lower()) if isinstance(text, str) else None
    unit = _SPELLINGS.get(found.group(2)) if found is not None else None
    if found is not None and unit is not None and int(found.group(1)) >= minimum:
        return Duration(int(found.group(1)), unit)
    named = f"{owner}: {setting}" if owner else setting[:1].upper() + setting[1:]
    if found is not None and unit is not None:
        least = "above 0" if minimum == 1 else f"of {minimum} or more"
        raise ConfigError(
            f"{named} {text!r} is too short: write a duration {least}, such as {EXAMPLES}."
        )
    raise ConfigError(
        f"{named} {text!r} is not a duration: write a number and a unit such as {EXAMPLES}."
    )


def require_duration(text: object, setting: str = "value", *, owner: str | None = None) -> str:
    """``text`` if it reads as a duration above 0 (:func:`parse_duration`).

    Raises:
        ConfigError: anything else, naming ``owner`` and ``setting``, with examples.
    """
    parse_duration(text, setting, owner=owner)
    assert isinstance(text, str)
    return text


def duration_micros(text: str) -> int:
    """Microseconds of a duration above 0.

    Raises:
        ConfigError: ``text`` is not a duration (:func:`parse_duration`).
    """
    return parse_duration(text).micros
