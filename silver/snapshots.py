"""Full re-snapshots (``resnapshot = "full"``): the end of a table's snapshot removes the rows
the snapshot did not read (pure Column helpers; docs/silver-semantics.md, "Re-snapshots").

A full (initial or blocking) Debezium snapshot reads every row of a table at one source
position P, so the table at P holds exactly the rows it read. The record that ends the table's
snapshot (``source.snapshot`` is ``last_in_data_collection``, or ``last`` for the last table)
therefore acts as a truncate placed just before the snapshot's reads: every row and tombstone
ordered below P goes, a later-arriving change ordered below P is dropped, and the snapshot's
own reads (order ``(P, partition, offset)``, all above ``(P, -1, -1)``) and every change after
P apply as usual. A table empty at the snapshot gets no record at all from Debezium 3 (no read,
so no end; tests/integration/test_real_ddl_corpus.py): its rows stay. Incremental snapshots
(``source.snapshot = "incremental"``) read chunks at different positions and never end one:
their reads are upserts compared by order like any change, so an older read never replaces a
newer change.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_core.columns import REASON, SNAPSHOT_END

#: The ``source.snapshot`` values of the read that ends a table's full snapshot.
END_MARKERS = ("last", "last_in_data_collection")
#: The columns of an event's order (:func:`silver.parse.order_of`).
ORDER_COLUMNS = ("_sequence", "_bronze_partition", "_bronze_offset")
#: The bronze partition and offset of a snapshot end's truncate: below every record's.
BEFORE_READS = -1


def ends_snapshot(op: Column, marker: Column) -> Column:
    """Whether an event (its envelope ``op`` and ``source.snapshot``) ends a full snapshot."""
    return F.coalesce((op == "r") & marker.isin(*END_MARKERS), F.lit(False))


def end_order(events: DataFrame) -> Column:
    """The order of a snapshot end's truncate, over the parsed ``events`` (for one that ends a
    snapshot): its sequence, then a bronze partition and offset below every record's, in the
    events' types, so that it compares with :func:`silver.parse.order_of`."""
    return F.struct(
        F.col("_sequence"),
        *[
            F.lit(BEFORE_READS).cast(events.schema[name].dataType).alias(name)
            for name in ORDER_COLUMNS[1:]
        ],
    )


def truncate_order(events: DataFrame, truncate: Column, order: Column) -> Column:
    """Per parsed event, the order it truncates the table at, or null: ``order`` (the event's
    :func:`silver.parse.order_of`) where ``truncate`` holds (a truncate that is kept), the
    :func:`end_order` of a kept (not quarantined) snapshot end."""
    at = F.when(truncate, order)
    if SNAPSHOT_END not in events.columns:
        return at
    kept_end = F.col(REASON).isNull() & ~F.col("_tombstone") & F.col(SNAPSHOT_END)
    return at.when(kept_end, end_order(events))


def with_snapshot_ends(valid: DataFrame, truncates: DataFrame | None) -> DataFrame | None:
    """The orders (``_sequence``, ``_bronze_partition``, ``_bronze_offset``) of the
    ``truncates`` and of the snapshot ends among the ``valid`` events (kept, no tombstones);
    ``truncates`` when the table's snapshots end nothing (not ``resnapshot = "full"``)."""
    if SNAPSHOT_END not in valid.columns:
        return truncates
    ends = valid.where(F.col(SNAPSHOT_END)).select(end_order(valid).alias("o")).select("o.*")
    if truncates is None:
        return ends
    return truncates.select(*ORDER_COLUMNS).unionByName(ends)
