"""Reading our tables with delta-rs (the ``deltalake`` package), a Delta reader other than Spark."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder
from pyspark.sql import SparkSession


def assert_delta_rs_reads_same_rows(spark: SparkSession, path: str) -> None:
    """delta-rs opens the table at ``path`` and reads the same columns and rows as Spark."""
    ours = spark.read.format("delta").load(path).toArrow()
    theirs = DeltaTable(path).to_pyarrow_table()
    assert theirs.column_names == ours.column_names, path
    assert _sorted(theirs) == _sorted(ours), path


def assert_delta_rs_sql_reads_same_rows(spark: SparkSession, path: str) -> None:
    """delta-rs's SQL reader (DataFusion; it honours deletion vectors, which its pyarrow
    conversion refuses) reads the same rows as Spark from the table at ``path``."""
    ours = spark.read.format("delta").load(path).toArrow()
    batches = QueryBuilder().register("t", DeltaTable(path)).execute("SELECT * FROM t")
    theirs = pa.table(batches.read_all())
    assert theirs.column_names == ours.column_names, path
    assert _sorted(theirs) == _sorted(ours), path


def _sorted(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=repr)
