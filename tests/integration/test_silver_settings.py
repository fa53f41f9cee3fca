"""One test per table setting (docs/silver-semantics.md, "Table settings"), through
``apply_batch`` on tiny bronze frames. Each test compares the whole silver table with the
expected rows and with the reference fold, and the Delta history where the setting is about
writing or not writing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from bronze.table import ensure_bronze_table
from cdc.records import Record
from lakehouse_core.columns import METADATA_COLUMNS
from lakehouse_core.config import TableSpec
from lakehouse_core.delta_io import table_exists
from lakehouse_core.errors import ConfigError
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import Trigger, await_query
from silver.job import BatchReport, apply_batch, entity_tables, start_silver
from silver.reference import TOAST_PLACEHOLDER, fold
from silver.tables import EntityTables
from silver.verify import canonical_rows, fold_spec
from tests.helpers import bronze_frame, bronze_record, pg_envelope, pg_key
from tests.integration.test_silver_merge import merge_counts

pytestmark = pytest.mark.integration

CUSTOMERS = TableSpec(name="customers", topic="pg.public.customers")
USERS = TableSpec(
    name="users", topic="app.users", format="events", keys=("id",), sequence_by=("seq",)
)


def pg(offset: int, op: str, key: int, lsn: int, name: Any = None, notes: Any = None) -> Record:
    """A wrapped Debezium Postgres event of the customers table (id, name, notes)."""
    after = None if op == "d" else {"id": key, "name": name, "notes": notes}
    before = {"id": key, "name": None, "notes": None} if op == "d" else None
    value = pg_envelope(op, (100, lsn), after=after, before=before)
    return Record(CUSTOMERS.topic, 0, offset, 1_000 + offset, pg_key(key), value)


def ev(offset: int, **value: Any) -> Record:
    """A record of the ``app.users`` event stream whose value is ``value``."""
    return Record(USERS.topic, 0, offset, 1_000 + offset, None, value)


@dataclass
class Lake:
    """A fresh warehouse; ``apply`` runs micro-batches of one table and remembers the records."""

    spark: SparkSession
    root: Path
    spec: TableSpec
    records: list[Record]

    @property
    def tables(self) -> EntityTables:
        return entity_tables(Warehouse.from_path(self.root), self.spec)

    def apply(self, records: list[Record], batch_id: int) -> BatchReport:
        self.records += records
        frame = bronze_frame(self.spark, records, batch_id)
        return apply_batch(frame, batch_id, self.spec, self.tables, "settings-test")

    def rows(self, columns: tuple[str, ...], path: str | None = None) -> list[tuple[Any, ...]]:
        frame = self.spark.read.format("delta").load(path or self.tables.silver)
        return sorted(tuple(row) for row in frame.select(*columns).collect())

    def columns(self) -> list[str]:
        return self.spark.read.format("delta").load(self.tables.silver).columns

    def history(self) -> list[tuple[str, dict[str, str]]]:
        """(operation, operationMetrics) of the silver table, oldest first."""
        frame = DeltaTable.forPath(self.spark, self.tables.silver).history()
        rows = frame.select("version", "operation", "operationMetrics").collect()
        return [(r.operation, dict(r.operationMetrics or {})) for r in sorted(rows)]

    def assert_equals_model(self) -> None:
        """Silver equals the fold of every record applied so far."""
        expected = fold([bronze_record(r) for r in self.records], fold_spec(self.spec, None))
        key = self.spec.keys or ("id",)
        actual = {
            tuple(row[k] for k in key): row
            for row in canonical_rows(self.spark.read.format("delta").load(self.tables.silver))
        }
        assert actual == expected.rows


@pytest.fixture
def lake(spark: SparkSession, tmp_path: Path) -> Lake:
    return Lake(spark, tmp_path, CUSTOMERS, [])


# --------------------------------------------------------------------------------------------
# apply_as_deletes, apply_as_truncates
# --------------------------------------------------------------------------------------------


def test_apply_as_deletes_on_an_events_stream(lake: Lake) -> None:
    lake.spec = replace(USERS, apply_as_deletes="operation = 'DELETE'")
    report = lake.apply(
        [
            ev(0, id=1, seq=1, operation="INSERT", name="a"),
            ev(1, id=1, seq=3, operation="DELETE", name=None),
            ev(2, id=2, seq=1, operation="INSERT", name="b"),
            ev(3, id=3, seq=1, operation=None, name="null is not a delete"),
        ],
        0,
    )
    assert report.applied == 3
    row = ("id", "operation", "name", "_bronze_offset")
    expected = [(2, "INSERT", "b", 2), (3, None, "null is not a delete", 3)]
    assert lake.rows(row) == expected
    assert lake.rows(("id", "_bronze_offset"), lake.tables.tombstones) == [(1, 1)]
    before = lake.history()

    # Older than the delete: ignored, no new version.
    report = lake.apply([ev(4, id=1, seq=2, operation="UPDATE", name="late")], 1)

    assert report.applied == 0
    assert lake.rows(row) == expected
    assert lake.history() == before
    lake.assert_equals_model()


def test_apply_as_deletes_adds_to_debezium_deletes(lake: Lake) -> None:
    lake.spec = replace(CUSTOMERS, apply_as_deletes="name = 'erased'")
    lake.apply(
        [
            pg(0, "c", 1, 10, "a"),
            pg(1, "u", 1, 20, "erased"),  # deleted by the condition
            pg(2, "c", 2, 10, None),  # null name: the condition is unknown, not true
            pg(3, "c", 3, 10, "c"),
            pg(4, "d", 3, 20),  # deleted by its op
        ],
        0,
    )
    assert lake.rows(("id", "name", "_op")) == [(2, None, "c")]
    assert lake.rows(("id", "_bronze_offset"), lake.tables.tombstones) == [(1, 1), (3, 4)]
    assert [op for op, _ in lake.history()] == ["CREATE TABLE", "MERGE"]
    assert merge_counts(lake.history()[-1][1]) == (1, 0, 0)

    # A batch with no row columns (only a Kafka tombstone) has nothing to test the condition on.
    tombstone = Record(CUSTOMERS.topic, 0, 5, 1_005, pg_key(3), None)
    assert lake.apply([tombstone], 1) == BatchReport(1, 0, 1, 0)
    lake.assert_equals_model()


def test_apply_as_truncates_on_an_events_stream(lake: Lake) -> None:
    lake.spec = replace(USERS, apply_as_truncates="operation = 'TRUNCATE'")
    lake.apply([ev(0, id=1, seq=1, operation="I"), ev(1, id=2, seq=5, operation="I")], 0)
    versions = len(lake.history())

    lake.apply(
        [
            ev(2, id=0, seq=3, operation="TRUNCATE"),
            ev(3, id=3, seq=2, operation="I"),  # older than the truncate: ignored
            ev(4, id=4, seq=4, operation="I"),
        ],
        1,
    )

    assert lake.rows(("id", "seq")) == [(2, 5), (4, 4)]
    assert [op for op, _ in lake.history()[versions:]] == ["DELETE", "MERGE"]
    assert lake.rows(("_bronze_offset",), lake.tables.truncations) == [(2,)]
    lake.assert_equals_model()


# --------------------------------------------------------------------------------------------
# column_list, except_column_list
# --------------------------------------------------------------------------------------------


def test_column_list_keeps_keys_listed_columns_and_metadata(lake: Lake) -> None:
    lake.spec = replace(CUSTOMERS, column_list=("name", "absent"))
    lake.apply([pg(0, "c", 1, 10, "a", "long"), pg(1, "u", 1, 20, "b", TOAST_PLACEHOLDER)], 0)

    assert lake.columns() == ["id", "name", *METADATA_COLUMNS]
    assert lake.rows(("id", "name", "_op")) == [(1, "b", "u")]
    lake.assert_equals_model()


def test_except_column_list_drops_columns_a_condition_still_reads(lake: Lake) -> None:
    lake.spec = replace(
        USERS, apply_as_deletes="operation = 'DELETE'", except_column_list=("operation",)
    )
    lake.apply(
        [
            ev(0, id=1, seq=1, operation="INSERT", name="a"),
            ev(1, id=2, seq=1, operation="INSERT", name="b"),
            ev(2, id=2, seq=2, operation="DELETE", name=None),
        ],
        0,
    )
    assert lake.columns() == ["id", "name", "seq", *METADATA_COLUMNS]
    assert lake.rows(("id", "name", "seq")) == [(1, "a", 1)]
    lake.assert_equals_model()


def test_except_column_list_refuses_the_record_key(lake: Lake) -> None:
    lake.spec = replace(CUSTOMERS, except_column_list=("id",))
    with pytest.raises(ConfigError, match=r"^Table 'customers': 'except_column_list' lists 'id'"):
        lake.apply([pg(0, "c", 1, 10, "a")], 0)
    tables = lake.tables
    assert not any(table_exists(lake.spark, p) for p in (tables.silver, tables.quarantine))


# --------------------------------------------------------------------------------------------
# Conditions checked against the batch's columns
# --------------------------------------------------------------------------------------------


def test_condition_with_a_mistyped_literal_is_refused(lake: Lake) -> None:
    lake.spec = replace(CUSTOMERS, apply_as_deletes="id = 'x'")
    with pytest.raises(
        ConfigError,
        match=r"^Table 'customers': apply_as_deletes compares column 'id' of type int with the "
        r"string 'x'; compare numbers with numbers, ",
    ):
        lake.apply([pg(0, "c", 1, 10, "a")], 0)
    assert not table_exists(lake.spark, lake.tables.silver)


def test_condition_on_an_unknown_column_stops_the_stream_and_loses_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    warehouse = Warehouse.from_path(tmp_path)
    bronze = warehouse.table("bronze", table_name_for_topic(USERS.topic))
    ensure_bronze_table(spark, bronze, USERS.topic)
    records = [ev(0, id=1, seq=1, operation="INSERT"), ev(1, id=1, seq=2, operation="DELETE")]
    bronze_frame(spark, records).write.format("delta").mode("append").save(bronze)
    typo = replace(USERS, apply_as_deletes="operaton = 'DELETE'")

    with pytest.raises(
        ConfigError,
        match=r"^Table 'users': apply_as_deletes reads column 'operaton', which is not a column "
        r"of the table \(declare it in 'schema' if the source omits it\)\. Columns: ",
    ):
        await_query(start_silver(spark, warehouse, typo, Trigger()))
    tables = entity_tables(warehouse, USERS)
    assert not table_exists(spark, tables.silver)

    # Fixed, the next run processes the same records.
    fixed = replace(USERS, apply_as_deletes="operation = 'DELETE'")
    await_query(start_silver(spark, warehouse, fixed, Trigger()))
    assert spark.read.format("delta").load(tables.tombstones).select("id").collect() == [(1,)]


# --------------------------------------------------------------------------------------------
# ignore_null_updates
# --------------------------------------------------------------------------------------------


def test_ignore_null_updates_keeps_previous_values(lake: Lake) -> None:
    lake.spec = replace(CUSTOMERS, ignore_null_updates=True)
    lake.apply([pg(0, "c", 1, 10, "a", "n1"), pg(1, "c", 3, 10, None, "x")], 0)
    lake.apply(
        [
            pg(2, "u", 1, 20, None, "n2"),  # previous version in the table
            pg(3, "c", 2, 30, "b", "m"),
            pg(4, "u", 2, 40, None, None),  # previous version earlier in the batch
            pg(5, "d", 3, 50),
            pg(6, "c", 3, 60, None, None),  # after a delete: no previous version
            pg(7, "c", 4, 70, "d", "o"),
            pg(8, "d", 4, 80),
            pg(9, "c", 4, 90, None, "o2"),  # the delete is newer than the batch's "d"
            # No previous version: the insert keeps its null, and so does the update after it
            # (found by the property test: the update's own placeholder was kept).
            pg(10, "c", 5, 100, None, None),
            pg(11, "u", 5, 110, "e", TOAST_PLACEHOLDER),
            pg(12, "c", 6, 120, "f", "p"),
            pg(13, "d", 6, 130),
            pg(14, "c", 6, 140, None, None),
            pg(15, "u", 6, 150, "f2", TOAST_PLACEHOLDER),
        ],
        1,
    )

    assert lake.rows(("id", "name", "notes", "_op")) == [
        (1, "a", "n2", "u"),
        (2, "b", "m", "u"),
        (3, None, None, "c"),
        (4, None, "o2", "c"),
        (5, "e", None, "u"),
        (6, "f2", None, "u"),
    ]
    assert merge_counts(lake.history()[-1][1]) == (4, 2, 0)
    lake.assert_equals_model()


def test_ignore_null_updates_on_events_with_omitted_fields(lake: Lake) -> None:
    lake.spec = replace(USERS, ignore_null_updates=True)
    lake.apply([ev(0, id=1, seq=1, name="a", email="a@x"), ev(1, id=2, seq=1, email="b@x")], 0)
    lake.apply([ev(2, id=1, seq=2, email="new@x"), ev(3, id=2, seq=2, name=None)], 1)

    assert lake.rows(("id", "name", "email", "seq")) == [(1, "a", "new@x", 2), (2, None, "b@x", 2)]
    lake.assert_equals_model()


def test_partial_update_applied_before_its_previous_version_arrives(lake: Lake) -> None:
    """The documented limit: an older version arriving after the partial event is ignored,
    so the column keeps what it had when the event was applied (here: its own null)."""
    lake.spec = replace(CUSTOMERS, ignore_null_updates=True)
    lake.apply([pg(0, "u", 1, 20, None, "n2")], 0)
    report = lake.apply([pg(1, "c", 1, 10, "a", "n1")], 1)

    assert report.applied == 0
    assert lake.rows(("id", "name", "notes")) == [(1, None, "n2")]
    model = fold([bronze_record(r) for r in lake.records], fold_spec(lake.spec, None))
    assert model.rows[(1,)]["name"] == "a"  # what in-order arrival gives


# --------------------------------------------------------------------------------------------
# Settings as Databricks AUTO CDC users write them
# --------------------------------------------------------------------------------------------


def test_a_keyless_truncate_is_a_truncate_not_a_missing_key(lake: Lake) -> None:
    """Databricks' TRUNCATE example sends the key (``userId``) null."""
    lake.spec = TableSpec(
        name="users",
        topic=USERS.topic,
        format="events",
        keys=["id"],  # type: ignore[arg-type]  # a list, as in Python
        sequence_by="seq",  # type: ignore[arg-type]  # one column as a string
        apply_as_truncates="operation = 'TRUNCATE'",
    )
    lake.apply([ev(0, id=1, seq=1, operation="I"), ev(1, id=2, seq=5, operation="I")], 0)

    report = lake.apply(
        [
            ev(2, id=None, seq=3, operation="TRUNCATE"),
            ev(3, id=None, seq=None, operation="TRUNCATE"),  # no sequence: still missing key
            ev(4, id=None, seq=4, operation="I"),  # not a truncate: missing key
            ev(5, id=4, seq=4, operation="I"),
        ],
        1,
    )

    assert report.reasons == (("missing key", 2),)
    assert lake.rows(("id", "seq")) == [(2, 5), (4, 4)]
    assert lake.rows(("_bronze_offset",), lake.tables.truncations) == [(2,)]
    lake.assert_equals_model()


