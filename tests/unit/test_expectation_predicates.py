"""The compiled column predicates of expectations/compile.py agree with Great Expectations' own
verdict on the same rows: which rows break each expectation (nulls included) and whether it
holds under ``mostly``.

Each hypothesis example carries many independent cases (an expectation and its rows); all of
them are checked by one Spark job over one DataFrame, and by GX on pandas, case by case.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import reduce
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from expectations.compile import compile_rule, holds
from expectations.suites import ROW_TYPES, Rule
from tests.draws import property_seed

pytestmark = pytest.mark.unit

SCHEMA = "case int, idx int, n bigint, s string"
OF_TYPE = "expect_column_values_to_be_of_type"
#: Regular expressions that mean the same to Java (Spark's rlike) and Python (GX on pandas).
PATTERNS = ("^a", "b$", "a.b", "[0-9]+", "^[^@]+@[^@]+$", "é", "^$", "(ab)+")
TEXT = st.text(alphabet="ab@.é1 ", max_size=6)
NUMBER = st.integers(-50, 50)


@dataclass(frozen=True)
class Case:
    type: str
    column: str  # "n" (numbers) or "s" (strings)
    kwargs: dict[str, Any]
    values: list[Any]

    def rule(self) -> Rule:
        kwargs = {"column": self.column, **self.kwargs}
        return Rule("silver.t", "r", self.type, self.column, kwargs, "warn")


def _mostly() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(st.just({}), st.sampled_from([0.5, 0.8]).map(lambda m: {"mostly": m}))


@st.composite
def _bounds(draw: st.DrawFn, values: st.SearchStrategy[int]) -> dict[str, Any]:
    low, high = draw(st.one_of(st.none(), values)), draw(st.one_of(st.none(), values))
    if low is None and high is None:
        low = draw(values)
    kwargs: dict[str, Any] = {"strict_min": draw(st.booleans()), "strict_max": draw(st.booleans())}
    if low is not None:
        kwargs["min_value"] = low
    if high is not None:
        kwargs["max_value"] = high
    return kwargs


@st.composite
def cases(draw: st.DrawFn) -> Case:
    # Every row-level type but of_type (a column's type, not its values: checked below).
    kind = draw(st.sampled_from([t for t in ROW_TYPES if t != OF_TYPE]))
    strings = kind in (
        "expect_column_values_to_match_regex",
        "expect_column_value_lengths_to_be_between",
    ) or ("set" in kind and draw(st.booleans()))
    if kind == "expect_column_values_to_not_be_null":
        strings = draw(st.booleans())
    element = TEXT if strings else NUMBER
    values = draw(st.lists(st.one_of(st.none(), element), min_size=1, max_size=8))
    kwargs: dict[str, Any] = draw(_mostly())
    if kind == "expect_column_values_to_be_between":
        kwargs |= draw(_bounds(NUMBER))
    elif kind == "expect_column_value_lengths_to_be_between":
        kwargs |= draw(_bounds(st.integers(0, 6)))
    elif "set" in kind:
        kwargs["value_set"] = draw(st.lists(element, max_size=4))
    elif kind == "expect_column_values_to_match_regex":
        kwargs["regex"] = draw(st.sampled_from(PATTERNS))
    return Case(kind, "s" if strings else "n", kwargs, values)


@pytest.fixture(scope="module")
def gx_validate() -> Any:
    """Validate one expectation on a pandas DataFrame with GX (an ephemeral context)."""
    import great_expectations as gx
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    context = gx.get_context(mode="ephemeral")
    asset = context.data_sources.add_pandas("cases").add_dataframe_asset("case")
    definition = asset.add_batch_definition_whole_dataframe("whole")

    def validate(case: Case) -> tuple[bool, set[int]]:
        frame = pd.DataFrame({case.column: pd.Series(case.values, dtype=object)})
        if case.column == "n":
            frame = frame.astype("float64")
        batch = definition.get_batch(batch_parameters={"dataframe": frame})
        kwargs = {"column": case.column, **case.kwargs}
        expectation = ExpectationConfiguration(type=case.type, kwargs=kwargs).to_domain_obj()
        result = batch.validate(expectation, result_format={"result_format": "COMPLETE"})
        return bool(result.success), set(result.result.get("unexpected_index_list") or [])

    return validate


@seed(property_seed("QUALITY_PROPERTY_SEED"))
@settings(
    max_examples=8, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.lists(cases(), min_size=1, max_size=20))
def test_predicates_agree_with_great_expectations(
    spark: SparkSession, gx_validate: Any, drawn: list[Case]
) -> None:
    rows = [
        (i, j, v if c.column == "n" else None, v if c.column == "s" else None)
        for i, c in enumerate(drawn)
        for j, v in enumerate(c.values)
    ]
    frame = spark.createDataFrame(rows, SCHEMA)
    checks = [compile_rule(c.rule(), frame.schema) for c in drawn]

    def per_case(pick: Any) -> Column:
        whens = [(F.col("case") == i, pick(check)) for i, check in enumerate(checks)]
        first, *rest = whens
        return reduce(lambda acc, w: acc.when(*w), rest, F.when(*first))

    found = frame.select(
        "case",
        "idx",
        per_case(lambda c: c.failed).alias("failed"),
        per_case(lambda c: c.counted).alias("counted"),
    ).collect()

    for i, case in enumerate(drawn):
        mine = [r for r in found if r.case == i]
        failed = {r.idx for r in mine if r.failed}
        counted = sum(1 for r in mine if r.counted)
        success, unexpected = gx_validate(case)
        assert failed == unexpected, case
        assert holds(case.rule(), counted, len(failed)) == success, case


def test_of_type_agrees_with_great_expectations_on_spark(spark: SparkSession) -> None:
    """``expect_column_values_to_be_of_type`` is about the column's Spark type, as in GX's own
    Spark engine (GX on pandas checks values instead)."""
    import great_expectations as gx
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )

    frame = spark.createDataFrame(
        [(1, 2, "x", None), (None, None, None, None)], "a bigint, b int, c string, d decimal(10,2)"
    )
    context = gx.get_context(mode="ephemeral")
    asset = context.data_sources.add_spark("types").add_dataframe_asset("frame")
    batch = asset.add_batch_definition_whole_dataframe("whole").get_batch(
        batch_parameters={"dataframe": frame}
    )
    for column, type_ in [
        ("a", "LongType"),
        ("a", "IntegerType"),
        ("b", "IntegerType"),
        ("c", "StringType"),
        ("c", "LongType"),
        ("d", "DecimalType"),
        ("d", "NumericType"),
    ]:
        kwargs = {"column": column, "type_": type_}
        rule = Rule("silver.t", "r", OF_TYPE, column, kwargs, "warn")
        check = compile_rule(rule, frame.schema)
        counts = frame.select(
            F.count_if(check.counted).alias("counted"), F.count_if(check.failed).alias("failed")
        ).first()
        assert counts is not None
        expectation = ExpectationConfiguration(type=OF_TYPE, kwargs=kwargs).to_domain_obj()
        expected = bool(batch.validate(expectation).success)
        assert holds(rule, counts.counted, counts.failed) == expected, (column, type_)
        assert counts.failed in (0, 2)  # the column's type, so every row or none
