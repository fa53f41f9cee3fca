"""SQL names for warehouse tables: the project re-points the catalog entries it registered and
never drops a table somebody else created under the same name; ``lakehouse sql`` refuses to
change an append-only (bronze) table with one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from core.catalog import REGISTERED_PREFIX, run_sql
from core.errors import ConfigError
from core.layout import Warehouse
from tests.cli import run_cli

pytestmark = pytest.mark.integration

NAME = "silver.catalog_probe"


def warehouse_with_probe(spark: SparkSession, root: Path, value: int) -> Warehouse:
    warehouse = Warehouse(str(root))
    spark.createDataFrame([(value,)], "v int").write.format("delta").save(
        warehouse.table("silver", "catalog_probe")
    )
    return warehouse


def test_foreign_table_is_kept_and_own_entries_are_repointed(
    spark: SparkSession, tmp_path: Path
) -> None:
    foreign = tmp_path / "foreign"
    spark.createDataFrame([(0,)], "v int").write.format("delta").save(str(foreign))
    spark.sql("CREATE DATABASE IF NOT EXISTS silver")
    spark.catalog.createTable(NAME, path=str(foreign), source="delta")
    first = warehouse_with_probe(spark, tmp_path / "one", 1)
    second = warehouse_with_probe(spark, tmp_path / "two", 2)
    try:
        with pytest.raises(ConfigError, match=f"already has a table {NAME} .* did not register"):
            run_sql(spark, first, f"SELECT v FROM {NAME}")
        assert [r.v for r in spark.table(NAME).collect()] == [0]  # still the foreign table

        spark.sql(f"DROP TABLE {NAME}")
        assert [r.v for r in run_sql(spark, first, f"SELECT v FROM {NAME}").collect()] == [1]
        # An entry that already points at the table is kept, even from another session (a
        # persistent metastore: this session has no record of registering it).
        spark.conf.unset(REGISTERED_PREFIX + NAME)
        assert [r.v for r in run_sql(spark, first, f"SELECT v FROM {NAME}").collect()] == [1]
        spark.conf.set(REGISTERED_PREFIX + NAME, first.table("silver", "catalog_probe"))
        # An entry this session registered follows the warehouse asked for.
        assert [r.v for r in run_sql(spark, second, f"SELECT v FROM {NAME}").collect()] == [2]
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {NAME}")


def test_sql_changing_an_append_only_table_is_one_line(spark: SparkSession, tmp_path: Path) -> None:
    table = "bronze.append_probe"
    path = Warehouse(str(tmp_path)).table("bronze", "append_probe")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (offset bigint) USING delta "
        "TBLPROPERTIES ('delta.appendOnly' = 'true')"
    )
    spark.createDataFrame([(7,)], "offset bigint").write.format("delta").mode("append").save(path)
    statements = [
        f"DELETE FROM {table} WHERE offset = 7",
        f"UPDATE {table} SET offset = 8",
        f"MERGE INTO {table} t USING {table} s ON t.offset = s.offset WHEN MATCHED THEN DELETE",
    ]
    try:
        for statement in statements:
            result = run_cli("sql", "--warehouse", tmp_path, statement)
            assert result.returncode == 2, (statement, result.stderr)
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1, (statement, result.stderr)
            assert lines[0].startswith("error: ") and "is append-only" in lines[0], lines
            assert "lakehouse forget" in lines[0], lines
        assert [r.offset for r in spark.read.format("delta").load(path).collect()] == [7]
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table}")
