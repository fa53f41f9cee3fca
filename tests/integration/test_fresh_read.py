"""A fresh read through the public API on a warehouse a real run made: the applied bronze
version comes from the silver query's checkpoint; the read holds bronze records silver has not
applied (an update, a delete, a new key; a malformed record is left out), equals the reference
fold of bronze, is repeatable after silver catches up, and then equals the plain read. SQL
reads it as ``fresh.<table>``; ``verify`` checks it while silver is behind. Its bound (also the
config's ``[fresh]``) and its refusals are one line each."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from cdc.records import Record
from lakehouse import Lakehouse
from lakehouse.declare import cdc_table
from lakehouse_core.specs import FreshSpec
from silver.fresh import FreshLimits, FreshReadError
from silver.reference import FoldSpec, fold
from silver.verify import canonical_rows
from tests.helpers import bronze_frame, bronze_record, deliver, pg_envelope, pg_key

pytestmark = pytest.mark.integration

TOPIC = "shop.public.customers"


def change(offset: int, op: str, key: int, lsn: int, name: str | None = None) -> Record:
    image = {"id": key, "name": name, "notes": None}
    value = (
        pg_envelope(op, (lsn - 1, lsn), before=image)
        if op == "d"
        else pg_envelope(op, (lsn - 1, lsn), after=image)
    )
    return Record(TOPIC, 0, offset, 1_767_225_600_000, pg_key(key), value)


APPLIED = [change(0, "c", 1, 100, "ann"), change(1, "c", 2, 110, "bob"), change(2, "c", 3, 120)]
PENDING = [
    change(3, "u", 1, 200, "anne"),
    change(4, "d", 2, 210),
    change(5, "c", 4, 220, "dan"),
    change(6, "u", 3, 115, "stale"),  # older than key 3's row: changes nothing
    Record(TOPIC, 0, 7, 1_767_225_600_000, pg_key(5), "not an envelope"),
]


def rows(frame: DataFrame) -> dict[Any, dict[str, Any]]:
    return {row["id"]: row for row in canonical_rows(frame)}


def test_fresh_read_through_the_api(spark: SparkSession, tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    deliver(source, 0, APPLIED)
    lh = Lakehouse(tmp_path / "wh", tables=[cdc_table("customers", topic=TOPIC)], spark=spark)
    lh.run(f"files:{source}")
    plain_before = rows(lh.table("silver.customers"))
    # Bronze gains records silver has not applied, appended as the bronze query appends.
    bronze = lh.warehouse.table("bronze", "shop_public_customers")
    bronze_frame(spark, PENDING, 1).write.format("delta").mode("append").save(bronze)

    fresh = lh.table("silver.customers", fresh=True)
    expected = fold([bronze_record(r) for r in APPLIED + PENDING], FoldSpec())
    assert len(expected.quarantined) == 1
    got = rows(fresh)
    assert got == {key[0]: row for key, row in expected.rows.items()}
    assert got != plain_before and sorted(got) == [1, 3, 4]
    assert got[1]["name"] == "anne" and got[3]["name"] is None
    # SQL reads the same rows from the schema ``fresh``; the table's name still qualifies.
    assert rows(lh.sql("SELECT * FROM fresh.customers")) == got
    query = "SELECT customers.id FROM fresh.customers WHERE customers.name IS NOT NULL ORDER BY 1"
    assert [r.id for r in lh.sql(query).collect()] == [1, 4]

    # verify checks the fresh read against the fold of bronze (silver itself is behind).
    checks = {check.table: check for check in lh.verify().checks}
    fresh_check = checks["customers (fresh)"]
    assert fresh_check.ok and fresh_check.actual_rows == 3, fresh_check.differences
    assert not checks["customers"].ok  # silver has not applied the pending records yet

    # status shows the unmerged tail: the records a fresh read folds.
    behind = {s.table: s.records_behind for s in lh.status().silver}
    assert behind == {"silver.customers": len(PENDING)}, behind

    with pytest.raises(FreshReadError, match=r"is 5 bronze records \(1 commits.*as it is") as over:
        lh.table("silver.customers", fresh=True, limits=FreshLimits(max_records=4))
    assert "\n" not in str(over.value)  # one line, naming the plain read
    bounded = replace(lh.config, fresh=FreshSpec(max_records=4))  # the TOML's [fresh]
    with pytest.raises(FreshReadError, match=r"is 5 bronze records .*\(4 records"):
        Lakehouse(lh.warehouse.root, bounded, spark=spark).sql("SELECT * FROM fresh.customers")
    with pytest.raises(FreshReadError, match="only silver tables have one"):
        lh.table("bronze.shop_public_customers", fresh=True)
    with pytest.raises(FreshReadError, match="drop version= or timestamp="):
        lh.table("silver.customers", version=1, fresh=True)

    lh.run(f"files:{source}")  # silver catches up with bronze
    assert [s.records_behind for s in lh.status().silver] == [0]
    assert "customers (fresh)" not in [c.table for c in lh.verify().checks]  # nothing pending
    assert rows(lh.table("silver.customers")) == got
    assert rows(fresh) == got  # the pinned pair reads the same rows later
    assert rows(lh.table("silver.customers", fresh=True)) == got  # nothing pending now
