"""Trigger intervals as a stopping run reads them (lakehouse_core.streaming.Trigger)."""

from __future__ import annotations

import pytest

from lakehouse_core.streaming import Trigger

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (None, 0.0),
        ("10s", 10.0),
        ("500ms", 0.5),
        ("2m", 120.0),
        ("1 minute", 60.0),
        ("1h", 3600.0),
        ("10 Seconds", 10.0),
        ("1 day", 86400.0),
        ("2d", 172800.0),
    ],
)
def test_interval_seconds(text: str | None, seconds: float) -> None:
    assert Trigger.parse(text).interval_seconds == seconds
