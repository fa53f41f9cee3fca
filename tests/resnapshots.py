"""Scenarios of re-snapshotted tables, for the fold's and silver's re-snapshot tests.

A scenario simulates one Postgres table and what Debezium emits for it, with the table's true
final contents alongside: an initial snapshot; streamed changes, some of them lost (never
delivered, as when a connector's offsets are lost); a second, full (blocking) snapshot that
reads every row the table holds at one position P with ``source.snapshot`` markers (``first``,
``true``, then ``last_in_data_collection`` or ``last`` on its last read); more streamed
changes; and incremental snapshot reads (``source.snapshot = "incremental"``) interleaved with
the streamed changes throughout, each at a WAL position of its own (the signal table's write
that closes its chunk) and holding the row as it is there. Every change is its own
transaction: its ``source.sequence`` is ``[last commit LSN, LSN]``; the snapshot's reads carry
the connector's last commit and P. The records are then delivered out of order, with
duplicates and Kafka tombstones, cut into micro-batches.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from cdc.records import Record
from tests.helpers import pg_envelope, pg_key

TOPIC = "shop.public.customers"
PARTITIONS = 3
KEY_SPACE = 1000  # key id = scenario index * KEY_SPACE + k
OFFSET_BLOCK = 200
LSN_BASE = 9_999_990_000  # crosses a digit boundary (the stored sequence is padded text)
TS_MS = 1_767_225_600_000


@dataclass(frozen=True)
class Change:
    """One event Debezium emits, in emission order."""

    key: int  # key number within the scenario
    op: str  # c, u, d or r
    seq: tuple[int | None, int]  # source.sequence: (last commit LSN, LSN)
    name: str | None  # the ``name`` column of the row image (None for a delete)
    marker: str  # source.snapshot
    lost: bool = False  # never delivered


@dataclass(frozen=True)
class ResnapshotScenario:
    """A table's emitted events, its true final rows (key number -> name), and a delivery:
    (event index, Kafka tombstone?, micro-batch) in delivery order."""

    changes: tuple[Change, ...]
    truth: tuple[tuple[int, str], ...]
    deliveries: tuple[tuple[int, bool, int], ...]
    full_snapshot: bool

    def key_id(self, index: int, key: int) -> int:
        return index * KEY_SPACE + key

    def expected(self, index: int) -> dict[int, str]:
        """Key id -> name: the table as Postgres holds it at the end."""
        return {self.key_id(index, k): name for k, name in self.truth}

    @property
    def loses_a_delete(self) -> bool:
        """A delete was lost, so only the full snapshot's end can remove its key."""
        return any(c.lost and c.op == "d" for c in self.changes)

    def records(self, index: int) -> list[tuple[int, Record]]:
        """(micro-batch, record) in delivery order, for the scenario at position ``index``."""
        used: Counter[int] = Counter()
        result = []
        for event, tombstone, batch in self.deliveries:
            change = self.changes[event]
            key_id = self.key_id(index, change.key)
            partition = key_id % PARTITIONS
            offset = index * OFFSET_BLOCK + used[partition]
            used[partition] += 1
            assert used[partition] <= OFFSET_BLOCK
            result.append((batch, _record(change, key_id, partition, offset, tombstone)))
        return result

    def describe(self, index: int) -> str:
        lines = [f"scenario {index} (full snapshot: {self.full_snapshot})"]
        for n, c in enumerate(self.changes):
            lost = " LOST" if c.lost else ""
            lines.append(
                f"  e{n}: {c.op} key {self.key_id(index, c.key)} seq={c.seq} "
                f"{c.marker} {c.name}{lost}"
            )
        lines.append(f"  truth: {self.expected(index)}")
        lines.append(f"  delivery (event, tombstone, batch): {list(self.deliveries)}")
        return "\n".join(lines)


def _record(change: Change, key_id: int, partition: int, offset: int, tombstone: bool) -> Record:
    key = pg_key(key_id)
    if tombstone:
        return Record(TOPIC, partition, offset, TS_MS, key, None)
    image: dict[str, Any] = {"id": key_id, "name": change.name, "notes": None}
    if change.op == "d":
        value = pg_envelope("d", change.seq, before={**image, "name": None}, ts_ms=TS_MS)
    else:
        value = pg_envelope(change.op, change.seq, after=image, ts_ms=TS_MS)
    value["payload"]["source"]["snapshot"] = change.marker
    return Record(TOPIC, partition, offset, TS_MS, key, value)


