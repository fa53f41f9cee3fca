"""SQL models (``[[models]]``): what load refuses (one line each, naming the fix), the order
models refresh in, and the pure parts of the refresh (the pinned query, the refresh rule, the
rows a keyed refresh writes)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from gold.models import (
    CHANGE,
    ModelRetries,
    ModelState,
    changed_rows,
    is_current,
    ordered_models,
    pinned_query,
    versions_behind,
)
from lakehouse_core.config import PipelineConfig, load_config
from lakehouse_core.errors import ConfigError
from lakehouse_core.failures import Failure, TableFailure
from lakehouse_core.models import SqlModel, models_to_toml

pytestmark = pytest.mark.unit

WINNING = """
[[gold]]
name = "winning_bids"
source = "bids"
event_time = "ts"
group_by = ["auction"]
window = { kind = "tumbling", size = "1 hour" }
measures = [{ name = "max_price", fn = "max", column = "price" }]
"""
AVG_SQL = (
    "SELECT a.category, avg(w.max_price) AS avg_price FROM gold.winning_bids w "
    "JOIN silver.auctions a ON a.id = w.auction GROUP BY a.category"
)


def write(tmp_path: Path, models: str, gold: str = WINNING, extra: str = "") -> Path:
    path = tmp_path / "pipeline.toml"
    path.write_text(gold + extra + models, encoding="utf-8")
    return path


def model(name: str, sql: str, key: str = "") -> str:
    line = f"key = {key}\n" if key else ""
    return f"\n[[models]]\nname = {name!r}\nsql = {sql!r}\n{line}"


def refusal(tmp_path: Path, models: str, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as raised:
        load_config(write(tmp_path, models, **kwargs))
    message = str(raised.value)
    assert "\n" not in message, message
    return message


def test_a_model_loads_from_toml_as_the_dataclass_it_round_trips_to(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, model("avg_price_per_category", AVG_SQL, '["category"]')))
    declared = SqlModel("avg_price_per_category", AVG_SQL, key=("category",))
    assert config.models == (declared,)
    assert declared.inputs == (("gold", "winning_bids"), ("silver", "auctions"))
    assert models_to_toml(config.models) == [
        {"name": "avg_price_per_category", "sql": AVG_SQL, "key": ["category"]}
    ]
    assert SqlModel("m", AVG_SQL, key=["category"]).key == ("category",)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("DELETE FROM silver.auctions WHERE id = 1", "(DELETE) changes data"),
        ("INSERT INTO gold.x SELECT * FROM silver.auctions", "(INSERT) changes data"),
        ("DROP TABLE silver.auctions", "changes tables"),
        ("SELECT * FROM parquet.`/data/secret`", "reads files by path (parquet.`/data/secret`)"),
        ("SELECT * FROM read_files('/data')", "reads files by path (read_files(...))"),
        ("SELECT reflect('java.lang.System', 'exit', 1) AS x FROM silver.a", "calls reflect()"),
        ("SELECT * FROM IDENTIFIER('silver.a')", "IDENTIFIER(...)"),
        ("SELECT 1 AS a FROM silver.a; SELECT 2 AS b FROM silver.a", "holds 2"),
        ("SELEC * FROM silver.a", "could not parse"),
        ("SHOW TABLES", "(SHOW) is not a query"),
        ("SELECT * FROM auctions", "reads auctions: a model reads only warehouse tables"),
        ("SELECT * FROM sales.auctions", "reads sales.auctions"),
        ("SELECT * FROM main.silver.auctions", "reads main.silver.auctions"),
        ("SELECT count(*) FROM silver.auctions", "without a plain name ((an expression))"),
        ("SELECT a.id, b.id FROM silver.a a JOIN silver.b b ON a.id = b.id", "id more than once"),
        ("WITH c AS (SELECT 1 AS x) SELECT x FROM c", "reads no table"),
        ("SELECT * FROM gold.nowhere", "reads gold.nowhere, which no gold declaration"),
    ],
)
def test_sql_a_model_cannot_run_is_refused_at_load(tmp_path: Path, sql: str, expected: str) -> None:
    message = refusal(tmp_path, model("m", sql))
    assert expected in message and message.startswith("Model 'm'"), message


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ('["region"]', "key column(s) region are not columns of its query"),
        ('["category", "category"]', "lists category more than once"),
        ('["cat egory"]', "key column 'cat egory' is not a plain name"),
        ("3", "'key' in [[models]] must be a list of column names"),
        ("[1]", "'key' in [[models]] must be a list of column names"),
    ],
)
def test_a_bad_key_is_refused(tmp_path: Path, key: str, expected: str) -> None:
    assert expected in refusal(tmp_path, model("m", AVG_SQL, key))


@pytest.mark.parametrize(
    ("models", "expected"),
    [
        (model("winning_bids", AVG_SQL), "is taken by a gold declaration ([[gold]])"),
        (model("late_events", AVG_SQL), "is taken by the log of late changes"),
        (model("alerts", AVG_SQL), "is taken by the alerts table"),
        (model("m", AVG_SQL) + model("m", AVG_SQL), "repeated: m"),
        (model("bad-name", AVG_SQL), "Invalid model name 'bad-name'"),
        (model("a", "SELECT x FROM gold.a"), "cycle: a -> a"),
        (
            model("a", "SELECT x FROM gold.b")
            + model("b", "SELECT x FROM gold.c")
            + model("c", "SELECT x FROM gold.a"),
            "cycle: a -> b -> c -> a",
        ),
        ('\n[[models]]\nname = "m"\n', "lacks sql"),
        (model("m", AVG_SQL) + 'when = "hourly"\n', "Unknown setting(s) when in [[models]]"),
        ("\nmodels = 3\n", "'models' must be a list of tables"),
    ],
)
def test_names_and_cycles_are_checked_together(tmp_path: Path, models: str, expected: str) -> None:
    top = models if models.startswith("\nmodels") else ""
    message = refusal(tmp_path, models if not top else "", gold=top + WINNING)
    assert expected in message, message


def test_an_alert_baseline_name_is_taken(tmp_path: Path) -> None:
    alert = (
        '\n[[alerts]]\nname = "spend"\nsource = "bids"\nkey = "auction"\nvalue = "price"\n'
        'event_time = "ts"\n'
    )
    message = refusal(tmp_path, model("spend_baseline", AVG_SQL), extra=alert)
    assert "taken by the baseline of alert 'spend'" in message


def test_models_refresh_after_the_models_they_read(tmp_path: Path) -> None:
    models = (
        model("top", "SELECT category FROM gold.avg_price WHERE avg_price > 1")
        + model("both", "SELECT t.category FROM gold.top t JOIN gold.avg_price a USING (category)")
        + model("avg_price", AVG_SQL)
        + model("alone", "SELECT id FROM bronze.raw")
    )
    config = load_config(write(tmp_path, models))
    assert [m.name for m in config.models] == ["avg_price", "top", "both", "alone"]
    # A config built in Python gets the same checks when it runs.
    cyclic = PipelineConfig(models=(SqlModel("a", "SELECT x FROM gold.a"),))
    with pytest.raises(ConfigError, match="cycle: a -> a"):
        ordered_models(cyclic)


def test_the_pinned_query_reads_views_under_the_names_the_query_used() -> None:
    declared = SqlModel(
        "m",
        "WITH recent AS (SELECT * FROM silver.auctions WHERE id > 1) "
        "SELECT auctions.id, w.max_price FROM recent JOIN gold.winning_bids w "
        "ON recent.id = w.auction JOIN silver.auctions ON auctions.id = w.auction",
    )
    views = {("silver", "auctions"): "v_a", ("gold", "winning_bids"): "v_w"}
    pinned = pinned_query(declared, views)
    assert "silver." not in pinned and "gold." not in pinned
    assert "FROM v_a AS auctions WHERE" in pinned
    assert "JOIN v_w AS w" in pinned and "JOIN v_a AS auctions ON" in pinned
    assert "FROM recent" in pinned  # a CTE is not an input


def test_the_refresh_rule_compares_versions_table_ids_and_the_sql() -> None:
    declared = SqlModel("m", AVG_SQL)
    inputs = {"gold.winning_bids": ("id-w", 4), "silver.auctions": ("id-a", 7)}
    state = ModelState("m", declared.digest, "g1", 3, dict(inputs))
    assert is_current(state, declared, inputs)
    assert not is_current(None, declared, inputs)
    moved = {**inputs, "silver.auctions": ("id-a", 9)}
    assert not is_current(state, declared, moved)
    assert versions_behind(state, moved) == 2
    assert versions_behind(state, {**inputs, "silver.auctions": ("id-new", 7)}) is None
    edited = SqlModel("m", AVG_SQL + " HAVING count(*) > 1")
    assert not is_current(state, edited, inputs)
    assert ModelState.from_json(state.to_json(), "m") == state
    assert ModelState.from_json(state.to_json(), "other") is None
    assert ModelState.from_json("silver batch 3", "m") is None


def test_a_keyed_refresh_writes_only_the_rows_that_differ(spark: SparkSession) -> None:
    """changed_rows against a plain-Python diff, on random tables with nulls in keys and
    values, rows equal, changed, new and gone."""
    rng = random.Random(7)
    schema = "k1 int, k2 string, v double, w string"
    for _ in range(3):
        keys = {(rng.choice([1, 2, 3, None]), rng.choice(["a", "b", None])) for _ in range(12)}
        values = [None, 1.5, 2.0]
        current = {
            k: (rng.choice(values), rng.choice(["x", None])) for k in keys if rng.random() < 0.8
        }
        result = {
            k: current[k] if k in current and rng.random() < 0.5 else (rng.choice(values), "y")
            for k in keys
            if rng.random() < 0.8
        }
        frames = [
            spark.createDataFrame([(*k, *v) for k, v in rows.items()], schema)
            for rows in (result, current)
        ]
        got = {
            ((r.k1, r.k2), (r.v, r.w), r[CHANGE])
            for r in changed_rows(frames[0], frames[1], ["k1", "k2"]).collect()
        }
        want = {(k, v, "upsert") for k, v in result.items() if current.get(k, ()) != v}
        want |= {(k, v, "delete") for k, v in current.items() if k not in result}
        assert got == want


def test_a_failing_model_is_retried_after_the_backoff_while_others_refresh() -> None:
    retries = ModelRetries(lambda attempts: 5.0 * 2 ** (attempts - 1))
    at = datetime(2026, 1, 1, tzinfo=UTC)
    failure = TableFailure("model_a", "gold.a", Failure("E", "boom", ""), at)
    assert retries.due(["a", "b"], 100.0) == ["a", "b"]
    noted = retries.failed(failure, 100.0)
    assert (noted.attempts, noted.retry_at) == (1, datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC))
    assert retries.due(["a", "b"], 104.0) == ["b"]
    assert retries.due(["a", "b"], 105.0) == ["a", "b"]
    assert retries.failed(failure, 105.0).attempts == 2
    assert retries.due(["a"], 114.0) == [] and retries.due(["a"], 115.0) == ["a"]
    assert retries.succeeded("a") is not None and retries.succeeded("a") is None
    assert retries.failed(failure, 200.0).attempts == 1
