"""The one duration grammar (:mod:`lakehouse_core.durations`): every spelling ("1 hour", "1 hr",
"1h"), any case, singular or plural, read by gold declarations, patterns and processing-time
triggers alike; its errors name the owner and the setting. No Spark."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakehouse_core.durations import UNIT_MICROS, parse_duration, require_duration
from lakehouse_core.errors import ConfigError
from lakehouse_core.loader import gold_table_from, pattern_from
from lakehouse_core.streaming import Trigger

pytestmark = pytest.mark.unit

#: Each unit's spellings, as a user may write them.
SPELLINGS = {
    "millisecond": ("ms", "msec", "msecs", "millisecond", "milliseconds"),
    "second": ("s", "sec", "secs", "second", "seconds"),
    "minute": ("m", "min", "mins", "minute", "minutes"),
    "hour": ("h", "hr", "hrs", "hour", "hours"),
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


def _gold(window: dict[str, object], **settings: object) -> dict[str, object]:
    """A ``[[gold]]`` entry named revenue with ``window`` and ``settings``."""
    measures = [{"name": "n", "fn": "count"}]
    entry = {"name": "revenue", "source": "orders", "event_time": "ts", "window": window}
    return {**entry, "measures": measures, **settings}


def _pattern(**settings: object) -> dict[str, object]:
    """A ``[[patterns]]`` entry named p with two steps and ``settings``."""
    steps = [{"name": "cold", "condition": "temp < 0"}, {"name": "hot", "condition": "temp > 30"}]
    entry = {"name": "p", "source": "readings", "event_time": "ts", "steps": steps}
    return {**entry, "within": "1 hour", **settings}


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("1 hour", 3_600_000_000),
        ("1h", 3_600_000_000),
        ("1 hr", 3_600_000_000),
        ("2 hours", 7_200_000_000),
        ("90 minutes", 5_400_000_000),
        ("5m", 300_000_000),
        ("5 min", 300_000_000),
        ("5 mins", 300_000_000),
        ("5 minute", 300_000_000),
        ("10 seconds", 10_000_000),
        ("10s", 10_000_000),
        ("30 sec", 30_000_000),
        ("30 secs", 30_000_000),
        ("500 ms", 500_000),
        ("500 msec", 500_000),
        ("1 day", 86_400_000_000),
        ("2d", 172_800_000_000),
        ("2 DAYS", 172_800_000_000),
        ("1 Minute", 60_000_000),
    ],
)
def test_every_spelling_is_one_grammar(text: str, micros: int) -> None:
    assert parse_duration(text).micros == micros
    # Gold declarations, patterns and triggers take every one of them.
    assert gold_table_from(_gold({"kind": "tumbling", "size": text})).window.size == text
    assert pattern_from(_pattern(within=text)).within_micros == micros
    assert Trigger.parse(text).interval_seconds == micros / 1_000_000


@pytest.mark.parametrize(
    "text", ["10 parsecs", "-1s", "1.5 hours", "hour", "10", "", "1 week", "5 minz", "10  minutes"]
)
def test_anything_else_is_one_line_naming_the_setting(text: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_duration(text, "window.size", owner="Gold table 'revenue'")
    assert str(raised.value) == (
        f"Gold table 'revenue': window.size {text!r} is not a duration: write a number and a "
        "unit such as 5m, 5 min, 1 hour, 30 s or 500 ms."
    )
    with pytest.raises(ConfigError, match=r"^Processing time .* is not a duration: "):
        Trigger.parse(text)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            _gold({"kind": "tumbling", "size": "5 minz"}),
            "Gold table 'revenue': window.size '5 minz' is not a duration",
        ),
        (
            _gold({"kind": "hopping", "size": "1h", "slide": "soon"}),
            "Gold table 'revenue': window.slide 'soon' is not a duration",
        ),
        (
            _gold({"kind": "session", "gap": "a while"}),
            "Gold table 'revenue': window.gap 'a while' is not a duration",
        ),
        (
            _gold({"kind": "sliding", "lookback": "1 week"}),
            "Gold table 'revenue': window.lookback '1 week' is not a duration",
        ),
        (
            _gold({"kind": "tumbling", "size": "5m"}, watermark_delay="later"),
            "Gold table 'revenue': watermark_delay 'later' is not a duration",
        ),
        (
            _gold(
                {"kind": "row"},
                stream_join={
                    "source": "clicks",
                    "on": ["user_id"],
                    "event_time": "ts",
                    "within": "half an hour",
                },
            ),
            "Gold table 'revenue': stream_join.within 'half an hour' is not a duration",
        ),
        (_pattern(within="1 fortnight"), "Pattern 'p': within '1 fortnight' is not a duration"),
        (
            _pattern(watermark_delay="soon"),
            "Pattern 'p': watermark_delay 'soon' is not a duration",
        ),
        (
            _pattern(absent={"condition": "temp > 0", "within": "5 minz"}),
            "Pattern 'p': absent.within '5 minz' is not a duration",
        ),
    ],
)
def test_each_error_names_its_table_and_setting(entry: dict[str, object], message: str) -> None:
    read = pattern_from if "steps" in entry else gold_table_from
    with pytest.raises(ConfigError) as raised:
        read(entry)
    assert str(raised.value) == (
        f"{message}: write a number and a unit such as 5m, 5 min, 1 hour, 30 s or 500 ms."
    )


def test_zero_is_a_processing_time_but_no_window() -> None:
    assert Trigger.parse("0s") == Trigger("0 seconds")
    with pytest.raises(ConfigError) as raised:
        gold_table_from(_gold({"kind": "tumbling", "size": "0s"}))
    assert str(raised.value) == (
        "Gold table 'revenue': window.size '0s' is too short: write a duration above 0, such "
        "as 5m, 5 min, 1 hour, 30 s or 500 ms."
    )
    with pytest.raises(ConfigError, match=r"^Value 5 is not a duration: "):
        parse_duration(5)
