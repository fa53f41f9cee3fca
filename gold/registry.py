"""The registry of a pipeline's gold jobs: one per declared gold table (:mod:`gold.jobs`), one
per pattern (:mod:`gold.pattern_jobs`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from pyspark.sql.streaming.query import StreamingQuery

from gold.feed import GoldJob
from gold.jobs import (
    group_query,
    joined_entity_name,
    joined_tables,
    query_name,
    shareable,
    start_gold,
    start_shared,
)
from gold.pattern_jobs import pattern_jobs
from lakehouse_core.config import PipelineConfig
from lakehouse_core.gold_tables import GoldTable

__all__ = ["GoldJob", "gold_jobs"]


def gold_jobs(config: PipelineConfig) -> list[GoldJob]:
    """Every gold job of the pipeline (one per declared gold table, one per pattern) with the
    silver table it reads. The declarations over one silver table without a join share one query
    (:func:`start_shared`): their jobs have its name and the same ``start``."""
    groups: dict[str, list[GoldTable]] = {}
    for table in config.gold_declarations:
        if shareable(table):
            groups.setdefault(table.source, []).append(table)
    starts: dict[str, Callable[..., StreamingQuery]] = {
        source: partial(start_shared, tables=tables, quality=config.quality)
        for source, tables in groups.items()
    }
    jobs = []
    for table in config.gold_declarations:
        shared = groups.get(table.source) if shareable(table) else None
        jobs.append(
            GoldJob(
                query_name(table) if shared is None else group_query(shared),
                table.name,
                table.source,
                f"stream join with silver.{table.stream_join.source} into gold.{table.name}"
                if table.stream_join is not None
                else f"{table.window.kind} windows into gold.{table.name}",
                partial(start_gold, table=table, quality=config.quality)
                if shared is None
                else starts[table.source],
                joined_tables(table),
                frozenset(filter(None, (table.source, joined_entity_name(table)))),
                shared is not None,
            )
        )
    return jobs + pattern_jobs(config)
