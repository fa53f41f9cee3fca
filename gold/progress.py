"""How far each gold declaration has applied its silver table's change feed: one small JSON
document per declaration (``_system/checkpoints/gold_<name>.applied.json``), replaced whole
after each micro-batch the declaration applied, the last of its writes.

Declarations over one silver table share one streaming query (:mod:`gold.jobs`), but each
keeps its own place in the feed: the newest silver version it has applied, and the query
micro-batch (query id, batch id) that wrote it. A declaration that missed batches (it failed,
it is new, its table was dropped, it comes from a warehouse of one query per declaration)
catches up from its place; one whose attempt at a batch failed after some of its writes may
have landed keeps that attempt (``pending``) and does it again under the same ids first, so
the writes that landed are skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import SparkSession

from lakehouse_core import checkpoints, storage
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import APP_ID_FILE

APPLIED_SUFFIX = ".applied.json"


@dataclass(frozen=True)
class Attempt:
    """A declaration's attempt at the silver versions ``first`` to ``last`` (inclusive) as
    micro-batch ``batch`` of the exactly-once writer ``app_id``."""

    app_id: str
    batch: int
    first: int
    last: int


@dataclass(frozen=True)
class Applied:
    """A declaration's place: every change of silver versions up to ``through`` applied (None:
    none), by micro-batch ``batch`` of writer ``app_id`` (None: not by a batch of the query
    now reading, e.g. seeded); ``pending``: a failed attempt to do again first; ``checkpoint``:
    the query checkpoint it was written under."""

    through: int | None
    app_id: str | None = None
    batch: int | None = None
    pending: Attempt | None = None
    checkpoint: str | None = None

    def to_json(self) -> str:
        pending = None if self.pending is None else self.pending.__dict__
        return json.dumps(
            {
                "through_version": self.through,
                "app_id": self.app_id,
                "batch": self.batch,
                "pending": pending,
                "checkpoint": self.checkpoint,
            }
        )

    @staticmethod
    def of_json(text: str) -> Applied:
        document = json.loads(text)
        pending = document.get("pending")
        return Applied(
            document.get("through_version"),
            document.get("app_id"),
            document.get("batch"),
            None if pending is None else Attempt(**pending),
            document.get("checkpoint"),
        )


def applied_location(warehouse: Warehouse, name: str) -> str:
    """Where the place of gold table ``name`` is kept (beside its own query's checkpoint
    name, so it outlives a change of the query that keeps it)."""
    return f"{warehouse.checkpoint(f'gold_{name}')}{APPLIED_SUFFIX}"


def read_applied(spark: SparkSession, path: str) -> Applied | None:
    """The place kept at ``path``, None if none."""
    text = storage.read_text(spark, path)
    return None if text is None or not text.strip() else Applied.of_json(text)


def write_applied(spark: SparkSession, path: str, applied: Applied) -> None:
    """Replace the place at ``path`` (one write)."""
    storage.write_text(spark, path, applied.to_json())


def offset_version(spark: SparkSession, location: str, batch: int) -> int | None:
    """The newest silver version the Delta-source offset of micro-batch ``batch`` of the
    query checkpointed at ``location`` reads in full (None: no such offset).

    A gold query reads the change feed, which Delta admits a whole commit at a time: an
    offset ``(v, index >= 0)`` ends after version ``v`` (its last file), one with index -1
    before it."""
    text = storage.read_text(spark, f"{location}/offsets/{batch}")
    if text is None:
        return None
    offset = json.loads(text.strip().splitlines()[-1])
    version = int(offset["reservoirVersion"])
    return version - 1 if int(offset.get("index", -1)) == -1 else version


def seeded(spark: SparkSession, base: str) -> Applied | None:
    """The place of a declaration whose own query (one query per declaration, before queries
    were shared) is checkpointed at ``base``: through the version its last committed batch
    read, by that batch; the batch it started and did not commit is pending, under its own
    ids (None: it committed no batch, so it wrote nothing to redo or skip)."""
    location = checkpoints.current(spark, base).location
    last = checkpoints.last_committed_batch(spark, location)
    app_id = storage.read_text(spark, f"{location}.{APP_ID_FILE}")
    if last is None or app_id is None or not app_id.strip():
        return None
    through = offset_version(spark, location, last)
    pending = None
    unfinished = checkpoints.unfinished_batch(spark, location)
    end = None if unfinished is None else offset_version(spark, location, unfinished)
    if unfinished is not None and end is not None and through is not None and end > through:
        pending = Attempt(app_id.strip(), unfinished, through + 1, end)
    return Applied(through, app_id.strip(), last, pending, location)
