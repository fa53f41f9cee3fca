"""Suites are read by name with GX's own models; every mistake in a suite or in ``[quality]``
is refused with one line naming the file or setting and what to fix (no Spark needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import LongType, StructField, StructType

from expectations.compile import compile_rule
from expectations.suites import PACKAGED_SUITES, check_overrides, load_suite, read_suite
from lakehouse_core.config import QualitySpec, load_config
from lakehouse_core.errors import ConfigError
from tests.cli import run_cli

pytestmark = pytest.mark.unit

BETWEEN = {
    "type": "expect_column_values_to_be_between",
    "kwargs": {"column": "total", "min_value": 0},
    "meta": {"name": "total_not_negative", "action": "drop"},
}


def suites(
    tmp_path: Path, document: Any, table: str = "orders", layer: str = "silver"
) -> QualitySpec:
    (tmp_path / layer).mkdir(exist_ok=True)
    text = document if isinstance(document, str) else json.dumps(document)
    (tmp_path / layer / f"{table}.json").write_text(text, encoding="utf-8")
    return QualitySpec(suites=str(tmp_path))


def test_a_suite_is_read_with_its_actions_and_overrides(tmp_path: Path) -> None:
    quality = suites(
        tmp_path,
        {
            "name": "silver.orders",
            "expectations": [
                BETWEEN,
                {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}},
                {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "id"}},
            ],
        },
    )
    suite = load_suite(quality, "silver", "orders")
    assert suite is not None
    assert [(r.name, r.action, r.kwargs) for r in suite.rules] == [
        ("total_not_negative", "drop", {"column": "total", "min_value": 0}),
        ("id_not_be_null", "warn", {"column": "id"}),
    ]
    assert suite.table_level == 1
    assert load_suite(quality, "silver", "customers") is None
    overridden = QualitySpec(
        suites=str(tmp_path), actions=(("silver.orders.id_not_be_null", "fail"),)
    )
    suite = load_suite(overridden, "silver", "orders")
    assert suite is not None and suite.rules[1].action == "fail"
    assert read_suite(Path(suite.path), "silver.orders").name == "silver.orders"


def test_a_gold_suite_cannot_drop(tmp_path: Path) -> None:
    """A gold row withheld would make gold differ from its declaration: ``drop`` is refused
    in a gold suite, in its meta or by ``[quality.actions]``; ``warn`` and ``fail`` load."""
    document = {"name": "gold.revenue", "expectations": [{**BETWEEN, "meta": {"name": "n"}}]}
    quality = suites(tmp_path, document, "revenue", "gold")
    suite = load_suite(quality, "gold", "revenue")
    assert suite is not None and suite.rules[0].action == "warn"
    refusal = (
        r"^Expectation gold\.revenue\.{} has action drop, which a gold table cannot take: "
        r".*Use warn or fail, or drop the rows at silver"
    )
    overridden = QualitySpec(suites=str(tmp_path), actions=(("gold.revenue.n", "drop"),))
    with pytest.raises(ConfigError, match=refusal.format("n")):
        load_suite(overridden, "gold", "revenue")
    quality = suites(tmp_path, {**document, "expectations": [BETWEEN]}, "revenue", "gold")
    with pytest.raises(ConfigError, match=refusal.format("total_not_negative")):
        load_suite(quality, "gold", "revenue")


def test_packaged_suites_are_valid_gx_suites() -> None:
    quality = QualitySpec(packaged_suites=True)
    for path in sorted(PACKAGED_SUITES.glob("*/*.json")):
        suite = load_suite(quality, path.parent.name, path.stem)
        assert suite is not None and suite.rules, path


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{not json", r"orders\.json is not valid JSON: Expecting property name"),
        ([1], r"must hold a JSON object with 'name' and 'expectations'"),
        (
            {"name": "orders", "expectations": []},
            r"is named 'orders': a suite's name must be 'silver\.orders'",
        ),
        (
            {"name": "silver.orders", "expectations": [{"kwargs": {}}]},
            r"is not a Great Expectations suite: .*type",
        ),
        (
            {
                "name": "silver.orders",
                "expectations": [{"type": "expect_colum_values_to_be_between", "kwargs": {}}],
            },
            r"expectation 1 \(expect_colum_values_to_be_between\) is invalid: .*not found",
        ),
        (
            {
                "name": "silver.orders",
                "expectations": [{**BETWEEN, "kwargs": {"column": "total", "min_value": "x"}}],
            },
            r"expectation 1 \(expect_column_values_to_be_between\) is invalid: .*min_value",
        ),
        (
            {
                "name": "silver.orders",
                "expectations": [
                    {
                        "type": "expect_column_mean_to_be_between",
                        "kwargs": {"column": "total", "min_value": 1},
                    },
                    {
                        "type": "expect_column_values_to_be_dateutil_parseable",
                        "kwargs": {"column": "x"},
                    },
                ],
            },
            r"^Suite silver\.orders: expectation type "
            r"'expect_column_values_to_be_dateutil_parseable' cannot run inside the stream\. "
            r"Row-level types: expect_column_values_to_not_be_null",
        ),
        (
            {
                "name": "silver.orders",
                "expectations": [{**BETWEEN, "meta": {"action": "quarantine"}}],
            },
            r"^Unknown action 'quarantine' for expectation silver\.orders\.total_be_between "
            r"\(meta\.action\)\. Must be one of warn, drop, fail\.$",
        ),
        (
            {"name": "silver.orders", "expectations": [BETWEEN, BETWEEN]},
            r"two expectations are named 'total_not_negative'; give each a distinct \"name\"",
        ),
    ],
    ids=[
        "json",
        "not-object",
        "name",
        "no-type",
        "unknown-type",
        "bad-kwargs",
        "stream",
        "action",
        "twice",
    ],
)
def test_suite_mistakes_are_one_line(tmp_path: Path, document: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        load_suite(suites(tmp_path, document), "silver", "orders")
    assert "\n" not in str(raised.value)


def test_unknown_column_and_overrides_are_named(tmp_path: Path) -> None:
    quality = suites(tmp_path, {"name": "silver.orders", "expectations": [BETWEEN]})
    suite = load_suite(quality, "silver", "orders")
    assert suite is not None
    schema = StructType([StructField("id", LongType()), StructField("amount", LongType())])
    with pytest.raises(
        ConfigError,
        match=r"^Expectation silver\.orders\.total_not_negative reads column 'total', which "
        r"silver\.orders does not have\. Columns: id, amount\.$",
    ):
        compile_rule(suite.rules[0], schema)
    for actions, message in [
        (
            (("silver.orders.nope", "fail"),),
            r"suite silver\.orders has no row-level expectation 'nope'\. "
            r"It has: total_not_negative\.",
        ),
        (
            (("silver.ordrs.x", "fail"),),
            r"there is no suite for silver\.ordrs\. Suites of silver: orders\.",
        ),
        ((("orders.x", "fail"),), r"must be '<layer>\.<table>\.<expectation>'"),
    ]:
        with pytest.raises(ConfigError, match=message):
            quality = QualitySpec(suites=str(tmp_path), actions=actions)  # type: ignore[arg-type]
            check_overrides(quality)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"quality = 5\n", r"^'quality' must be a table: write \[quality\]"),
        (
            b"[quality]\nsuite = 'x'\n",
            r"^Unknown setting\(s\) suite in \[quality\]\. "
            r"Allowed: actions, packaged_suites, suites, validate_every\.$",
        ),
        (
            b"[quality.actions]\n'silver.orders.x' = 'stop'\n",
            r"^Unknown action 'stop' for 'silver\.orders\.x' in \[quality\.actions\]\. "
            r"Must be one of warn, drop, fail\.$",
        ),
        (b"[quality]\nactions = 5\n", r"^'actions' in \[quality\] must be a table"),
        (
            b"[quality]\nvalidate_every = 'hourly'\n",
            r"^\[quality\]: validate_every 'hourly' is not a duration: write a number and a ",
        ),
    ],
    ids=["quality-int", "unknown", "action", "actions-int", "validate-every"],
)
def test_quality_settings_mistakes_are_one_line(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_quality_settings_are_read_relative_to_the_config(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text(
        "[quality]\nsuites = 'quality'\n[quality.actions]\n'silver.orders.x' = 'fail'\n"
    )
    quality = load_config(path).quality
    assert quality == QualitySpec(str(tmp_path / "quality"), False, (("silver.orders.x", "fail"),))
    assert not load_config(None).quality.enabled


def test_validate_every_is_read_as_seconds(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text("[quality]\npackaged_suites = true\nvalidate_every = '2 minutes'\n")
    assert load_config(path).quality.validate_seconds == 120
    assert QualitySpec().validate_seconds is None


def test_validate_without_suites_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "pipeline.toml"
    config.write_text("[maintenance]\n", encoding="utf-8")
    done = run_cli("validate", "--warehouse", tmp_path, "--config", config)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: {config} names no suites and declares no expectations: set 'suites' (a "
        "directory) or 'packaged_suites = true' in its [quality] table, or declare expectations "
        "on its tables ([tables.expect], [tables.expect_or_fail], ...)."
    )
