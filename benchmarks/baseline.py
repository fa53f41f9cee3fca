"""The usual hand-written CDC apply, as the Delta docs recipe does it: per-batch dedupe + MERGE.

It shares our parsing (so the comparison is about applying changes) and differs in the apply:
the latest event per key within the batch wins (row_number over the sequence), then one plain
MERGE deletes or upserts. It keeps no tombstones, ignores truncates and never compares with
the target's sequence, so it is not correct under disorder; it is the speed reference.
"""

from __future__ import annotations

from collections.abc import Callable

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakehouse_core.columns import METADATA_COLUMNS
from lakehouse_core.config import TableSpec
from lakehouse_core.delta_io import ensure_table
from silver.parse import as_text, discover_layout, parse_changes


def baseline_applier(spec: TableSpec, path: str) -> Callable[[DataFrame, int], None]:
    def apply(batch: DataFrame, batch_id: int) -> None:
        texts = as_text(batch)
        layout = discover_layout(texts, spec)
        keys = list(layout.key_names)
        columns = [c.name for c in layout.value_columns]
        events = parse_changes(texts, spec, layout).where(
            F.col("_reason").isNull() & ~F.col("_tombstone") & (F.col("_op") != "t")
        )
        newest_first = Window.partitionBy(*keys).orderBy(F.col("_sequence").desc())
        latest = (
            events.withColumn("_rank", F.row_number().over(newest_first))
            .where("_rank = 1")
            .select(*keys, *columns, *METADATA_COLUMNS)
        )
        ensure_table(batch.sparkSession, path, latest.schema, change_feed=False)
        match = F.lit(True)
        for key in keys:
            match = match & (F.col(f"t.{key}") == F.col(f"s.{key}"))
        (
            DeltaTable.forPath(batch.sparkSession, path)
            .alias("t")
            .merge(latest.alias("s"), match)
            .whenMatchedDelete(condition=F.col("s._op") == "d")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll(condition=F.col("s._op") != "d")
            .execute()
        )

    return apply
