"""``lakehouse plan``: what a run with the given declarations would do to the warehouse, per
change from the declarations it last ran with, without running anything or starting Spark."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from lakehouse.cli.common import CONFIG, WarehouseLocation, console, given_config, warehouse_files
from lakehouse_core.errors import ConfigError

#: The exit status of a plan whose run would refuse (a change only a replay can make).
REFUSED_EXIT = 3


@click.command()
@click.option(
    "--warehouse",
    required=True,
    type=WarehouseLocation(),
    help="Warehouse root: a directory or a Hadoop URI (s3a://bucket/warehouse, abfss://...).",
)
@CONFIG
def plan(warehouse: str, config_path: Path | None) -> None:
    """Print what a run with these declarations (--config or --declarations) would do, per
    change from those the warehouse last ran with: a new gold table or pattern is backfilled
    from silver, a changed one is rebuilt from silver (dropped and backfilled), a changed silver
    contract (keys, sequence_by, SCD type) needs 'lakehouse replay --table' first, a removed
    declaration leaves its table orphaned until 'lakehouse drop'. Runs nothing, starts no
    Spark. Exit status 0, or 3 when the run would refuse."""
    from lakehouse.run.changes import declaration_changes, refusal, replay_needed
    from lakehouse.run.declarations import (
        PLAIN_FILES,
        comparable,
        held_tables,
        newest_recorded,
    )
    from lakehouse_core.config import PipelineConfig
    from lakehouse_core.layout import Warehouse

    given = given_config(config_path)
    if given is None:
        raise ConfigError(
            "lakehouse plan compares declarations with the warehouse's: give them with "
            "--config FILE.toml or --declarations FILE.py[:NAME]."
        )
    given = comparable(given)  # as a run records it (a relative suites directory made absolute)
    place = Warehouse.from_path(warehouse)
    files = warehouse_files(place) or PLAIN_FILES
    recorded = newest_recorded(place, files)
    held = held_tables(place, "silver", files)
    if recorded is None:
        say(f"{place.root} has no recorded declarations: a first run makes everything declared")
        changes = declaration_changes(PipelineConfig(), given)
        held = []  # what it ran with is not known: a run refuses nothing
    else:
        when = recorded.describe()
        if recorded.at is not None:
            when += f", version {recorded.version}"
        say(f"compared with the declarations {place.root} last ran with ({when})")
        changes = declaration_changes(recorded.config, given, held)
    if not changes:
        say("no changes: a run goes on as before")
        return
    say(f"{len(changes)} change{'s' if len(changes) != 1 else ''}:")
    for change in changes:
        say(f"  {change.line()}")
    needed = replay_needed(changes, held)
    if needed:
        say(f"a run refuses: {refusal(needed)}")
        sys.exit(REFUSED_EXIT)


def say(line: str) -> None:
    console.print(line, markup=False, highlight=False, soft_wrap=True)