def test_system_sequence_by_breaks_ties_of_sequence_by(lake: Lake) -> None:
    lake.spec = replace(USERS, system_sequence_by="lsn")
    lake.apply(
        [
            ev(0, id=1, seq=1, lsn=20, name="second"),
            ev(1, id=1, seq=1, lsn=10, name="first"),  # same seq, lower lsn: older
            ev(2, id=2, seq=2, lsn=1, name="newer seq"),
            ev(3, id=2, seq=1, lsn=99, name="older seq"),
        ],
        0,
    )
    lake.apply([ev(4, id=1, seq=1, lsn=15, name="between")], 1)  # older than the row

    assert lake.rows(("id", "name")) == [(1, "second"), (2, "newer seq")]
    lake.assert_equals_model()


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"ignore_null_updates_column_list": ("name",)}, [(1, "a", None), (2, "b", None)]),
        ({"ignore_null_updates_except_column_list": ("name",)}, [(1, None, "n1"), (2, None, "m")]),
    ],
)
def test_ignore_null_updates_for_listed_columns(
    lake: Lake, setting: dict[str, Any], expected: list[tuple[Any, ...]]
) -> None:
    lake.spec = replace(CUSTOMERS, **setting)
    lake.apply([pg(0, "c", 1, 10, "a", "n1"), pg(1, "c", 2, 10, "b", "m")], 0)
    lake.apply([pg(2, "u", 1, 20, None, None), pg(3, "u", 2, 20, None, None)], 1)

    assert lake.rows(("id", "name", "notes")) == expected
    lake.assert_equals_model()
