"""Audit: every silver table against the reference fold of its bronze log."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakehouse.config import PipelineConfig
from lakehouse.identifiers import table_name_for_topic
from lakehouse.layout import Warehouse
from lakehouse.pipeline import entity_specs
from silver.verify import TableCheck, check_table


def verify_warehouse(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig
) -> list[TableCheck]:
    """Check each silver entity of ``warehouse``; an empty list means there was nothing to check."""
    return [
        check_table(
            spark,
            warehouse.table("bronze", table_name_for_topic(spec.topic)),
            warehouse.table("silver", spec.name),
            spec,
        )
        for spec in entity_specs(spark, warehouse, config)
    ]
