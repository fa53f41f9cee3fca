"""The persisted watermark of each gold table (``_system/watermarks/<name>.json``): the latest
event time its job has seen, so restarts, retried micro-batches and replays agree on it.

The state is one small JSON document, replaced whole (:func:`lakehouse_core.storage.write_text`)
after the batch's gold and late-event writes. It names the batch that wrote it and the value before,
so a batch retried after a crash reads the state its first attempt read.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import Any, Protocol

from delta.tables import DeltaTable
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from gold.finality import FINAL, FINALIZED_AT, at_micros
from lakehouse_core import storage
from lakehouse_core.delta_io import table_exists
from lakehouse_core.layout import Warehouse

SEEN = "max_event_micros"
#: The micro-batch that wrote the state, and the latest event time before it.
WRITTEN_BY = "written_by"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _state(spark: SparkSession, path: str) -> dict[str, Any] | None:
    """The state at ``path``; a warehouse of an earlier version keeps it as a one-row Delta
    table beside it (``<name>``, not ``<name>.json``)."""
    text = storage.read_text(spark, path)
    if text is not None:
        state: dict[str, Any] = json.loads(text)
        return state
    earlier = path.removesuffix(".json")
    if earlier != path and table_exists(spark, earlier):
        row = spark.read.format("delta").load(earlier).select(SEEN).first()
        if row is not None and row[0] is not None:
            return {SEEN: int(row[0])}
    return None


def seen_micros(spark: SparkSession, path: str) -> int | None:
    """The latest event time (epoch µs) recorded at ``path``, None if none yet."""
    state = _state(spark, path)
    return None if state is None else int(state[SEEN])


class Delayed(Protocol):
    """What has a watermark: a gold table or a pattern (its name and watermark delay)."""

    @property
    def name(self) -> str: ...

    @property
    def delay_micros(self) -> int: ...


def watermark_of(seen: int | None, table: Delayed) -> int | None:
    """The watermark (epoch µs) for the latest event time ``seen``."""
    return None if seen is None else seen - table.delay_micros


def _instant(micros: int) -> str:
    return (_EPOCH + timedelta(microseconds=micros)).isoformat()


def record_seen(
    spark: SparkSession,
    path: str,
    table: Delayed,
    seen: int,
    written_by: dict[str, Any] | None = None,
) -> None:
    """Replace the state at ``path`` with ``seen`` (``written_by``: the micro-batch writing it,
    see :class:`RecordedSeen`)."""
    watermark = watermark_of(seen, table)
    assert watermark is not None
    state = {
        "gold_table": table.name,
        SEEN: seen,
        "max_event_time": _instant(seen),
        "watermark": _instant(watermark),
        WRITTEN_BY: written_by,
    }
    storage.write_text(spark, path, json.dumps(state))


class RecordedSeen:
    """The latest event time a running gold job recorded at ``path``: read once, then kept as
    the job records it (only the job writes its state while it runs)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: int | None = None
        self._known = False

    def read(self, spark: SparkSession, app_id: str, batch_id: int) -> int | None:
        """:func:`seen_micros` of the state, read from its file the first time: the value
        before micro-batch ``batch_id`` of query ``app_id``, if that batch wrote the state."""
        if not self._known:
            state = _state(spark, self.path) or {}
            written = state.get(WRITTEN_BY) or {}
            if (written.get("query"), written.get("batch")) == (app_id, batch_id):
                self._seen = written.get("previous")
            else:
                self._seen = state.get(SEEN)
            self._known = True
        return self._seen

    def record(
        self, spark: SparkSession, table: Delayed, seen: int, app_id: str, batch_id: int
    ) -> None:
        """:func:`record_seen` for micro-batch ``batch_id`` of query ``app_id``, and keep
        ``seen``."""
        written_by = {"query": app_id, "batch": batch_id, "previous": self._seen}
        record_seen(spark, self.path, table, seen, written_by)
        self._seen, self._known = seen, True


class Declared(Delayed, Protocol):
    """A gold table or a pattern, with its table's columns (without the finality ones)."""

    @property
    def columns(self) -> tuple[str, ...]: ...


def carry_over(
    spark: SparkSession,
    live: Warehouse,
    staged: Warehouse,
    table: Declared,
    final_from: Column,
) -> None:
    """After a rebuild of ``table`` into ``staged``: keep the later of the live and the rebuilt
    watermark (a rebuild does not forget event times the live job saw), mark final the rebuilt
    rows that watermark makes final (``final_from``: the watermark from which a row is final),
    and keep the live ``_finalized_at`` of each final row the rebuild gave the same values."""
    live_state, staged_state = live.watermark(table.name), staged.watermark(table.name)
    rebuilt = seen_micros(spark, staged_state)
    seen = [s for s in (seen_micros(spark, live_state), rebuilt) if s is not None]
    staged_gold, live_gold = staged.table("gold", table.name), live.table("gold", table.name)
    if not seen or not table_exists(spark, staged_gold):
        return
    latest = max(seen)
    if rebuilt != latest:
        record_seen(spark, staged_state, table, latest)
    watermark = watermark_of(latest, table)
    assert watermark is not None
    due = ~F.coalesce(F.col(FINAL), F.lit(False)) & (final_from <= at_micros(watermark))
    gold = DeltaTable.forPath(spark, staged_gold)
    gold.update(condition=due, set={FINAL: F.lit(True), FINALIZED_AT: F.current_timestamp()})
    if not table_exists(spark, live_gold):
        return
    previous = spark.read.format("delta").load(live_gold)
    if FINAL not in previous.columns:
        return
    same = reduce(
        lambda a, b: a & b,
        [F.col(f"t.{c}").eqNullSafe(F.col(f"s.{c}")) for c in table.columns],
        F.col(f"t.{FINAL}") & F.col(f"s.{FINAL}"),
    )
    (
        gold.alias("t")
        .merge(previous.alias("s"), same)
        .whenMatchedUpdate(set={FINALIZED_AT: F.col(f"s.{FINALIZED_AT}")})
        .execute()
    )
