"""The persisted watermark of each gold table (``_system/watermarks/<name>``): the latest
event time its job has seen, so restarts, retried micro-batches and replays agree on it.

The state is one row, overwritten under the job's Delta transaction id after the batch's gold
and late-event writes, so a retried batch reads the same state its first attempt read.
"""

from __future__ import annotations

from functools import reduce

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from core.delta_io import table_exists
from core.gold_tables import FINAL, FINALIZED_AT, GoldTable
from core.layout import Warehouse
from gold.finality import at_micros

SEEN = "max_event_micros"


def seen_micros(spark: SparkSession, path: str) -> int | None:
    """The latest event time (epoch µs) recorded at ``path``, None if none yet."""
    if not table_exists(spark, path):
        return None
    row = spark.read.format("delta").load(path).select(SEEN).first()
    return None if row is None or row[0] is None else int(row[0])


def watermark_of(seen: int | None, table: GoldTable) -> int | None:
    """The watermark (epoch µs) for the latest event time ``seen``."""
    return None if seen is None else seen - table.delay_micros


def record_seen(
    spark: SparkSession,
    path: str,
    table: GoldTable,
    seen: int,
    app_id: str | None = None,
    batch_id: int = 0,
) -> None:
    """Overwrite the state at ``path`` with ``seen`` (idempotent per ``app_id``/``batch_id``
    when an ``app_id`` is given)."""
    watermark = watermark_of(seen, table)
    assert watermark is not None
    writer = (
        spark.range(1)
        .select(
            F.lit(table.name).alias("gold_table"),
            F.lit(seen).cast("bigint").alias(SEEN),
            at_micros(seen).alias("max_event_time"),
            at_micros(watermark).alias("watermark"),
        )
        .write.format("delta")
        .mode("overwrite")
    )
    if app_id is not None:
        writer = writer.option("txnAppId", app_id).option("txnVersion", batch_id)
    writer.save(path)


class RecordedSeen:
    """The latest event time a running gold job recorded at ``path``: read once, then kept as
    the job records it (only the job writes its state while it runs)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: int | None = None
        self._known = False

    def read(self, spark: SparkSession) -> int | None:
        """:func:`seen_micros` of the state, read from the table the first time."""
        if not self._known:
            self._seen, self._known = seen_micros(spark, self.path), True
        return self._seen

    def record(
        self, spark: SparkSession, table: GoldTable, seen: int, app_id: str, batch_id: int
    ) -> None:
        """:func:`record_seen` under the batch's transaction id, and keep ``seen``."""
        record_seen(spark, self.path, table, seen, app_id, batch_id)
        self._seen, self._known = seen, True


def carry_over(spark: SparkSession, live: Warehouse, staged: Warehouse, table: GoldTable) -> None:
    """After a rebuild of ``table`` into ``staged``: keep the later of the live and the rebuilt
    watermark (a rebuild does not forget event times the live job saw), mark final the rebuilt
    rows that watermark makes final, and keep the live ``_finalized_at`` of each final row the
    rebuild gave the same values."""
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
    due = ~F.coalesce(F.col(FINAL), F.lit(False)) & (
        F.col(table.window.end_as) <= at_micros(watermark)
    )
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
