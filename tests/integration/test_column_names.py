"""Any column name a source sends works in silver (docs/silver-semantics.md, "Column names").

A source column named like one of bronze's columns (``key``, ``value``, ``offset``, ...), like a
helper column of parsing, or like anything the project's code names, is an ordinary column;
a name :mod:`lakehouse_core.columns` reserves quarantines the records that carry a value in it, and
the run goes on. The names are drawn from all of those and from random identifiers, through both
table formats, and silver is compared with the reference fold.
"""

from __future__ import annotations

import ast
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from cdc.records import Record
from lakehouse_core.columns import METADATA_COLUMNS, RESERVED_COLUMNS, column_name_problem
from lakehouse_core.config import TableSpec
from lakehouse_core.errors import ConfigError
from lakehouse_core.layout import QUARANTINE_TABLE, Warehouse
from silver.job import apply_batch, entity_tables
from silver.reference import fold
from silver.verify import canonical_rows, fold_spec
from tests.draws import draw_examples, example_count, property_seed
from tests.helpers import bronze_frame, bronze_record, connect_field, pg_envelope

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lakehouse_core", "cdc", "bronze", "silver", "gold", "expectations", "lakehouse")

#: Bronze's columns, the Kafka source's, and what parsing names on the way.
BRONZE_AND_PARSING = [
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
    "headers",
    "k",
    "v",
    "payload",
    "schema",
    "before",
    "after",
    "op",
    "source",
    "ts_ms",
    "transaction",
    "_env",
    "_row",
    "_key",
    "_value",
    "_rkey",
    "_why",
    "_prepared_0",
    "_key_value_0",
    "_sequence_parts",
    "_sequence_value",
    "_ingested_at",
    "_ingest_batch",
    "_id",
    "id_",
    "seq_",
]


def project_names() -> set[str]:
    """Every plain-name string literal of the project's code that starts with an underscore
    (the names its DataFrames give their helper columns)."""
    names = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    text = node.value
                    if text.startswith("_") and text.isidentifier() and text.isascii():
                        names.add(text)
    return names


POOL = sorted({*BRONZE_AND_PARSING, *project_names(), *RESERVED_COLUMNS} - {"id", "seq"})
IDENTIFIER = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)
#: One spelling per name, letter case aside (the examples share one table).
SPELLING = {name.lower(): name for name in POOL}
NAMES = st.lists(
    st.one_of(st.sampled_from(POOL), IDENTIFIER).map(lambda n: SPELLING.setdefault(n.lower(), n)),
    min_size=1,
    max_size=10,
    unique_by=str.lower,
).map(lambda names: [n for n in names if n.lower() not in ("id", "seq")])

EVENTS = TableSpec(
    name="named", topic="app.named", format="events", keys=("id",), sequence_by=("seq",)
)
DEBEZIUM = TableSpec(name="named", topic="pg.public.named")

#: Each name's values have one type (a name's hash picks it), so schemas never conflict.
KINDS: tuple[tuple[str, Any], ...] = (("int64", 7), ("string", "text"), ("boolean", True))


def kind_of(name: str) -> tuple[str, Any]:
    return KINDS[zlib.crc32(name.lower().encode()) % len(KINDS)]


def rows_for(examples: Iterable[list[str]]) -> list[dict[str, Any]]:
    """Per example: one row with a value in every usable name; per refused name, one row with
    a value in it (quarantined) and one with null in it (applied)."""
    rows: list[dict[str, Any]] = []
    for names in examples:
        usable = [n for n in names if column_name_problem(n) is None]
        rows.append({n: kind_of(n)[1] for n in usable})
        for name in names:
            if column_name_problem(name) is not None:
                rows += [{name: kind_of(name)[1]}, {name: None}]
    return [{"id": i, "seq": 1, **row} for i, row in enumerate(rows)]


def events_records(rows: list[dict[str, Any]]) -> list[Record]:
    return [Record(EVENTS.topic, 0, i, 1_000 + i, None, row) for i, row in enumerate(rows)]


def debezium_records(rows: list[dict[str, Any]]) -> list[Record]:
    records = []
    for i, row in enumerate(rows):
        fields = [connect_field("id", "int64", optional=False)]
        fields += [connect_field(n, kind_of(n)[0]) for n in row if n not in ("id", "seq")]
        after = {n: v for n, v in row.items() if n != "seq"}
        value = pg_envelope("c", (100, 10 + i), after=after, fields=fields)
        key = {
            "schema": {"type": "struct", "fields": [{"field": "id", "type": "int64"}]},
            "payload": {"id": row["id"]},
        }
        records.append(Record(DEBEZIUM.topic, 0, i, 1_000 + i, key, value))
    return records


