"""Rebuilding a gold table whose declaration changed (effect ``rebuild`` of
:func:`lakehouse.run.changes.declaration_changes`): before the run starts a query, the table is
dropped with every piece of state the pipeline kept for it, as ``lakehouse drop`` drops an
orphaned one (:func:`gold_state_paths`), so the run's gold job backfills it from silver as the
job of a new declaration does. No other table is written.

A declaration that shares a query with others over its source (:mod:`gold.jobs`) keeps its own
place in that query's feed; with the place gone it would catch up only at the query's next
micro-batch, when silver next changes. So its query's checkpoint goes too: the query starts
afresh and its first micro-batch reads the whole feed, from which the rebuilt declaration
backfills while every other one finds nothing past its own place and writes nothing (a place
that holds only by the checkpoint a replay installed is written down first).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from lakehouse.run.changes import Change
from lakehouse_core import storage
from lakehouse_core.config import PipelineConfig
from lakehouse_core.layout import Warehouse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: Lists a directory's entry names (none if it does not exist).
Names = Callable[[str], Sequence[str]]


def state_paths(
    warehouse: Warehouse, candidates: Sequence[str], queries: Collection[str], names: Names
) -> list[str]:
    """The present paths among ``candidates`` and every checkpoint entry of ``queries``: the
    checkpoint itself, its files beside it (``<query>.<x>``: idempotency id, pointer, a gold
    declaration's place) and its generations (``<query>@<g>``)."""
    checkpoints = f"{warehouse.root.rstrip('/')}/_system/checkpoints"
    found = [
        f"{checkpoints}/{entry}"
        for entry in sorted(names(checkpoints))
        if any(entry == q or entry.startswith((f"{q}.", f"{q}@")) for q in queries)
    ]
    present = []
    for path in candidates:
        folder, _, entry = path.rstrip("/").rpartition("/")
        if entry in names(folder):
            present.append(path)
    return present + found


def gold_state_paths(
    warehouse: Warehouse, name: str, names: Names, queries: Collection[str] = ()
) -> list[str]:
    """What dropping ``gold.<name>`` deletes (present paths only): the table, its watermark,
    its model state, and the checkpoints of a query of its own (``gold_<name>``,
    ``pattern_<name>``, with their idempotency ids, pointers and its place in a shared query,
    ``gold_<name>.applied.json``) and of ``queries``."""
    root = warehouse.root.rstrip("/")
    candidates = [
        warehouse.table("gold", name),
        warehouse.watermark(name),
        f"{root}/_system/models/{name}.json",
    ]
    own = [f"gold_{name}", f"pattern_{name}"]
    return state_paths(warehouse, candidates, [*own, *queries], names)


def rebuilt(changes: Sequence[Change]) -> list[Change]:
    """The changes that rebuild a gold table or pattern."""
    return [change for change in changes if change.effect == "rebuild"]


def rebuild_paths(
    warehouse: Warehouse, config: PipelineConfig, tables: Collection[str], names: Names
) -> list[str]:
    """What rebuilding the gold tables ``tables`` (names) of ``config`` deletes: each table's
    state (:func:`gold_state_paths`) and the checkpoint of the query it shares with other
    declarations, if any (see the module docstring)."""
    from gold.registry import gold_jobs  # Spark's imports only where a table is rebuilt

    jobs = {job.table: job for job in gold_jobs(config)}
    paths: list[str] = []
    for name in tables:
        job = jobs.get(name)
        shared = [job.query] if job is not None and job.shared else []
        paths += [p for p in gold_state_paths(warehouse, name, names, shared) if p not in paths]
    return paths


def drop_for_rebuild(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    changes: Sequence[Change],
    names: Names,
    leave: Collection[str] = (),
) -> list[str]:
    """Delete what rebuilding the gold tables of ``changes`` needs deleted (but of those in
    ``leave``: a replay rebuilt them already); return the deleted paths."""
    tables = [change.name for change in rebuilt(changes) if change.name not in leave]
    if not tables:
        return []
    paths = rebuild_paths(warehouse, config, tables, names)
    _settle_places(spark, warehouse, config, tables)
    for path in paths:
        storage.delete_tree(spark, path)
    for name in tables:
        log.info(f"gold.{name}: dropped with its state, to be rebuilt from silver")
    return paths


def _settle_places(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig, tables: Collection[str]
) -> None:
    """Before the checkpoint of a shared query goes: write down the place of each of its other
    declarations as the query reads it now. A replay on an object store installs a checkpoint
    with a starting version, and a place written under another checkpoint means every change
    before that version (:class:`gold.jobs._Member`); the fresh checkpoint has none."""
    from gold.progress import Applied, applied_location, read_applied, write_applied
    from gold.registry import gold_jobs
    from lakehouse_core import checkpoints

    jobs = gold_jobs(config)
    queries = {job.query for job in jobs if job.shared and job.table in tables}
    for query in queries:
        place = checkpoints.current(spark, warehouse.checkpoint(query))
        if place.starting_version <= 0:
            continue
        for job in jobs:
            if job.query == query and job.table not in tables:
                path = applied_location(warehouse, job.table)
                state = read_applied(spark, path)
                if state is not None and state.checkpoint != place.location:
                    write_applied(spark, path, Applied(place.starting_version - 1))
