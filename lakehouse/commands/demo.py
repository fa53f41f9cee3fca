"""``lakehouse demo``: the main job, a shop workload through every layer."""

from __future__ import annotations

import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

import click

from core.errors import LakehouseError
from lakehouse.commands.common import (
    SEED,
    console,
    print_table,
    progress,
    spark_options,
    spark_session,
)


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
def demo(
    events: int,
    seed: int,
    warehouse: Path | None,
    use_kafka: bool,
    bootstrap: str | None,
    spark_mode: str,
    master: str,
) -> None:
    """Generate a shop workload and run it through every layer, then query gold."""
    from lakehouse.broker import LocalBroker, default_home, free_port
    from lakehouse.demo import run_demo

    if bootstrap and not use_kafka:
        raise LakehouseError("--bootstrap needs --kafka.")
    root = warehouse or Path(tempfile.mkdtemp(prefix="lakehouse-demo-"))
    with ExitStack() as cleanup:
        if use_kafka and not bootstrap:
            broker = LocalBroker(home=default_home(), port=free_port())
            with console.status("starting the local Kafka broker"):
                broker.start()
            cleanup.callback(broker.stop)
            progress(f"local Kafka broker at {broker.bootstrap} (stopped at the end)")
            bootstrap = broker.bootstrap
        with spark_session(spark_mode, master) as spark:
            summary = run_demo(spark, root, events, seed, progress, bootstrap)
    print_table("Tables", ["table", "rows"], summary.counts)
    console.print(f"quarantined records: {summary.quarantined}")
    if summary.quality_rows:
        print_table("Quality (system.quality)", summary.quality_columns, summary.quality_rows)
    verdict = "silver equals the reference fold of bronze" if summary.verified else "DIFFERENCES"
    console.print(f"verify: {verdict}")
    console.print(f"[bold]{summary.query}[/bold]")
    print_table("gold result", summary.result_columns, summary.result_rows)
    example = "SELECT * FROM gold.user_sessions LIMIT 5"
    console.print(f"warehouse: {summary.warehouse}", markup=False)
    console.print(f'try: lakehouse sql --warehouse {summary.warehouse} "{example}"', markup=False)
    if not summary.verified:
        sys.exit(1)
