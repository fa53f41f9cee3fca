"""Expectations declared beside a table (DLT's ``expect``, ``expect_or_drop``,
``expect_or_fail`` and ``expect_all...``), in Python and in the TOML: each condition is read by
the checked grammar and compiles to one row-level Great Expectations expectation of the table's
suite; a mistake is refused at declaration in one line naming the table, the expectation and
the fix (no Spark needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from expectations.suites import check_overrides, load_suite, suite_names, table_suite
from lakehouse import (
    cdc_table,
    events_table,
    expect,
    expect_all,
    expect_all_or_drop,
    expect_all_or_fail,
    expect_or_drop,
    expect_or_fail,
    gold_table,
    measure,
    pipeline_config,
    quality,
    tumbling,
)
from lakehouse.run.changes import declaration_changes
from lakehouse_core.config import config_from_toml
from lakehouse_core.errors import ConfigError
from lakehouse_core.expects import Expectation, compile_expectation, like_regex

pytestmark = pytest.mark.unit

OWNER = "silver table 'orders'"


@pytest.mark.parametrize(
    ("condition", "kind", "kwargs"),
    [
        ("total IS NOT NULL", "expect_column_values_to_not_be_null", {}),
        ("NOT (total IS NULL)", "expect_column_values_to_not_be_null", {}),
        ("total >= 0", "expect_column_values_to_be_between", {"min_value": 0}),
        ("0 < total", "expect_column_values_to_be_between", {"min_value": 0, "strict_min": True}),
        ("NOT (total < 0)", "expect_column_values_to_be_between", {"min_value": 0}),
        (
            "total BETWEEN -1.5 AND 10",
            "expect_column_values_to_be_between",
            {"min_value": -1.5, "max_value": 10},
        ),
        (
            "total > 0 AND total <= 1e6",
            "expect_column_values_to_be_between",
            {"min_value": 0, "strict_min": True, "max_value": 1e6},
        ),
        (
            "total < TIMESTAMP '2030-01-01 00:00:00'",
            "expect_column_values_to_be_between",
            {"max_value": "2030-01-01 00:00:00", "strict_max": True},
        ),
        ("total = 3", "expect_column_values_to_be_in_set", {"value_set": [3]}),
        ("total <> 3", "expect_column_values_to_not_be_in_set", {"value_set": [3]}),
        (
            "total IN ('new', 'paid')",
            "expect_column_values_to_be_in_set",
            {"value_set": ["new", "paid"]},
        ),
        ("total NOT IN (1, 2)", "expect_column_values_to_not_be_in_set", {"value_set": [1, 2]}),
        ("total LIKE 'A%'", "expect_column_values_to_match_regex", {"regex": "^A(?s:.*)$"}),
        (
            "length(total) BETWEEN 1 AND 40",
            "expect_column_value_lengths_to_be_between",
            {"min_value": 1, "max_value": 40},
        ),
    ],
)
def test_a_condition_compiles_to_its_gx_expectation(
    condition: str, kind: str, kwargs: dict[str, Any]
) -> None:
    compiled = compile_expectation(Expectation("e", condition), OWNER)
    assert (compiled.type, compiled.column, dict(compiled.kwargs)) == (kind, "total", kwargs)


@pytest.mark.parametrize(
    ("expectations", "message"),
    [
        (
            [expect("either", "total > 0 OR status = 'free'")],
            r"^Expectation 'either' of silver table 'orders': condition \"total > 0 OR status = "
            r"'free'\" has no Great Expectations form; write one column compared with "
            r"constants: .*, one condition per expectation\.$",
        ),
        (
            [expect("two_columns", "total > discount")],
            r"^Expectation 'two_columns' of silver table 'orders': .* has no Great Expectations",
        ),
        (
            [expect_or_drop("bad", "total >>> 0")],
            r"^Unsupported condition 'total >>> 0' for expectation 'bad' of silver table "
            r"'orders': it is not a Spark SQL expression",
        ),
        (
            [expect_or_fail("no subqueries", "total IN (SELECT 1)")],
            r"^Silver table 'orders': expectation name 'no subqueries' is not a plain name; "
            r"use letters, digits and underscores",
        ),
        (
            [expect("positive", "total > 0"), expect_all_or_fail({"positive": "total < 9"})],
            r"^Silver table 'orders': two expectations are named 'positive'; give each its "
            r"own name\.$",
        ),
        (
            [{"positive": "total > 0"}],
            r"^Silver table 'orders': expectations= takes expect\(\.\.\.\), ",
        ),
    ],
)
def test_a_mistake_is_refused_at_declaration_in_one_line(
    expectations: list[Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        cdc_table("orders", topic="shop.public.orders", expectations=expectations)
    assert "\n" not in str(raised.value)


def test_a_gold_table_cannot_drop_and_says_where_to_drop() -> None:
    with pytest.raises(ConfigError, match=r"^Gold table 'revenue': expectation 'positive' is "):
        gold_table(
            "revenue",
            source="orders",
            event_time="created_at",
            window=tumbling("1 minute"),
            measures=[measure.sum("total", name="revenue")],
            expectations=[expect_or_drop("positive", "revenue > 0")],
        )


TOML = """
[[tables]]
name = "orders"
topic = "shop.public.orders"

[tables.expect]
total_not_negative = "total >= 0"

[tables.expect_or_drop]
has_customer = "customer_id IS NOT NULL"

[tables.expect_or_fail]
known_status = "status IN ('new', 'paid')"

[[tables]]
name = "clicks"
topic = "shop.clickstream"
format = "events"
keys = ["event_id"]
sequence_by = ["ts"]

