"""Property: the SCD type 2 history table equals the reference history, whatever the delivery.

The history is a function of the *set* of bronze records (``docs/silver-semantics.md``, "SCD
type 2 history"). Hypothesis draws 120 scenarios of 1-3 keys, each key with at least three
versions: an insert, tracked changes (names from a three-letter alphabet, so a value comes
back: A -> B -> A), untracked or identical updates, TOAST placeholders, deletes and
re-inserts, sometimes a truncate, sometimes a commit time earlier than the one before it (the
validity columns must still never overlap). The Postgres sequences, the disordered delivery
(permutation, duplicates, up to four micro-batches, first inserts held back to the last batch)
and the packing of many scenarios into a few Spark runs are those of ``test_silver_property``:
each scenario on its own key range, a group's micro-batch ``i`` the union of its scenarios'
batch ``i``. Each group runs through :func:`silver.job.apply_batch` on a fresh warehouse and its
whole history table is compared with :func:`silver.reference_history.fold_history` of the
group's complete record list.

Plain groups alternate between tracking every column and tracking ``name`` only (``notes``
changes then update a version in place); scenarios with a truncate run in a group of their own.

A second test runs re-snapshotted tables (``tests/resnapshots.py``) through a type 2 table
with ``resnapshot = "full"``: a full snapshot's end must end the versions of the keys it did
not read, in silver as in the reference (``RESNAPSHOT_SEED=<seed>`` reproduces it).

Reproduce a failure with the seed printed in its message: ``SCD2_PROPERTY_SEED=<seed>``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from cdc.records import Record
from lakehouse_core.config import TableSpec
from lakehouse_core.delta_io import table_exists
from lakehouse_core.layout import Warehouse
from silver.job import QueryState, apply_batch, entity_tables
from silver.reference import TOAST_PLACEHOLDER, FoldSpec
from silver.reference_history import END_AT, IS_CURRENT, HistoryKey, fold_history
from silver.reference_snapshots import BEFORE_READS
from silver.verify import canonical_rows
from tests.draws import draw_examples, example_count, property_seed
from tests.helpers import bronze_frame, bronze_record, pg_envelope, pg_key
from tests.integration.test_silver_property import (
    BATCHES,
    TOPIC,
    Delivery,
    Scenario,
    draw_deliveries,
    draw_log,
    has_duplicates,
    mismatch_report,
    one_in,
)
from tests.resnapshots import KEY_SPACE as RESNAPSHOT_KEYS
from tests.resnapshots import group_batches, resnapshot_scenarios
from tests.unit.test_reference_snapshots import HAND_CASE

pytestmark = pytest.mark.integration

SPEC = TableSpec(name="customers", topic=TOPIC, stored_as_scd_type=2)
NAME_ONLY = replace(SPEC, track_history_column_list=("name",))
EXAMPLES = example_count(120)
PLAIN_GROUPS = (SPEC, NAME_ONLY)  # one Spark run each
TRUNCATE_ONE_IN = 6
NAMES = ("A", "B", "C")
NOTES = (None, "x", "y")
MIN_VERSIONS = 3
CLOCK_STEP_MS = 5_000

#: The row of an upsert: (name, notes); None for a delete or truncate.
Values = tuple[str, str | None] | None


# --------------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryScenario(Scenario):
    """A :class:`Scenario` whose upserts carry drawn values (``values[n]`` for ``log[n]``)."""

    values: tuple[Values, ...] = ()

    def _record(self, index: int, delivery: Delivery, partition: int, offset: int) -> Record:
        event, values = self.log[delivery.event], self.values[delivery.event]
        if values is None or delivery.tombstone:
            return super()._record(index, delivery, partition, offset)
        key_id = self.key_id(index, event.key or 0)
        name, notes = values
        after = {"id": key_id, "name": name, "notes": notes}
        value = pg_envelope(event.op, event.seq, after=after, ts_ms=event.ts_ms)
        return Record(TOPIC, partition, offset, event.ts_ms, pg_key(key_id), value)

    def describe(self, index: int) -> str:
        lines = super().describe(index).splitlines()
        marked = [
            f"{line} {self.values[int(line.split(':')[0].strip()[1:])]}"
            if line.startswith("    e")
            else line
            for line in lines
        ]
        return "\n".join(marked)


def draw_key_history(draw: st.DrawFn) -> list[tuple[str, Values]]:
    """(op, values) of one key in commit order, with at least MIN_VERSIONS versions (under any
    tracking: every new version changes ``name``)."""
    name = draw(st.sampled_from(NAMES))
    history: list[tuple[str, Values]] = [
        ("r" if one_in(draw, 4) else "c", (name, draw(st.sampled_from(NOTES))))
    ]
    versions, extra = 1, draw(st.integers(0, 2))
    while versions < MIN_VERSIONS or extra:
        if versions >= MIN_VERSIONS:
            extra -= 1
        step = draw(st.sampled_from(["change", "change", "same", "delete"]))
        if step == "delete":
            name = draw(st.sampled_from(NAMES))
            history += [("d", None), ("c", (name, draw(st.sampled_from(NOTES))))]
            versions += 1
            continue
        if step == "change":
            name = draw(st.sampled_from([n for n in NAMES if n != name]))
            versions += 1
        notes = draw(st.sampled_from([*NOTES, TOAST_PLACEHOLDER]))
        history.append(("u", (name, notes)))
    return history


@st.composite
def scenario_strategy(draw: st.DrawFn) -> HistoryScenario:
    keys = draw(st.sampled_from(range(1, 4)))
    queues = {key: draw_key_history(draw) for key in range(keys)}
    snapshot = [key for key, events in queues.items() if events[0][0] == "r"]
    first = {key: queues[key].pop(0) for key in snapshot}
    labels = draw(st.permutations([k for k, events in queues.items() for _ in events]))
    stream: list[tuple[int | None, str]] = []
    stream_values: list[Values] = []
    for key in labels:
        op, values = queues[key].pop(0)
        stream.append((key, op))
        stream_values.append(values)
    if one_in(draw, TRUNCATE_ONE_IN):
        at = draw(st.integers(0, len(stream)))
        stream.insert(at, (None, "t"))
        stream_values.insert(at, None)
    log = draw_log(draw, snapshot, stream)
    if one_in(draw, 3):  # the source's clock steps back: validities still never overlap
        back = draw(st.integers(0, len(log) - 1))
        log[back] = replace(log[back], ts_ms=log[back].ts_ms - CLOCK_STEP_MS)
    deliveries = draw_deliveries(draw, log)
    shuffle = draw(st.integers(1, 2**16)) if one_in(draw, 4) else None
    values = tuple([first[key][1] for key in snapshot] + stream_values)
    return HistoryScenario(keys, tuple(log), tuple(deliveries), shuffle, values)


# --------------------------------------------------------------------------------------------
# Coverage of the interesting cases
# --------------------------------------------------------------------------------------------


def first_batches(scenario: Scenario) -> dict[int, int]:
    first: dict[int, int] = {}
    for delivery in scenario.deliveries:
        first.setdefault(delivery.event, delivery.batch)
    return first


def late_change_into_the_middle(scenario: Scenario) -> bool:
    """Some upsert first arrives after a later upsert of its key was applied."""
    log, first = scenario.log, first_batches(scenario)
    return any(
        a.key == b.key is not None
        and a.op in "cur"
        and b.op in "cur"
        and i < j
        and first[i] > max(d.batch for d in scenario.deliveries if d.event == j)
        for i, a in enumerate(log)
        for j, b in enumerate(log)
    )


def value_comes_back(scenario: HistoryScenario) -> bool:
    """A key's name goes A -> B -> A (the third version equals the first)."""
    names: dict[int, list[str]] = {}
    for event, values in zip(scenario.log, scenario.values, strict=True):
        if event.key is not None and values is not None:
            seen = names.setdefault(event.key, [])
            if not seen or seen[-1] != values[0]:
                seen.append(values[0])
    return any(len(seen) > len(set(seen)) for seen in names.values())


