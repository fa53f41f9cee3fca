"""One test per silver MERGE behaviour (docs/silver-semantics.md), through ``apply_batch``.

Each test runs one to three micro-batches into a fresh warehouse, then compares the whole
silver table and, where the behaviour is about writing or not writing, the Delta history.
A Delta MERGE costs seconds, so every test keeps its batches few and small.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc.records import Record
from lakehouse_core.config import TableSpec
from lakehouse_core.delta_io import table_exists
from lakehouse_core.frames import is_in
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import query_app_id
from silver import context as silver_context
from silver import tables as silver_tables
from silver import write as silver_write
from silver.job import BatchReport, QueryState, apply_batch, entity_tables
from silver.reference import fold
from silver.tables import EntityTables, KeyRange, current_orders, merge_silver
from silver.verify import check_table, fold_spec
from tests.faults import GUARDED_DML, CommitFaults, InjectedCrash
from tests.helpers import (
    CUSTOMER_FIELDS,
    DECIMAL_FIELDS,
    b64_int,
    bronze_frame,
    bronze_record,
    merge_counts,
    pg_envelope,
    pg_key,
    spark_jobs,
)

pytestmark = pytest.mark.integration

TOPIC = "pg.public.customers"
SPEC = TableSpec(name="customers", topic=TOPIC)
APP_ID = "silver-merge-test"
PLACEHOLDER = "__debezium_unavailable_value"
SOURCE_TS_MS = 1_767_225_600_000  # pg_envelope's default source.ts_ms

#: Columns compared in most tests: the row and the two metadata columns that name its event.
ROW = ("id", "name", "notes", "_sequence", "_op")


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def seq(commit: int | None, lsn: int) -> str:
    """The stored form of a Postgres ``source.sequence``."""
    return f"{commit or 0:020d}/{lsn:020d}"


def event(
    offset: int,
    op: str,
    id_: int | None,
    sequence: tuple[int | None, int],
    name: str | None = "n",
    notes: str | None = None,
    partition: int = 0,
    ts_ms: int = SOURCE_TS_MS,
) -> Record:
    """A bronze record holding a wrapped Debezium Postgres event for the customers table."""
    after = None if op in ("d", "t") else {"id": id_, "name": name, "notes": notes}
    before = {"id": id_, "name": None, "notes": None} if op == "d" else None
    key = None if op == "t" or id_ is None else pg_key(id_)
    value = pg_envelope(op, sequence, after=after, before=before, ts_ms=ts_ms)
    return Record(TOPIC, partition, offset, 1_000 + offset, key, value)


def tombstone(offset: int, id_: int, partition: int = 0) -> Record:
    """The Kafka tombstone (null value) that follows a delete."""
    return Record(TOPIC, partition, offset, 1_000 + offset, pg_key(id_), None)


def raw(offset: int, key: Any, value: Any) -> Record:
    return Record(TOPIC, 0, offset, 1_000 + offset, key, value)


@dataclass(frozen=True)
class Lake:
    """A fresh warehouse with the customers entity's tables."""

    spark: SparkSession
    tables: EntityTables
    #: Kept between batches, as the streaming query keeps it.
    state: QueryState = field(default_factory=QueryState)

    def apply(self, records: list[Record], batch_id: int, app_id: str = APP_ID) -> BatchReport:
        frame = bronze_frame(self.spark, records, batch_id)
        return apply_batch(frame, batch_id, SPEC, self.tables, app_id, state=self.state)

    def rows(
        self, path: str | None = None, columns: tuple[str, ...] = ROW
    ) -> list[tuple[Any, ...]]:
        """The whole table (selected columns), sorted."""
        frame = self.spark.read.format("delta").load(path or self.tables.silver)
        return sorted(tuple(row) for row in frame.select(*columns).collect())

    def history(self, path: str | None = None) -> list[tuple[int, str, dict[str, str]]]:
        """``(version, operation, operationMetrics)`` oldest first."""
        if not table_exists(self.spark, path or self.tables.silver):
            return []
        rows = (
            DeltaTable.forPath(self.spark, path or self.tables.silver)
            .history()
            .select("version", "operation", "operationMetrics")
            .collect()
        )
        return sorted((r.version, r.operation, dict(r.operationMetrics or {})) for r in rows)

    def version(self, path: str | None = None) -> int:
        history = self.history(path)
        return history[-1][0] if history else -1