[[gold]]
name = "revenue"
source = "orders"
event_time = "created_at"
measures = [{ name = "revenue", fn = "sum", column = "total" }]
window = { kind = "tumbling", size = "1 minute" }
expect_or_fail = { revenue_not_negative = "revenue >= 0" }
"""


def python_config() -> Any:
    return pipeline_config(
        tables=[
            cdc_table(
                "orders",
                topic="shop.public.orders",
                expectations=[
                    expect("total_not_negative", "total >= 0"),
                    expect_or_drop("has_customer", "customer_id IS NOT NULL"),
                    expect_or_fail("known_status", "status IN ('new', 'paid')"),
                ],
            ),
            events_table("clicks", topic="shop.clickstream", keys=["event_id"], sequence_by="ts"),
        ],
        gold=[
            gold_table(
                "revenue",
                source="orders",
                event_time="created_at",
                window=tumbling("1 minute"),
                measures=[measure.sum("total", name="revenue")],
                expectations=expect_all_or_fail({"revenue_not_negative": "revenue >= 0"}),
            )
        ],
    )


def test_python_and_toml_declare_the_same_expectations_and_round_trip() -> None:
    from_toml = config_from_toml(TOML)
    from_python = python_config()
    assert from_python == from_toml
    assert config_from_toml(from_python.to_toml()) == from_python
    assert [(e.name, e.action) for e in from_toml.tables[0].expectations] == [
        ("total_not_negative", "warn"),
        ("has_customer", "drop"),
        ("known_status", "fail"),
    ]
    assert expect_all({"a": "x > 0"}) == (Expectation("a", "x > 0", "warn"),)
    assert expect_all_or_drop({"a": "x > 0"}) == (Expectation("a", "x > 0", "drop"),)


def test_toml_expect_that_is_not_a_table_of_conditions_is_refused() -> None:
    text = TOML.replace('[tables.expect]\ntotal_not_negative = "total >= 0"', "expect = 5")
    with pytest.raises(ConfigError, match=r"^'expect' of \[\[tables\]\] must be a table of "):
        config_from_toml(text)


def test_declared_expectations_compile_into_the_tables_gx_suites(tmp_path: Path) -> None:
    config = python_config()
    assert config.quality.enabled
    assert suite_names(config.quality, "silver") == ["orders"]
    assert suite_names(config.quality, "gold") == ["revenue"]
    suite = load_suite(config.quality, "silver", "orders")
    assert suite is not None
    assert [(r.name, r.type, r.column, r.action) for r in suite.rules] == [
        ("total_not_negative", "expect_column_values_to_be_between", "total", "warn"),
        ("has_customer", "expect_column_values_to_not_be_null", "customer_id", "drop"),
        ("known_status", "expect_column_values_to_be_in_set", "status", "fail"),
    ]
    assert suite.path == "the expectations declared on silver table 'orders'"
    gx_suite = table_suite(config.quality, "gold", "revenue")
    assert gx_suite is not None and gx_suite.name == "gold.revenue"
    configuration = gx_suite.expectations[0].configuration
    assert configuration.type == "expect_column_values_to_be_between"
    assert configuration.meta == {
        "name": "revenue_not_negative",
        "action": "fail",
        "condition": "revenue >= 0",
    }


def test_declared_expectations_join_a_suite_file_of_the_same_table(tmp_path: Path) -> None:
    (tmp_path / "silver").mkdir()
    filed = {
        "name": "silver.orders",
        "expectations": [
            {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}},
            {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "id"}},
        ],
    }
    (tmp_path / "silver" / "orders.json").write_text(json.dumps(filed), encoding="utf-8")
    config = pipeline_config(
        tables=[
            cdc_table(
                "orders",
                topic="shop.public.orders",
                expectations=[expect_or_drop("total_not_negative", "total >= 0")],
            )
        ],
        quality=quality(suites=str(tmp_path), actions={"silver.orders.total_not_negative": "fail"}),
    )
    check_overrides(config.quality)
    suite = load_suite(config.quality, "silver", "orders")
    assert suite is not None
    assert [(r.name, r.action) for r in suite.rules] == [
        ("id_not_be_null", "warn"),
        ("total_not_negative", "fail"),
    ]
    assert suite.table_level == 1
    assert suite.path.endswith("orders.json and the expectations declared on silver table 'orders'")


def test_like_patterns_become_anchored_regular_expressions() -> None:
    assert like_regex("a_b%") == "^a(?s:.)b(?s:.*)$"
    assert like_regex("100\\%") == "^100%$"
    assert like_regex("a.b") == "^a\\.b$"


def test_a_change_of_expectations_alone_is_checked_from_now_on() -> None:
    recorded = config_from_toml(TOML)
    given = config_from_toml(
        TOML.replace(
            'total_not_negative = "total >= 0"', 'total_not_negative = "total > 0"'
        ).replace('revenue_not_negative = "revenue >= 0"', 'revenue_positive = "revenue > 0"')
    )
    assert [(c.line(), c.effect) for c in declaration_changes(recorded, given)] == [
        (
            "changed table orders (expectations): the run checks the rows it writes to "
            "silver.orders from now on with the new expectations; the rows it holds are not "
            "checked again (lakehouse validate checks the whole table)",
            "from_now",
        ),
        (
            "changed gold revenue (expectations): the run checks the rows it writes to "
            "gold.revenue from now on with the new expectations; the rows it holds are not "
            "checked again (lakehouse validate checks the whole table)",
            "from_now",
        ),
    ]
