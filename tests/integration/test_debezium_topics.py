"""Debezium's own topics are not silver tables unless declared (issue 63, item 4).

A connector's heartbeats (``__debezium-heartbeat.<prefix>``, or as ``[debezium]
heartbeat_prefix`` names them), its transaction metadata (``<prefix>.transaction``) and its
signalling table (``debezium_signal``, or ``[debezium] signal_tables``) land in bronze like every
topic, and silver makes no table of them; a ``[[tables]]`` entry for one makes it a table.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc.records import Record
from lakehouse import Lakehouse
from lakehouse.run.entities import bronze_topics
from lakehouse_core.config import DebeziumSpec, PipelineConfig, TableSpec
from lakehouse_core.layout import Warehouse
from lakehouse_demo.generator import write_files
from tests.helpers import connect_field, pg_envelope, pg_key

pytestmark = pytest.mark.integration

CUSTOMERS = "shop.public.customers"
SIGNAL_FIELDS = [connect_field(name, "string") for name in ("id", "type", "data")]


def _signal(topic: str, offset: int) -> Record:
    after = {"id": f"s{offset}", "type": "execute-snapshot", "data": '{"data-collections": []}'}
    key = {"schema": {"type": "struct", "fields": [connect_field("id", "string")]}}
    key["payload"] = {"id": after["id"]}
    return Record(
        topic,
        0,
        offset,
        1_000,
        key,
        pg_envelope("c", (None, 100 + offset), after, fields=SIGNAL_FIELDS),
    )


def test_debezium_topics_stay_in_bronze_unless_declared(
    spark: SparkSession, tmp_path: Path
) -> None:
    customer = {"id": 1, "name": "Ada", "notes": None}
    records = [
        Record(
            "shop.public.customers", 0, 0, 1_000, pg_key(1), pg_envelope("c", (None, 10), customer)
        ),
        Record("hb.shop", 0, 0, 1_000, {"serverName": "shop"}, {"ts_ms": 1_767_225_600_000}),
        Record(
            "shop.transaction",
            0,
            0,
            1_000,
            {"id": "571:53195832"},
            {"status": "BEGIN", "id": "571:53195832", "event_count": None, "ts_ms": 1},
        ),
        _signal("shop.public.debezium_signal", 0),
        _signal("shop.public.signals", 0),
    ]
    write_files(records, tmp_path / "source")
    config = PipelineConfig(
        tables=(TableSpec(name="signals", topic="shop.public.signals"),),
        debezium=DebeziumSpec(heartbeat_prefix="hb", signal_tables=("debezium_signal", "signals")),
    )
    lh = Lakehouse(tmp_path / "wh", config, spark=spark)
    lh.run(f"files:{tmp_path / 'source'}")
    warehouse = Warehouse.from_path(tmp_path / "wh")
    silver = set(warehouse.table_names("silver", spark))
    assert {"customers", "signals"} <= silver  # a declared signalling table is a table
    assert not silver & {"debezium_signal", "transaction", "shop_transaction", "hb_shop", "shop"}
    assert len(warehouse.table_names("bronze", spark)) >= 5  # every record is in bronze
    topics = bronze_topics(spark, warehouse, config)
    assert sorted(topics.connector) == [
        "hb.shop",
        "shop.public.debezium_signal",
        "shop.transaction",
    ]
    assert sorted(s.topic for s in topics.specs) == ["shop.public.customers", "shop.public.signals"]
    assert lh.verify().ok
