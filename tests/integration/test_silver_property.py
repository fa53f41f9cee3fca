"""Property: the silver MERGE job equals the reference fold, whatever the delivery.

``docs/silver-semantics.md`` says a silver table is a function of the *set* of bronze records:
arrival order, at-least-once duplicates and micro-batch boundaries change nothing. Hypothesis
draws 200 small scenarios (1-4 keys, realistic Postgres sequences, optional truncate, random
delivery). A Delta MERGE costs seconds, so the scenarios are not run one by one: they are packed
into a few groups, each scenario on its own key range (key id = scenario index * 1000 + k) and
its own partition offsets, and a group's micro-batch ``i`` is the union of its scenarios' batch
``i``. Each group runs through :func:`silver.job.apply_batch` on a fresh table and the whole
table is compared with :func:`silver.reference.fold` of the group's complete record list (the
model sees the combined log, so a truncate that reaches into another scenario is still checked).

Scenarios with a truncate run in groups of their own: a truncate removes every older row of
the table (snapshot reads, with their null last commit, are older than any streamed change), so
in a mixed group it would hide most other scenarios. Within a truncate group the scenarios'
sequences overlap, so each truncate cuts into the other scenarios' histories.

Reproduce a failure with the seed printed in its message: ``SILVER_PROPERTY_SEED=<seed>``.
"""

from __future__ import annotations

import itertools
import random
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
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
from silver.reference import BronzeRecord, FoldSpec, fold
from silver.verify import canonical_rows
from tests.delta_rs import assert_delta_rs_sql_reads_same_rows
from tests.draws import draw_examples, example_count, property_seed
from tests.helpers import bronze_frame, bronze_record, pg_envelope, pg_key

pytestmark = pytest.mark.integration

SPEC = TableSpec(name="customers", topic="shop.public.customers")
MODEL = FoldSpec()
TOPIC = SPEC.topic

EXAMPLES = example_count(200)
PLAIN_GROUPS = 1  # Spark runs for the scenarios without a truncate
TRUNCATE_GROUPS = 2  # Spark runs for the scenarios with one
BATCHES = 4
TRUNCATE_ONE_IN = 8  # about 20% of the scenarios have a truncate
PARTITIONS = 3
KEY_SPACE = 1000  # key id = scenario index * KEY_SPACE + k
OFFSET_BLOCK = 100  # a scenario's offsets in a partition: [index * 100, index * 100 + 100)
# LSNs start just below 10**10 so that many scenarios cross a digit boundary (the stored
# sequence is zero padded text; unpadded text would compare "9..." above "10...").
LSN_BASE = 9_999_980_000
TS_BASE_MS = 1_767_225_600_000


# --------------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One change in a scenario's log; the log is in commit (Postgres WAL emission) order."""

    key: int | None  # key number within the scenario (0-3); None for a truncate
    op: str  # c, u, d, r or t
    seq: tuple[int | None, int]  # source.sequence: (last commit LSN, LSN)
    ts_ms: int  # source.ts_ms (commit time)


@dataclass(frozen=True)
class Delivery:
    """One bronze record of a scenario, in delivery order."""

    event: int  # index into Scenario.log
    tombstone: bool  # the Kafka tombstone that follows a delete
    batch: int  # micro-batch, 0 .. BATCHES - 1


