"""``lakehouse status``: how far each layer has applied its input, the last micro-batches,
freshness, quarantine, and whether a pipeline runs. It starts no Spark (see
:mod:`lakehouse.ops.status`), and its tables fit the terminal: a row per table with the essentials
(``--wide``: every column; ``--json``: every field), plain aligned text, names never cut."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from lakehouse.cli.common import CONFIG, EXISTING_WAREHOUSE, console, declarations, given_config


@click.command()
@EXISTING_WAREHOUSE
@CONFIG
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON object.")
@click.option(
    "--html",
    "html_path",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the pipeline page (a graph of the tables and flows, one self-contained "
    "HTML file) to this file; with --watch, rewritten at every refresh.",
)
@click.option(
    "--wide", is_flag=True, help="Every column of every table, however wide the terminal."
)
@click.option(
    "--watch", is_flag=True, help="Print it again every --interval seconds (Ctrl-C ends)."
)
@click.option(
    "--interval",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0.5),
    help="Seconds between two refreshes of --watch.",
)
@click.option("--spark-mode", hidden=True, default=None, help="Ignored: status starts no Spark.")
@click.option("--master", hidden=True, default=None, help="Ignored: status starts no Spark.")
def status(
    warehouse: str,
    config_path: Path | None,
    as_json: bool,
    html_path: Path | None,
    wide: bool,
    watch: bool,
    interval: float,
    spark_mode: str | None,
    master: str | None,
) -> None:
    """Per table: bronze version and newest record, how far silver and gold have applied,
    the last micro-batch, freshness and quarantine; and whether a pipeline runs now. Read
    from the Delta logs, checkpoints and event log without starting Spark."""
    from lakehouse.ops.status import pipeline_status, status_json
    from lakehouse.ops.status_text import status_lines
    from lakehouse_core.layout import Warehouse

    config = declarations(given_config(config_path), warehouse).config
    try:
        while True:
            now = datetime.now(UTC)
            report = pipeline_status(None, Warehouse.from_path(warehouse), config, now)
            if html_path is not None:
                from lakehouse.ops.pipeline_page import write_pipeline_page

                write_pipeline_page(Warehouse.from_path(warehouse), status_json(report), html_path)
            if watch and not as_json:
                console.clear()
            if as_json:
                click.echo(json.dumps(status_json(report), sort_keys=True))
            else:
                for line in status_lines(report, console.width, wide):
                    console.print(line, markup=False, highlight=False, emoji=False, crop=False)
            if not watch:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        if not watch:
            raise
