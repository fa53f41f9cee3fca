"""The one duration grammar (:mod:`lakehouse_core.durations`): both spellings ("1 hour", "1h"), any
case, singular or plural, read by gold declarations and processing-time triggers alike. No Spark."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakehouse_core.durations import UNIT_MICROS, parse_duration, require_duration
from lakehouse_core.errors import ConfigError
from lakehouse_core.gold_tables import Window
from lakehouse_core.streaming import Trigger

pytestmark = pytest.mark.unit

#: Each unit's spellings, as a user may write them.
SPELLINGS = {
    "millisecond": ("ms", "millisecond", "milliseconds"),
    "second": ("s", "second", "seconds"),
    "minute": ("m", "minute", "minutes"),
    "hour": ("h", "hour", "hours"),
    "day": ("d", "day", "days"),
}


def _cased(text: str, upper: list[bool]) -> str:
    flags = (upper + [False] * len(text))[: len(text)]
    return "".join(c.upper() if u else c for c, u in zip(text, flags, strict=True))


@given(
    st.integers(1, 10_000),
    st.sampled_from(sorted(SPELLINGS)),
    st.data(),
    st.sampled_from(("", " ")),
    st.lists(st.booleans(), max_size=12),
)
def test_every_spelling_of_a_duration_reads_the_same(
    amount: int, unit: str, data: st.DataObject, space: str, upper: list[bool]
) -> None:
    spelling = data.draw(st.sampled_from(SPELLINGS[unit]))
    text = _cased(f"{amount}{space}{spelling}", upper)
    duration = parse_duration(text)
    # An independent model: the amount times the unit's length.
    assert duration.micros == amount * UNIT_MICROS[unit]
    assert parse_duration(duration.text) == duration  # the canonical text reads back
    assert require_duration(text) == text


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("1 hour", 3_600_000_000),
        ("1h", 3_600_000_000),
        ("90 minutes", 5_400_000_000),
        ("10 seconds", 10_000_000),
        ("10s", 10_000_000),
        ("500 ms", 500_000),
        ("1 day", 86_400_000_000),
        ("2d", 172_800_000_000),
        ("2 DAYS", 172_800_000_000),
        ("1 Minute", 60_000_000),
    ],
)
def test_both_spellings_are_one_grammar(text: str, micros: int) -> None:
    assert parse_duration(text).micros == micros
    # Gold declarations and triggers take every one of them.
    assert Window("tumbling", size=text).size == text
    assert Trigger.parse(text).interval_seconds == micros / 1_000_000


@pytest.mark.parametrize(
    "text", ["10 parsecs", "-1s", "1.5 hours", "hour", "10", "", "1 week", "5 mins", "10  minutes"]
)
def test_anything_else_is_one_line_naming_the_form(text: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_duration(text, "window size")
    message = str(raised.value)
    assert message.startswith(f"Invalid window size {text!r}: write '<number> <unit>'")
    assert "\n" not in message
    with pytest.raises(ConfigError, match=r"^Invalid processing time"):
        Trigger.parse(text)


def test_zero_is_a_processing_time_but_no_window() -> None:
    assert Trigger.parse("0s") == Trigger("0 seconds")
    with pytest.raises(ConfigError, match=r"^Invalid window size '0s': .* above 0"):
        Window("tumbling", size="0s")
    with pytest.raises(ConfigError, match=r"^Invalid duration 5: "):
        parse_duration(5)
