"""Registers a warehouse's Delta tables so SQL can name them ``<layer>.<table>``."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from core.identifiers import quote_identifier
from core.layout import LAYERS, Warehouse


def register_tables(spark: SparkSession, warehouse: Warehouse) -> list[str]:
    """Create (or re-point) external catalog entries for every table; return their names."""
    registered = []
    for layer in LAYERS:
        names = warehouse.table_names(layer)
        if not names:
            continue
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(layer, 'layer')}")
        for name in names:
            qualified = f"{layer}.{name}"
            if spark.catalog.tableExists(qualified):
                spark.catalog.dropTempView(qualified)
                spark.sql(f"DROP TABLE {quote_identifier(layer)}.{quote_identifier(name)}")
            spark.catalog.createTable(qualified, path=warehouse.table(layer, name), source="delta")
            registered.append(qualified)
    return registered


def run_sql(spark: SparkSession, warehouse: Warehouse, statement: str) -> DataFrame:
    """Run a user's SQL statement against the registered warehouse tables."""
    register_tables(spark, warehouse)
    return spark.sql(statement)
