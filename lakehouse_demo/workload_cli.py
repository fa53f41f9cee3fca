"""The demo's workload commands: ``generate`` (files) and ``produce`` (Kafka)."""

from __future__ import annotations

from pathlib import Path

import click

from lakehouse.cli.common import (
    KAFKA_OPTION,
    KAFKA_SETTINGS,
    MALFORMED_RATE,
    SEED,
    console,
    kafka_options,
    print_table,
)
from lakehouse_core.errors import LakehouseError


@click.command()
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
@click.option(
    "--late-rate",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0.0, 0.5),
    help="Share of clicks sent late on purpose, into windows gold already marked final.",
)
@click.option(
    "--parts",
    default=None,
    type=click.IntRange(min=1),
    help="Split the records, in delivery order, into this many files that can arrive one at a "
    "time [default: one file per 20,000 records].",
)
def generate(
    out_dir: Path,
    events: int,
    seed: int,
    malformed_rate: float,
    late_rate: float,
    parts: int | None,
) -> None:
    """Write a shop workload (customers and orders CDC, clickstream) as JSON-lines files."""
    from lakehouse_demo.generator import WorkloadConfig
    from lakehouse_demo.job import write_workload

    workload = WorkloadConfig(
        events=events, seed=seed, malformed_rate=malformed_rate, late_rate=late_rate
    )
    try:
        files, count = write_workload(out_dir, workload, parts)
    except OSError as error:
        raise LakehouseError(
            f"Cannot write the workload to {out_dir}: {error.strerror}. Choose a directory "
            "you can write to with --out."
        ) from None
    console.print(f"wrote {count} records in {files} files to {out_dir}")


@click.command()
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
    from lakehouse_demo.generator import WorkloadConfig
    from lakehouse_demo.producer import send_workload

    settings = _librdkafka_settings(kafka_options(kafka_option, kafka_settings))
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
    print_table("Produced", ["topic", "records"], rows)
    rate = report.records / report.seconds if report.seconds else 0.0
    console.print(f"{report.records} records in {report.seconds:.1f} s ({rate:,.0f} records/s)")


def _librdkafka_settings(options: dict[str, str]) -> dict[str, str]:
    """The ``kafka.``-prefixed options without the prefix (what a producer takes)."""
    return {k.removeprefix("kafka."): v for k, v in options.items() if k.startswith("kafka.")}