@dataclass(frozen=True)
class Scenario:
    """Key histories in a Postgres log and one delivery of them; placed in a group by index."""

    keys: int
    log: tuple[Event, ...]
    deliveries: tuple[Delivery, ...]
    offset_shuffle: int | None  # None: offsets follow delivery order, else a shuffle seed

    @property
    def has_truncate(self) -> bool:
        return any(e.op == "t" for e in self.log)

    def key_id(self, index: int, key: int) -> int:
        return index * KEY_SPACE + key

    def records(self, index: int) -> list[tuple[int, Record]]:
        """(batch, record) in delivery order, for the scenario at position ``index``."""
        partitions = [self._partition(index, d) for d in self.deliveries]
        offsets: dict[int, list[int]] = defaultdict(list)
        for partition in partitions:
            block = offsets[partition]
            block.append(index * OFFSET_BLOCK + len(block))
            assert len(block) <= OFFSET_BLOCK
        if self.offset_shuffle is not None:
            rng = random.Random(self.offset_shuffle)
            for block in offsets.values():
                rng.shuffle(block)
        used: Counter[int] = Counter()
        result = []
        for delivery, partition in zip(self.deliveries, partitions, strict=True):
            offset = offsets[partition][used[partition]]
            used[partition] += 1
            result.append((delivery.batch, self._record(index, delivery, partition, offset)))
        return result

    def _partition(self, index: int, delivery: Delivery) -> int:
        key = self.log[delivery.event].key
        return 0 if key is None else self.key_id(index, key) % PARTITIONS

    def _record(self, index: int, delivery: Delivery, partition: int, offset: int) -> Record:
        event = self.log[delivery.event]
        if event.key is None:
            value = pg_envelope("t", event.seq, ts_ms=event.ts_ms)
            return Record(TOPIC, partition, offset, event.ts_ms, None, value)
        key_id = self.key_id(index, event.key)
        key = pg_key(key_id)
        if delivery.tombstone:
            return Record(TOPIC, partition, offset, event.ts_ms, key, None)
        if event.op == "d":
            before = {"id": key_id, "name": None, "notes": None}
            value = pg_envelope("d", event.seq, before=before, ts_ms=event.ts_ms)
        else:
            n = delivery.event
            after = {"id": key_id, "name": f"k{key_id}-e{n}", "notes": None if n % 3 else f"{n}"}
            value = pg_envelope(event.op, event.seq, after=after, ts_ms=event.ts_ms)
        return Record(TOPIC, partition, offset, event.ts_ms, key, value)

    def describe(self, index: int) -> str:
        """The scenario's log and delivery, for a failure report."""
        shuffled = "shuffled" if self.offset_shuffle is not None else "in delivery order"
        lines = [f"scenario {index} (offsets {shuffled})", "  log (commit order):"]
        for n, e in enumerate(self.log):
            who = "table" if e.key is None else f"key {self.key_id(index, e.key)}"
            lines.append(f"    e{n}: {e.op} {who} seq={e.seq}")
        lines.append("  delivery:")
        for delivery, (batch, record) in zip(self.deliveries, self.records(index), strict=True):
            what = "tombstone of " if delivery.tombstone else ""
            lines.append(
                f"    batch {batch} partition {record.partition} offset {record.offset}: "
                f"{what}e{delivery.event}"
            )
        return "\n".join(lines)


def one_in(draw: st.DrawFn, n: int) -> bool:
    """True with probability 1/n (``st.integers`` would favour its lower bound)."""
    return bool(draw(st.sampled_from(range(n))) == 0)


def draw_stream(draw: st.DrawFn, keys: int) -> tuple[list[int], list[tuple[int | None, str]]]:
    """(keys read by the initial snapshot, the streamed changes in commit order).

    Each key has 1-6 events: a snapshot read or an insert, then updates and deletes, an insert
    again after a delete. The keys' histories are interleaved; sometimes a truncate
    (key None) sits somewhere in the stream.
    """
    snapshot: list[int] = []
    queues: dict[int, list[str]] = {}
    for key in range(keys):
        length = draw(st.sampled_from(range(1, 7)))
        ops = ["r" if one_in(draw, 4) else "c"]
        while len(ops) < length:
            ops.append("c" if ops[-1] == "d" else draw(st.sampled_from(["u", "d"])))
        if ops[0] == "r":
            snapshot.append(key)
            ops = ops[1:]
        queues[key] = ops
    labels = draw(st.permutations([k for k, ops in queues.items() for _ in ops]))
    stream: list[tuple[int | None, str]] = [(k, queues[k].pop(0)) for k in labels]
    if one_in(draw, TRUNCATE_ONE_IN):
        stream.insert(draw(st.integers(0, len(stream))), (None, "t"))
    return snapshot, stream


