"""SQL names for warehouse tables: the project re-points the catalog entries it registered and
never drops a table somebody else created under the same name (``lakehouse sql`` and its
refusals: ``test_sql_command.py``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.sql import SparkSession

from lakehouse_core.catalog import REGISTERED_PREFIX, register_tables, run_sql
from lakehouse_core.config import CatalogSpec, load_config
from lakehouse_core.errors import ConfigError
from lakehouse_core.layout import Warehouse

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


def test_catalog_setting_names_schemas_and_own_entries_are_repointed(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = tmp_path / "pipeline.toml"
    config.write_text('[catalog]\nname = "spark_catalog"\nschema_prefix = "i13_"\n')
    names = load_config(config).catalog
    assert names == CatalogSpec(name="spark_catalog", schema_prefix="i13_")
    config.write_text('[catalog]\nschema_prefix = "shop-"\n')
    with pytest.raises(ConfigError, match="schema_prefix in \\[catalog\\]"):
        load_config(config)

    warehouse = warehouse_with_probe(spark, tmp_path / "wh", 3)
    old = tmp_path / "wh" / "_system" / "old_probe"
    spark.createDataFrame([(9,)], "v int").write.format("delta").save(str(old))
    qualified = "spark_catalog.i13_silver.catalog_probe"
    try:
        assert register_tables(spark, warehouse, names) == [qualified]
        assert [r.v for r in spark.sql(f"SELECT v FROM {qualified}").collect()] == [3]
        # Another session of a shared metastore finds an entry at an old place inside this
        # warehouse (no record of registering it): the project made it, so it is re-pointed.
        spark.sql(f"DROP TABLE {qualified}")
        spark.catalog.createTable(qualified, path=str(old), source="delta")
        spark.conf.unset(REGISTERED_PREFIX + qualified)
        register_tables(spark, warehouse, names)
        assert [r.v for r in spark.sql(f"SELECT v FROM {qualified}").collect()] == [3]
        assert [r.v for r in spark.read.format("delta").load(str(old)).collect()] == [9]
    finally:
        spark.sql("DROP DATABASE IF EXISTS spark_catalog.i13_silver CASCADE")


def test_registering_again_after_commits_opens_no_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A running pipeline names its tables after every step: a table it registered before, with
    new commits since (here from the driver, as gold's are), costs no Spark job (the catalog
    is asked, not the table's Delta log); a name in upper case is found as the catalog keeps
    it; an entry dropped meanwhile comes back."""
    warehouse = Warehouse(str(tmp_path / "wh"))
    path = warehouse.table("silver", "Probe_Mixed")
    spark.createDataFrame([(1,)], "v int").write.format("delta").save(path)
    name = "silver.probe_mixed"
    try:
        assert register_tables(spark, warehouse) == ["silver.Probe_Mixed"]
        for value in (2, 3):
            write_deltalake(path, pa.table({"v": pa.array([value], pa.int32())}), mode="append")
        jobs = spark.sparkContext._jsc.sc().dagScheduler().nextJobId()
        assert register_tables(spark, warehouse) == ["silver.Probe_Mixed"]
        assert spark.sparkContext._jsc.sc().dagScheduler().nextJobId() == jobs
        assert sorted(r.v for r in spark.table(name).collect()) == [1, 2, 3]

        spark.sql(f"DROP TABLE {name}")
        register_tables(spark, warehouse)
        assert sorted(r.v for r in spark.table(name).collect()) == [1, 2, 3]
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
