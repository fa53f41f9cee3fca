"""One test per SCD type 2 history behaviour (docs/silver-semantics.md), through ``apply_batch``.

Each test runs a few micro-batches of a customers table with ``stored_as_scd_type = 2`` into a
fresh warehouse and compares the whole history table (as intervals in LSN terms) and, where the
behaviour is about writing or not writing, the Delta history and change data feed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bronze.table import ensure_bronze_table
from cdc.records import Record
from lakehouse.ops.audit import verify_warehouse
from lakehouse_core.catalog import run_sql
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.delta_io import table_exists, table_property
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import Trigger, await_query
from silver import history_job
from silver.job import apply_batch, entity_tables, start_silver
from silver.tables import EntityTables, HistoryTables
from silver.verify import check_history
from tests.faults import CommitFaults, InjectedCrash
from tests.helpers import bronze_frame, customer_change, merge_counts, pg_key

pytestmark = pytest.mark.integration

TOPIC = "pg.public.customers"
SPEC = TableSpec(name="customers", topic=TOPIC, stored_as_scd_type=2)
APP_ID = "silver-history-test"

Interval = tuple[int, str | None, str | None, int | None, int | None, bool]


def change(
    offset: int,
    op: str,
    id_: int | None,
    lsn: int,
    name: str | None = "n",
    notes: str | None = None,
) -> Record:
    """A customers change at ``(commit 100, lsn)``, bronze partition 0, ``offset``."""
    return customer_change(TOPIC, offset, op, id_, (100, lsn), name, notes)


def lsn_of(order: Any) -> int | None:
    return None if order is None else int(order._sequence[-20:])


@dataclass(frozen=True)
class Lake:
    """A fresh warehouse with the customers entity's tables."""

    spark: SparkSession
    tables: EntityTables

    @property
    def paths(self) -> HistoryTables:
        assert self.tables.history is not None
        return self.tables.history

    def apply(self, records: list[Record], batch_id: int, spec: TableSpec = SPEC) -> None:
        frame = bronze_frame(self.spark, records, batch_id)
        apply_batch(frame, batch_id, spec, self.tables, APP_ID)

    def intervals(self) -> list[Interval]:
        """(id, name, notes, start LSN, end LSN or None, current) per history row, sorted."""
        frame = self.spark.read.format("delta").load(self.paths.history)
        return sorted(
            (
                r.id,
                r.name,
                r.notes,
                lsn_of(r["__start_at"]),
                lsn_of(r["__end_at"]),
                r["__is_current"],
            )
            for r in frame.collect()
        )

    def rows(self) -> dict[tuple[int, int], dict[str, Any]]:
        """Whole history rows by (id, start LSN)."""
        frame = self.spark.read.format("delta").load(self.paths.history)
        return {(r.id, lsn_of(r["__start_at"]) or 0): r.asDict() for r in frame.collect()}

    def silver(self) -> list[tuple[Any, ...]]:
        frame = self.spark.read.format("delta").load(self.tables.silver)
        return sorted(tuple(r) for r in frame.select("id", "name", "notes").collect())

    def history(self, path: str | None = None) -> list[tuple[int, str, dict[str, str]]]:
        """``(version, operation, operationMetrics)`` oldest first."""
        path = path or self.paths.history
        if not table_exists(self.spark, path):
            return []
        rows = DeltaTable.forPath(self.spark, path).history().collect()
        return sorted((r.version, r.operation, dict(r.operationMetrics or {})) for r in rows)

    def version(self, path: str | None = None) -> int:
        history = self.history(path)
        return history[-1][0] if history else -1

    def changes(self, since: int) -> list[tuple[str, int, int | None]]:
        """(change type, id, start LSN) of the history table's change feed from ``since``."""
        frame = (
            self.spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", since)
            .load(self.paths.history)
        )
        return sorted((r._change_type, r.id, lsn_of(r["__start_at"])) for r in frame.collect())


@pytest.fixture
def lake(spark: SparkSession, tmp_path: Path) -> Lake:
    return Lake(spark, entity_tables(Warehouse(str(tmp_path)), SPEC))


# --------------------------------------------------------------------------------------------
# Versions
# --------------------------------------------------------------------------------------------