def draw_log(
    draw: st.DrawFn, snapshot: list[int], stream: list[tuple[int | None, str]]
) -> list[Event]:
    """Give the changes realistic Postgres sequences ``[last commit LSN, LSN]``.

    The stream is cut into transactions (in commit order). Some transaction began before the
    previous one: its first change sits earlier in the WAL, so the lsn alone goes backwards
    while (last commit, lsn) still grows. Snapshot reads share the snapshot's ``[null, lsn]``;
    the first streamed transaction may have a null last commit too.
    """
    transactions: list[list[int]] = []
    for position in range(len(stream)):
        if transactions and one_in(draw, 3):
            transactions[-1].append(position)
        else:
            transactions.append([position])
    overlaps = [j > 0 and one_in(draw, 3) for j in range(len(transactions))]
    first_commit_null = draw(st.booleans())
    start = LSN_BASE + draw(st.integers(0, 30_000))
    rng = random.Random(draw(st.integers(0, 2**16)))

    wal: list[tuple[str, int]] = []  # ("event", stream position) / ("commit", transaction)
    for j, members in enumerate(transactions):
        rest = members
        if overlaps[j]:
            wal.insert(wal.index(("event", transactions[j - 1][0])), ("event", members[0]))
            rest = members[1:]
        wal += [("event", p) for p in rest]
        wal.append(("commit", j))
    lsn_of: dict[tuple[str, int], int] = {}
    lsn = start + rng.randint(100, 10_000)
    for entry in wal:
        lsn += (48 + rng.randrange(353)) if entry[0] == "event" else (24 + rng.randrange(73))
        lsn_of[entry] = lsn
        if entry[0] == "commit":
            lsn += rng.randrange(4000)  # unrelated WAL

    log = [Event(k, "r", (None, start), TS_BASE_MS - 60_000) for k in snapshot]
    for j, members in enumerate(transactions):
        commit = lsn_of[("commit", j - 1)] if j else None if first_commit_null else start - 24
        ts_ms = TS_BASE_MS + 1000 * j + rng.randrange(1000)
        log += [Event(*stream[p], (commit, lsn_of[("event", p)]), ts_ms) for p in members]
    return log


def draw_deliveries(draw: st.DrawFn, log: list[Event]) -> list[Delivery]:
    """Every event once plus duplicates, shuffled and cut into up to BATCHES micro-batches.

    Often a key's first insert (or snapshot read) is moved to the last batch, so that it
    arrives after the key's delete. A delete's first copy is followed by its Kafka tombstone.
    """
    copies = list(range(len(log))) + draw(st.lists(st.integers(0, len(log) - 1), max_size=6))
    order = draw(st.permutations(copies))
    cuts = draw(st.lists(st.integers(0, len(order)), min_size=BATCHES - 1, max_size=BATCHES - 1))
    first_event: dict[int, int] = {}
    for n, event in enumerate(log):
        if event.key is not None:
            first_event.setdefault(event.key, n)
    late = {n for n in first_event.values() if one_in(draw, 3)}
    placed = sorted(
        (BATCHES - 1, len(order) + i, n) if n in late else (sum(c <= i for c in cuts), i, n)
        for i, n in enumerate(order)
    )
    deliveries: list[Delivery] = []
    for batch, _, n in placed:
        deliveries.append(Delivery(n, False, batch))
        if log[n].op == "d" and not any(d.event == n for d in deliveries[:-1]):
            deliveries.append(Delivery(n, True, batch))
    return deliveries


@st.composite
def scenario_strategy(draw: st.DrawFn) -> Scenario:
    """A scenario: key histories in a realistic Postgres log, then a disordered delivery."""
    keys = draw(st.sampled_from(range(1, 5)))
    log = draw_log(draw, *draw_stream(draw, keys))
    deliveries = draw_deliveries(draw, log)
    shuffle = draw(st.integers(1, 2**16)) if one_in(draw, 4) else None
    return Scenario(keys, tuple(log), tuple(deliveries), shuffle)


# --------------------------------------------------------------------------------------------
# Coverage of the interesting cases (the strategy must keep producing them)
# --------------------------------------------------------------------------------------------


def late_insert_after_delete(scenario: Scenario) -> bool:
    """Some key's delete arrives in an earlier batch than an older upsert of that key."""
    first_batch: dict[int, int] = {}
    for d in scenario.deliveries:
        first_batch.setdefault(d.event, d.batch)
    last_batch: dict[int, int] = {}
    for d in scenario.deliveries:
        last_batch[d.event] = max(last_batch.get(d.event, 0), d.batch)
    log = scenario.log
    return any(
        log[d].op == "d"
        and log[u].op in ("c", "u", "r")
        and log[u].key == log[d].key
        and u < d
        and last_batch[u] > first_batch[d]
        for d in range(len(log))
        for u in range(len(log))
    )