def reinsert(scenario: Scenario) -> bool:
    ops = [e.op for e in scenario.log]
    return any(op == "d" for op in ops) and ops.count("c") + ops.count("r") > scenario.keys


def clock_steps_back(scenario: Scenario) -> bool:
    """A commit time is earlier than the one of the change before it."""
    log = scenario.log
    return any(later.ts_ms < earlier.ts_ms for earlier, later in pairwise(log))


def toast(scenario: HistoryScenario) -> bool:
    return any(v is not None and v[1] == TOAST_PLACEHOLDER for v in scenario.values)


# --------------------------------------------------------------------------------------------
# The test
# --------------------------------------------------------------------------------------------


def draw_scenarios(seed_value: int) -> list[HistoryScenario]:
    return draw_examples(scenario_strategy(), seed_value, EXAMPLES)


def pack(scenarios: list[HistoryScenario]) -> list[tuple[TableSpec, list[int]]]:
    """(spec, scenario indices) per Spark run."""
    plain = [i for i, s in enumerate(scenarios) if not s.has_truncate]
    truncating = [i for i, s in enumerate(scenarios) if s.has_truncate]
    groups = [(spec, plain[g :: len(PLAIN_GROUPS)]) for g, spec in enumerate(PLAIN_GROUPS)]
    return [(spec, indices) for spec, indices in [*groups, (SPEC, truncating)] if indices]


