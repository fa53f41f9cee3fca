"""What a user reads about records quarantined by an incompatible column type change: the
run's summary and ``lakehouse status`` print the same line (plain Python: status reads it
without Spark)."""

from __future__ import annotations

from collections.abc import Mapping

from lakehouse_core.layout import QUARANTINE_TABLE

#: The start of the reason of a record whose column's type the table cannot take
#: (silver.evolution: ``incompatible type for column <c>: table <type>, record <type>``).
INCOMPATIBLE = "incompatible type for column "


def type_change_lines(entity: str, reasons: Mapping[str, int]) -> list[str]:
    """One line per column whose type change quarantined records (``reasons``: records per
    quarantine reason, of any reason): the table, the column, both types, and what to do (the
    rest of the table went on)."""
    return [
        f"silver.{entity}: {records} records quarantined as {reason!r}: no type holds both, "
        "the rest of the table was applied. To keep the new values, give the column a new "
        "name in the source (a new column of the new type); the records are in "
        f"silver.{QUARANTINE_TABLE}."
        for reason, records in sorted(reasons.items())
        if reason.startswith(INCOMPATIBLE)
    ]