def lsn_goes_backwards(scenario: Scenario) -> bool:
    lsns = [e.seq[1] for e in scenario.log if e.seq[0] is not None]
    return any(b < a for a, b in itertools.pairwise(lsns))


def has_duplicates(scenario: Scenario) -> bool:
    events = [d.event for d in scenario.deliveries if not d.tombstone]
    return len(events) != len(set(events))


# --------------------------------------------------------------------------------------------
# The test
# --------------------------------------------------------------------------------------------


def draw_scenarios(seed_value: int) -> list[Scenario]:
    return draw_examples(scenario_strategy(), seed_value, EXAMPLES)


def pack(scenarios: list[Scenario]) -> list[list[int]]:
    """Scenario indices per Spark run: truncate-free scenarios together, the others apart."""
    plain = [i for i, s in enumerate(scenarios) if not s.has_truncate]
    truncating = [i for i, s in enumerate(scenarios) if s.has_truncate]
    groups = [plain[g::PLAIN_GROUPS] for g in range(PLAIN_GROUPS)]
    groups += [truncating[g::TRUNCATE_GROUPS] for g in range(TRUNCATE_GROUPS)]
    return [group for group in groups if group]


def group_batches(scenarios: list[Scenario], indices: list[int]) -> list[list[Record]]:
    """The group's micro-batches: batch i is the union of its scenarios' batch i."""
    batches: list[list[Record]] = [[] for _ in range(BATCHES)]
    for index in indices:
        for batch, record in scenarios[index].records(index):
            batches[batch].append(record)
    return batches