def apply_in_two_batches(
    spark: SparkSession, root: Path, spec: TableSpec, records: list[Record]
) -> list[tuple[str, int]]:
    """Apply ``records`` in two micro-batches; the quarantine reasons, most first."""
    tables = entity_tables(Warehouse.from_path(root), spec)
    half = len(records) // 2
    reasons: dict[str, int] = {}
    for batch_id, part in enumerate((records[:half], records[half:])):
        report = apply_batch(bronze_frame(spark, part, batch_id), batch_id, spec, tables, "names")
        for reason, count in report.reasons:
            reasons[reason] = reasons.get(reason, 0) + count
    return sorted(reasons.items())


def assert_silver_equals_fold(
    spark: SparkSession, root: Path, spec: TableSpec, records: list[Record]
) -> None:
    expected = fold([bronze_record(r) for r in records], fold_spec(spec, None))
    silver = entity_tables(Warehouse.from_path(root), spec).silver
    actual = {(row["id"],): row for row in canonical_rows(spark.read.format("delta").load(silver))}
    assert actual == expected.rows
    folded: dict[str, int] = {}
    for _, reason in expected.quarantined:
        folded[reason] = folded.get(reason, 0) + 1
    quarantine = Warehouse.from_path(root).table("silver", QUARANTINE_TABLE)
    kept = spark.read.format("delta").load(quarantine).groupBy("reason").count().collect()
    assert sorted((r.reason, r["count"]) for r in kept) == sorted(folded.items())


@pytest.mark.parametrize(
    ("spec", "records_of"), [(EVENTS, events_records), (DEBEZIUM, debezium_records)]
)
def test_any_column_name_reaches_silver_or_quarantines_its_records(
    spark: SparkSession, tmp_path: Path, spec: TableSpec, records_of: Any
) -> None:
    seed = property_seed("COLUMN_NAMES_SEED")
    # Every name of the pool in some example (20 a row: a row of hundreds of columns is a
    # plan Spark takes minutes to optimise), then drawn ones.
    pooled = [POOL[i : i + 20] for i in range(0, len(POOL), 20)]
    examples = [*pooled, *draw_examples(NAMES, seed, example_count(8))]
    rows = rows_for(examples)
    records = records_of(rows)

    reasons = apply_in_two_batches(spark, tmp_path, spec, records)

    refused = {n for names in examples for n in names if column_name_problem(n)}
    assert reasons == sorted(
        (column_name_problem(n) or "", sum(1 for r in rows if r.get(n) is not None))
        for n in refused
    ), f"seed {seed}"
    silver = entity_tables(Warehouse.from_path(tmp_path), spec).silver
    columns = set(spark.read.format("delta").load(silver).columns)
    usable = {n for names in examples for n in names if n not in refused}
    assert columns == {"id", *usable, *METADATA_COLUMNS} | ({"seq"} if spec is EVENTS else set())
    assert_silver_equals_fold(spark, tmp_path, spec, records)


def test_value_and_key_columns_keep_their_values(spark: SparkSession, tmp_path: Path) -> None:
    """The issue's record: ``{"id": 1, "value": "a", "seq": 10}`` crashed the silver query."""
    records = events_records([{"id": 1, "value": "a", "key": "k", "offset": 3, "seq": 10}])

    apply_in_two_batches(spark, tmp_path, EVENTS, records)

    silver = entity_tables(Warehouse.from_path(tmp_path), EVENTS).silver
    row = spark.read.format("delta").load(silver).select("id", "value", "key", "offset").first()
    assert tuple(row or ()) == (1, "a", "k", 3)


@pytest.mark.parametrize("column", ["_op", "_SEQUENCE", "__start_at", "_change_type"])
def test_a_declared_reserved_column_is_refused_at_start(column: str) -> None:
    with pytest.raises(ConfigError, match=rf"column name '{column}' is reserved.*rename it"):
        TableSpec(name="t", topic="t", format="events", keys=(column,), sequence_by=("seq",))
    with pytest.raises(ConfigError, match=rf"column name '{column}' is reserved"):
        TableSpec(name="t", topic="t", format="events", keys=("id",), sequence_by=column)
