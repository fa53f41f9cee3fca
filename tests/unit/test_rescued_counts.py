"""Values of the wrong type kept in ``_rescued_data`` are counted (issue 63, item 5): in the
run's summary (one warning line per table that rescued any) and in ``status`` (the rows that
hold rescued values, from the silver files' statistics, without Spark)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse.ops.status import _rescued_rows
from lakehouse.run.summary import RunSummary
from silver.job import BatchReport

pytestmark = pytest.mark.unit


def test_the_summary_names_each_table_that_rescued_values() -> None:
    summary = RunSummary()
    summary.silver_batch("readings", BatchReport(10, 1, 0, 9, (("missing key", 1),), rescued=2))
    summary.silver_batch("readings", BatchReport(5, 0, 0, 5, rescued=1))
    summary.silver_batch("orders", BatchReport(5, 0, 0, 5))
    assert summary.tables["readings"].rescued == 3
    assert summary.warnings() == [
        "silver.readings: 3 records of this run had values their columns' types do not hold: "
        "applied with those columns null, the values kept in _rescued_data (find them: SELECT * "
        "FROM silver.readings WHERE _rescued_data IS NOT NULL)."
    ]


def test_status_counts_the_rows_holding_rescued_values_from_file_statistics() -> None:
    files = pa.table({"num_records": [10, 5], "null_count._rescued_data": [8, 5]})
    assert _rescued_rows(files) == 2
    assert _rescued_rows(pa.table({"num_records": [10]})) == 0  # no such column
    assert _rescued_rows(None) == 0
