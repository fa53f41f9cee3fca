"""Pure transforms of the alerts: a per-key baseline fit from rows, and the scores of rows
against it (built-in methods, or a user's function over pandas batches)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StructField, StructType

from lakehouse_core.alerting import AlertSpec, ScoreFunction

#: Scales the median absolute deviation to the standard deviation of a normal distribution,
#: so ``mad`` scores read like z-scores (the "modified z-score").
MAD_SCALE = 1.4826
#: Scales the mean absolute deviation from the median, the ``mad`` method's spread where
#: the median absolute deviation is 0 (more than half of a key's values are equal).
MEAN_AD_SCALE = 1.253314
#: Columns of the baseline of one key (besides ``key``).
BASELINE_STATS = ("count", "mean", "stddev", "median", "mad", "mean_abs_dev")
#: What a user's scoring function gets: each row's key and value and its key's baseline.
SCORE_INPUTS = ("key", "value", *BASELINE_STATS)


def fit_baseline(rows: DataFrame, key: str, value: str) -> DataFrame:
    """Per ``key``: ``count``, ``mean``, ``stddev`` (sample), ``median``, ``mad`` (median of
    the absolute deviations from the median) and ``mean_abs_dev`` (their mean) of ``value`` as
    double; rows with a null key or value are left out. ``stddev`` is null for a key with one
    row."""
    values = rows.select(F.col(key).alias("key"), F.col(value).cast("double").alias("value")).where(
        F.col("key").isNotNull() & F.col("value").isNotNull()
    )
    centre = values.groupBy("key").agg(
        F.count(F.lit(1)).alias("count"),
        F.mean("value").alias("mean"),
        F.stddev_samp("value").alias("stddev"),
        F.median("value").alias("median"),
    )
    spread = (
        values.join(centre.select("key", "median"), "key")
        .groupBy("key")
        .agg(
            F.median(F.abs(F.col("value") - F.col("median"))).alias("mad"),
            F.mean(F.abs(F.col("value") - F.col("median"))).alias("mean_abs_dev"),
        )
    )
    return centre.join(spread, "key").select("key", *BASELINE_STATS)


def distance_score(value: Column, centre: Column, spread: Column) -> Column:
    """``|value - centre| / spread``; with no spread (0 or null), 0 at the centre and
    infinity anywhere else."""
    distance = F.abs(value - centre)
    return (
        F.when(spread > 0, distance / spread)
        .when(distance == 0, F.lit(0.0))
        .otherwise(F.lit(float("inf")))
    )


def builtin_score(method: str) -> Column:
    """The score of a row (columns ``value`` and :data:`BASELINE_STATS`) by ``method``:
    ``zscore`` against the mean and standard deviation; ``mad`` against the median and
    ``MAD_SCALE`` x the median absolute deviation, or where that is 0, ``MEAN_AD_SCALE`` x the
    mean absolute deviation (the modified z-score of Iglewicz and Hoaglin)."""
    value = F.col("value")
    if method == "zscore":
        return distance_score(value, F.col("mean"), F.col("stddev"))
    spread = F.when(F.col("mad") > 0, F.col("mad") * F.lit(MAD_SCALE)).otherwise(
        F.col("mean_abs_dev") * F.lit(MEAN_AD_SCALE)
    )
    return distance_score(value, F.col("median"), spread)


def with_baseline(rows: DataFrame, baseline: DataFrame, spec: AlertSpec) -> DataFrame:
    """``rows`` (``key``, ``value`` and any other columns) joined with their key's baseline;
    rows of keys with fewer than ``min_history`` rows in it, or none, are left out."""
    enough = baseline.where(F.col("count") >= spec.min_history).select("key", *BASELINE_STATS)
    return rows.where(F.col("value").isNotNull()).join(enough, "key")


def scored(rows: DataFrame, spec: AlertSpec, function: ScoreFunction | None = None) -> DataFrame:
    """``rows`` (from :func:`with_baseline`) with a ``score`` column: the built-in method of
    ``spec``, or ``function`` (its ``"module:function"``) applied to pandas batches of
    :data:`SCORE_INPUTS` with ``mapInPandas``."""
    if function is None:
        return rows.withColumn("score", builtin_score(spec.method))
    schema = StructType([*rows.schema.fields, StructField("score", DoubleType())])
    return rows.mapInPandas(_score_batches(function, spec.method), schema)


def _score_batches(function: ScoreFunction, name: str) -> Any:
    def apply(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            scores = np.asarray(function(batch[list(SCORE_INPUTS)].copy()), dtype="float64")
            if scores.shape != (len(batch),):
                raise ValueError(
                    f"Scoring function {name} returned {scores.shape} scores for a batch of "
                    f"{len(batch)} rows: return one number per row."
                )
            yield batch.assign(score=scores)

    return apply


def alert_rows(scored_rows: DataFrame, spec: AlertSpec, baseline_version: int) -> DataFrame:
    """The rows whose score is above the threshold, as ``gold.alerts`` rows; of several images
    of one row, the latest (``_commit_version``) is kept."""
    over = scored_rows.where(F.col("score") > F.lit(float(spec.threshold)))
    latest = F.row_number().over(
        Window.partitionBy("row_key").orderBy(F.col("_commit_version").desc())
    )
    reason = F.format_string(
        f"%s %.2f scores %.2f by {spec.method} against key %s (median %.2f, mean %.2f, "
        f"%d rows), above {float(spec.threshold):g}",
        F.lit(spec.value),
        F.col("value"),
        F.col("score"),
        F.col("key"),
        F.col("median"),
        F.col("mean"),
        F.col("count"),
    )
    return (
        over.withColumn("_latest", latest)
        .where(F.col("_latest") == 1)
        .select(
            F.lit(spec.name).alias("alert"),
            F.col("key").cast("string").alias("key"),
            F.col("row_key").cast("string").alias("row_key"),
            F.col("event_time").cast("timestamp").alias("event_time"),
            F.col("value"),
            F.col("score"),
            F.lit(float(spec.threshold)).alias("threshold"),
            F.lit(spec.method).alias("method"),
            F.lit(baseline_version).cast("bigint").alias("baseline_version"),
            F.col("_commit_version").cast("bigint").alias("silver_version"),
            reason.alias("reason"),
        )
    )
