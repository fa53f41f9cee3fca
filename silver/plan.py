"""The plan stage of a silver micro-batch: what to write, decided from the checked batch and
what the tables hold (pure: DataFrame in, DataFrames out; :mod:`silver.write` writes them)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from expectations.enforce import Outcome
from lakehouse_core.columns import OP, REASON
from silver.changes import latest_per_key, newer_than
from silver.check import Checked
from silver.context import Current
from silver.decode import NEWEST_TRUNCATE
from silver.parse import TOMBSTONE, TRUNCATE_OP, RowLayout, order_of, order_type_of
from silver.snapshots import with_snapshot_ends
from silver.tables import KeyRange, lists_keys, order_literal


@dataclass(frozen=True)
class Merge:
    """The MERGE of a batch into the silver table: ``changes``, the newest event per key that is
    newer than the key's row or tombstone (see :func:`silver.changes.latest_per_key`; not yet
    computed); ``toast_columns``: its partial columns; ``within``: the batch's key range;
    ``list_keys``: the range is to be narrowed to the keys it lists (a small batch)."""

    changes: DataFrame
    keys: tuple[str, ...]
    columns: tuple[str, ...]
    toast_columns: tuple[str, ...]
    within: KeyRange | None
    list_keys: bool


@dataclass(frozen=True)
class BatchWrites:
    """Everything one micro-batch writes, in the order :func:`silver.write.write` writes it:
    the quarantined records, the checks' outcomes (None: not judged), the batch's truncates
    and full snapshots' ends, as orders (None: it has none), the MERGE (None: no keyed
    change), and the history's input: the events neither quarantined nor Kafka tombstones, in
    the ``kept`` layout."""

    quarantined: DataFrame | None
    outcomes: tuple[Outcome, ...] | None
    truncates: DataFrame | None
    merge: Merge | None
    valid: DataFrame
    kept: RowLayout


def plan(checked: Checked, current: Current) -> BatchWrites:
    """Decide a batch's writes from its checked events and ``current`` (the tables' truncation
    floor and key orders, read before the batch). A change at or below the floor, the batch's
    own newest truncate included (a full snapshot's end is one: :mod:`silver.snapshots`), is
    dropped; of the rest, the newest per key that is newer than the key's row or tombstone is
    merged."""
    decoded, events = checked.decoded, checked.events
    counts, kept = decoded.counts, decoded.kept
    quarantined = events.where(F.col(REASON).isNotNull()) if counts.quarantined else None
    valid = events.where(F.col(REASON).isNull() & ~F.col(TOMBSTONE))
    truncates = valid.where(F.col(OP) == TRUNCATE_OP) if counts.truncates else None
    if counts[NEWEST_TRUNCATE] is not None:  # the batch may end a full snapshot
        truncates = with_snapshot_ends(valid, truncates)
    changes = valid.where(F.col(OP) != TRUNCATE_OP)
    for floor in (current.floor, counts[NEWEST_TRUNCATE]):
        changes = _above(changes, floor)
    merge = None
    if kept.key_names:  # else no keyed record in the batch: every change was quarantined
        listed = lists_keys(counts.records)
        merge = _merge(changes, kept, counts.toast_columns, current.orders, decoded.key_range)
        merge = replace(merge, list_keys=listed)
    return BatchWrites(quarantined, checked.outcomes, truncates, merge, valid, kept)


def _above(changes: DataFrame, floor: Row | None) -> DataFrame:
    """The changes whose order is above ``floor`` (None: all)."""
    if floor is None:
        return changes
    return changes.where(order_of() > order_literal(floor, order_type_of(changes)))


def _merge(
    changes: DataFrame,
    kept: RowLayout,
    toast_columns: list[str],
    orders: DataFrame | None,
    within: KeyRange | None,
) -> Merge:
    keys = kept.key_names
    columns = tuple(c.name for c in kept.value_columns)
    toast = tuple(c for c in toast_columns if c in columns)
    # Dropping the events not newer than the key's live row or tombstone keeps batches of
    # stale or duplicate events from committing MERGE versions, and keeps them from filling
    # partial columns (a version older than the table's is no previous version). The MERGE's
    # own order conditions cannot replace this: Delta rewrites every file its ON condition
    # matches, even where no clause's condition holds (a stale update of one row: one file
    # removed, one added, the row copied, a new version).
    # ``within`` bounds every read of the tables by the batch's keys, so Delta reads only the
    # files whose key statistics overlap them.
    fresh = newer_than(changes, orders, keys)
    return Merge(latest_per_key(fresh, keys, toast), keys, columns, toast, within, False)
