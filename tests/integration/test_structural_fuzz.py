"""Structural fuzz: each JSON type at every path of real Debezium records, in one batch.

The base records are real captured output (:mod:`tests.structural_fuzz`): the ``accounts``
table's snapshot read, insert, update and delete and the delete's tombstone, all paths of key
and value (the Connect schemas included), and an update of ``typed_values`` (a column of each
captured PostgreSQL type), all paths but the column names of its row schemas (a variant
renaming a column is a schema version of its own, parsed in a pass of its own; the
``accounts`` variants rename each of theirs). Every variant (about 12,800) goes with the good
records through the file source, bronze and silver in one ``--once`` run (one micro-batch
per table), which must finish; then per table:

* bronze holds every record, and the run's counts add up: each record was applied, is a
  tombstone, or is in the quarantine table;
* the quarantine table holds exactly the records the reference fold quarantines, with the
  same reasons, and silver equals the fold of bronze (``lakehouse verify``'s comparison);
* the good records' rows are exactly the fold of the good records alone, in the table's
  types (a variant's schema may turn a column to text, a lossless change).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc.records import Record
from cdc.sources import SourceSpec
from lakehouse.run.pipeline import run_once
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import QUARANTINE_TABLE, Warehouse
from silver.reference import BronzeRecord, fold
from silver.verify import canonical_rows, fold_spec, row_differences
from tests.helpers import bronze_record
from tests.structural_fuzz import JsonPath, Part, captured_records, is_column_name, variants

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ACCOUNTS, TYPED = "pg.public.accounts", "pg.public.typed_values"
#: A type the table cannot take is quarantined (``fail``, the default, would stop the run:
#: asked for, so no input's fault).
CONFIG = PipelineConfig(
    tables=tuple(
        TableSpec(name=topic.rsplit(".", 1)[1], topic=topic, on_incompatible_type="quarantine")
        for topic in (ACCOUNTS, TYPED)
    )
)


def skipped(record: Record, part: Part, path: JsonPath) -> bool:
    return record.topic == TYPED and is_column_name(part, path)


def test_every_json_type_at_every_path_is_kept_and_stops_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    good = captured_records()
    fuzzed = [v.record for v in variants(good, skipped)]
    assert len(fuzzed) > 12_000
    source = tmp_path / "source"
    source.mkdir()
    (source / "part-00000.jsonl").write_text(
        "".join(r.to_line() + "\n" for r in [*good, *fuzzed]), encoding="utf-8"
    )
    warehouse = Warehouse.from_path(tmp_path / "warehouse")

    report = run_once(spark, SourceSpec("files", str(source)), warehouse, CONFIG)

    quarantine = spark.read.format("delta").load(warehouse.table("silver", QUARANTINE_TABLE))
    for spec in CONFIG.tables:
        sent = [r for r in [*good, *fuzzed] if r.topic == spec.topic]
        bronze = _bronze(spark, warehouse, spec.topic)
        assert sorted(r.offset for r in bronze) == sorted(r.offset for r in sent)
        silver = spark.read.format("delta").load(warehouse.table("silver", spec.name))
        expected = fold(bronze, fold_spec(spec, silver.schema))
        counts = report.summary.tables[spec.name]
        assert counts.read == len(bronze)
        assert counts.tombstones == expected.skipped_tombstones
        assert counts.quarantined == len(expected.quarantined)
        changes = counts.read - counts.tombstones - counts.quarantined
        assert len(expected.rows) <= counts.applied <= changes

        kept = quarantine.where(F.col("entity") == spec.name).select("offset", "reason")
        assert {r.offset: r.reason for r in kept.collect()} == {
            r.offset: why for r, why in expected.quarantined
        }
        rows = {(row["id"],): row for row in canonical_rows(silver)}
        differences = list(row_differences(expected.rows, rows))
        assert not differences, differences[:20]

        # In the table's types: a variant whose schema turns a column to text (a lossless
        # change, "Schema changes") makes the good records' values their text.
        alone = fold(
            [bronze_record(r) for r in good if r.topic == spec.topic],
            fold_spec(spec, silver.schema),
        )
        assert alone.rows
        for key, row in alone.rows.items():
            assert {name: rows[key].get(name) for name in row} == row, key


def _bronze(spark: SparkSession, warehouse: Warehouse, topic: str) -> list[BronzeRecord]:
    frame = spark.read.format("delta").load(warehouse.table("bronze", table_name_for_topic(topic)))
    return [
        BronzeRecord(r.topic, r.partition, r.offset, _bytes(r.key), _bytes(r.value))
        for r in frame.select("topic", "partition", "offset", "key", "value").collect()
    ]


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)
