"""Finishing or discarding a replay that a crash cut short, before a command writes tables.

A replay stages its rebuild and then installs it (:mod:`lakehouse.run.swap` by renames on a local
file system, :mod:`lakehouse.run.commit_swap` by Delta commits and checkpoint pointers at a URI).
A crash while it installs leaves some tables rebuilt and others not: every command that writes
the warehouse first finishes that install (the rebuild was sealed) or discards the rebuild (it
was not), so the warehouse is wholly old or wholly rebuilt before it writes. A table a kill
left half created is then deleted, to be created again.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

from pyspark.sql import SparkSession

from lakehouse.run import commit_swap, swap
from lakehouse.run.state_check import discard_half_created_tables
from lakehouse_core import storage
from lakehouse_core.layout import is_uri

log = logging.getLogger(__name__)

#: What :func:`recover` found: no interrupted replay, one it installed, or one it discarded.
Outcome = Literal["none", "finished", "discarded"]

MESSAGES: dict[Outcome, str] = {
    "finished": "replay: finished installing the rebuild of an interrupted replay",
    "discarded": "replay: discarded the unfinished rebuild of an interrupted replay "
    "(the tables are as they were before it)",
}


def recover(spark: SparkSession, root: str) -> Outcome:
    """Finish (sealed) or discard (unsealed) an interrupted replay of the warehouse ``root``."""
    if is_uri(root):
        pending = storage.exists(spark, commit_swap.staging_root(root))
        finished = commit_swap.recover(spark, root)
    else:
        pending = (Path(root) / swap.STAGING).exists()
        finished = swap.recover(root)
    if finished:
        return "finished"
    return "discarded" if pending else "none"


def recover_and_say(spark: SparkSession, root: str) -> Outcome:
    """:func:`recover`, saying in one INFO log line what it did (nothing if nothing); then
    delete the tables a kill left half created (one line for each), so they are created
    again (:func:`lakehouse.run.state_check.discard_half_created_tables`)."""
    outcome = recover(spark, root)
    if outcome != "none":
        log.info(MESSAGES[outcome])
    for table in discard_half_created_tables(spark, root):
        log.info(
            f"{table}: a kill interrupted its creation (nothing was committed); creating it again"
        )
    return outcome
