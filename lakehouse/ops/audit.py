"""Audit: every silver table (and SCD2 history) against the reference fold of its bronze log,
every gold table against its declaration evaluated over silver, and every bronze table for
records held twice."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bronze.job import COORDINATES
from cdc.files import SOURCE_COLUMN
from gold.batch import join_inputs
from gold.models import check_models_of
from gold.pattern_jobs import identity_columns, source_keys
from gold.verify import check_gold, check_pattern_table
from lakehouse.ops.fresh import fresh_read_after
from lakehouse.ops.status import silver_applied_version
from lakehouse.run.entities import entity_specs
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.delta_io import current_version, table_exists
from lakehouse_core.errors import ConfigError
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import QUARANTINE_TABLE, Warehouse
from silver.fresh import FreshReadError
from silver.job import bronze_path
from silver.verify import TableCheck, check_fresh, check_history, check_table

log = logging.getLogger(__name__)


def _fresh_check(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    spec: TableSpec,
    quarantine: str,
) -> TableCheck | None:
    """A fresh read of ``spec``'s table compared with the fold of bronze through the version
    it is pinned to, if bronze holds records silver has not applied (None: it holds none, or
    has no table yet)."""
    bronze = bronze_path(warehouse, spec)
    if not table_exists(spark, bronze):
        return None
    try:
        applied = silver_applied_version(warehouse, spec.name)
    except ConfigError as error:  # a file system only Spark reaches: no fresh read there
        log.info(f"verify: no fresh read of silver.{spec.name} to check: {error}")
        return None
    if applied is not None and applied >= current_version(spark, bronze):
        return None
    try:
        read = fresh_read_after(spark, warehouse, config, spec, applied)
    except FreshReadError as error:  # over the bound: the fresh read says so, nothing to check
        log.info(f"verify: no fresh read of silver.{spec.name} to check: {error}")
        return None
    if not read.pending_commits:
        return None
    return check_fresh(spark, bronze, read.rows, read.bronze_version, spec, quarantine)


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
        if (fresh := _fresh_check(spark, warehouse, config, spec, quarantine)) is not None:
            checks.append(fresh)
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
        checks += [
            check_bronze_coordinates(spark, warehouse, table)
            for table in warehouse.table_names("bronze", spark)
        ]
    return checks


def check_bronze_coordinates(spark: SparkSession, warehouse: Warehouse, table: str) -> TableCheck:
    """Check that no two writes to the bronze ``table`` hold the same source coordinates:
    topic, partition and offset, and for the file source the file too (two runs that wrote one
    batch twice leave such rows; silver folds them away, so only this check sees them). Rows
    of one write with the same coordinates are the source's own repeats, not counted. A line
    no record could be read from has no coordinates and is not compared, but counted: as a
    row held and a row expected (``bronze.unreadable_lines: 1 rows, expected 1: ok``). Logs
    one progress line (``verify: bronze.<table> ...``) as it starts."""
    log.info(f"verify: bronze.{table} for records written twice")
    frame = spark.read.format("delta").load(warehouse.table("bronze", table))
    coordinates = [c for c in (*COORDINATES, SOURCE_COLUMN) if c in frame.columns]
    located = F.lit(True)
    for column in COORDINATES:
        located = located & F.col(column).isNotNull()
    # A record the source itself holds twice (a line repeated in a file) lands in one write;
    # only a record written again by another write (another _ingested_at) is a repeat.
    writes = F.count_distinct("_ingested_at") if "_ingested_at" in frame.columns else F.count("*")
    grouped = frame.groupBy(*coordinates).agg(writes.alias("count"), F.count("*").alias("held"))
    counts = grouped.where(located)
    totals = grouped.agg(
        F.count_if(located).alias("distinct"),
        F.coalesce(F.sum(F.when(located, F.col("count"))), F.lit(0)).alias("rows"),
        F.coalesce(F.sum(F.when(~located, F.col("held"))), F.lit(0)).alias("unlocated"),
        F.coalesce(
            F.sum(F.when(located & (F.col("count") > 1), F.col("count") - 1)), F.lit(0)
        ).alias("extra"),
    ).first()
    assert totals is not None
    unlocated = int(totals["unlocated"])  # each line a row of its own, held and expected
    check = TableCheck(
        table,
        int(totals["distinct"]) + unlocated,
        int(totals["rows"]) + unlocated,
        layer="bronze",
    )
    if totals["extra"]:
        twice = counts.where("count > 1").orderBy(*COORDINATES).limit(3).collect()
        where = "; ".join(
            f"{row['topic']} partition {row['partition']} offset {row['offset']} "
            f"({row['count']} times)"
            for row in twice
        )
        check.differences.append(
            f"{totals['extra']} rows repeat a record already in bronze (same topic, partition, "
            f"offset{' and file' if SOURCE_COLUMN in coordinates else ''}; e.g. {where}): two "
            "pipelines wrote the same batch. Silver and gold fold them away; for a clean bronze, "
            "run the source again into a new warehouse (lakehouse run --once --warehouse NEW) "
            "and use that one."
        )
    return check