def test_versions_in_order_and_the_scd1_table_is_kept(lake: Lake) -> None:
    lake.apply(
        [
            change(0, "c", 1, 10, "a"),
            change(1, "u", 1, 20, "b"),
            change(2, "u", 1, 30, "a"),  # the first value again: a third version
            change(3, "c", 2, 15, "x"),
        ],
        0,
    )

    assert lake.intervals() == [
        (1, "a", None, 10, 20, False),
        (1, "a", None, 30, None, True),
        (1, "b", None, 20, 30, False),
        (2, "x", None, 15, None, True),
    ]
    assert lake.silver() == [(1, "a", None), (2, "x", None)]
    history = lake.history()
    assert [op for _, op, _ in history] == ["CREATE TABLE", "MERGE"]
    assert merge_counts(history[-1][2]) == (4, 0, 0)
    columns = lake.spark.read.format("delta").load(lake.paths.history).dtypes
    assert columns[-5:] == [
        ("__start_at", "struct<_sequence:string,_bronze_partition:int,_bronze_offset:bigint>"),
        ("__end_at", "struct<_sequence:string,_bronze_partition:int,_bronze_offset:bigint>"),
        ("__is_current", "boolean"),
        ("__valid_from", "timestamp"),
        ("__valid_to", "timestamp"),
    ]


def test_late_change_splits_its_interval_and_rewrites_no_other_row(lake: Lake) -> None:
    lake.apply(
        [change(0, "c", 1, 10, "a"), change(1, "u", 1, 20, "b"), change(2, "u", 1, 40, "d")], 0
    )
    closed = lake.rows()[(1, 10)]
    before = lake.version()

    lake.apply([change(3, "u", 1, 30, "c")], 1)

    assert lake.intervals() == [
        (1, "a", None, 10, 20, False),
        (1, "b", None, 20, 30, False),
        (1, "c", None, 30, 40, False),
        (1, "d", None, 40, None, True),
    ]
    history = lake.history()
    assert [op for v, op, _ in history if v > before] == ["MERGE"]
    assert merge_counts(history[-1][2]) == (1, 1, 0)
    # No re-stamping: the change feed has the split interval and the new one, not the closed
    # row before them or the current row after them, and the closed row is unchanged.
    assert lake.changes(before + 1) == [
        ("insert", 1, 30),
        ("update_postimage", 1, 20),
        ("update_preimage", 1, 20),
    ]
    assert lake.rows()[(1, 10)] == closed


def test_late_change_inside_an_in_place_run_restores_the_values_of_the_time(
    lake: Lake,
) -> None:
    spec = replace(SPEC, track_history_column_list=("name",))
    lake.apply([change(0, "c", 1, 10, "a", "x"), change(1, "u", 1, 30, "a", "y")], 0, spec)
    assert lake.intervals() == [(1, "a", "y", 10, None, True)]

    lake.apply([change(2, "u", 1, 20, "b", "z")], 1, spec)

    assert lake.intervals() == [
        (1, "a", "x", 10, 20, False),  # notes as of the first event again
        (1, "a", "y", 30, None, True),
        (1, "b", "z", 20, 30, False),
    ]


def test_untracked_change_updates_the_version_in_place(lake: Lake) -> None:
    spec = replace(SPEC, track_history_column_list=("name",))
    lake.apply([change(0, "c", 1, 10, "a", "x")], 0, spec)

    lake.apply([change(1, "u", 1, 20, "a", "y"), change(2, "c", 2, 21, "b", "x")], 1, spec)

    assert lake.intervals() == [(1, "a", "y", 10, None, True), (2, "b", "x", 21, None, True)]
    row = lake.rows()[(1, 10)]
    assert (row["_sequence"][-2:], row["_op"], row["_bronze_offset"]) == ("20", "u", 1)
    assert merge_counts(lake.history()[-1][2]) == (1, 1, 0)


# --------------------------------------------------------------------------------------------
# Deletes and truncates
# --------------------------------------------------------------------------------------------


def test_delete_closes_the_current_interval(lake: Lake) -> None:
    lake.apply([change(0, "c", 1, 10, "a"), change(1, "c", 2, 11, "b")], 0)

    tombstone = Record(TOPIC, 0, 3, 0, pg_key(1), None)
    lake.apply([change(2, "d", 1, 20), tombstone], 1)

    assert lake.intervals() == [(1, "a", None, 10, 20, False), (2, "b", None, 11, None, True)]
    assert lake.silver() == [(2, "b", None)]
    assert merge_counts(lake.history()[-1][2]) == (0, 1, 0)


def test_reinsert_after_delete_opens_a_new_interval(lake: Lake) -> None:
    lake.apply([change(0, "c", 1, 10, "a"), change(1, "d", 1, 20), change(2, "c", 1, 30, "a")], 0)

    assert lake.intervals() == [(1, "a", None, 10, 20, False), (1, "a", None, 30, None, True)]