def silver_rows(spark: SparkSession, path: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    if not table_exists(spark, path):
        return {}
    frame = spark.read.format("delta").load(path)
    return {(row["id"],): row for row in canonical_rows(frame)}


def run_group(
    spark: SparkSession, warehouse: Path, batches: list[list[Record]], spec: TableSpec = SPEC
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Apply the batches to a fresh table and return its rows by key."""
    tables = entity_tables(Warehouse.from_path(warehouse), spec)
    state = QueryState()  # kept between batches, as the streaming query keeps it
    for batch_id, records in enumerate(batches):
        if records:
            frame = bronze_frame(spark, records, batch_id)
            apply_batch(frame, batch_id, spec, tables, "prop", state=state)
    assert not table_exists(spark, tables.quarantine), "valid records were quarantined"
    return silver_rows(spark, tables.silver)


def differences(
    expected: dict[tuple[Any, ...], dict[str, Any]], actual: dict[tuple[Any, ...], dict[str, Any]]
) -> Iterator[tuple[int, str]]:
    """(key id, what differs) for every key whose silver row is not the expected one."""
    for key in sorted(set(expected) | set(actual)):
        want, got = expected.get(key), actual.get(key)
        if want != got:
            yield key[0], f"key {key[0]}: silver {got}\n      expected {want}"


def check_group(
    spark: SparkSession,
    warehouse: Path,
    scenarios: list[Scenario],
    indices: list[int],
    spec: TableSpec = SPEC,
) -> str | None:
    """Run one group; None if silver equals the fold, else a report of what differs."""
    batches = group_batches(scenarios, indices)
    expected = fold([bronze_record(r) for batch in batches for r in batch], MODEL)
    assert not expected.quarantined
    truncates = [i for i in indices if scenarios[i].has_truncate]
    header = f"scenarios {indices} (with a truncate: {truncates})"
    try:
        actual = run_group(spark, warehouse, batches, spec)
    except Exception as error:
        return f"{header}: apply_batch failed: {type(error).__name__}: {error}"[:4000]
    wrong = list(differences(expected.rows, actual))
    if not wrong:
        return None
    return mismatch_report(header, wrong, scenarios)


def mismatch_report(
    header: str, wrong: list[tuple[int, str]], scenarios: Sequence[Scenario]
) -> str:
    """What differs, per key id, then the scenarios those keys belong to."""
    bad = sorted({key // KEY_SPACE for key, _ in wrong})
    return "\n".join(
        [
            f"{header}: scenarios {bad} differ",
            *(f"    {line}" for _, line in wrong),
            *(scenarios[i].describe(i) for i in bad),
        ]
    )


def test_silver_equals_fold_under_any_delivery(spark: SparkSession, tmp_path: Path) -> None:
    seed_value = property_seed("SILVER_PROPERTY_SEED")
    started = time.monotonic()
    scenarios = draw_scenarios(seed_value)
    assert len(scenarios) == EXAMPLES

    coverage = {
        "late insert after delete": sum(map(late_insert_after_delete, scenarios)),
        "truncate": sum(s.has_truncate for s in scenarios),
        "lsn backwards": sum(map(lsn_goes_backwards, scenarios)),
        "duplicates": sum(map(has_duplicates, scenarios)),
    }
    assert all(count >= 10 for count in coverage.values()), f"weak coverage: {coverage}"

    failures = [
        f"group {group}: {report}"
        for group, indices in enumerate(pack(scenarios))
        if (report := check_group(spark, tmp_path / f"group-{group}", scenarios, indices))
    ]
    print(f"silver property: seed {seed_value}, {coverage}, {time.monotonic() - started:.0f} s")
    assert not failures, f"SILVER_PROPERTY_SEED={seed_value}\n" + "\n\n".join(failures)


def test_silver_with_deletion_vectors_equals_fold(spark: SparkSession, tmp_path: Path) -> None:
    """The same, for the scenarios without a truncate, on tables with deletion vectors (their
    MERGEs mark replaced rows instead of rewriting files); delta-rs's SQL reader, which
    supports them, reads the same rows as Spark."""
    seed_value = property_seed("SILVER_PROPERTY_SEED")
    scenarios = draw_scenarios(seed_value)
    plain = [i for i, s in enumerate(scenarios) if not s.has_truncate]
    spec = replace(SPEC, deletion_vectors=True)
    report = check_group(spark, tmp_path, scenarios, plain, spec)
    assert report is None, f"SILVER_PROPERTY_SEED={seed_value}\n{report}"
    silver = entity_tables(Warehouse.from_path(tmp_path), spec).silver
    log = spark.read.json(f"{silver}/_delta_log/*.json")
    assert "deletionVector" in log.schema["add"].dataType.fieldNames(), "no deletion vector"
    assert_delta_rs_sql_reads_same_rows(spark, silver)


def test_bronze_record_matches_bronze_frame(spark: SparkSession) -> None:
    """The model's bytes are the bytes bronze stores (the comparison above relies on it)."""
    record = Record(TOPIC, 1, 7, TS_BASE_MS, pg_key(4), pg_envelope("c", (None, 5), {"id": 4}))
    row = bronze_frame(spark, [record]).first()
    assert row is not None
    stored = BronzeRecord(row.topic, row.partition, row.offset, bytes(row.key), bytes(row.value))
    assert stored == bronze_record(record)


# --------------------------------------------------------------------------------------------
# Found by the property test: micro-batches without a keyed change event
# --------------------------------------------------------------------------------------------


def _customer(key: int, seq: tuple[int | None, int]) -> Record:
    value = pg_envelope("c", seq, {"id": key, "name": f"n{key}", "notes": None})
    return Record(TOPIC, key % PARTITIONS, 0, TS_BASE_MS, pg_key(key), value)


_TRUNCATE = Record(TOPIC, 0, 50, TS_BASE_MS, None, pg_envelope("t", (200, 210)))
_OLD, _NEW = _customer(1, (100, 110)), _customer(2, (300, 310))
_TOMBSTONE = Record(TOPIC, 1, 9, TS_BASE_MS, pg_key(1), None)


@pytest.mark.parametrize(
    "batches",
    [
        pytest.param([[_OLD, _NEW], [_TRUNCATE]], id="truncate-alone-after-rows"),
        pytest.param([[_TRUNCATE], [_OLD, _NEW]], id="truncate-alone-first"),
        pytest.param([[_OLD], [_TOMBSTONE]], id="tombstone-alone"),
        pytest.param([[_OLD], []], id="empty"),
    ],
)
def test_batch_without_keyed_change_event(
    spark: SparkSession, tmp_path: Path, batches: list[list[Record]]
) -> None:
    """A batch of only a truncate, only tombstones, or no rows is applied like any other
    (these once failed: no key columns could be found in the batch)."""
    tables = entity_tables(Warehouse.from_path(tmp_path), SPEC)
    for batch_id, records in enumerate(batches):
        apply_batch(bronze_frame(spark, records, batch_id), batch_id, SPEC, tables, "keyless")
    expected = fold([bronze_record(r) for batch in batches for r in batch], MODEL)
    assert silver_rows(spark, tables.silver) == expected.rows
