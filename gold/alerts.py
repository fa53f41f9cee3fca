"""Alerts: ``lakehouse fit`` writes a versioned per-key baseline of a silver table; a streaming
job scores every new or changed row of it against the baseline in force into ``gold.alerts``.

The baseline of alert ``<name>`` is the gold table ``<name>_baseline``: every fit appends its
rows with the next ``baseline_version`` (1, 2, ...) and ``fitted_at``; the rows of the highest
version are in force. ``gold.alerts`` has one row per alert and scored row (``row_key``): the
latest image of the row whose score was above the threshold.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from gold.aggregates import ADDS
from gold.baseline import alert_rows, fit_baseline, scored, with_baseline
from gold.feed import GOLD_WIDENING, start_on_changes
from lakehouse_core.alerting import AlertSpec, load_score_function
from lakehouse_core.config import PipelineConfig
from lakehouse_core.delta_io import dml_once, ensure_table, merge_materialized, table_exists
from lakehouse_core.errors import ConfigError, TableNotFoundError
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import Trigger

ALERTS_TABLE = "alerts"


class Fit(NamedTuple):
    """What one ``lakehouse fit`` of an alert wrote."""

    alert: str
    table: str
    version: int
    keys: int
    scored_keys: int


class AlertJob(NamedTuple):
    """The streaming job of one alert: its query name, silver input and baseline table."""

    query: str
    input: str
    baseline: str
    what: str
    start: Callable[[SparkSession, Warehouse, Trigger], StreamingQuery]


def alert_jobs(config: PipelineConfig) -> list[AlertJob]:
    """The streaming job of every ``[[alerts]]`` declaration."""
    return [
        AlertJob(
            f"gold_alerts_{spec.name}",
            spec.source,
            spec.baseline_table,
            f"alerts {spec.name}",
            lambda spark, warehouse, trigger, spec=spec: start_alerts(  # type: ignore[misc]
                spark, warehouse, spec, trigger
            ),
        )
        for spec in config.alerts
    ]


def source_rows(spark: SparkSession, warehouse: Warehouse, spec: AlertSpec) -> DataFrame:
    """The silver table of ``spec``, checked to have the columns the alert names.

    Raises:
        TableNotFoundError: the silver table does not exist.
        ConfigError: a named column is missing from it.
    """
    path = warehouse.table("silver", spec.source)
    if not table_exists(spark, path):
        raise TableNotFoundError(
            f"Alert {spec.name!r} reads silver.{spec.source}, which does not exist yet: run "
            "the pipeline first, or fix 'source' in [[alerts]]."
        )
    rows = spark.read.format("delta").load(path)
    check_columns(rows, spec)
    return rows


def check_columns(rows: DataFrame, spec: AlertSpec) -> None:
    """Raise ConfigError naming the first column of ``spec`` that ``rows`` lacks."""
    for setting in ("key", "value", "event_time", "row_key"):
        column = getattr(spec, setting)
        if column not in rows.columns:
            raise ConfigError(
                f"Alert {spec.name!r}: silver.{spec.source} has no column {column!r} (its "
                f"{setting}); it has {', '.join(rows.columns)}. Fix '{setting}' in [[alerts]]."
            )


def fit(spark: SparkSession, warehouse: Warehouse, spec: AlertSpec) -> Fit:
    """Fit the baseline of ``spec`` from the current rows of its silver table and append it as
    the next ``baseline_version`` of ``gold.<name>_baseline``."""
    baseline = fit_baseline(source_rows(spark, warehouse, spec), spec.key, spec.value)
    path = warehouse.table("gold", spec.baseline_table)
    version = latest_version(spark, path) + 1
    rows = baseline.select(
        "*",
        F.lit(version).cast("bigint").alias("baseline_version"),
        F.current_timestamp().alias("fitted_at"),
    ).localCheckpoint()
    ensure_table(spark, path, rows.schema, change_feed=False, widening=GOLD_WIDENING)
    rows.write.format("delta").mode("append").save(path)
    counts = rows.agg(
        F.count(F.lit(1)).alias("keys"),
        F.count(F.when(F.col("count") >= spec.min_history, 1)).alias("scored"),
    ).first()
    assert counts is not None
    return Fit(spec.name, f"gold.{spec.baseline_table}", version, counts.keys, counts.scored)


def latest_version(spark: SparkSession, path: str) -> int:
    """The highest ``baseline_version`` in the baseline table at ``path`` (0: no fit yet)."""
    if not table_exists(spark, path):
        return 0
    row = spark.read.format("delta").load(path).agg(F.max("baseline_version")).first()
    return int(row[0]) if row is not None and row[0] is not None else 0


def start_alerts(
    spark: SparkSession, warehouse: Warehouse, spec: AlertSpec, trigger: Trigger
) -> StreamingQuery:
    """Score each row image that enters silver (inserts, update post-images) against the
    baseline in force when its micro-batch runs, and MERGE the alerts into ``gold.alerts``
    (idempotent per micro-batch: a replayed batch commits nothing twice)."""
    source_rows(spark, warehouse, spec)
    return start_on_changes(
        spark,
        warehouse,
        f"gold_alerts_{spec.name}",
        warehouse.table("silver", spec.source),
        trigger,
        lambda app_id: _alerter(warehouse, spec, app_id),
    )


def _alerter(
    warehouse: Warehouse, spec: AlertSpec, app_id: str
) -> Callable[[DataFrame, int], None]:
    function = load_score_function(spec.method) if spec.custom else None
    baseline_path = warehouse.table("gold", spec.baseline_table)
    alerts_path = warehouse.table("gold", ALERTS_TABLE)

    def score(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        version = latest_version(spark, baseline_path)
        if version == 0:
            raise TableNotFoundError(
                f"Alert {spec.name!r} has no baseline yet: run 'lakehouse fit' first."
            )
        baseline = (
            spark.read.format("delta")
            .load(baseline_path)
            .where(F.col("baseline_version") == version)
        )
        rows = batch.where(F.col("_change_type").isin(*ADDS)).select(
            F.col(spec.key).alias("key"),
            F.col(spec.value).cast("double").alias("value"),
            F.col(spec.row_key).alias("row_key"),
            F.col(spec.event_time).alias("event_time"),
            "_commit_version",
        )
        alerts = alert_rows(
            scored(with_baseline(rows, baseline, spec), spec, function), spec, version
        )
        alerts = alerts.localCheckpoint()
        ensure_table(spark, alerts_path, alerts.schema, change_feed=False, widening=GOLD_WIDENING)
        same = (F.col("t.alert") == F.col("s.alert")) & (F.col("t.row_key") == F.col("s.row_key"))
        merge = (
            DeltaTable.forPath(spark, alerts_path)
            .alias("t")
            .merge(alerts.alias("s"), same)
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
        )
        dml_once(spark, alerts_path, app_id, batch_id, partial(merge_materialized, merge, alerts))

    return score
