"""The bound of a fresh read (no JVM): its settings checked as they are made (also as the
pipeline TOML's ``[fresh]``), the one line said when silver is further behind than it allows,
and the ``fresh.<table>`` names a SQL statement reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lakehouse.ops.fresh import check_bound, fresh_tables
from lakehouse_core.errors import ConfigError
from lakehouse_core.loader import config_from_toml
from lakehouse_core.specs import FreshSpec, PipelineConfig
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


def test_the_fresh_tables_a_statement_names() -> None:
    _, names = fresh_tables(
        "WITH o AS (SELECT * FROM fresh.orders) SELECT * FROM o JOIN FRESH.Customers c "
        "ON o.customer_id = c.id JOIN silver.orders s ON s.id = o.id, fresh.orders"
    )
    assert sorted(names) == ["customers", "orders"]
    assert fresh_tables("SELECT * FROM main.fresh.orders, silver.fresh")[1] == []
    assert fresh_tables("SELECT * FROM shop_fresh.orders", "shop_fresh")[1] == ["orders"]


def test_the_bound_in_the_pipeline_toml() -> None:
    config = config_from_toml("[fresh]\nmax_records = 5\nmax_age_seconds = 60\n")
    assert config.fresh == FreshSpec(max_records=5, max_age_seconds=60)
    assert config_from_toml(config.to_toml()).fresh == config.fresh
    assert config_from_toml("").fresh == FreshSpec()
    assert "fresh" not in PipelineConfig().to_mapping()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("max_records = -1", "Invalid [fresh] max_records -1: use a whole number of records"),
        ("max_age_seconds = 1.5", "Setting 'max_age_seconds' in [fresh] must be an integer"),
        ('max_records = "10"', "Setting 'max_records' in [fresh] must be an integer"),
        ("max_rows = 1", "Unknown setting(s) max_rows in [fresh]. Allowed: max_age_seconds"),
    ],
)
def test_a_wrong_bound_is_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config_from_toml(f"[fresh]\n{text}\n")
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
