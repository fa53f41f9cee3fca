"""Where a streaming query's checkpoint is now: its base location, or the directory its pointer
names.

Object stores cannot rename a directory, so a rebuilt checkpoint is never moved into place:
it is written to a new directory beside the base (``<job>@<generation>``) and a small pointer
object (``<job>.current``, one PUT, so whole or absent) names it. A pointer may also give the
first version a fresh change-feed query reads (``startingVersion``): a rebuilt gold table
already holds everything up to it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse_core import storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

POINTER_SUFFIX = ".current"


@dataclass(frozen=True)
class CheckpointPlace:
    """A query's checkpoint location, and the source version a fresh one starts from."""

    location: str
    starting_version: int = 0


def pointer(base: str) -> str:
    """The pointer object of the checkpoint whose base location is ``base``."""
    return f"{base}{POINTER_SUFFIX}"


def generation(base: str, name: str) -> str:
    """The location of generation ``name`` of the checkpoint at ``base``."""
    return f"{base}@{name}"


def current(spark: SparkSession, base: str) -> CheckpointPlace:
    """The checkpoint a query with base location ``base`` uses now."""
    text = storage.read_text(spark, pointer(base))
    if text is None:
        return CheckpointPlace(base)
    document = json.loads(text)
    return CheckpointPlace(
        generation(base, str(document["generation"])), int(document.get("startingVersion", 0))
    )


def point(spark: SparkSession, base: str, name: str, starting_version: int = 0) -> None:
    """Make generation ``name`` the checkpoint of ``base`` (one write of the pointer)."""
    document = {"generation": name, "startingVersion": starting_version}
    storage.write_text(spark, pointer(base), json.dumps(document))


def last_committed_batch(spark: SparkSession, location: str) -> int | None:
    """The id of the newest micro-batch the streaming query checkpointed at ``location`` has
    committed (None: none). A later batch, if its offsets are written, runs again on restart."""
    commits = [int(name) for name in storage.names(spark, f"{location}/commits") if name.isdigit()]
    return max(commits, default=None)


def unfinished_batch(spark: SparkSession, location: str) -> int | None:
    """The id of the micro-batch the query checkpointed at ``location`` started (its offsets
    are written) and did not commit: the one it does again on restart (None: none)."""
    started = [int(name) for name in storage.names(spark, f"{location}/offsets") if name.isdigit()]
    last = last_committed_batch(spark, location)
    newest = max(started, default=None)
    return newest if newest is not None and (last is None or newest > last) else None
