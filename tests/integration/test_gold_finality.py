"""Finality at scale: the rows a new watermark makes final are found without reading the gold
files whose rows are all final already, or whose windows all end after the watermark."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from core.gold_tables import FINAL, FINALIZED_AT, GoldTable, Measure, Window
from gold.finality import newly_final

pytestmark = pytest.mark.integration

TABLE = GoldTable(
    name="orders_per_minute",
    source="orders",
    event_time="created_at",
    window=Window("tumbling", size="1 minute"),
    measures=(Measure("orders", "count"),),
    group_by=("customer_id",),
)
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def micros(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1) + 1_767_225_600_000_000


def test_newly_final_rows_are_found_in_the_files_that_can_hold_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Three files: windows already final, windows due under the watermark, windows after it.
    The scan names only the second, and its rows come back final as of the batch."""
    path = str(tmp_path / "gold")
    schema = (
        "customer_id long, window_start timestamp, window_end timestamp, orders long, "
        f"{FINAL} boolean, {FINALIZED_AT} timestamp"
    )

    def rows(minutes: range, final: bool | None) -> list[tuple[object, ...]]:
        return [
            (
                n,
                EPOCH + timedelta(minutes=n),
                EPOCH + timedelta(minutes=n + 1),
                1,
                final,
                EPOCH if final else None,
            )
            for n in minutes
        ]

    for part in (rows(range(0, 3), True), rows(range(3, 6), False), rows(range(100, 103), None)):
        frame = spark.createDataFrame(part, schema).coalesce(1)
        frame.write.format("delta").mode("append").save(path)
    gold = spark.read.format("delta").load(path)
    watermark = micros(EPOCH + timedelta(minutes=10))
    now = EPOCH + timedelta(hours=1)

    due = newly_final(gold, TABLE, watermark, micros(now))

    assert len(gold.inputFiles()) == 3
    assert len(due.inputFiles()) == 1
    got = due.select("customer_id", FINAL, F.unix_micros(FINALIZED_AT).alias("at")).collect()
    assert sorted(tuple(r) for r in got) == [(n, True, micros(now)) for n in range(3, 6)]