@pytest.fixture
def lake(spark: SparkSession, tmp_path: Path) -> Lake:
    return Lake(spark, entity_tables(Warehouse(str(tmp_path)), SPEC))


# --------------------------------------------------------------------------------------------
# Upserts
# --------------------------------------------------------------------------------------------


def test_insert(lake: Lake) -> None:
    report = lake.apply(
        [event(0, "c", 1, (100, 10), "ann"), event(1, "r", 2, (None, 5), "bob", "x")], 0
    )

    assert report == BatchReport(records=2, quarantined=0, tombstones=0, applied=2)
    assert lake.rows() == [
        (1, "ann", None, seq(100, 10), "c"),
        (2, "bob", "x", seq(None, 5), "r"),
    ]
    history = lake.history()
    assert [(v, op) for v, op, _ in history] == [(0, "CREATE TABLE"), (1, "MERGE")]
    assert merge_counts(history[-1][2]) == (2, 0, 0)


def test_newer_update_replaces(lake: Lake) -> None:
    lake.apply([event(0, "c", 1, (100, 10), "v1"), event(1, "c", 2, (100, 500), "v1")], 0)
    before = lake.version()
    # Key 2's update has a lower LSN but a later commit: it is newer.
    lake.apply([event(2, "u", 1, (100, 20), "v2", "n2"), event(3, "u", 2, (200, 300), "v2")], 1)

    assert lake.rows() == [
        (1, "v2", "n2", seq(100, 20), "u"),
        (2, "v2", None, seq(200, 300), "u"),
    ]
    history = lake.history()
    assert [(v, op) for v, op, _ in history[before + 1 :]] == [(before + 1, "MERGE")]
    assert merge_counts(history[-1][2]) == (0, 2, 0)


def test_stale_update_ignored(lake: Lake) -> None:
    lake.apply([event(0, "c", 1, (100, 20), "current")], 0)
    expected = lake.rows()
    before = lake.version()
    report = lake.apply(
        [
            event(1, "u", 1, (100, 15), "stale update"),
            # A re-snapshot read: null commit sorts first even with a higher LSN.
            event(2, "r", 1, (None, 999), "stale snapshot"),
        ],
        1,
    )

    assert report.applied == 0
    assert lake.rows() == expected == [(1, "current", None, seq(100, 20), "c")]
    assert lake.version() == before


# --------------------------------------------------------------------------------------------
# Deletes
# --------------------------------------------------------------------------------------------


def test_delete_removes_row_and_keeps_tombstone(lake: Lake) -> None:
    lake.apply([event(0, "c", 1, (100, 10)), event(1, "c", 2, (100, 11))], 0)
    report = lake.apply([event(2, "d", 1, (100, 30), ts_ms=SOURCE_TS_MS + 7), tombstone(3, 1)], 1)

    assert report == BatchReport(records=2, quarantined=0, tombstones=1, applied=1)
    assert lake.rows() == [(2, "n", None, seq(100, 11), "c")]
    tombstones = lake.spark.read.format("delta").load(lake.tables.tombstones)
    assert [
        tuple(r)
        for r in tombstones.select(
            "id", "_sequence", "_bronze_partition", "_bronze_offset", F.unix_millis("_source_ts")
        ).collect()
    ] == [(1, seq(100, 30), 0, 2, SOURCE_TS_MS + 7)]
    history = lake.history()
    assert history[-1][1] == "MERGE"
    assert merge_counts(history[-1][2]) == (0, 0, 1)


