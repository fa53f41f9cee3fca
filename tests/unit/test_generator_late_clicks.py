"""The generator's late clicks: stamped long before they are sent, the rest of the workload as
it was."""

from __future__ import annotations

from datetime import datetime

import pytest

from lakehouse_core.errors import ConfigError
from lakehouse_demo.generator import LATE_CLICK_MS, WorkloadConfig, generate

pytestmark = pytest.mark.unit


def click_delays_ms(records: list) -> list[int]:  # type: ignore[type-arg]
    """Per clickstream record: how long before it was sent its event time lies (ms)."""
    delays = []
    for record in records:
        if record.topic.endswith(".clickstream") and isinstance(record.value, dict):
            stamped = datetime.fromisoformat(record.value["ts"].replace("Z", "+00:00"))
            delays.append(record.timestamp_ms - int(stamped.timestamp() * 1000))
    return delays


def test_late_clicks_are_stamped_long_before_they_are_sent() -> None:
    plain, late = (
        WorkloadConfig(events=3000, seed=5),
        WorkloadConfig(events=3000, seed=5, late_rate=0.1),
    )
    plain_records, late_records = generate(plain), generate(late)
    usual, delayed = click_delays_ms(plain_records), click_delays_ms(late_records)
    assert len(usual) == len(delayed)
    assert max(usual) < LATE_CLICK_MS[0]
    very_late = [d for d in delayed if d >= LATE_CLICK_MS[0]]
    assert 0.05 * len(delayed) < len(very_late) < 0.15 * len(delayed)
    assert all(d <= LATE_CLICK_MS[1] + 1 for d in very_late)
    # Only those clicks' times change: every other record is the same.
    changed = [a for a, b in zip(plain_records, late_records, strict=True) if a != b]
    assert all(r.topic.endswith(".clickstream") for r in changed)
    with pytest.raises(ConfigError, match=r"late_rate must be a number between 0 and 0\.5"):
        WorkloadConfig(events=10, late_rate=0.9)