def test_truncate_closes_open_intervals_and_older_events_stay_before_it(lake: Lake) -> None:
    lake.apply([change(0, "c", 1, 10, "a"), change(1, "c", 2, 10, "b")], 0)
    # A truncate alone in its batch: no key columns, the keys come from the history log.
    lake.apply([change(2, "t", None, 50)], 1)

    assert lake.intervals() == [(1, "a", None, 10, 50, False), (2, "b", None, 10, 50, False)]
    assert merge_counts(lake.history()[-1][2]) == (0, 2, 0)

    # Late events older than the truncate make history before it, not silver rows.
    lake.apply(
        [change(3, "u", 1, 60, "a"), change(4, "c", 3, 40, "c"), change(5, "u", 2, 45, "b2")], 2
    )

    assert lake.intervals() == [
        (1, "a", None, 10, 50, False),
        (1, "a", None, 60, None, True),
        (2, "b", None, 10, 45, False),
        (2, "b2", None, 45, 50, False),
        (3, "c", None, 40, 50, False),
    ]
    assert lake.silver() == [(1, "a", None)]


def test_truncate_before_any_row(lake: Lake) -> None:
    """The first batch has only a truncate: no key is known yet; it still closes later-arriving
    older rows."""
    lake.apply([change(0, "t", None, 50)], 0)

    lake.apply([change(1, "c", 1, 10, "a"), change(2, "c", 2, 60, "b")], 1)

    assert lake.intervals() == [(1, "a", None, 10, 50, False), (2, "b", None, 60, None, True)]


# --------------------------------------------------------------------------------------------
# Duplicates and replays
# --------------------------------------------------------------------------------------------


