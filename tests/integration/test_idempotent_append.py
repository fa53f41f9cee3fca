"""Idempotent appends (:func:`lakehouse_core.delta_io.append`): each micro-batch of a query lands
once, whether it is new, run again after a crash, or was written before batch marks existed."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StructField, StructType, TimestampType

from lakehouse_core.delta_io import BATCH_MARK, append, append_held
from lakehouse_core.streaming import query_app_id

pytestmark = pytest.mark.integration


def plan(checkpoint: Path, *batches: int) -> None:
    """Write the offsets files of ``batches`` as a streaming query's checkpoint holds them."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    for batch in batches:
        (checkpoint / "offsets" / str(batch)).write_text("v1\n", encoding="utf-8")


def marks(spark: SparkSession, path: str) -> list[str]:
    """The ``userMetadata`` of the table's commits, oldest first."""
    history = DeltaTable.forPath(spark, path).history().orderBy("version")
    return [row.userMetadata for row in history.select("userMetadata").collect()]


def test_each_batch_lands_once_across_restarts(spark: SparkSession, tmp_path: Path) -> None:
    """New batches are appended and marked; after a restart, a batch the checkpoint had planned
    is looked up and skipped if it landed, appended if it did not."""
    checkpoint, table = tmp_path / "checkpoint", str(tmp_path / "table")
    plan(checkpoint, 0)
    app_id = query_app_id(spark, str(checkpoint))

    def batch(n: int) -> None:
        append(spark.range(n * 10, n * 10 + 2), table, app_id, n)

    batch(0)  # planned before the start: may have run, looked up, not found
    batch(1)
    batch(2)
    other = query_app_id(spark, str(tmp_path / "other"))  # another query's commit comes last
    append(spark.range(100, 101), table, other, 0)
    plan(checkpoint, 1, 2, 3)
    assert query_app_id(spark, str(checkpoint)) == app_id  # the restart: batches up to 3 ran?
    batch(2)  # landed before the "crash": skipped
    batch(3)  # planned, never landed: appended
    batch(3)  # a retry within the run: skipped
    batch(4)
    ids = sorted(row.id for row in spark.read.format("delta").load(table).collect())
    assert ids == [0, 1, 10, 11, 20, 21, 30, 31, 40, 41, 100]
    expected = [BATCH_MARK.format(app_id, n) for n in range(3)]
    expected += [BATCH_MARK.format(other, 0), *(BATCH_MARK.format(app_id, n) for n in (3, 4))]
    assert marks(spark, table) == expected


def test_batches_written_with_transaction_ids_alone_are_skipped(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A batch appended with Delta's transaction id and no mark (as earlier versions wrote)
    is not appended again."""
    checkpoint, table = tmp_path / "checkpoint", str(tmp_path / "table")
    app_id = query_app_id(spark, str(checkpoint))
    writer = spark.range(2).write.format("delta").mode("append")
    writer.option("txnAppId", app_id).option("txnVersion", 5).save(table)
    plan(checkpoint, 5)
    query_app_id(spark, str(checkpoint))
    append(spark.range(2), table, app_id, 5)
    assert spark.read.format("delta").load(table).count() == 2
    append(spark.range(2, 3), table, app_id, 6)
    assert spark.read.format("delta").load(table).count() == 3


HELD = StructType([StructField("n", LongType()), StructField("at", TimestampType())])


def _jobs_started(spark: SparkSession) -> int:
    """The number of Spark jobs the session's context has started so far."""
    return int(spark.sparkContext._jsc.sc().dagScheduler().nextJobId())


def test_held_rows_land_once_from_the_driver_beside_spark_writers(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Rows the driver holds are appended without a Spark job on a local disk, marked as
    Spark's appends are, each batch once; Spark's appends to the same table go on beside them,
    and a column the table lacks is added."""
    checkpoint, table = tmp_path / "checkpoint", str(tmp_path / "table")
    app_id = query_app_id(spark, str(checkpoint))  # a new query: its batches are new
    at = datetime(2026, 1, 1, tzinfo=UTC)
    append(spark.range(100, 101), table, "spark-writer", 0)  # created by Spark, without "at"
    before = _jobs_started(spark)
    append_held(spark, [{"n": 0, "at": at}, {"n": 1}], HELD, table, (app_id, 0))
    append_held(spark, [{"n": 2, "at": at}], HELD, table, (app_id, 1))
    assert _jobs_started(spark) == before  # written from the driver
    append_held(spark, [], HELD, table, (app_id, 2))  # nothing to write: no commit
    append(spark.range(101, 102), table, "spark-writer", 1)
    plan(checkpoint, 0, 1)
    query_app_id(spark, str(checkpoint))  # a restart: batches 0 and 1 may have run
    append_held(spark, [{"n": 1}], HELD, table, (app_id, 1))  # landed: skipped
    rows = spark.read.format("delta").load(table).orderBy("id", "n").collect()
    assert [(r.id, r.n, r.at) for r in rows] == [
        (None, 0, at.replace(tzinfo=None)),
        (None, 1, None),
        (None, 2, at.replace(tzinfo=None)),
        (100, None, None),
        (101, None, None),
    ]
    expected = [BATCH_MARK.format("spark-writer", 0), BATCH_MARK.format(app_id, 0)]
    expected += [BATCH_MARK.format(app_id, 1), BATCH_MARK.format("spark-writer", 1)]
    assert marks(spark, table) == expected


def test_held_rows_at_a_uri_or_without_a_batch_go_through_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A table at a URI is appended through the session (its file systems); without a batch
    id each call appends."""
    table = (tmp_path / "table").as_uri()
    append_held(spark, [{"n": 0}], HELD, table)
    append_held(spark, [{"n": 0}], HELD, str(tmp_path / "table"))
    assert sorted(r.n for r in spark.read.format("delta").load(table).collect()) == [0, 0]