def history_rows(spark: SparkSession, path: str) -> dict[HistoryKey, dict[str, Any]]:
    if not table_exists(spark, path):
        return {}
    frame = spark.read.format("delta").load(path)
    return {((row["id"],), row["__start_at"]): row for row in canonical_rows(frame)}


def differences(
    expected: dict[HistoryKey, dict[str, Any]], actual: dict[HistoryKey, dict[str, Any]]
) -> Iterator[tuple[int, str]]:
    """(key id, what differs) for every history row that is not the expected one."""
    for row_key in sorted(set(expected) | set(actual), key=repr):
        want, got = expected.get(row_key), actual.get(row_key)
        if want != got:
            yield row_key[0][0], f"row {row_key}:\n      got      {got}\n      expected {want}"


def check_group(
    spark: SparkSession,
    warehouse: Path,
    scenarios: list[HistoryScenario],
    spec: TableSpec,
    indices: list[int],
) -> str | None:
    """Run one group; None if its history equals the model's, else a report of what differs."""
    batches: list[list[Record]] = [[] for _ in range(BATCHES)]
    for index in indices:
        for batch, record in scenarios[index].records(index):
            batches[batch].append(record)
    expected = fold_history(
        [bronze_record(r) for batch in batches for r in batch],
        FoldSpec(),
        spec.track_history_column_list,
    )
    versions = Counter(key for key, _ in expected)
    assert min(versions.values()) >= MIN_VERSIONS, "a key has fewer versions than drawn"
    header = f"scenarios {indices} (tracking {spec.track_history_column_list or 'all'})"
    tables = entity_tables(Warehouse.from_path(warehouse), spec)
    assert tables.history is not None
    state = QueryState()  # kept between batches, as the streaming query keeps it
    try:
        for batch_id, records in enumerate(batches):
            if records:
                frame = bronze_frame(spark, records, batch_id)
                apply_batch(frame, batch_id, spec, tables, "history-property", state=state)
    except Exception as error:
        return f"{header}: apply_batch failed: {type(error).__name__}: {error}"[:4000]
    wrong = list(differences(expected, history_rows(spark, tables.history.history)))
    if not wrong:
        return None
    return mismatch_report(header, wrong, scenarios)


