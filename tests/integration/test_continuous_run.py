"""The continuous runner (``lakehouse run --processing-time``): queries that start together,
and a stop by signal."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from bronze.table import ensure_bronze_table
from cdc.records import Record
from core.config import PipelineConfig
from core.identifiers import table_name_for_topic
from core.layout import QUARANTINE_TABLE, Warehouse
from core.streaming import Trigger
from lakehouse.pipeline import RunningQueries, start_ready
from tests.helpers import bronze_frame, customer_change

pytestmark = pytest.mark.integration

ENTITIES = 4


def test_entities_quarantining_in_their_first_batch_start_together(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Several silver queries whose first micro-batch quarantines a record start at once; the
    quarantine table they share exists before they start, so no first write races another."""
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    topics = [f"shop.public.t{i}" for i in range(ENTITIES)]
    for topic in topics:
        bronze = warehouse.table("bronze", table_name_for_topic(topic))
        ensure_bronze_table(spark, bronze, topic)
        records = [
            customer_change(topic, 0, "c", 1, (None, 10)),
            Record(topic, 0, 1, 1_767_225_600_000, {"id": 2}, "not json"),
        ]
        bronze_frame(spark, records).write.format("delta").mode("append").save(bronze)
    running = RunningQueries()
    try:
        start_ready(spark, warehouse, PipelineConfig(), Trigger("1 second"), running)
        running.catch_up()
        assert all(running.query(name).exception() is None for name in running.names())
    finally:
        running.stop()
    quarantined = spark.read.format("delta").load(warehouse.table("silver", QUARANTINE_TABLE))
    assert sorted((r.topic, r.reason) for r in quarantined.collect()) == [
        (topic, "unparseable") for topic in topics
    ]
    assert set(warehouse.table_names("silver")) == {
        QUARANTINE_TABLE,
        *(f"t{i}" for i in range(ENTITIES)),
    }
