"""The demo's command line, ``python -m lakehouse_demo``: ``demo`` (the main job, a shop
workload through every layer), ``generate`` (its files) and ``produce`` (to Kafka); errors as
the ``lakehouse`` command line shows them (:func:`lakehouse.cli.main`)."""

from __future__ import annotations

import json
import logging
import shlex
import sys
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

import click

from lakehouse import LOGGERS
from lakehouse.cli import main as run_commands
from lakehouse.cli.common import (
    SEED,
    console,
    print_table,
    spark_options,
    spark_session,
)
from lakehouse_core.errors import LakehouseError
from lakehouse_demo.workload_cli import generate, produce

log = logging.getLogger(__name__)


@click.command()
@click.option(
    "--events",
    default=20_000,
    show_default=True,
    type=click.IntRange(min=100),
    help="Records to generate.",
)
@SEED
@click.option(
    "--warehouse",
    default=None,
    type=click.Path(path_type=Path),
    help="Directory for the demo's source files and warehouse (default: a new temporary one).",
)
@spark_options
@click.option(
    "--kafka",
    "use_kafka",
    is_flag=True,
    default=False,
    help="Send the workload through Kafka instead of files (starts a local broker unless "
    "--bootstrap is given).",
)
@click.option("--bootstrap", default=None, help="With --kafka: an existing broker, HOST:PORT.")
@click.option(
    "--postgres",
    "use_postgres",
    is_flag=True,
    default=False,
    help="Real CDC instead of the generated workload: start a local PostgreSQL, change every "
    "column type there, capture it with the Debezium PostgreSQL connector, run every layer and "
    "compare silver with PostgreSQL (needs Java 17; --events and --seed do not apply).",
)
def demo(
    events: int,
    seed: int,
    warehouse: Path | None,
    use_kafka: bool,
    bootstrap: str | None,
    use_postgres: bool,
    spark_mode: str,
    master: str | None,
) -> None:
    """Generate a shop workload and run it through every layer, then query gold."""
    from lakehouse_demo.job import run_demo
    from lakehouse_local.broker import LocalBroker, default_home, free_port

    if bootstrap and not use_kafka:
        raise LakehouseError("--bootstrap needs --kafka.")
    if use_postgres and use_kafka:
        raise LakehouseError("--postgres and --kafka cannot be combined; choose one.")
    root = warehouse or Path(tempfile.mkdtemp(prefix="lakehouse-demo-"))
    if use_postgres:
        _postgres_demo(root, spark_mode, master)
        return
    with ExitStack() as cleanup:
        if use_kafka and not bootstrap:
            broker = LocalBroker(home=default_home(), port=free_port())
            with console.status("starting the local Kafka broker"):
                broker.start()
            cleanup.callback(broker.stop)
            log.info(f"local Kafka broker at {broker.bootstrap} (stopped at the end)")
            bootstrap = broker.bootstrap
        with spark_session(spark_mode, master) as spark:
            summary = run_demo(spark, root, events, seed, bootstrap)
    print_table("Tables", ["table", "rows"], summary.counts)
    console.print(f"quarantined records: {summary.quarantined}")
    if summary.quality_rows:
        print_table("Quality (system.quality)", summary.quality_columns, summary.quality_rows)
    verdict = (
        "silver equals the reference fold of bronze, gold its declarations"
        if summary.verified
        else "DIFFERENCES"
    )
    console.print(f"verify: {verdict}")
    console.print(f"[bold]{summary.query}[/bold]")
    print_table("gold result", summary.result_columns, summary.result_rows)
    late = ", ".join(
        f"{table} {changes} (up to {minutes:g} min late)"
        for table, changes, minutes in summary.late_events
    )
    console.print(
        f"late data: {sum(row[1] for row in summary.late_events)} changes landed in windows "
        f"already final, corrected and recorded in gold.late_events{': ' + late if late else ''}",
        markup=False,
    )
    console.print(f"[bold]{summary.alerts_query}[/bold]")
    print_table("alerts", summary.alerts_columns, summary.alerts_rows)
    console.print(f"warehouse: {summary.warehouse}", markup=False)
    console.print(
        "its declarations are recorded there (the same as examples/demo.toml): "
        "these commands need no --config",
        markup=False,
    )
    for line in next_commands(summary.warehouse, summary.customer_id):
        console.print(line, markup=False, soft_wrap=True)
    if not summary.verified:
        sys.exit(1)


def next_commands(warehouse: str, customer_id: int | None) -> list[str]:
    """The demo's last lines: the commands a user runs next on its ``warehouse``, each on a
    line of its own (so it can be copied whole), none needing --config; ``forget`` of the
    customer ``customer_id`` where there is one."""
    w = shlex.quote(warehouse)
    query = shlex.quote("SELECT * FROM gold.user_sessions LIMIT 5")
    return [
        "try:",
        f"  lakehouse status --warehouse {w}",
        f"  lakehouse status --warehouse {w} --html pipeline.html",
        f"  lakehouse verify --warehouse {w}",
        f"  lakehouse validate --warehouse {w}",
        f"  lakehouse sql --warehouse {w} {query}",
        f"  lakehouse replay --warehouse {w} --table orders",
    ] + (
        []
        if customer_id is None
        else [
            f"  lakehouse forget --warehouse {w} --table customers "
            f"--key {shlex.quote(json.dumps({'id': customer_id}))}"
        ]
    )


def _postgres_demo(root: Path, spark_mode: str, master: str | None) -> None:
    """``demo --postgres``: print how silver compares with PostgreSQL; exit 1 if it differs."""
    from lakehouse_demo.job import run_postgres_demo
    from lakehouse_local.real_cdc import capture_postgres

    captured = capture_postgres(root)  # stops PostgreSQL and Debezium when done
    with spark_session(spark_mode, master) as spark:
        summary = run_postgres_demo(spark, root, captured)
    console.print(f"Debezium records captured: {summary.records}")
    columns = ["table", "rows in PostgreSQL", "rows in silver", "differences"]
    print_table("silver vs PostgreSQL", columns, summary.tables)
    if summary.differences:
        console.print(f"DIFFERENCES ({len(summary.differences)}):", markup=False)
        for line in summary.differences[:20]:
            console.print(f"  {line}", markup=False)
    else:
        console.print("silver equals PostgreSQL: every table, row and column")
    example = "SELECT * FROM silver.typed_values"
    console.print(f"warehouse: {summary.warehouse}", markup=False)
    console.print(f'try: lakehouse sql --warehouse {summary.warehouse} "{example}"', markup=False)
    if summary.differences:
        sys.exit(1)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """The cdc-lakehouse demo (not part of the product): a shop workload, generated or captured
    from PostgreSQL, through every layer; the lakehouse commands work on its warehouse."""


for command in (demo, generate, produce):
    cli.add_command(command)


def main(args: Sequence[str] | None = None) -> None:
    """Entry point of ``python -m lakehouse_demo`` (``args``: default ``sys.argv[1:]``); the
    steps the demo and its local servers log are shown with the product's."""
    run_commands(args, cli, (*LOGGERS, "lakehouse_local", "lakehouse_demo"))