def test_history_equals_model_under_any_delivery(spark: SparkSession, tmp_path: Path) -> None:
    seed_value = property_seed("SCD2_PROPERTY_SEED")
    started = time.monotonic()
    scenarios = draw_scenarios(seed_value)
    assert len(scenarios) == EXAMPLES

    coverage = {
        "late change into the middle": sum(map(late_change_into_the_middle, scenarios)),
        "value comes back": sum(map(value_comes_back, scenarios)),
        "re-insert": sum(map(reinsert, scenarios)),
        "toast": sum(map(toast, scenarios)),
        "truncate": sum(s.has_truncate for s in scenarios),
        "duplicates": sum(map(has_duplicates, scenarios)),
        "clock steps back": sum(map(clock_steps_back, scenarios)),
    }
    assert all(count >= 10 for count in coverage.values()), f"weak coverage: {coverage}"

    failures = [
        f"group {group}: {report}"
        for group, (spec, indices) in enumerate(pack(scenarios))
        if (report := check_group(spark, tmp_path / f"group-{group}", scenarios, spec, indices))
    ]
    print(f"history property: seed {seed_value}, {coverage}, {time.monotonic() - started:.0f} s")
    assert not failures, f"SCD2_PROPERTY_SEED={seed_value}\n" + "\n\n".join(failures)


# --------------------------------------------------------------------------------------------
# Full re-snapshots (resnapshot = "full")
# --------------------------------------------------------------------------------------------

FULL = replace(SPEC, resnapshot="full")


def resnapshot_history(
    spark: SparkSession, warehouse: Path, batches: list[list[Record]]
) -> tuple[dict[HistoryKey, dict[str, Any]], dict[HistoryKey, dict[str, Any]]]:
    """(the reference history of every record of ``batches``, silver's history table after
    them, applied in order on a fresh warehouse) for :data:`FULL`."""
    records = [bronze_record(r) for batch in batches for r in batch]
    expected = fold_history(records, FoldSpec(resnapshot="full"))
    tables = entity_tables(Warehouse.from_path(warehouse), FULL)
    assert tables.history is not None
    state = QueryState()
    for batch_id, batch in enumerate(batches):
        if batch:
            frame = bronze_frame(spark, batch, batch_id)
            apply_batch(frame, batch_id, FULL, tables, "history-resnapshot", state=state)
    return expected, history_rows(spark, tables.history.history)


def test_history_equals_model_for_full_resnapshots(spark: SparkSession, tmp_path: Path) -> None:
    """``resnapshot = "full"`` on a type 2 table: re-snapshotted tables (tests/resnapshots.py:
    deletes lost before a full blocking snapshot, incremental reads, any delivery), packed into
    one table on their own key ranges (a snapshot's end cuts into the other scenarios too),
    give the reference history, which ends at a full snapshot's end the versions of the keys
    it did not read; then docs/silver-semantics.md's hand case, its end marker first."""
    seed = property_seed("RESNAPSHOT_SEED")
    scenarios = draw_examples(resnapshot_scenarios(), seed, example_count(30))
    batches = group_batches(scenarios, list(range(len(scenarios))))
    expected, actual = resnapshot_history(spark, tmp_path / "drawn", batches)
    ended = [key for key, row in expected.items() if (row[END_AT] or (0, 0))[1] == BEFORE_READS]
    assert len(ended) >= 5, f"weak coverage: {len(ended)} versions ended by a snapshot's end"
    wrong = list(differences(expected, actual))
    bad = sorted({key_id // RESNAPSHOT_KEYS for key_id, _ in wrong})
    report = [text for _, text in wrong[:20]] + [scenarios[i].describe(i) for i in bad[:5]]
    assert not wrong, f"RESNAPSHOT_SEED={seed}\n" + "\n".join(report)

    hand = [HAND_CASE[:2], HAND_CASE[2:5], HAND_CASE[5:]]
    expected, actual = resnapshot_history(spark, tmp_path / "hand", hand)
    assert list(differences(expected, actual)) == []
    assert sorted((key[0], row["name"], row[IS_CURRENT]) for (key, _), row in actual.items()) == [
        (1, "one", True),
        (2, "two", False),  # deleted while the offsets were lost: ended by the snapshot's end
        (3, "three", True),
        (4, "four", True),
        (5, "five", True),
    ]
