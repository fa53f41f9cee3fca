"""DataFrame helpers every layer uses."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Row


def kept_with_totals(frame: DataFrame, *totals: Column) -> tuple[DataFrame, Row]:
    """``frame`` computed once and kept (a local checkpoint: later reads do not recompute it,
    and their plans stay small), and one row of the aggregate columns ``totals`` over it,
    both from a single Spark job."""
    kept = frame.localCheckpoint(eager=False)
    row = kept.select(*totals).first()
    assert row is not None  # an aggregate without grouping has exactly one row
    return kept, row
