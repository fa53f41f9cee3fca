"""Real upstream re-snapshots: PostgreSQL captured by the real Debezium connector, with a
blocking snapshot and an incremental snapshot asked for through Debezium's signalling table
while changes stream. The deletes made before the blocking snapshot are then dropped from the
capture (as when a connector's offsets are lost and the events never reach bronze): silver
with ``resnapshot = "full"`` still equals PostgreSQL's final table, read over SQL, and the
fold; under the default (``upsert``) the keys whose deletes were lost stay."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdc.records import Record
from lakehouse_core.config import TableSpec
from lakehouse_local import debezium_capture as capture_module
from lakehouse_local.broker import free_port
from lakehouse_local.postgres import DATABASE, HOST, USER, LocalPostgres
from lakehouse_local.processes import wait_until
from silver.reference import FoldSpec, fold
from tests import signal_capture
from tests.helpers import bronze_record
from tests.integration.test_silver_property import run_group

pytestmark = [pytest.mark.slow, pytest.mark.integration]

TOPIC = f"{capture_module.TOPIC_PREFIX}.public.items"
SPEC = TableSpec(name="items", topic=TOPIC, resnapshot="full")
SIGNAL = f"INSERT INTO {signal_capture.SIGNAL_TABLE} VALUES (%s, 'execute-snapshot', %s)"
WAIT_S = 120.0


def _signal(connection: Any, name: str, kind: str) -> None:
    data = json.dumps({"data-collections": ["public.items"], "type": kind})
    connection.execute(SIGNAL, (name, data))


def _captured(partial: Path) -> list[dict[str, Any]]:
    """The values of the items records the capture has written so far."""
    if not partial.exists():
        return []
    lines = [json.loads(line) for line in partial.read_text(encoding="utf-8").splitlines()]
    return [r["value"]["payload"] for r in lines if r["topic"] == TOPIC and r["value"]]


def _snapshot_ended(partial: Path, kind: str) -> bool:
    reads = [p["source"]["snapshot"] for p in _captured(partial) if p["op"] == "r"]
    if kind == "incremental":
        return reads.count("incremental") >= 4  # every row the table holds then
    return reads.count("last") >= 2  # the initial snapshot's, then the blocking one's


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Record], dict[int, str]]:
    """The captured items records (the lost deletes left out) and PostgreSQL's final rows."""
    root = tmp_path_factory.mktemp("real-resnapshot")
    server = LocalPostgres.in_new_folder(free_port())
    server.start()
    try:
        conninfo = {"host": HOST, "port": server.port, "user": USER, "dbname": DATABASE}
        import psycopg

        with psycopg.connect(**conninfo, autocommit=True) as connection:
            connection.execute("CREATE TABLE items (id integer PRIMARY KEY, name text)")
            connection.execute(
                f"CREATE TABLE {signal_capture.SIGNAL_TABLE} (id varchar(42) PRIMARY KEY, "
                "type varchar(32) NOT NULL, data varchar(2048))"
            )
            marker = capture_module.MARKER_TABLE
            connection.execute(f"CREATE TABLE {marker} (id integer PRIMARY KEY)")
            for key in range(1, 7):
                connection.execute("INSERT INTO items VALUES (%s, %s)", (key, f"v0-{key}"))
            out = root / "out"
            running = signal_capture.start(conninfo, root, timeout_s=300)
            partial = out / f".{capture_module.OUTPUT_FILE}.partial"
            try:
                capture_module._wait_until_streaming(connection, running)
                connection.execute("UPDATE items SET name = 'v1-1' WHERE id = 1")
                connection.execute("DELETE FROM items WHERE id IN (2, 6)")  # to be lost
                connection.execute("INSERT INTO items VALUES (7, 'v1-7')")
                _signal(connection, "blocking-1", "blocking")
                assert wait_until(lambda: _snapshot_ended(partial, "blocking"), WAIT_S)
                connection.execute("UPDATE items SET name = 'v2-3' WHERE id = 3")
                _signal(connection, "incremental-1", "incremental")
                connection.execute("UPDATE items SET name = 'v2-4' WHERE id = 4")
                connection.execute("DELETE FROM items WHERE id = 5")
                assert wait_until(lambda: _snapshot_ended(partial, "incremental"), WAIT_S)
                connection.execute("UPDATE items SET name = 'v3-1' WHERE id = 1")
                connection.execute(f"INSERT INTO {marker} VALUES (1)")
                running.finish(WAIT_S)
            finally:
                running.stop()
            final = dict(connection.execute("SELECT id, name FROM items").fetchall())
    finally:
        server.remove()
    lines = (out / capture_module.OUTPUT_FILE).read_text(encoding="utf-8").splitlines()
    records = [Record(**_fields(json.loads(line))) for line in lines]
    items = [r for r in records if r.topic == TOPIC]
    lost = {2, 6}
    kept = [r for r in items if not (r.key["payload"]["id"] in lost and _is_delete(r))]
    assert len(kept) == len(items) - 4  # two deletes and their Kafka tombstones
    return kept, final


def _fields(line: dict[str, Any]) -> dict[str, Any]:
    return {
        "topic": line["topic"],
        "partition": line["partition"],
        "offset": line["offset"],
        "timestamp_ms": line["timestamp"],
        "key": line["key"],
        "value": line["value"],
    }


def _is_delete(record: Record) -> bool:
    return record.value is None or record.value["payload"]["op"] == "d"


def test_capture_has_both_snapshots(capture: tuple[list[Record], dict[int, str]]) -> None:
    """What Debezium 3 writes: the blocking snapshot's reads carry a commit LSN and the
    markers first/true/last; the incremental ones ``incremental`` and no ``source.lsn``."""
    records, final = capture
    reads = [r.value["payload"] for r in records if r.value and r.value["payload"]["op"] == "r"]
    blocking = [p for p in reads if json.loads(p["source"]["sequence"])[0] is not None]
    blocking = [p for p in blocking if p["source"]["snapshot"] != "incremental"]
    assert [p["source"]["snapshot"] for p in blocking][-1] == "last"
    incremental = [p for p in reads if p["source"]["snapshot"] == "incremental"]
    assert incremental and all(p["source"]["lsn"] is None for p in incremental)
    assert final == {1: "v3-1", 3: "v2-3", 4: "v2-4", 7: "v1-7"}


@pytest.mark.parametrize("split", [1, 3])
def test_silver_equals_postgres_after_resnapshots(
    capture: tuple[list[Record], dict[int, str]],
    spark: SparkSession,
    tmp_path: Path,
    split: int,
) -> None:
    """Delivered in Debezium's order in ``split`` batches (3: reversed, so every read comes
    after the changes that follow it in the source): silver equals PostgreSQL and the fold."""
    records, final = capture
    ordered = records if split == 1 else list(reversed(records))
    size = -(-len(ordered) // split)
    batches = [ordered[i : i + size] for i in range(0, len(ordered), size)]
    rows = run_group(spark, tmp_path / "full", batches, SPEC)
    assert {k[0]: row["name"] for k, row in rows.items()} == final
    expected = fold([bronze_record(r) for r in records], FoldSpec(resnapshot="full"))
    assert rows == expected.rows
    upsert = run_group(spark, tmp_path / "upsert", batches, replace(SPEC, resnapshot="upsert"))
    assert {k[0] for k in upsert} == {*final, 2, 6}  # the lost deletes' keys stay
