"""A fresh read's bronze tail read on the driver (:func:`lakehouse_core.delta_io.read_files`):
the rows of the chosen files as Spark reads them, or None where Spark must read them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_core.delta_io import read_files


def _added(path: str, version: int) -> list[str]:
    """The names of the data files the commit ``version`` of the table at ``path`` added."""
    log = Path(path) / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    return [Path(action["add"]["path"]).name for action in actions if "add" in action]


def _jobs_started(spark: SparkSession) -> int:
    """The number of Spark jobs the session's context has started so far."""
    return int(spark.sparkContext._jsc.sc().dagScheduler().nextJobId())


def _frame(spark: SparkSession, start: int, end: int) -> DataFrame:
    return spark.range(start, end).select(
        "id",
        F.col("id").cast("string").cast("binary").alias("value"),
        F.when(F.col("id") % 3 == 0, None).otherwise(F.timestamp_seconds(F.col("id"))).alias("at"),
        F.struct(F.col("id").alias("a"), F.array(F.col("id"), F.lit(None)).alias("b")).alias("s"),
    )


def _spark_read(spark: SparkSession, path: str, version: int, names: list[str]) -> DataFrame:
    table = spark.read.format("delta").option("versionAsOf", version).load(path)
    return table.where(F.col("_metadata.file_name").isin(names)).select(*table.columns)


def test_chosen_files_are_read_on_the_driver_as_spark_reads_them(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files a commit added, as of a version: the same rows and schema as Spark's read
    of those files (binary, timestamps, nulls, structs; a column a later commit added is null
    in older files), no Spark job; files not in that version give no rows; a table with
    deletion vectors, over the row limit or at a URI is left to Spark (None)."""
    path = str(tmp_path / "bronze")
    _frame(spark, 0, 30).repartition(2).write.format("delta").save(path)
    _frame(spark, 30, 50).repartition(3).write.format("delta").mode("append").save(path)
    wider = _frame(spark, 50, 60).withColumn("extra", F.lit("x"))
    wider.write.format("delta").mode("append").option("mergeSchema", "true").save(path)
    second, third = _added(path, 1), _added(path, 2)
    assert len(second) == 3 and third

    for version, names in ((1, second), (2, second), (2, [*second, *third])):
        before = _jobs_started(spark)
        driver = read_files(spark, path, version, names)
        assert _jobs_started(spark) == before
        assert driver is not None
        expected = _spark_read(spark, path, version, names)
        assert driver.schema == expected.schema
        assert sorted(driver.collect()) == sorted(expected.collect())
    assert read_files(spark, path, 2, [*second, *third]).count() == 30  # type: ignore[union-attr]
    assert read_files(spark, path, 0, second).count() == 0  # type: ignore[union-attr]

    assert read_files(spark, (tmp_path / "bronze").as_uri(), 1, second) is None
    monkeypatch.setattr("lakehouse_core.delta_io.HELD_ROWS", 19)
    assert read_files(spark, path, 1, second) is None  # 20 rows
    monkeypatch.undo()
    vectors = str(tmp_path / "vectors")
    rows = _frame(spark, 0, 10)
    builder = DeltaTable.createIfNotExists(spark).location(vectors).addColumns(rows.schema)
    builder.property("delta.enableDeletionVectors", "true").execute()
    rows.write.format("delta").mode("append").save(vectors)
    assert read_files(spark, vectors, 1, _added(vectors, 1)) is None