def test_duplicate_and_replayed_batches_add_no_version(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash right after the history log append, then the batch again: the log gains no
    version and the history MERGE runs once; replaying the finished batch, or redelivering its
    records, then adds no version."""
    batch = [
        change(0, "c", 1, 10, "a"),
        change(1, "u", 1, 20, "b"),
        change(2, "c", 2, 10, "x"),
        change(3, "d", 2, 30),
        change(4, "t", None, 40),
    ]
    faults = CommitFaults(
        monkeypatch, [(history_job, "append"), (history_job, "_merge")], crash_after=1
    )
    with pytest.raises(InjectedCrash):
        lake.apply(batch, 0)
    log_version = lake.version(lake.paths.log)
    assert lake.version(lake.paths.history) == -1

    faults.arm(None)
    lake.apply(batch, 0)  # the same micro-batch again (a restart before its checkpoint)
    assert faults.calls == ["_merge"]
    assert lake.version(lake.paths.log) == log_version
    paths = (lake.paths.history, lake.paths.log)
    versions = [lake.version(path) for path in paths]
    rows = lake.rows()
    assert lake.intervals() == [
        (1, "a", None, 10, 20, False),
        (1, "b", None, 20, 40, False),
        (2, "x", None, 10, 30, False),
    ]

    lake.apply(batch, 0)  # and again, finished this time
    lake.apply(batch, 1)  # the same records again (redelivered)

    assert [lake.version(path) for path in paths] == versions
    assert lake.rows() == rows


# --------------------------------------------------------------------------------------------
# The streaming job, SQL and verify
# --------------------------------------------------------------------------------------------


def test_streaming_job_keeps_history_that_verify_and_sql_see(
    spark: SparkSession, tmp_path: Path
) -> None:
    warehouse = Warehouse(str(tmp_path))
    bronze = warehouse.table("bronze", table_name_for_topic(TOPIC))
    ensure_bronze_table(spark, bronze, TOPIC)
    for batch_id, records in enumerate(
        [
            [change(0, "c", 1, 10, "a"), change(1, "u", 1, 30, "c"), change(2, "c", 2, 10, "x")],
            [change(3, "u", 1, 20, "b"), change(4, "d", 2, 15)],
        ]
    ):
        bronze_frame(spark, records, batch_id).write.format("delta").mode("append").save(bronze)
    config = PipelineConfig(tables=(SPEC,))

    await_query(start_silver(spark, warehouse, SPEC, Trigger()))

    checks = verify_warehouse(spark, warehouse, config)
    silver = [c for c in checks if c.layer != "bronze"]  # bronze's own check comes last
    assert [(c.table, c.actual_rows, c.expected_rows, c.ok) for c in silver] == [
        ("customers", 1, 1, True),
        ("customers_history", 4, 4, True),
    ]
    count = run_sql(spark, warehouse, "SELECT count(*) FROM silver.customers_history").first()
    assert count is not None and count[0] == 4

    history = DeltaTable.forPath(spark, warehouse.table("silver", "customers_history"))
    history.update(F.col("id") == 2, {"name": F.lit("tampered")})

    differences = verify_warehouse(spark, warehouse, config)[1].differences
    assert len(differences) == 1
    assert "column name is 'tampered', expected 'x'" in differences[0]


def test_columns_silver_drops_are_dropped_from_the_history_too(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec = replace(SPEC, except_column_list=("notes",))
    warehouse = Warehouse(str(tmp_path))
    bronze = warehouse.table("bronze", table_name_for_topic(TOPIC))
    ensure_bronze_table(spark, bronze, TOPIC)
    records = [change(0, "c", 1, 10, "a", "secret"), change(1, "u", 1, 20, "b", "other")]
    bronze_frame(spark, records, 0).write.format("delta").mode("append").save(bronze)

    await_query(start_silver(spark, warehouse, spec, Trigger()))

    tables = entity_tables(warehouse, spec)
    assert tables.history is not None
    for path in (tables.silver, tables.history.history, tables.history.log):
        assert "notes" not in spark.read.format("delta").load(path).columns, path
    checks = verify_warehouse(spark, warehouse, PipelineConfig(tables=(spec,)))
    silver = [c for c in checks if c.layer != "bronze"]  # bronze's own check comes last
    assert [(c.table, c.actual_rows, c.expected_rows, c.ok) for c in silver] == [
        ("customers", 1, 1, True),
        ("customers_history", 2, 2, True),
    ]


# --------------------------------------------------------------------------------------------
# Validity as times (__valid_from, __valid_to)
# --------------------------------------------------------------------------------------------

#: ``customer_change``'s commit time of the change at LSN 0, in epoch ms (it grows with the LSN).
COMMIT_MS = 1_767_225_600_000


def test_an_as_of_join_in_plain_sql_over_the_validity_columns(lake: Lake) -> None:
    """Customer 1 is 'a' from LSN 10, 'b' from 20, deleted at 30 and 'c' again from 40 (the
    older changes delivered last); each order takes the name in force at its time."""
    lake.apply([change(2, "d", 1, 30), change(3, "c", 1, 40, "c")], 0)
    lake.apply([change(0, "c", 1, 10, "a"), change(1, "u", 1, 20, "b")], 1)
    spark = lake.spark
    spark.read.format("delta").load(lake.paths.history).createOrReplaceTempView("customers_h")
    at_lsn = {5: None, 10: "a", 15: "a", 20: "b", 29: "b", 30: None, 39: None, 40: "c", 99: "c"}
    orders = ", ".join(f"({lsn}, 1, timestamp_millis({COMMIT_MS + lsn}))" for lsn in at_lsn)
    spark.sql(f"SELECT * FROM VALUES {orders} AS o(lsn, customer, ts)").createOrReplaceTempView(
        "orders_at"
    )

    joined = spark.sql(
        """
        SELECT o.lsn, h.name
        FROM orders_at o
        LEFT JOIN customers_h h
          ON h.id = o.customer
         AND h.__valid_from <= o.ts
         AND (h.__valid_to IS NULL OR o.ts < h.__valid_to)
        """
    ).collect()

    assert sorted((r.lsn, r.name) for r in joined) == sorted(at_lsn.items())
    types = dict(spark.table("customers_h").dtypes)
    assert (types["__valid_from"], types["__valid_to"]) == ("timestamp", "timestamp")


def test_validity_takes_the_type_and_values_of_sequence_by(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec = replace(SPEC, sequence_by=("notes",))  # a string column, to see its type kept
    lake = Lake(spark, entity_tables(Warehouse(str(tmp_path)), spec))
    records = [change(0, "c", 1, 10, "a", "k1"), change(1, "u", 1, 11, "b", "k3")]
    lake.apply([*records, change(2, "u", 1, 12, "c", "k4")], 0, spec)

    frame = spark.read.format("delta").load(lake.paths.history)
    assert dict(frame.dtypes)["__valid_from"] == "string"
    assert sorted((r.name, r["__valid_from"], r["__valid_to"]) for r in frame.collect()) == [
        ("a", "k1", "k3"),
        ("b", "k3", "k4"),
        ("c", "k4", None),
    ]


def test_a_history_table_from_before_the_validity_columns_gets_them_for_every_version(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first batch after the upgrade fills them in for every key, also keys it does not
    touch, and a run stopped after the columns were added fills them on its retry."""
    first = [change(0, "c", 1, 10, "a"), change(1, "u", 1, 20, "b"), change(2, "c", 2, 11)]
    lake.apply(first, 0)
    filled = lake.rows()
    path = lake.paths.history
    spark = lake.spark
    before = spark.read.format("delta").load(path).drop("__valid_from", "__valid_to")
    old = spark.createDataFrame(before.collect(), before.schema)
    old.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    assert "__valid_from" not in spark.read.format("delta").load(path).columns
    bronze = str(Path(path).parent.parent / "bronze_copy")
    ensure_bronze_table(spark, bronze, TOPIC)
    bronze_frame(spark, first, 0).write.format("delta").mode("append").save(bronze)
    check = check_history(spark, bronze, path, SPEC)  # compared without the columns it lacks
    assert (check.ok, check.actual_rows, check.differences) == (True, 3, [])

    later = [change(3, "u", 2, 30, "y")]
    faults = CommitFaults(monkeypatch, [(history_job, "ensure_table")], crash_after=2)
    with pytest.raises(InjectedCrash):  # after the history table got the columns, all null
        lake.apply(later, 1)
    assert "__valid_from" in spark.read.format("delta").load(path).columns
    faults.arm(None)
    lake.apply(later, 1)
    bronze_frame(spark, later, 1).write.format("delta").mode("append").save(bronze)
    check = check_history(spark, bronze, path, SPEC)  # now with them
    assert (check.ok, check.actual_rows, check.differences) == (True, 4, [])

    rows = lake.rows()
    assert {k: rows[k] for k in ((1, 10), (1, 20))} == {k: filled[k] for k in ((1, 10), (1, 20))}
    millis = {k: (r["__valid_from"], r["__valid_to"]) for k, r in rows.items() if k[0] == 2}
    assert millis == {
        (2, 11): (filled[(2, 11)]["__valid_from"], rows[(2, 30)]["__valid_from"]),
        (2, 30): (rows[(2, 30)]["__valid_from"], None),
    }
    assert rows[(2, 30)]["__valid_from"] > rows[(2, 11)]["__valid_from"]
    assert table_property(spark, path, history_job.FILLING_VALIDITY) is None


def at_commit_time(record: Record, lsn_ms: int) -> Record:
    """``record`` with ``source.ts_ms`` set to ``COMMIT_MS + lsn_ms`` (its clock off its LSN)."""
    value = copy.deepcopy(record.value)
    assert isinstance(value, dict)
    value["payload"]["source"]["ts_ms"] = COMMIT_MS + lsn_ms
    return replace(record, value=value)


def test_a_late_truncate_changes_the_validity_of_only_the_keys_it_ends(lake: Lake) -> None:
    """The truncate at LSN 30 has a commit time ahead of the changes after it (the source's
    clock stepped back) and arrives last. It ends customer 2's version, whose next one then
    starts at the truncate's time; customer 1 had been deleted before it, so the truncate
    changes nothing of customer 1's history (nor is customer 1 rebuilt). The history equals
    the reference's: before, silver kept customer 1's re-insert at its own time while the
    reference raised it to the truncate's (the CI failure of issue 64, item 2)."""
    truncate = at_commit_time(change(5, "t", None, 30), 90)
    first = [
        change(0, "c", 1, 10, "a"),
        change(1, "d", 1, 20),
        change(2, "c", 2, 25, "x"),
        change(3, "c", 1, 40, "b"),
        change(4, "u", 2, 50, "y"),
    ]
    lake.apply(first, 0)
    lake.apply([truncate], 1)

    spark = lake.spark
    bronze = str(Path(lake.paths.history).parent.parent / "bronze_copy")
    ensure_bronze_table(spark, bronze, TOPIC)
    for batch_id, records in enumerate([first, [truncate]]):
        bronze_frame(spark, records, batch_id).write.format("delta").mode("append").save(bronze)
    check = check_history(spark, bronze, lake.paths.history, SPEC)
    assert (check.ok, check.actual_rows, check.differences) == (True, 4, [])

    def ms(value: Any) -> int | None:
        return None if value is None else round(value.timestamp() * 1000) - COMMIT_MS

    rows = lake.rows()
    assert {k: (ms(r["__valid_from"]), ms(r["__valid_to"])) for k, r in rows.items()} == {
        (1, 10): (10, 20),
        (1, 40): (40, None),
        (2, 25): (25, 90),
        (2, 50): (90, None),
    }
