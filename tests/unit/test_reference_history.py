"""Tests of the plain-Python reference history (silver/reference_history.py), by hand."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from cdc.records import Record
from silver.reference import TOAST_PLACEHOLDER, BronzeRecord, FoldSpec, fold
from silver.reference_history import (
    END_AT,
    IS_CURRENT,
    START_AT,
    VALID_FROM,
    VALID_TO,
    fold_history,
)
from tests.draws import draw_examples, example_count, property_seed
from tests.helpers import bronze_record, customer_change, pg_envelope, pg_key
from tests.resnapshots import resnapshot_scenarios
from tests.unit.test_reference_snapshots import HAND_CASE

pytestmark = pytest.mark.unit

TOPIC = "pg.public.customers"
PG = FoldSpec()
TS_MS = 1_767_225_600_000
VALIDITY = (VALID_FROM, VALID_TO)


def seq(commit: int | None, lsn: int) -> str:
    return f"{commit or 0:020d}/{lsn:020d}"


def event(
    offset: int,
    op: str,
    id_: int | None,
    lsn: int,
    name: str | None = "n",
    notes: str | None = None,
    partition: int = 0,
) -> Record:
    """A customers change at ``(commit 100, lsn)`` in bronze at ``(partition, offset)``."""
    return customer_change(TOPIC, offset, op, id_, (100, lsn), name, notes, partition)


def at(lsn: int, offset: int, partition: int = 0) -> tuple[Any, ...]:
    """The order of the event at ``lsn`` stored at ``(partition, offset)``."""
    return (seq(100, lsn), partition, offset)


def history(records: list[Record], **tracking: Any) -> dict[Any, dict[str, Any]]:
    return fold_history([bronze_record(r) for r in records], PG, **tracking)


def intervals(records: list[Record], **tracking: Any) -> list[tuple[Any, ...]]:
    """(id, name, notes, start lsn, end lsn or None, current) per row, sorted."""
    return sorted(
        (
            key[0],
            row["name"],
            row["notes"],
            int(row[START_AT][0][-20:]),
            int(row[END_AT][0][-20:]) if row[END_AT] else None,
            row[IS_CURRENT],
        )
        for (key, _), row in history(records, **tracking).items()
    )


def test_each_change_starts_a_version_and_closes_the_previous() -> None:
    records = [
        event(0, "c", 1, 10, "a"),
        event(1, "u", 1, 20, "b"),
        event(2, "u", 1, 30, "a"),  # back to the first value: still a new version
        event(3, "c", 2, 15, "x"),
    ]
    assert intervals(records) == [
        (1, "a", None, 10, 20, False),
        (1, "a", None, 30, None, True),
        (1, "b", None, 20, 30, False),
        (2, "x", None, 15, None, True),
    ]


def test_row_has_the_silver_columns_and_the_interval() -> None:
    rows = history([event(5, "c", 1, 10, "a", partition=2), event(9, "u", 1, 20, "b")])
    first = rows[((1,), at(10, 5, 2))]
    assert first == {
        "id": 1,
        "name": "a",
        "notes": None,
        "_sequence": seq(100, 10),
        "_op": "c",
        "_source_ts": (TS_MS + 10) * 1000,  # customer_change: source.ts_ms grows with the LSN
        "_bronze_topic": TOPIC,
        "_bronze_partition": 2,
        "_bronze_offset": 5,
        START_AT: at(10, 5, 2),
        END_AT: at(20, 9),
        IS_CURRENT: False,
        VALID_FROM: (TS_MS + 10) * 1000,  # the commit times of the first and ending change
        VALID_TO: (TS_MS + 20) * 1000,
    }


def test_current_rows_equal_the_silver_fold() -> None:
    records = [
        event(0, "c", 1, 10, "a", "x"),
        event(1, "u", 1, 20, "a", "y"),
        event(2, "c", 2, 11, "b"),
        event(3, "d", 2, 21),
        event(4, "c", 3, 12, "c", TOAST_PLACEHOLDER),
        event(5, "u", 3, 22, "c2", TOAST_PLACEHOLDER),
    ]
    current = {
        key: {c: v for c, v in row.items() if c not in (START_AT, END_AT, IS_CURRENT, *VALIDITY)}
        for (key, _), row in history(records).items()
        if row[IS_CURRENT]
    }
    assert current == fold([bronze_record(r) for r in records], PG).rows


def test_untracked_change_updates_the_version_in_place() -> None:
    records = [
        event(0, "c", 1, 10, "a", "x"),
        event(1, "u", 1, 20, "a", "y"),  # only notes (untracked) changes
        event(2, "u", 1, 30, "b", "y"),
    ]
    rows = history(records, track=["name"])
    assert intervals(records, track=["name"]) == [
        (1, "a", "y", 10, 30, False),
        (1, "b", "y", 30, None, True),
    ]
    first = rows[((1,), at(10, 0))]
    assert (first["_sequence"], first["_op"], first["_bronze_offset"]) == (seq(100, 20), "u", 1)
    assert intervals(records, track_except=["notes"]) == intervals(records, track=["name"])


def test_identical_update_is_not_a_new_version() -> None:
    records = [event(0, "c", 1, 10, "a"), event(1, "u", 1, 20, "a")]
    assert intervals(records) == [(1, "a", None, 10, None, True)]


def test_delete_closes_and_reinsert_opens() -> None:
    records = [
        event(0, "c", 1, 10, "a"),
        event(1, "d", 1, 20),
        event(2, "d", 1, 25),  # nothing open: no effect
        event(3, "c", 1, 30, "a"),
    ]
    assert intervals(records) == [
        (1, "a", None, 10, 20, False),
        (1, "a", None, 30, None, True),
    ]


def test_truncate_closes_every_open_version() -> None:
    records = [
        event(0, "c", 1, 10, "a"),
        event(1, "c", 2, 11, "b"),
        event(2, "d", 2, 12),
        event(3, "t", None, 40),
        event(4, "u", 1, 50, "a"),  # after the truncate: a new version, same values or not
        event(5, "c", 3, 30, "c"),  # older than the truncate: a version it closes
    ]
    assert intervals(records) == [
        (1, "a", None, 10, 40, False),
        (1, "a", None, 50, None, True),
        (2, "b", None, 11, 12, False),
        (3, "c", None, 30, 40, False),
    ]


def test_toast_placeholder_takes_the_previous_versions_value() -> None:
    records = [
        event(0, "c", 1, 10, "a", "long"),
        event(1, "u", 1, 20, "b", TOAST_PLACEHOLDER),
        event(2, "u", 1, 30, "c", TOAST_PLACEHOLDER),
        event(3, "d", 1, 40),
        event(4, "c", 1, 50, "d", TOAST_PLACEHOLDER),  # nothing before it: stays
    ]
    assert [row[2] for row in intervals(records)] == ["long", "long", "long", TOAST_PLACEHOLDER]


def test_toast_placeholder_follows_history_order_not_arrival() -> None:
    records = [
        event(0, "c", 1, 10, "a", "first"),
        event(1, "u", 1, 30, "c", TOAST_PLACEHOLDER),
        event(2, "u", 1, 20, "b", "second"),  # arrives last, sits before the placeholder
    ]
    assert [row[2] for row in intervals(records)] == ["first", "second", "second"]


def test_copies_of_an_event_make_one_version() -> None:
    records = [
        event(0, "c", 1, 10, "a"),
        event(1, "u", 1, 20, "b"),
        event(7, "c", 1, 10, "a"),  # redelivered copies, at later offsets
        event(8, "u", 1, 20, "b"),
    ]
    rows = history(records)
    assert sorted(rows) == [((1,), at(10, 0)), ((1,), at(20, 1))]
    assert rows[((1,), at(10, 0))][END_AT] == at(20, 1)
    assert rows[((1,), at(20, 1))]["_bronze_offset"] == 8


def test_history_is_a_function_of_the_set_of_records() -> None:
    rng = random.Random(7)
    records = [
        event(n, op, key, lsn, name, None, key % 2)
        for n, (op, key, lsn, name) in enumerate(
            [
                ("c", 1, 10, "a"),
                ("u", 1, 20, "b"),
                ("u", 1, 30, "a"),
                ("d", 1, 40, None),
                ("c", 1, 50, "a"),
                ("c", 2, 15, "x"),
                ("u", 2, 25, "x"),
                ("u", 2, 35, "y"),
            ]
        )
    ] + [event(99, "t", None, 33)]
    expected = history(records)
    assert len(expected) == 6
    for _ in range(20):
        delivered = records + rng.sample(records, 3)
        rng.shuffle(delivered)
        assert history(delivered) == expected


def test_quarantined_records_and_tombstones_are_ignored() -> None:
    good = event(0, "c", 1, 10, "a")
    tombstone = Record(TOPIC, 0, 1, TS_MS, pg_key(1), None)
    broken = Record(TOPIC, 0, 2, TS_MS, pg_key(1), "not json")
    assert history([good, tombstone, broken]) == history([good])


def test_events_tables_order_versions_by_sequence_by() -> None:
    spec = FoldSpec(
        format="events",
        keys=("id",),
        sequence_by=("ts",),
        column_types={"id": "bigint", "status": "string", "ts": "timestamp"},
    )

    def click(offset: int, status: str, ts: str) -> BronzeRecord:
        value = json.dumps({"id": 7, "status": status, "ts": ts}).encode()
        return BronzeRecord("web.orders", 0, offset, b"7", value)

    rows = fold_history(
        [click(0, "paid", "2026-01-01T00:00:02Z"), click(1, "new", "2026-01-01T00:00:01Z")], spec
    )
    new, paid = (1_767_225_601_000_000,), (1_767_225_602_000_000,)
    assert {key: (row["status"], row[END_AT]) for key, row in rows.items()} == {
        ((7,), (new, 0, 1)): ("new", (paid, 0, 0)),
        ((7,), (paid, 0, 0)): ("paid", None),
    }
    # The validity is in sequence_by's own terms: the first column's value, not a commit time.
    assert {row["status"]: (row[VALID_FROM], row[VALID_TO]) for row in rows.values()} == {
        "new": (new[0], paid[0]),
        "paid": (paid[0], None),
    }


def committed(offset: int, op: str, id_: int | None, lsn: int, ts_ms: int | None) -> Record:
    """A customers change at ``(commit 100, lsn)`` whose ``source.ts_ms`` is ``ts_ms``."""
    after = None if op in ("d", "t") else {"id": id_, "name": f"n{lsn}", "notes": None}
    before = {"id": id_, "name": None, "notes": None} if op == "d" else None
    value = pg_envelope(op, (100, lsn), after=after, before=before, ts_ms=ts_ms or 0)
    if ts_ms is None:
        del value["payload"]["source"]["ts_ms"]
    key = None if id_ is None else pg_key(id_)
    return Record(TOPIC, 0, offset, 0, key, value)


def validities(records: list[Record]) -> list[tuple[Any, ...]]:
    """(id, start lsn, valid from, valid to) per row, in ms, sorted."""
    ms = [
        (key[0], int(row[START_AT][0][-20:]), row[VALID_FROM], row[VALID_TO])
        for (key, _), row in history(records).items()
    ]
    return sorted(
        (k, lsn, *(None if t is None else t // 1000 for t in times)) for k, lsn, *times in ms
    )


def test_validity_is_the_commit_time_never_stepping_back() -> None:
    records = [
        committed(0, "c", 1, 10, 1000),
        committed(1, "u", 1, 20, 3000),
        committed(2, "u", 1, 30, 2000),  # the source's clock stepped back: no overlap
        committed(3, "d", 1, 40, 4000),
        committed(4, "c", 1, 50, None),  # no commit time: the latest so far
        committed(5, "c", 2, 15, None),  # none at all: null
        committed(6, "t", None, 60, 6000),
    ]
    assert validities(records) == [
        (1, 10, 1000, 3000),
        (1, 20, 3000, 3000),
        (1, 30, 3000, 4000),
        (1, 50, 4000, 6000),
        (2, 15, None, 6000),
    ]


def test_a_truncate_raises_only_the_keys_whose_version_it_ends() -> None:
    """The truncate at LSN 30 carries a commit time ahead of the changes after it: it ends key
    2's version, so key 2's next one starts no earlier than it; key 1 was deleted before it
    and its re-insert keeps its own commit time (a truncate that arrives late changes no
    validity of a key it does not end, so silver need not rebuild such keys)."""
    records = [
        committed(0, "c", 1, 10, 1000),
        committed(1, "d", 1, 20, 2000),
        committed(2, "c", 2, 25, 2500),
        committed(3, "t", None, 30, 9000),
        committed(4, "c", 1, 40, 4000),
        committed(5, "c", 2, 50, 5000),
    ]
    assert validities(records) == [
        (1, 10, 1000, 2000),
        (1, 40, 4000, None),
        (2, 25, 2500, 9000),
        (2, 50, 9000, None),
    ]


# --------------------------------------------------------------------------------------------
# Full re-snapshots (resnapshot = "full")
# --------------------------------------------------------------------------------------------

FULL = FoldSpec(resnapshot="full")


def current_rows(records: list[Record], spec: FoldSpec) -> dict[Any, dict[str, Any]]:
    """The current versions, without the interval columns, by key."""
    rows = fold_history([bronze_record(r) for r in records], spec)
    hidden = (START_AT, END_AT, IS_CURRENT, *VALIDITY)
    return {
        key: {c: v for c, v in row.items() if c not in hidden}
        for (key, _), row in rows.items()
        if row[IS_CURRENT]
    }


def test_a_full_snapshots_end_ends_the_versions_of_the_keys_it_did_not_read() -> None:
    """docs/silver-semantics.md's hand case: key 2, deleted while the connector's offsets were
    lost, is not read by the second snapshot, whose end closes its version there; keys 1 and 3,
    read again unchanged, keep the version they had; the default keeps key 2 open."""
    end = (seq(250, 300), -1, -1)
    rows = fold_history([bronze_record(r) for r in HAND_CASE], FULL)
    assert sorted((key[0], row["name"], row[END_AT]) for (key, _), row in rows.items()) == [
        (1, "one", None),
        (2, "two", end),
        (3, "three", None),
        (4, "four", None),
        (5, "five", None),
    ]
    # Key 1's one version starts at its first read and holds its second one (in place).
    ones = [row for (key, _), row in rows.items() if key == (1,)]
    assert [(row[START_AT], row["_sequence"]) for row in ones] == [
        ((seq(0, 100), 0, 2), seq(250, 300))
    ]
    upsert = fold_history([bronze_record(r) for r in HAND_CASE], PG)
    assert [row[END_AT] for (key, _), row in upsert.items() if key == (2,)] == [None]


def test_current_versions_equal_the_fold_for_resnapshots() -> None:
    """Under any delivery of a re-snapshotted table (tests/resnapshots.py), the history's
    current versions are the fold's rows, with and without the rule."""
    seed = property_seed("RESNAPSHOT_SEED")
    scenarios = draw_examples(resnapshot_scenarios(), seed, example_count(200))
    lost_deletes = 0
    for index, scenario in enumerate(scenarios):
        records = [record for _, record in scenario.records(index)]
        for spec in (FULL, PG):
            expected = fold([bronze_record(r) for r in records], spec).rows
            assert current_rows(records, spec) == expected, (
                f"RESNAPSHOT_SEED={seed} ({spec.resnapshot})\n{scenario.describe(index)}"
            )
        lost_deletes += scenario.loses_a_delete
    assert lost_deletes >= 20, lost_deletes
