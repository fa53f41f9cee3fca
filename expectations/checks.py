"""The checks a table's job enforces: its suite's row-level expectations, ready for a stream."""

from __future__ import annotations

from pyspark.sql import SparkSession

from expectations.enforce import TableChecks
from expectations.metrics import ensure_quality_table
from expectations.suites import load_suite, suite_names
from lakehouse_core.config import QualitySpec
from lakehouse_core.layout import Layer, Warehouse


def load_checks(
    spark: SparkSession, quality: QualitySpec, warehouse: Warehouse, layer: Layer, table: str
) -> TableChecks | None:
    """The row-level expectations of ``<layer>.<table>`` with the warehouse's metrics table
    (created here if missing), or None if the table has no suite or no row-level expectation.

    Raises:
        ConfigError: the suite is malformed or cannot run in a stream (``load_suite``).
    """
    if not quality.enabled:
        return None
    suite = load_suite(quality, layer, table)
    if suite is None or not suite.rules:
        return None
    ensure_quality_table(spark, warehouse.quality())
    return TableChecks(suite, warehouse.quality())


def load_layer_checks(
    spark: SparkSession, quality: QualitySpec, warehouse: Warehouse, layer: Layer
) -> dict[str, TableChecks]:
    """The checks of every table of ``layer`` that has a suite with a row-level expectation,
    by table name (for a job that learns its tables as it runs: bronze, one per topic).

    Raises:
        ConfigError: a suite is malformed or cannot run in a stream (``load_suite``).
    """
    if not quality.enabled:
        return {}
    loaded = {
        t: load_checks(spark, quality, warehouse, layer, t) for t in suite_names(quality, layer)
    }
    return {table: checks for table, checks in loaded.items() if checks is not None}