class _Source:
    """The simulated table and its WAL position."""

    def __init__(self, rng: random.Random, keys: int) -> None:
        self.rng, self.keys = rng, keys
        self.rows: dict[int, str] = {}
        self.lsn = LSN_BASE + rng.randrange(5000)
        self.last_commit: int | None = None
        self.changes: list[Change] = []
        self.count = 0

    def step(self) -> int:
        self.lsn += 8 + self.rng.randrange(200)
        return self.lsn

    def change(self, lost: bool) -> None:
        """One streamed change of a random key (its own transaction)."""
        key = self.rng.randrange(self.keys)
        self.count += 1
        if key not in self.rows:
            op, name = "c", f"c{self.count}"
        elif self.rng.random() < 0.35:
            op, name = "d", None
        else:
            op, name = "u", f"u{self.count}"
        lsn = self.step()
        self.changes.append(Change(key, op, (self.last_commit, lsn), name, "false", lost))
        if name is None:
            self.rows.pop(key, None)
        else:
            self.rows[key] = name
        self.last_commit = self.step()  # its commit

    def incremental_read(self, lost: bool) -> None:
        """A chunk's read of a random row, at the position of the write that closes the chunk."""
        if not self.rows:
            return
        key = self.rng.choice(sorted(self.rows))
        seq = (self.last_commit, self.step())
        self.changes.append(Change(key, "r", seq, self.rows[key], "incremental", lost))
        self.last_commit = self.step()  # the signal write's commit

    def full_snapshot(self, initial: bool) -> None:
        """Every row at one position, with the markers of a full snapshot."""
        position = self.step()
        keys = sorted(self.rows)
        self.rng.shuffle(keys)
        last = self.rng.choice(["last", "last_in_data_collection"])
        first = self.rng.choice(["first", "first_in_data_collection"])
        commit = None if initial else self.last_commit
        for n, key in enumerate(keys):
            marker = last if n == len(keys) - 1 else first if n == 0 else "true"
            self.changes.append(Change(key, "r", (commit, position), self.rows[key], marker))


@st.composite
def resnapshot_scenarios(draw: st.DrawFn, batches: int = 4) -> ResnapshotScenario:
    """A scenario (see the module docstring); about one in five has no second snapshot (then
    nothing is lost)."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    source = _Source(rng, keys=draw(st.integers(1, 5)))
    for key in range(source.keys):
        if rng.random() < 0.6:
            source.rows[key] = f"s{key}"
    source.full_snapshot(initial=True)
    full = rng.random() < 0.8
    for _ in range(rng.randrange(1, 9)):
        lost = full and rng.random() < 0.4
        if rng.random() < 0.25:
            source.incremental_read(lost)
        else:
            source.change(lost)
    if full:
        source.full_snapshot(initial=False)
        if not any(c.marker in ("last", "last_in_data_collection") for c in source.changes[-1:]):
            # An empty table's snapshot reads nothing, so nothing ends it: lose nothing then.
            source.changes = [_delivered(c) for c in source.changes]
    for _ in range(rng.randrange(0, 6)):
        if rng.random() < 0.3:
            source.incremental_read(False)
        else:
            source.change(False)
    changes = tuple(source.changes)
    return ResnapshotScenario(
        changes,
        tuple(sorted(source.rows.items())),
        tuple(_deliveries(rng, changes, batches)),
        full,
    )


def _delivered(change: Change) -> Change:
    return Change(change.key, change.op, change.seq, change.name, change.marker, False)


def _deliveries(
    rng: random.Random, changes: tuple[Change, ...], batches: int
) -> list[tuple[int, bool, int]]:
    """Every delivered event once, some twice, shuffled, cut into micro-batches; a delete's
    first copy is followed by its Kafka tombstone."""
    events = [n for n, c in enumerate(changes) if not c.lost]
    copies = events + [rng.choice(events) for _ in range(rng.randrange(3))] if events else []
    rng.shuffle(copies)
    cuts = sorted(rng.randrange(len(copies) + 1) for _ in range(batches - 1))
    seen: set[int] = set()
    result = []
    for position, event in enumerate(copies):
        batch = sum(cut <= position for cut in cuts)
        result.append((event, False, batch))
        if changes[event].op == "d" and event not in seen:
            result.append((event, True, batch))
        seen.add(event)
    return result


def group_batches(
    scenarios: list[ResnapshotScenario], indices: list[int], batches: int = 4
) -> list[list[Record]]:
    """Micro-batch i of a group: the union of its scenarios' batch i."""
    grouped: dict[int, list[Record]] = defaultdict(list)
    for index in indices:
        for batch, record in scenarios[index].records(index):
            grouped[batch].append(record)
    return [grouped[b] for b in range(batches)]
