"""The alerts' baseline and scores (gold.baseline) against a plain-Python model built on the
statistics module, and the [[alerts]] declaration's checks."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from gold.baseline import MAD_SCALE, MEAN_AD_SCALE, fit_baseline, scored, with_baseline
from lakehouse_core.alerting import AlertSpec
from lakehouse_core.config import load_config
from lakehouse_core.errors import ConfigError

pytestmark = pytest.mark.unit

#: Histories per key: spread out, MAD 0 but a mean deviation, all equal, one row, too few.
HISTORY = {
    "spread": [10.0, 12.0, 11.0, 13.0, 9.0, 50.0, 12.5],
    "mostly_equal": [5.0, 5.0, 5.0, 5.0, 9.0],
    "constant": [7.0, 7.0, 7.0, 7.0, 7.0],
    "short": [3.0, 4.0],
}
#: Values scored against each key's baseline.
PROBES = [11.0, 40.0, 5.0, 9.0, 7.0, 8.0, 3.5, -20.0]


def model_baseline(values: list[float]) -> dict[str, float | None]:
    median = statistics.median(values)
    deviations = [abs(v - median) for v in values]
    return {
        "count": len(values),
        "mean": statistics.fmean(values),
        "stddev": statistics.stdev(values) if len(values) > 1 else None,
        "median": median,
        "mad": statistics.median(deviations),
        "mean_abs_dev": statistics.fmean(deviations),
    }


def model_score(value: float, centre: float, spread: float | None) -> float:
    if spread:
        return abs(value - centre) / spread
    return 0.0 if value == centre else math.inf


def model_scores(method: str, value: float, base: dict[str, float | None]) -> float:
    if method == "zscore":
        return model_score(value, base["mean"], base["stddev"])  # type: ignore[arg-type]
    spread = MAD_SCALE * base["mad"] if base["mad"] else MEAN_AD_SCALE * base["mean_abs_dev"]  # type: ignore[operator]
    return model_score(value, base["median"], spread)  # type: ignore[arg-type]


def test_baseline_and_scores_match_the_statistics_model(spark: SparkSession) -> None:
    history = spark.createDataFrame(
        [(key, value) for key, values in HISTORY.items() for value in values],
        "customer string, amount double",
    )
    baseline = fit_baseline(history, "customer", "amount").localCheckpoint()
    fitted = {row.key: row.asDict() for row in baseline.collect()}
    for key, values in HISTORY.items():
        expected = model_baseline(values)
        for stat, value in expected.items():
            assert fitted[key][stat] == pytest.approx(value), (key, stat)

    rows = spark.createDataFrame(
        [(key, value, i) for key in [*HISTORY, "unknown"] for i, value in enumerate(PROBES)],
        "key string, value double, row_key int",
    )
    results: dict[tuple[str, str, str, int], float] = {}
    for method in ("zscore", "mad", "lakehouse_demo.custom_scores:times_median"):
        spec = AlertSpec("a", "orders", "k", "v", "t", method=method, min_history=3)
        function = None
        if spec.custom:
            from lakehouse_core.alerting import load_score_function

            function = load_score_function(method)
        for row in scored(with_baseline(rows, baseline, spec), spec, function).collect():
            results[(method, row.key, str(row.value), row.row_key)] = row.score
    # Keys below min_history ("short") or without a baseline are not scored.
    assert {key for _, key, _, _ in results} == {"spread", "mostly_equal", "constant"}
    for (method, key, _, index), score in results.items():
        base = model_baseline(HISTORY[key])
        value = PROBES[index]
        if method == "lakehouse_demo.custom_scores:times_median":
            expected = value / base["median"]  # type: ignore[operator]
        else:
            expected = model_scores(method, value, base)
        assert score == pytest.approx(expected), (method, key, value)
    assert results[("mad", "constant", "8.0", 5)] == math.inf
    assert results[("mad", "constant", "7.0", 4)] == 0.0


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ('method = "median"', "Invalid method 'median' for alert 'big': use one of zscore, mad"),
        ('method = "no_such_module:f"', "module 'no_such_module' cannot be imported"),
        ('method = "lakehouse_demo.custom_scores:nope"', "has no function 'nope'"),
        ("threshold = 0", "Invalid threshold 0 for alert 'big': use a number above 0"),
        ('threshold = "3"', "Setting 'threshold' in [[alerts]] must be a number, not '3'."),
        ("min_history = 1", "Invalid min_history 1 for alert 'big': use a whole number, 2 or more"),
        ('row_key = "order id"', "Invalid alert 'big' row_key column 'order id': use letters"),
        ('windw = "1 hour"', "Unknown setting(s) windw in [[alerts]]."),
    ],
)
def test_alert_declaration_errors(tmp_path: Path, settings: str, message: str) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text(
        '[[alerts]]\nname = "big"\nsource = "orders"\nkey = "customer_id"\nvalue = "total"\n'
        f'event_time = "created_at"\n{settings}\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert message in str(raised.value)


def test_alert_declaration_loads(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.toml"
    entry = (
        '[[alerts]]\nname = "big"\nsource = "orders"\nkey = "customer_id"\nvalue = "total"\n'
        'event_time = "created_at"\n'
    )
    path.write_text(entry + 'method = "zscore"\nthreshold = 4\n', encoding="utf-8")
    (alert,) = load_config(path).alerts
    assert alert == AlertSpec(
        "big", "orders", "customer_id", "total", "created_at", method="zscore", threshold=4
    )
    assert alert.baseline_table == "big_baseline"
    path.write_text(entry + entry, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"Alert names must be unique; repeated: big\."):
        load_config(path)
    path.write_text(entry.replace('value = "total"\n', ""), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"An \[\[alerts\]\] entry lacks value: set it."):
        load_config(path)
