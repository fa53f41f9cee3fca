"""A column whose type change quarantined records is named in the run's summary, with what
to do, while the rest of the table goes on (issue 63, item 3)."""

from __future__ import annotations

import pytest

from lakehouse.run.summary import RunSummary
from silver.job import BatchReport

pytestmark = pytest.mark.unit

REASON = "incompatible type for column total: table decimal(10,2), record string"


def test_the_summary_names_each_column_whose_type_change_quarantined_records() -> None:
    summary = RunSummary()
    summary.silver_batch("orders", BatchReport(10, 2, 0, 8, ((REASON, 2), ("missing key", 1))))
    summary.silver_batch("orders", BatchReport(4, 1, 0, 3, ((REASON, 1),)))
    summary.silver_batch("customers", BatchReport(5, 0, 0, 5, (("missing key", 1),)))
    assert summary.warnings() == [
        f"silver.orders: 3 records quarantined as {REASON!r}: no type holds both, the rest of "
        "the table was applied. To keep the new values, give the column a new name in the "
        "source (a new column of the new type); the records are in silver.quarantine."
    ]
