"""Property: with ``resnapshot = "full"`` the silver MERGE job equals the reference fold for
re-snapshotted tables (tests/resnapshots.py: an initial snapshot, streamed changes of which
some are lost, a full blocking snapshot with Debezium's markers, more changes, incremental
snapshot reads interleaved throughout), whatever the delivery order, duplicates and batch
split. The fold's own convergence to the source is tests/unit/test_reference_snapshots.py.

Scenarios are packed into a few tables, each on its own key range; their LSNs overlap, so a
snapshot's end also cuts into the other scenarios of its table (the fold sees the combined log,
as silver does). Reproduce a failure with ``RESNAPSHOT_SEED=<seed>``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc.records import Record
from lakehouse_core.config import TableSpec
from silver.reference import FoldSpec, fold
from tests.draws import draw_examples, example_count, property_seed
from tests.helpers import bronze_record
from tests.integration.test_silver_property import differences, run_group
from tests.resnapshots import KEY_SPACE, TOPIC, group_batches, resnapshot_scenarios
from tests.unit.test_reference_snapshots import HAND_CASE

pytestmark = pytest.mark.integration

SPEC = TableSpec(name="customers", topic=TOPIC, resnapshot="full")
MODEL = FoldSpec(resnapshot="full")
GROUPS = 2


def _check(
    spark: SparkSession, warehouse: Path, batches: list[list[Record]]
) -> tuple[list[str], dict[int, str]]:
    """What differs between silver after ``batches`` and the fold of all their records, and
    silver's names by key."""
    expected = fold([bronze_record(r) for batch in batches for r in batch], MODEL)
    assert not expected.quarantined
    actual = run_group(spark, warehouse, batches, SPEC)
    names = {key[0]: row["name"] for key, row in actual.items()}
    return [line for _, line in differences(expected.rows, actual)], names


def test_silver_equals_fold_for_resnapshots(spark: SparkSession, tmp_path: Path) -> None:
    seed = property_seed("RESNAPSHOT_SEED")
    scenarios = draw_examples(resnapshot_scenarios(), seed, example_count(40))
    assert sum(s.loses_a_delete for s in scenarios) >= 5
    failures = []
    for group in range(GROUPS):
        indices = list(range(group, len(scenarios), GROUPS))
        wrong, _ = _check(spark, tmp_path / f"g{group}", group_batches(scenarios, indices))
        if wrong:
            bad = sorted({int(line.split()[1].rstrip(":")) // KEY_SPACE for line in wrong})
            failures += wrong + [scenarios[i].describe(i) for i in bad]
    assert not failures, f"RESNAPSHOT_SEED={seed}\n" + "\n".join(failures)


def test_hand_case_in_silver(spark: SparkSession, tmp_path: Path) -> None:
    """docs/silver-semantics.md's case, the end marker in the first batch, the reads after."""
    batches = [HAND_CASE[:2], HAND_CASE[2:5], HAND_CASE[5:]]
    wrong, names = _check(spark, tmp_path / "full", batches)
    assert wrong == []
    assert names == {1: "one", 3: "three", 4: "four", 5: "five"}
    # The default (upsert) keeps key 2, whose delete was lost.
    upsert = run_group(spark, tmp_path / "upsert", batches, replace(SPEC, resnapshot="upsert"))
    assert (2,) in upsert
