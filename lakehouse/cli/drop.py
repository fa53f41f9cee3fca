"""``lakehouse drop``: remove a silver or gold table the declarations no longer declare."""

from __future__ import annotations

from pathlib import Path

import click

from lakehouse.cli.common import (
    CONFIG,
    EXISTING_WAREHOUSE,
    console,
    declarations,
    given_config,
    spark_options,
    spark_session,
    warehouse_files,
)
from lakehouse_core.errors import LakehouseError, TableNotFoundError


@click.command()
@click.argument("table")
@EXISTING_WAREHOUSE
@click.option(
    "--yes",
    is_flag=True,
    default=False,
    help="Drop it; without, only print what dropping it would delete.",
)
@CONFIG
@spark_options
def drop(
    table: str,
    warehouse: str,
    yes: bool,
    config_path: Path | None,
    spark_mode: str,
    master: str | None,
) -> None:
    """Drop TABLE (silver.<name> or gold.<name>), an orphaned table whose declaration was
    removed (lakehouse plan names it), with the state the pipeline kept for it: checkpoints,
    watermark, tombstones, history. Refused while its declaration is there (the next run would
    make it again) and while a pipeline runs on the warehouse. Bronze is never dropped: a
    Debezium topic's silver table comes back with the next run, as every Debezium topic does."""
    from lakehouse.ops.drop import DropTarget, dropped_paths, refuse_declared
    from lakehouse.run.declarations import PLAIN_FILES
    from lakehouse_core import storage
    from lakehouse_core.layout import Warehouse

    target = DropTarget.parse(table)
    place = Warehouse.from_path(warehouse)
    refuse_declared(target, declarations(given_config(config_path), warehouse).config)
    files = warehouse_files(place) or PLAIN_FILES
    paths = dropped_paths(place, target, files.names)
    if not paths:
        raise TableNotFoundError(f"{place.root} holds no {target.table}: nothing to drop.")
    relative = [path.removeprefix(f"{place.root.rstrip('/')}/") for path in paths]
    if not yes:
        console.print(f"dropping {target.table} would delete:", markup=False, highlight=False)
        for path in relative:
            console.print(f"  {path}", markup=False, highlight=False)
        raise LakehouseError(f"nothing dropped: add --yes to drop {target.table}.")
    from lakehouse.run.lease import holding  # one pipeline per warehouse

    with spark_session(spark_mode, master, warehouse) as spark, holding(spark, place, "drop"):
        for path in paths:
            storage.delete_tree(spark, path)
    for path in relative:
        console.print(f"deleted {path}", markup=False, highlight=False)
    console.print(f"dropped {target.table}", markup=False, highlight=False)
