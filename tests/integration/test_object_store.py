"""A warehouse at a URI rather than a local path: every table, checkpoint and idempotency id is
found, read and written through Hadoop's FileSystem of the session."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from bronze.job import BRONZE_QUERY, start_bronze
from cdc.generator import write_files
from cdc.sources import SourceSpec, read_source
from core.identifiers import table_name_for_topic
from core.layout import Warehouse
from core.streaming import Trigger
from tests.helpers import customer_change

pytestmark = pytest.mark.integration

TOPIC = "shop.public.customers"


def test_a_replayed_bronze_batch_is_skipped_on_a_uri_warehouse(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The idempotency id beside a checkpoint at a URI survives a restart: a micro-batch
    replayed after a crash between its append and its checkpoint commit adds nothing."""
    monkeypatch.chdir(tmp_path)  # anything written relative to the working directory stays here
    write_files([customer_change(TOPIC, n, "c", n, (1, n)) for n in range(3)], tmp_path / "in")
    warehouse = Warehouse.from_path(f"file://{tmp_path}/warehouse")
    bronze = warehouse.table("bronze", table_name_for_topic(TOPIC))

    def run() -> int:
        source = read_source(spark, SourceSpec("files", str(tmp_path / "in")))
        query = start_bronze(source, warehouse, Trigger())
        query.awaitTermination()
        assert query.exception() is None
        return spark.read.format("delta").load(bronze).count()

    assert run() == 3
    # A crash after the append, before the checkpoint's commit: the restart replays batch 0.
    commits = tmp_path / "warehouse" / "_system" / "checkpoints" / BRONZE_QUERY / "commits"
    for name in ("0", ".0.crc"):
        (commits / name).unlink()
    assert run() == 3