def test_delete_then_late_older_insert_stays_deleted(lake: Lake) -> None:
    lake.apply(
        [
            event(0, "c", 1, (100, 10), "first"),
            event(1, "d", 1, (100, 50)),
            tombstone(2, 1),
            event(3, "c", 2, (100, 12), "other"),
        ],
        0,
    )
    before = lake.version()

    report = lake.apply(
        [event(4, "c", 1, (100, 40), "late insert"), event(5, "u", 1, (100, 45), "late update")],
        1,
    )

    assert report.applied == 0
    assert lake.rows() == [(2, "other", None, seq(100, 12), "c")]
    assert lake.version() == before
    assert lake.rows(lake.tables.tombstones, ("id", "_sequence")) == [(1, seq(100, 50))]


def test_reinsert_after_delete_with_higher_sequence(lake: Lake) -> None:
    lake.apply(
        [event(0, "c", 1, (100, 10), "first"), event(1, "d", 1, (100, 20)), tombstone(2, 1)], 0
    )
    lake.apply([event(3, "c", 1, (100, 30), "again")], 1)

    assert lake.rows() == [(1, "again", None, seq(100, 30), "c")]
    history = lake.history()
    assert history[-1][1] == "MERGE"
    assert merge_counts(history[-1][2]) == (1, 0, 0)


# --------------------------------------------------------------------------------------------
# Duplicates and replays
# --------------------------------------------------------------------------------------------


def test_duplicate_event_changes_nothing(lake: Lake) -> None:
    """Two copies in one batch give one row; the same records again give no new version."""
    first = [
        event(0, "c", 1, (100, 10), "ann"),
        event(1, "c", 1, (100, 10), "ann"),  # at-least-once copy of the same event
        event(2, "c", 2, (100, 11), "bob"),
    ]
    lake.apply(first, 0)
    expected = [
        (1, "ann", None, seq(100, 10), "c", 1),  # the copy with the highest offset wins the tie
        (2, "bob", None, seq(100, 11), "c", 2),
    ]
    assert lake.rows(columns=(*ROW, "_bronze_offset")) == expected
    history = lake.history()
    assert merge_counts(history[-1][2]) == (2, 0, 0)
    before = history[-1][0]

    report = lake.apply(first, 1)

    assert report.applied == 0
    assert lake.rows(columns=(*ROW, "_bronze_offset")) == expected
    assert lake.version() == before


