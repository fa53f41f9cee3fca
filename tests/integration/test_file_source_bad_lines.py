"""Lines of a source file that are not records (invalid UTF-8, NUL bytes, text that is not JSON,
JSON the record schema cannot hold) land in bronze's unreadable table with their exact bytes;
the good lines of the same file reach bronze and silver, and a later file is still processed."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import Row, SparkSession

from cdc.files import UNREADABLE_TOPIC
from cdc.records import Record
from cdc.sources import SourceSpec
from lakehouse.run.pipeline import run_once
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import Warehouse
from lakehouse_demo.settings import SHOP_CONFIG
from tests.helpers import customer_change

pytestmark = pytest.mark.integration

TOPIC = "shop.public.customers"

BAD_LINES = [
    b'{"topic":"shop.public.customers","partition":0,"offset":9,"timestamp":1,"value":"\xff"}',
    b"\xc3\x28 not utf-8 \xed\xa0\x80 (an encoded surrogate)",
    b'{"topic":"t","partition":0,\x00"offset":1,"timestamp":5}',
    "plain text, valid UTF-8: caf\u00e9".encode(),
    b'{"topic":"\\ud800","partition":0,"offset":1,"timestamp":5}',
    b'{"topic":"t","partition":0,"offset":1,"timestamp":5,"value":{"n":"\\udfff"}}',
    b'{"topic":"t","partition":0,"offset":1,"timestamp":5,"headers":{"\\ud800":"x"}}',
    b"[" * 100_000,
    b"a stray \r inside a line",
    b"",
]


def write_lines(path: Path, lines: list[bytes]) -> None:
    """Write a JSON-lines file atomically (hidden name, then rename), as the source requires."""
    hidden = path.with_name(f".{path.name}.tmp")
    hidden.write_bytes(b"".join(line + b"\n" for line in lines))
    hidden.rename(path)


def line(record: Record) -> bytes:
    return record.to_line().encode("utf-8")


def test_bad_lines_are_kept_and_good_lines_ingested(spark: SparkSession, tmp_path: Path) -> None:
    source, warehouse = tmp_path / "source", Warehouse(str(tmp_path / "warehouse"))
    source.mkdir()
    first = [customer_change(TOPIC, 0, "c", 1, (1, 1)), customer_change(TOPIC, 1, "c", 2, (1, 2))]
    write_lines(source / "part-00000.jsonl", [line(first[0]), *BAD_LINES, line(first[1])])
    spec = SourceSpec("files", str(source))

    run_once(spark, spec, warehouse, SHOP_CONFIG)

    def bronze(topic: str) -> list[Row]:
        table = warehouse.table("bronze", table_name_for_topic(topic))
        return spark.read.format("delta").load(table).collect()

    def customer_ids() -> list[int]:
        customers = spark.read.format("delta").load(warehouse.table("silver", "customers"))
        return sorted(row.id for row in customers.collect())

    assert sorted(bytes(row.value) for row in bronze(UNREADABLE_TOPIC)) == sorted(BAD_LINES)
    assert sorted((row.offset, bytes(row.value)) for row in bronze(TOPIC)) == [
        (r.offset, r.value_bytes) for r in first
    ]
    assert customer_ids() == [1, 2]

    # Nothing is stuck: a file that arrives later is read on the next run.
    write_lines(source / "part-00001.jsonl", [line(customer_change(TOPIC, 2, "c", 3, (1, 3)))])
    run_once(spark, spec, warehouse, SHOP_CONFIG)
    assert customer_ids() == [1, 2, 3]
    assert len(bronze(UNREADABLE_TOPIC)) == len(BAD_LINES)
