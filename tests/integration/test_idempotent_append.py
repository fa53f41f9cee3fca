"""Idempotent appends (:func:`lakehouse_core.delta_io.append`): each micro-batch of a query lands
once, whether it is new, run again after a crash, or was written before batch marks existed."""

from __future__ import annotations

from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_core.delta_io import BATCH_MARK, append
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
