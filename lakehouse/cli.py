"""The ``lakehouse`` command line."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from lakehouse.errors import LakehouseError

console = Console()
errors = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])


def spark_options(command: F) -> F:
    """Options shared by every command that starts Spark."""
    command = click.option(
        "--spark-mode",
        type=click.Choice(["auto", "active", "local-jars", "maven"]),
        default="auto",
        show_default=True,
        help="How Delta gets onto Spark: reuse a session, jars from the jsoniq wheel, or Maven.",
    )(command)
    return click.option(
        "--master", default="local[2]", show_default=True, help="Spark master URL."
    )(command)


SEED = click.option(
    "--seed", default=42, show_default=True, type=int, help="Random seed (same seed, same records)."
)
MALFORMED_RATE = click.option(
    "--malformed-rate",
    default=0.01,
    show_default=True,
    type=float,
    help="Share of malformed records (0 to 1).",
)
CONFIG = click.option(
    "--config",
    "config_path",
    default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Pipeline TOML file (default: the shop demo's settings).",
)
KAFKA_OPTION = click.option(
    "--kafka-option",
    "kafka_option",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Kafka source option (subscribe, maxOffsetsPerTrigger, ...) or librdkafka setting "
    "as kafka.<setting>; repeatable.",
)
KAFKA_SETTINGS = click.option(
    "--kafka-settings",
    default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="librdkafka settings file (key=value lines), e.g. SASL/SSL; keeps secrets off the "
    "command line.",
)


def kafka_options(pairs: tuple[str, ...], settings_file: Path | None) -> dict[str, str]:
    """Source options from ``--kafka-settings`` and ``--kafka-option`` (the latter win)."""
    from cdc.sources import read_kafka_settings

    options = read_kafka_settings(settings_file) if settings_file else {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise LakehouseError(f"--kafka-option {key or pair!r}: write it as KEY=VALUE.")
        options[key] = value
    return options


def librdkafka_settings(options: dict[str, str]) -> dict[str, str]:
    """The ``kafka.``-prefixed options without the prefix (what a producer takes)."""
    return {k.removeprefix("kafka."): v for k, v in options.items() if k.startswith("kafka.")}


EXISTING_WAREHOUSE = click.option(
    "--warehouse",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Warehouse root directory.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """cdc-lakehouse: Debezium CDC and event streams into a Delta medallion lakehouse."""


@cli.command()
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Directory for the JSON-lines files.",
)
@click.option(
    "--events",
    default=20_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Number of records.",
)
@SEED
@MALFORMED_RATE
def generate(out_dir: Path, events: int, seed: int, malformed_rate: float) -> None:
    """Write a shop workload (customers and orders CDC, clickstream) as JSON-lines files."""
    from cdc.generator import WorkloadConfig
    from lakehouse.demo import write_workload

    files, count = write_workload(
        out_dir, WorkloadConfig(events=events, seed=seed, malformed_rate=malformed_rate)
    )
    console.print(f"wrote {count} records in {files} files to {out_dir}")


@cli.command()
@click.option(
    "--source",
    required=True,
    help="files:DIR (JSON-lines records) or kafka:HOST:PORT[,HOST:PORT] (bootstrap servers).",
)
@click.option(
    "--warehouse", required=True, type=click.Path(path_type=Path), help="Warehouse root directory."
)
@click.option(
    "--once",
    "once",
    is_flag=True,
    default=False,
    help="Process what is available, then stop (the default).",
)
@click.option(
    "--processing-time", default=None, help="Run continuously with this trigger interval, e.g. 10s."
)
@CONFIG
@click.option(
    "--max-files-per-trigger",
    default=4,
    show_default=True,
    type=click.IntRange(min=1),
    help="File source: files per micro-batch.",
)
@KAFKA_OPTION
@KAFKA_SETTINGS
@click.option(
    "--kafka-format",
    type=click.Choice(["lakehouse", "spark"]),
    default="lakehouse",
    show_default=True,
    help="Kafka source: this project's confluent-kafka source, or Spark's own 'kafka' format "
    "(Databricks, or a cluster with the connector jar).",
)
@spark_options
def run(
    source: str,
    warehouse: Path,
    once: bool,
    processing_time: str | None,
    config_path: Path | None,
    max_files_per_trigger: int,
    kafka_option: tuple[str, ...],
    kafka_settings: Path | None,
    kafka_format: str,
    spark_mode: str,
    master: str,
) -> None:
    """Run the pipeline: source -> bronze -> silver -> gold."""
    from dataclasses import replace

    from cdc.sources import SPARK_KAFKA_FORMAT, SourceSpec
    from lakehouse.config import load_config
    from lakehouse.layout import Warehouse
    from lakehouse.pipeline import run_continuously, run_once
    from lakehouse.streaming import Trigger

    if once and processing_time:
        raise LakehouseError("Use either --once or --processing-time, not both.")
    spec = replace(
        SourceSpec.parse(source),
        max_files_per_trigger=max_files_per_trigger,
        kafka_options=kafka_options(kafka_option, kafka_settings),
        kafka_format=SPARK_KAFKA_FORMAT if kafka_format == "spark" else None,
    )
    trigger = Trigger.parse(processing_time)
    config = load_config(config_path)
    with _spark(spark_mode, master) as spark:
        if trigger.once:
            report = run_once(spark, spec, Warehouse.from_path(warehouse), config, _progress)
            console.print(f"done: {len(report.queries)} queries in {report.seconds:.1f} s")
        else:
            run_continuously(
                spark, spec, Warehouse.from_path(warehouse), config, trigger, _progress
            )


@cli.command()
@click.option("--bootstrap", required=True, help="Kafka bootstrap servers, HOST:PORT[,...].")
@click.option(
    "--events", default=20_000, show_default=True, type=click.IntRange(min=1), help="Records."
)
@SEED
@MALFORMED_RATE
@click.option(
    "--partitions",
    default=3,
    show_default=True,
    type=click.IntRange(min=1),
    help="Partitions per topic (topics are created when missing).",
)
@click.option("--server", default="shop", show_default=True, help="Debezium topic prefix.")
@KAFKA_OPTION
@KAFKA_SETTINGS
def produce(
    bootstrap: str,
    events: int,
    seed: int,
    malformed_rate: float,
    partitions: int,
    server: str,
    kafka_option: tuple[str, ...],
    kafka_settings: Path | None,
) -> None:
    """Send a shop workload to Kafka (<server>.public.customers, .orders, <server>.clickstream)."""
    from cdc.generator import WorkloadConfig
    from cdc.producer import send_workload

    settings = librdkafka_settings(kafka_options(kafka_option, kafka_settings))
    workload = WorkloadConfig(
        events=events,
        seed=seed,
        malformed_rate=malformed_rate,
        partitions=partitions,
        server=server,
    )
    with console.status(f"producing {events} records to {bootstrap}"):
        report = send_workload(workload, bootstrap, settings)
    rows = [[topic, count] for topic, count in sorted(report.per_topic.items())]
    _print_table("Produced", ["topic", "records"], rows)
    rate = report.records / report.seconds if report.seconds else 0.0
    console.print(f"{report.records} records in {report.seconds:.1f} s ({rate:,.0f} records/s)")


@cli.command()
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
            _progress(f"local Kafka broker at {broker.bootstrap} (stopped at the end)")
            bootstrap = broker.bootstrap
        with _spark(spark_mode, master) as spark:
            summary = run_demo(spark, root, events, seed, _progress, bootstrap)
    _print_table("Tables", ["table", "rows"], summary.counts)
    console.print(f"quarantined records: {summary.quarantined}")
    verdict = "silver equals the reference fold of bronze" if summary.verified else "DIFFERENCES"
    console.print(f"verify: {verdict}")
    console.print(f"[bold]{summary.query}[/bold]")
    _print_table("gold result", summary.result_columns, summary.result_rows)
    example = "SELECT * FROM gold.user_sessions LIMIT 5"
    console.print(f"warehouse: {summary.warehouse}", markup=False)
    console.print(f'try: lakehouse sql --warehouse {summary.warehouse} "{example}"', markup=False)
    if not summary.verified:
        sys.exit(1)


@cli.command()
@EXISTING_WAREHOUSE
@CONFIG
@spark_options
def verify(warehouse: Path, config_path: Path | None, spark_mode: str, master: str) -> None:
    """Recompute every silver table from bronze with an independent fold and compare."""
    from lakehouse.audit import verify_warehouse
    from lakehouse.config import load_config
    from lakehouse.layout import Warehouse

    with _spark(spark_mode, master) as spark:
        checks = verify_warehouse(spark, Warehouse.from_path(warehouse), load_config(config_path))
    if not checks:
        raise LakehouseError(
            f"No bronze tables in {warehouse}: point --warehouse at a warehouse that "
            "'lakehouse run' has written."
        )
    for check in checks:
        status = "ok" if check.ok else f"{len(check.differences)} differences"
        rows = f"{check.actual_rows} rows, expected {check.expected_rows}"
        console.print(f"silver.{check.table}: {rows}: {status}")
        for line in check.differences[:20]:
            console.print(f"  {line}", markup=False)
    if not all(c.ok for c in checks):
        sys.exit(1)


@cli.command()
@EXISTING_WAREHOUSE
@click.option(
    "--limit", default=100, show_default=True, type=click.IntRange(min=1), help="Rows to print."
)
@click.argument("statement")
@spark_options
def sql(warehouse: Path, limit: int, statement: str, spark_mode: str, master: str) -> None:
    """Run a SQL statement; tables are named <layer>.<table> (e.g. gold.revenue_per_minute)."""
    from pyspark.errors import AnalysisException, ParseException

    from lakehouse.catalog import run_sql
    from lakehouse.layout import Warehouse

    with _spark(spark_mode, master) as spark:
        try:
            frame = run_sql(spark, Warehouse.from_path(warehouse), statement)
        except (AnalysisException, ParseException) as error:
            raise LakehouseError(f"SQL error: {_first_line(str(error))}") from error
        rows = [[_show(v) for v in row] for row in frame.limit(limit).collect()]
        _print_table(None, frame.columns, rows)


def _show(value: Any) -> str:
    return "NULL" if value is None else str(value)


def _print_table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*[_show(v) for v in row])
    console.print(table)


def _progress(message: str) -> None:
    console.print(f"[dim]- {message}[/dim]")


@contextmanager
def _spark(spark_mode: str, master: str) -> Iterator[Any]:
    from lakehouse.spark import get_spark

    with console.status("starting Spark"):
        spark = get_spark(mode=spark_mode, master=master)  # type: ignore[arg-type]
    spark.sparkContext.setLogLevel("ERROR")
    yield spark


def main() -> None:
    """Entry point: user errors become one line on stderr and exit status 2."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger", "cdc.kafka"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        errors.print("aborted")
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except LakehouseError as error:
        if os.environ.get("LAKEHOUSE_DEBUG"):
            raise
        errors.print(f"error: {error}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


# The operations commands (replay, forget, maintain) live in their own module.
from lakehouse import cli_ops as _cli_ops  # noqa: E402, F401
