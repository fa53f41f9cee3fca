"""The bound of a fresh read (no JVM): its settings checked as they are made, and the one
line said when silver is further behind than it allows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lakehouse.ops.fresh import check_bound
from silver.fresh import FreshLimits, FreshReadError, PendingCommit

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def commit(version: int, records: int, seconds_ago: float) -> PendingCommit:
    at = int((NOW - timedelta(seconds=seconds_ago)).timestamp() * 1000)
    return PendingCommit(version, (f"part-{version}.parquet",), records, at, version)


@pytest.mark.parametrize("records", [-1, 1.5, True, "10"])
def test_max_records_is_a_whole_number(records: object) -> None:
    with pytest.raises(FreshReadError, match="Invalid max_records"):
        FreshLimits(max_records=records)  # type: ignore[arg-type]


@pytest.mark.parametrize("age", [timedelta(seconds=-1), 60])
def test_max_age_is_a_timedelta(age: object) -> None:
    with pytest.raises(FreshReadError, match="Invalid max_age"):
        FreshLimits(max_age=age)  # type: ignore[arg-type]


def test_within_the_bound_nothing_is_said() -> None:
    limits = FreshLimits(max_records=10, max_age=timedelta(minutes=1))
    check_bound("orders", [commit(3, 4, 30), commit(4, 6, 10)], 10, limits, NOW)
    check_bound("orders", [], 0, FreshLimits(max_records=0, max_age=timedelta(0)), NOW)


def test_too_many_records() -> None:
    limits = FreshLimits(max_records=9)
    with pytest.raises(FreshReadError) as raised:
        check_bound("orders", [commit(3, 4, 30), commit(4, 6, 10)], 10, limits, NOW)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("silver.orders is 10 bronze records (2 commits, the oldest 30 s")
    assert "read silver.orders as it is" in message


def test_too_old() -> None:
    limits = FreshLimits(max_age=timedelta(seconds=20))
    with pytest.raises(FreshReadError, match=r"oldest 30 s old\) behind.*20 s\)"):
        check_bound("orders", [commit(3, 4, 30)], 4, limits, NOW)
