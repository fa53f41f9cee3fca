"""What the pipeline reads of a Delta table's log on the driver, without a Spark job: the newest
version (:func:`lakehouse_core.delta_io.current_version`) and the newest commits' messages
(:func:`lakehouse_core.delta_io.newest_commit_messages`), each checked against Delta's own
history of the same table, also after the log's cleanup left a checkpoint and its newest
commits only."""

from __future__ import annotations

from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_core.delta_io import commit_message, current_version, newest_commit_messages
from lakehouse_core.errors import TableNotFoundError
from tests.helpers import spark_jobs

pytestmark = pytest.mark.integration


def history(spark: SparkSession, path: str) -> list[tuple[int, str | None]]:
    rows = DeltaTable.forPath(spark, path).history().select("version", "userMetadata")
    return sorted(((r.version, r.userMetadata) for r in rows.collect()), reverse=True)


def test_the_newest_version_and_messages_are_read_from_the_log_as_delta_reads_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    for version in range(12):  # Delta writes a checkpoint at version 10
        with commit_message(spark, f"commit {version}" if version % 3 else ""):
            spark.range(version, version + 1).write.format("delta").mode("append").save(path)
    # The log's cleanup keeps the checkpoint and what follows it.
    for old in range(5):
        (tmp_path / "t" / "_delta_log" / f"{old:020d}.json").unlink()

    found: list[int] = []
    assert spark_jobs(spark, "log reads", lambda: found.append(current_version(spark, path))) == 0
    assert found == [11]
    messages = list(newest_commit_messages(spark, path, 4))
    assert [(v, m or None) for v, m in messages] == [
        (v, m or None) for v, m in history(spark, path)[:4]
    ]


def test_a_path_without_a_committed_table_has_no_version(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "empty" / "_delta_log").mkdir(parents=True)
    for path in (tmp_path / "empty", tmp_path / "missing"):
        with pytest.raises(TableNotFoundError, match="holds no commit"):
            current_version(spark, str(path))
        assert list(newest_commit_messages(spark, str(path), 3)) == []
