"""Property: a fresh read of a silver table equals the reference fold of bronze, and silver
after it has caught up, wherever silver stands.

The scenarios are the silver property test's (:mod:`tests.integration.test_silver_property`:
realistic Postgres key histories, duplicates, disorder, truncates, split into micro-batches),
packed into one group without truncates and one with them, plus records silver quarantines.
Each micro-batch is appended to a real bronze Delta table (one version each) and applied to
silver with :func:`silver.job.apply_batch`. At three points (bronze holds three batches,
silver none; all, silver half of them, so the kept piece of the first read reaches below what
silver applied and is joined with the new one; all, silver all, read with a tail of all but
the first, which overlaps what silver applied, as when silver commits while a read pins its
pair) the fresh read of :func:`lakehouse.ops.fresh.fresh_read_after` (whose tail is kept
between reads, decoded piece by piece) must equal :func:`silver.reference.fold` of every
bronze record appended so far, and silver's own rows once it has applied them all.

Reproduce a failure with the seed printed in its message: ``FRESH_PROPERTY_SEED=<seed>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from bronze.table import ensure_bronze_table
from cdc.records import Record
from lakehouse.ops.fresh import fresh_read_after
from lakehouse_core.config import PipelineConfig
from lakehouse_core.layout import Warehouse
from silver.job import QueryState, apply_batch, bronze_path, entity_tables
from silver.reference import fold
from silver.verify import canonical_rows
from tests.draws import draw_examples, example_count, property_seed
from tests.helpers import bronze_frame, bronze_record, pg_envelope, pg_key
from tests.integration.test_silver_property import (
    BATCHES,
    MODEL,
    SPEC,
    TOPIC,
    TS_BASE_MS,
    Scenario,
    group_batches,
    scenario_strategy,
    silver_rows,
)

pytestmark = pytest.mark.integration

EXAMPLES = example_count(30)
CONFIG = PipelineConfig(tables=(SPEC,))
Rows = dict[tuple[Any, ...], dict[str, Any]]


def malformed(batch: int) -> list[Record]:
    """Records silver quarantines (no JSON object, an unknown op, no key), on offsets no
    scenario uses."""
    offset = 900_000 + 10 * batch
    unknown = pg_envelope("x", (None, 5), {"id": 7, "name": "n", "notes": None})
    keyless = pg_envelope("c", (None, 6), {"id": 8, "name": "n", "notes": None})
    return [
        Record(TOPIC, 0, offset, TS_BASE_MS, pg_key(7), "not an envelope"),
        Record(TOPIC, 1, offset + 1, TS_BASE_MS, pg_key(7), unknown),
        Record(TOPIC, 2, offset + 2, TS_BASE_MS, None, keyless),
    ]


def fresh_rows(spark: SparkSession, warehouse: Warehouse, applied: int | None) -> Rows:
    read = fresh_read_after(spark, warehouse, CONFIG, SPEC, applied)
    return {(row["id"],): row for row in canonical_rows(read.rows)}


def check_group(
    spark: SparkSession, root: Path, scenarios: list[Scenario], group: list[int]
) -> str:
    """Run one group through bronze and silver, reading fresh at each point; the problems
    found (empty: none)."""
    batches = group_batches(scenarios, group)
    batches = [[*records, *malformed(b)] if b % 2 else records for b, records in enumerate(batches)]
    expected = fold([bronze_record(r) for batch in batches for r in batch], MODEL)
    assert expected.quarantined, "the group has no record silver quarantines"
    warehouse = Warehouse.from_path(root)
    bronze = bronze_path(warehouse, SPEC)
    ensure_bronze_table(spark, bronze, TOPIC)  # version 0; batch b is version b + 1
    tables = entity_tables(warehouse, SPEC)
    state = QueryState()
    problems = []
    # (bronze holds batches up to, silver applies batches up to, the bronze version the read
    # takes silver to have applied): the reads' tails are decoded piece by piece and kept
    # between reads (a read decodes only the commits the last one had not), silver's applied
    # version moves into the first piece, and the last read's tail reaches below the pieces.
    points = [(3, 0, 0), (BATCHES, 2, 2), (BATCHES, BATCHES, 1)]
    appended = applied = 0
    for held, through, said in points:
        while appended < held:
            frame = bronze_frame(spark, batches[appended], appended)
            frame.write.format("delta").mode("append").save(bronze)
            appended += 1
        while applied < through:
            if batches[applied]:
                frame = bronze_frame(spark, batches[applied], applied)
                apply_batch(frame, applied, SPEC, tables, "fresh-prop", state=state)
            applied += 1
        want = fold([bronze_record(r) for batch in batches[:held] for r in batch], MODEL).rows
        got = fresh_rows(spark, warehouse, said)
        if got != want:
            problems.append(
                f"group {group}, bronze through batch {held}, silver through batch "
                f"{through}, read after {said}:"
            )
            problems += [
                f"  key {key}: fresh {got.get(key)}\n    expected {want.get(key)}"
                for key in sorted(set(got) | set(want))
                if got.get(key) != want.get(key)
            ]
    caught_up = silver_rows(spark, tables.silver)
    if caught_up != expected.rows:
        problems.append(f"group {group}: silver after catching up differs from the fold")
    return "\n".join(problems)


def test_fresh_read_equals_fold_and_caught_up_silver(spark: SparkSession, tmp_path: Path) -> None:
    seed_value = property_seed("FRESH_PROPERTY_SEED")
    scenarios = draw_examples(scenario_strategy(), seed_value, EXAMPLES)
    plain = [i for i, s in enumerate(scenarios) if not s.has_truncate]
    truncating = [i for i, s in enumerate(scenarios) if s.has_truncate]
    assert plain and truncating, "the draw has no group with a truncate or none without"
    reports = [
        check_group(spark, tmp_path / f"group-{n}", scenarios, group)
        for n, group in enumerate((plain, truncating))
    ]
    failures = [r for r in reports if r]
    assert not failures, f"FRESH_PROPERTY_SEED={seed_value}\n" + "\n\n".join(failures)[:8000]
