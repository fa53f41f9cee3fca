"""Audit: every silver table (and SCD2 history) against the reference fold of its bronze log,
and every gold table against its declaration evaluated over silver."""

from __future__ import annotations

from pyspark.sql import SparkSession

from core.config import PipelineConfig
from core.delta_io import table_exists
from core.identifiers import table_name_for_topic
from core.layout import QUARANTINE_TABLE, Warehouse
from gold.jobs import join_inputs
from gold.models import check_models_of
from gold.pattern_jobs import identity_columns, source_keys
from gold.verify import check_gold, check_pattern_table
from lakehouse.entities import entity_specs
from silver.verify import TableCheck, check_history, check_table


def verify_warehouse(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig
) -> list[TableCheck]:
    """Check each silver entity of ``warehouse`` (and its history table for SCD type 2); an
    empty list means there was nothing to check. Records a ``drop`` expectation quarantined
    are left out of the expected state. Then each declared gold table (and pattern) whose silver
    source and gold table exist; then each SQL model whose table and inputs exist
    (:func:`gold.models.check_model`)."""
    checks = []
    quarantine = warehouse.table("silver", QUARANTINE_TABLE)
    for spec in entity_specs(spark, warehouse, config):
        bronze = warehouse.table("bronze", table_name_for_topic(spec.topic))
        silver = warehouse.table("silver", spec.name)
        checks.append(check_table(spark, bronze, silver, spec, quarantine))
        if spec.history_name is not None:
            history = warehouse.table("silver", spec.history_name)
            checks.append(check_history(spark, bronze, history, spec, quarantine))
    for table in config.gold_declarations:
        silver, gold = warehouse.table("silver", table.source), warehouse.table("gold", table.name)
        if checks and table_exists(spark, silver) and table_exists(spark, gold):
            watermark = warehouse.watermark(table.name)
            joined = None if table.join is None else join_inputs(warehouse, table.join)
            other = None
            if table.stream_join is not None:
                other = warehouse.table("silver", table.stream_join.source)
                if not table_exists(spark, other):
                    continue
            checks.append(check_gold(spark, silver, gold, table, watermark, joined, other))
    for pattern in config.patterns:
        silver, gold = (
            warehouse.table("silver", pattern.source),
            warehouse.table("gold", pattern.name),
        )
        if checks and table_exists(spark, silver) and table_exists(spark, gold):
            columns = spark.read.format("delta").load(silver).columns
            identity = identity_columns(pattern, source_keys(config, pattern), columns)
            watermark = warehouse.watermark(pattern.name)
            checks.append(check_pattern_table(spark, silver, gold, pattern, watermark, identity))
    if checks:
        checks += check_models_of(spark, warehouse, config)
    return checks
