"""The warning of a broken ``warn`` or ``drop`` expectation says which rows its counts are of:
the rows read when it counted them all, otherwise the rows it checks. No Spark: ``judge`` takes
the one row of counts the batch's job computed, and a warning reads nothing else."""

from __future__ import annotations

import logging
from typing import cast

import pytest
from pyspark.sql import Column, DataFrame, Row

from expectations.compile import Check
from expectations.enforce import Seen, TableChecks, broke_warning
from expectations.suites import Rule, TableSuite
from silver.check import SCOPE

pytestmark = pytest.mark.unit

PLAUSIBLE = Rule(
    "silver.readings",
    "temp_plausible",
    "expect_column_values_to_be_between",
    "temp",
    {"column": "temp", "min_value": -50, "max_value": 60},
    "drop",
)
PRESENT = Rule(
    "silver.readings",
    "temp_present",
    "expect_column_values_to_not_be_null",
    "temp",
    {"column": "temp"},
    "warn",
)


def test_a_drop_names_the_rows_it_checked_of_those_read(caplog: pytest.LogCaptureFixture) -> None:
    suite = TableSuite("readings", "suites/readings.json", (PLAUSIBLE,), 0)
    checks = TableChecks(suite, "metrics")
    compiled = [Check(PLAUSIBLE, cast(Column, None), cast(Column, None))]
    counts = Row(_q0_counted=3, _q0_failed=1)
    with caplog.at_level(logging.WARNING, logger="expectations.enforce"):
        outcomes = checks.judge(compiled, counts, cast(DataFrame, None), (), 1, Seen(4, SCOPE))
    assert [(o.counted, o.failed, o.dropped, o.held) for o in outcomes] == [(3, 1, 1, False)]
    assert caplog.messages == [
        "expectation silver.readings.temp_plausible (drop) broke in micro-batch 1: 1 of 3 rows "
        "it checked dropped to quarantine (4 read; it checks the inserts and updates not "
        "quarantined before the check whose temp is not null)"
    ]


@pytest.mark.parametrize(
    ("rule", "counted", "seen", "tail"),
    [
        (PLAUSIBLE, 4, Seen(4, SCOPE), "1 of 4 rows read dropped to quarantine"),
        (
            PRESENT,
            3,
            Seen(4, SCOPE),
            "1 of 3 rows it checked (4 read; it checks the inserts and updates not quarantined "
            "before the check)",
        ),
        (
            PLAUSIBLE,
            3,
            Seen(5, "records of sensors"),
            "1 of 3 rows it checked dropped to quarantine (5 read; it checks the records of "
            "sensors whose temp is not null)",
        ),
        (
            PRESENT,
            2,
            Seen(None, "rows the batch inserts or updates"),
            "1 of 2 rows it checked (it checks the rows the batch inserts or updates)",
        ),
    ],
    ids=["all-read", "not-null", "bronze", "gold"],
)
def test_the_warning_words_what_the_counts_are(
    rule: Rule, counted: int, seen: Seen, tail: str
) -> None:
    head = f"expectation {rule.qualified} ({rule.action}) broke in micro-batch 7: "
    assert broke_warning(rule, 7, counted, 1, seen) == head + tail