def test_replayed_batch_is_idempotent(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash right after the silver MERGE, then the same batch id again (a restart before the
    checkpoint): the replay reaches the silver MERGE (the batch's delete is not in the
    tombstones yet) and finds its batch mark in the silver table's history, so skips it; only
    the missing tombstone commit is made. A second replay of the finished batch adds no Delta
    version anywhere."""
    batch = [
        event(0, "t", None, (100, 5)),
        event(1, "c", 1, (100, 10), "ann"),
        event(2, "c", 2, (100, 11), "bob"),
        raw(3, pg_key(3), "not json"),
        tombstone(4, 9),
        event(5, "c", 3, (100, 12), "cy"),
        event(6, "d", 3, (100, 13)),
    ]
    # the truncate's two DELETEs, then the silver MERGE
    faults = CommitFaults(monkeypatch, [(silver_write, GUARDED_DML)], crash_after=3)
    with pytest.raises(InjectedCrash):
        lake.apply(batch, 0)
    assert faults.crashed == ["merge_silver"]
    paths = (lake.tables.silver, lake.tables.quarantine, lake.tables.truncations)
    versions = [lake.version(path) for path in paths]
    assert lake.version(lake.tables.tombstones) == -1

    faults.arm(None)
    lake.apply(batch, 0)

    # reached, and skipped: the table's history holds its batch mark
    assert faults.calls == [*["delete_older_than"] * 2, "merge_silver"]
    assert [lake.version(path) for path in paths] == versions
    assert lake.version(lake.tables.tombstones) == 1  # 0: created, 1: the append
    silver = lake.rows(columns=(*ROW, "_bronze_offset"))
    quarantine = lake.rows(lake.tables.quarantine, ("reason", "offset", "_batch_id"))
    assert silver == [
        (1, "ann", None, seq(100, 10), "c", 1),
        (2, "bob", None, seq(100, 11), "c", 2),
    ]
    assert quarantine == [("unparseable", 3, 0)]
    assert lake.rows(lake.tables.tombstones, ("id", "_sequence")) == [(3, seq(100, 13))]

    every = (*paths, lake.tables.tombstones)
    finished = [lake.version(path) for path in every]
    lake.apply(batch, 0)
    assert [lake.version(path) for path in every] == finished
    assert lake.rows(columns=(*ROW, "_bronze_offset")) == silver


# --------------------------------------------------------------------------------------------
# Truncate
# --------------------------------------------------------------------------------------------


def test_truncate_removes_older_rows_and_ignores_late_older_events(lake: Lake) -> None:
    lake.apply(
        [
            event(0, "c", 1, (100, 10), "old"),
            event(1, "c", 2, (300, 10), "newer than truncate"),
            event(2, "c", 3, (100, 20), "old"),
        ],
        0,
    )
    before = lake.version()
    lake.apply(
        [
            event(3, "t", None, (200, 5)),
            event(4, "c", 4, (250, 1), "after truncate"),
            event(5, "c", 5, (150, 1), "before truncate"),
        ],
        1,
    )
    expected = [
        (2, "newer than truncate", None, seq(300, 10), "c"),
        (4, "after truncate", None, seq(250, 1), "c"),
    ]
    assert lake.rows() == expected
    history = lake.history()
    assert [op for v, op, _ in history if v > before] == ["DELETE", "MERGE"]
    assert lake.rows(lake.tables.truncations, ("_sequence", "_bronze_offset")) == [(seq(200, 5), 3)]
    after_truncate = history[-1][0]

    report = lake.apply(
        [event(6, "c", 6, (150, 2), "late"), event(7, "u", 1, (199, 99), "late update")], 2
    )

    assert report.applied == 0
    assert lake.rows() == expected
    assert lake.version() == after_truncate


# --------------------------------------------------------------------------------------------
# TOAST
# --------------------------------------------------------------------------------------------


def test_toast_placeholder_takes_previous_value(lake: Lake) -> None:
    lake.apply([event(0, "c", 1, (100, 10), "a", "long text 1")], 0)
    lake.apply(
        [
            # previous version in silver (earlier batch)
            event(1, "u", 1, (100, 20), "a2", PLACEHOLDER),
            # previous version earlier in the same batch
            event(2, "c", 2, (100, 30), "b", "long text 2"),
            event(3, "u", 2, (100, 40), "b2", PLACEHOLDER),
            # no previous version known: the placeholder stays
            event(4, "u", 3, (100, 50), "c", PLACEHOLDER),
        ],
        1,
    )

    assert lake.rows() == [
        (1, "a2", "long text 1", seq(100, 20), "u"),
        (2, "b2", "long text 2", seq(100, 40), "u"),
        (3, "c", PLACEHOLDER, seq(100, 50), "u"),
    ]
    assert merge_counts(lake.history()[-1][2]) == (2, 1, 0)


def test_toast_placeholder_takes_value_of_replaced_row_not_late_older_event(lake: Lake) -> None:
    lake.apply([event(0, "c", 1, (100, 7), "a", "B")], 0)
    lake.apply(
        [
            event(1, "u", 1, (100, 5), "a", "A"),  # late, older than the silver row
            event(2, "u", 1, (100, 10), "a2", PLACEHOLDER),
        ],
        1,
    )
    # The fold: c@7 (B) -> u@10 replaces it, so notes = B. The late u@5 is ignored.
    assert lake.rows() == [(1, "a2", "B", seq(100, 10), "u")]


# --------------------------------------------------------------------------------------------
# Quarantine and metadata
# --------------------------------------------------------------------------------------------


def test_malformed_records_are_quarantined_and_valid_ones_applied(lake: Lake) -> None:
    good = event(0, "c", 1, (100, 10), "ann")
    no_op = pg_envelope("c", (100, 11), {"id": 2, "name": "x", "notes": None})
    del no_op["payload"]["op"]
    no_sequence = pg_envelope("c", (100, 12), {"id": 3, "name": "y", "notes": None})
    del no_sequence["payload"]["source"]["sequence"]
    records = [
        good,
        raw(1, pg_key(2), "not json"),
        raw(2, pg_key(2), no_op),
        raw(3, pg_key(3), no_sequence),
        raw(4, None, pg_envelope("u", (100, 13), {"id": 4, "name": "z", "notes": None})),
        tombstone(5, 1),
    ]
    report = lake.apply(records, 3)

    reasons = (("missing key", 1), ("missing op", 1), ("missing sequence", 1), ("unparseable", 1))
    assert report == BatchReport(6, quarantined=4, tombstones=1, applied=1, reasons=reasons)
    assert lake.rows() == [(1, "ann", None, seq(100, 10), "c")]
    quarantine = lake.spark.read.format("delta").load(lake.tables.quarantine)
    assert sorted(quarantine.columns) == sorted(
        [
            "entity",
            "reason",
            "topic",
            "partition",
            "offset",
            "key",
            "value",
            "_quarantined_at",
            "_batch_id",
        ]
    )
    rows = sorted(
        (r.offset, r.entity, r.reason, r.topic, r.partition, r._batch_id, r.key, r.value)
        for r in quarantine.collect()
    )
    by_offset = {r.offset: r for r in records}
    assert rows == [
        (
            offset,
            "customers",
            reason,
            TOPIC,
            0,
            3,
            by_offset[offset].key_bytes,
            by_offset[offset].value_bytes,
        )
        for offset, reason in [
            (1, "unparseable"),
            (2, "missing op"),
            (3, "missing sequence"),
            (4, "missing key"),
        ]
    ]
    assert quarantine.where(F.col("_quarantined_at").isNull()).count() == 0
    assert [op for _, op, _ in lake.history(lake.tables.quarantine)] == ["WRITE"]


def test_decimal_that_does_not_fit_is_quarantined_and_verify_agrees(
    lake: Lake, tmp_path: Path
) -> None:
    """A ``numeric`` value of 25 digits before the point and one of 20 after it go to the
    quarantine with their reasons; the value that fits keeps every digit; ``verify`` (the
    reference fold of the same bronze) expects the same rows and the same reasons."""
    fields = [*CUSTOMER_FIELDS, DECIMAL_FIELDS[0]]

    def numeric(offset: int, id_: int, scale: int, unscaled: int) -> Record:
        after = {
            "id": id_,
            "name": "n",
            "notes": None,
            "n": {"scale": scale, "value": b64_int(unscaled)},
        }
        value = pg_envelope("c", (100, 10 + offset), after=after, fields=fields)
        return Record(TOPIC, 0, offset, 1_000 + offset, pg_key(id_), value)

    records = [
        numeric(0, 1, 2, 12_345),
        numeric(1, 2, 0, 10**24),
        numeric(2, 3, 20, 1),
    ]
    bronze = str(tmp_path / "bronze")
    bronze_frame(lake.spark, records).write.format("delta").save(bronze)
    report = lake.apply(records, 0)

    fix = (
        "(declare the column's precision in PostgreSQL, "
        "or set Debezium decimal.handling.mode=string)"
    )
    too_big = f"value of column n does not fit decimal(38,18): 25 digits before the point {fix}"
    too_fine = f"value of column n does not fit decimal(38,18): 20 digits after the point {fix}"
    assert report.quarantined == 2
    assert lake.rows(columns=("id", "n")) == [(1, Decimal("123.45"))]
    quarantine = lake.rows(lake.tables.quarantine, ("offset", "reason"))
    assert quarantine == [(1, too_big), (2, too_fine)]

    check = check_table(lake.spark, bronze, lake.tables.silver, SPEC)
    assert check.ok, check.differences
    assert check.expected_rows == check.actual_rows == 1
    silver_schema = lake.spark.read.format("delta").load(lake.tables.silver).schema
    expected = fold([bronze_record(r) for r in records], fold_spec(SPEC, silver_schema))
    assert [(r.offset, reason) for r, reason in expected.quarantined] == quarantine


def test_silver_metadata_columns(lake: Lake) -> None:
    ts_ms = 1_700_000_000_123
    lake.apply([event(42, "u", 7, (555, 777), "ann", "x", partition=3, ts_ms=ts_ms)], 0)

    silver = lake.spark.read.format("delta").load(lake.tables.silver)
    assert silver.dtypes == [
        ("id", "int"),
        ("name", "string"),
        ("notes", "string"),
        ("_sequence", "string"),
        ("_op", "string"),
        ("_source_ts", "timestamp"),
        ("_bronze_topic", "string"),
        ("_bronze_partition", "int"),
        ("_bronze_offset", "bigint"),
    ]
    actual = silver.withColumn("_source_ts", F.unix_millis("_source_ts"))
    expected = lake.spark.createDataFrame(
        [(7, "ann", "x", seq(555, 777), "u", ts_ms, TOPIC, 3, 42)],
        "id int, name string, notes string, _sequence string, _op string, _source_ts bigint, "
        "_bronze_topic string, _bronze_partition int, _bronze_offset bigint",
    )
    assert_df_equality(actual, expected, ignore_nullable=True)


# --------------------------------------------------------------------------------------------
# What a steady-state micro-batch costs
# --------------------------------------------------------------------------------------------


def test_a_batch_of_the_last_batchs_schema_skips_schema_discovery(
    lake: Lake, tmp_path: Path
) -> None:
    """The query keeps the decoding of its last batch's one Connect schema: a batch whose
    records all carry that schema runs fewer Spark jobs than the same work with nothing kept,
    and gives the same rows."""
    app_id = query_app_id(lake.spark, str(tmp_path / "checkpoint"))  # its batches are new
    first = [event(0, "c", 1, (100, 10), "a1"), event(1, "c", 2, (100, 11), "b1")]
    lake.apply(first, 0, app_id)
    assert lake.state.schemas.version is not None
    steady = [event(2, "u", 1, (100, 12), "a2")]
    kept = spark_jobs(lake.spark, "steady", lambda: lake.apply(steady, 1, app_id))
    cold = Lake(lake.spark, lake.tables)  # the same tables, nothing kept between batches
    new = [event(3, "u", 2, (100, 13), "b2")]
    fresh = spark_jobs(lake.spark, "fresh", lambda: cold.apply(new, 2, app_id))

    assert kept < fresh, (kept, fresh)
    assert kept <= STEADY_BATCH_JOBS, kept
    assert lake.rows() == [(1, "a2", None, seq(100, 12), "u"), (2, "b2", None, seq(100, 13), "u")]


#: Spark jobs of a steady micro-batch of updates (no delete, no quarantine, known schema):
#: parse and totals (1); the batch against the current orders of its keys (the keys broadcast
#: to select them, so the table is not shuffled) and its totals (4); the MERGE reading its
#: source as kept, without Delta's own copy (5). A bound, so that a change that adds a job per
#: batch, which every micro-batch of every run pays, is seen.
STEADY_BATCH_JOBS = 10


# --------------------------------------------------------------------------------------------
# Cost that follows the batch
# --------------------------------------------------------------------------------------------


def test_a_batch_reads_only_the_files_that_can_hold_its_keys(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's range of keys bounds its read of the table's current orders: Delta skips
    the files whose key statistics lie outside it, and the result is the fold's."""
    batches = [
        [event(base + i, "c", base + i, (100, base + i)) for i in range(3)]
        for base in (0, 100, 200)
    ]
    for batch_id, records in enumerate(batches):
        lake.apply(records, batch_id)
    read: list[tuple[KeyRange | None, int]] = []

    def spied(spark: SparkSession, tables: EntityTables, keys: Any, within: Any = None) -> Any:
        current = current_orders(spark, tables, keys, within)
        read.append((within, len(current.inputFiles()) if current is not None else 0))
        return current

    monkeypatch.setattr(silver_context, "current_orders", spied)
    update = [event(300, "u", 101, (200, 1), "new"), event(301, "u", 102, (200, 2), "new")]
    lake.apply(update, 3)

    every_file = len(lake.spark.read.format("delta").load(lake.tables.silver).inputFiles())
    assert read[0][0] == KeyRange("id", 101, 102)
    assert 0 < read[0][1] < every_file, (read, every_file)
    records = [bronze_record(r) for batch in [*batches, update] for r in batch]
    expected = fold(records, fold_spec(SPEC, None)).rows.values()
    assert lake.rows(columns=("id", "name")) == sorted((r["id"], r["name"]) for r in expected)


def test_a_merge_of_few_keys_names_them(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of at most ``LISTED_KEYS`` keys names them in its MERGE's condition, so the
    table's rows of keys between them are dropped as they are read; a larger batch bounds its
    keys only. Either way the result is the fold's."""
    inserts = [event(i, "c", i, (100, i)) for i in range(6)]
    lake.apply(inserts, 0)
    merged: list[KeyRange | None] = []

    def spied(*args: Any, **kwargs: Any) -> None:
        merged.append(args[-1])
        merge_silver(*args, **kwargs)

    monkeypatch.setattr(silver_write, "merge_silver", spied)
    few = [event(10, "u", 1, (200, 1), "new"), event(11, "u", 4, (200, 2), "new")]
    lake.apply(few, 1)
    monkeypatch.setattr(silver_tables, "LISTED_KEYS", 1)
    more = [event(12, "u", 2, (300, 1), "newer"), event(13, "d", 3, (300, 2))]
    lake.apply(more, 2)

    listed, bounded = merged
    assert listed is not None and sorted(listed.values or ()) == [1, 4]
    assert (listed.column, listed.low, listed.high) == ("id", 1, 4)
    table = lake.spark.read.format("delta").load(lake.tables.silver)
    assert sorted(r.id for r in table.where(listed.holds()).collect()) == [1, 4]
    assert bounded == KeyRange("id", 2, 3)
    records = [bronze_record(r) for r in (*inserts, *few, *more)]
    expected = fold(records, fold_spec(SPEC, None)).rows.values()
    assert lake.rows(columns=("id", "name")) == sorted((r["id"], r["name"]) for r in expected)


def test_is_in_keeps_exactly_the_listed_values(spark: SparkSession) -> None:
    """``lakehouse_core.frames.is_in`` (the list handed over as JSON) keeps the rows whose value is
    listed, for integer keys beyond 32 bits and for strings JSON must escape."""
    numbers = spark.createDataFrame([(v,) for v in (1, 2, 3, 2**40, -(2**40))], "k long")
    assert sorted(r.k for r in numbers.where(is_in("k", [3, 2**40, 7])).collect()) == [3, 2**40]
    texts = ['a"b', "c\\d", "é\u2028😀", "plain", "it's"]
    strings = spark.createDataFrame([(t,) for t in texts], "k string")
    kept = [r.k for r in strings.where(is_in("k", [*texts[:3], "absent"])).collect()]
    assert sorted(kept) == sorted(texts[:3])
