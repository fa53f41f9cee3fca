"""Operations commands: ``verify``, ``replay``, ``forget`` and ``maintain``.

They check or rewrite the tables of an existing warehouse; ``replay``, ``forget`` and
``maintain`` take the warehouse's lease (:mod:`lakehouse.run.lease`), so none runs beside a
pipeline.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import click

from lakehouse.cli.common import (
    CONFIG,
    EXISTING_WAREHOUSE,
    KAFKA_OPTION,
    KAFKA_SETTINGS,
    console,
    declarations,
    given_config,
    kafka_options,
    print_table,
    spark_options,
    spark_session,
)
from lakehouse_core.errors import LakehouseError


@click.command()
@EXISTING_WAREHOUSE
@CONFIG
@click.option(
    "--source",
    default=None,
    help="kafka:HOST:PORT[,HOST:PORT]: also compare, per partition of the topics the pipeline "
    "reads, the records the broker holds with those in bronze, and name any gap.",
)
@KAFKA_OPTION
@KAFKA_SETTINGS
@spark_options
def verify(
    warehouse: str,
    config_path: Path | None,
    source: str | None,
    kafka_option: tuple[str, ...],
    kafka_settings: Path | None,
    spark_mode: str,
    master: str | None,
) -> None:
    """Recompute every silver table from bronze with an independent fold and compare; check
    every gold table against its declaration evaluated over silver; with --source kafka:...,
    check that bronze holds every record of the source's partitions."""
    from cdc.sources import SourceSpec
    from lakehouse.ops.audit import verify_warehouse
    from lakehouse.ops.source_check import partition_gaps
    from lakehouse_core.layout import Warehouse

    given = given_config(config_path)
    spec = None
    if source is not None:
        spec = replace(
            SourceSpec.parse(source), kafka_options=kafka_options(kafka_option, kafka_settings)
        )
        if spec.kind != "kafka":
            raise LakehouseError(
                f"verify --source compares a Kafka source with bronze; {source!r} is not one "
                "(give kafka:HOST:PORT, or leave --source out)."
            )
    root = Warehouse.from_path(warehouse)
    with spark_session(spark_mode, master) as spark:
        config = declarations(given, warehouse, spark).config
        checks = verify_warehouse(spark, root, config)
        gaps = [] if spec is None else [g.line() for g in partition_gaps(spark, root, spec)]
    for line in gaps:
        console.print(f"source: {line}", markup=False, highlight=False, soft_wrap=True)
    if spec is not None and not gaps:
        console.print(f"source: bronze holds every record of {spec.describe()}")
    if not checks and spec is None:
        raise LakehouseError(
            f"No bronze tables in {warehouse}: point --warehouse at a warehouse that "
            "'lakehouse run' has written."
        )
    for check in checks:
        note = getattr(check, "note", "")  # a SQL model behind its inputs: not compared
        if note:
            console.print(f"{check.layer}.{check.table}: {note}")
            continue
        status = "ok" if check.ok else f"{len(check.differences)} differences"
        rows = f"{check.actual_rows} rows, expected {check.expected_rows}"
        console.print(f"{check.layer}.{check.table}: {rows}: {status}")
        for line in check.differences[:20]:
            console.print(f"  {line}", markup=False)
    if gaps or not all(c.ok for c in checks):
        sys.exit(1)


@click.command()
@EXISTING_WAREHOUSE
@click.option(
    "--table",
    default=None,
    help="Rebuild only this silver table (entity) and the gold tables that read it.",
)
@CONFIG
@spark_options
def replay(
    warehouse: str,
    table: str | None,
    config_path: Path | None,
    spark_mode: str,
    master: str | None,
) -> None:
    """Rebuild silver and gold from bronze from scratch, then swap the rebuilt tables in.

    The rebuild runs the pipeline's jobs with fresh checkpoints into a staging area; the live
    tables are replaced only when it is complete. Stop the pipeline first.
    """
    from lakehouse.ops.replay import replay as replay_tables
    from lakehouse_core.layout import Warehouse

    given = given_config(config_path)
    from lakehouse.run.lease import holding  # one pipeline per warehouse

    with (
        spark_session(spark_mode, master) as spark,
        holding(spark, Warehouse.from_path(warehouse), "replay"),
    ):
        config = declarations(given, warehouse, spark).config
        report = replay_tables(spark, Warehouse.from_path(warehouse), config, table)
    print_table("Rebuilt from bronze", ["table", "rows"], [list(t) for t in report.tables])
    console.print(f"replayed {', '.join(report.entities)} in {report.seconds:.1f} s")


@click.command()
@EXISTING_WAREHOUSE
@click.option("--table", required=True, help="The silver table (entity) the key belongs to.")
@click.option(
    "--key",
    "key_text",
    required=True,
    help="The key as a JSON object of key columns, e.g. '{\"id\": 42}'.",
)
@click.option(
    "--reason",
    default="privacy request",
    show_default=True,
    help="Why; recorded in the history of every table the deletion rewrites.",
)
@CONFIG
@spark_options
def forget(
    warehouse: str,
    table: str,
    key_text: str,
    reason: str,
    config_path: Path | None,
    spark_mode: str,
    master: str | None,
) -> None:
    """Remove every trace of one key from bronze, silver and gold, then VACUUM and check.

    Bronze is rewritten (its append-only guard is lifted for that commit only) and the reason
    is recorded in the table history. Afterwards no readable table version holds the key;
    older versions of the touched tables can no longer be read (VACUUM with retention 0).
    """
    from lakehouse.ops.forget import forget as forget_key
    from lakehouse_core.layout import Warehouse
    from silver.keys import parse_key

    values = parse_key(key_text)
    given = given_config(config_path)
    from lakehouse.run.lease import holding  # one pipeline per warehouse

    with (
        spark_session(spark_mode, master) as spark,
        holding(spark, Warehouse.from_path(warehouse), "forget"),
    ):
        config = declarations(given, warehouse, spark).config
        report = forget_key(spark, Warehouse.from_path(warehouse), config, table, values, reason)
    if not report.held:
        console.print(
            f"nothing in the warehouse holds key {report.key} of table {report.table}: "
            "nothing changed",
            markup=False,
        )
        return
    removed = [list(row) for row in report.removed]
    print_table(f"Removed key {report.key}", ["table", "rows removed"], removed)
    if report.recomputed:
        console.print(f"recomputed: {', '.join(report.recomputed)}")
    console.print(f"vacuumed (retention 0): {', '.join(report.vacuumed)}")
    console.print(
        f"checked {report.versions_checked} table versions ({report.versions_readable} still "
        "readable): none holds the key"
    )
    console.print(f"reason recorded in the table history: {reason}", markup=False)
    console.print("the source (Kafka topic or files) is outside the warehouse: delete it there too")


@click.command()
@EXISTING_WAREHOUSE
@CONFIG
@click.option(
    "--vacuum-retention-hours",
    type=int,
    default=None,
    help="Override [maintenance] vacuum_retention_hours (default 168).",
)
@click.option(
    "--bronze-retention-days",
    type=int,
    default=None,
    help="Override [maintenance] bronze_retention_days (default: keep bronze forever).",
)
@spark_options
def maintain(
    warehouse: str,
    config_path: Path | None,
    vacuum_retention_hours: int | None,
    bronze_retention_days: int | None,
    spark_mode: str,
    master: str | None,
) -> None:
    """OPTIMIZE and VACUUM every table, drop expired tombstones, apply bronze retention.

    Exit status 1 if bronze retention had to keep records that silver still needs.
    """
    from lakehouse.ops.maintenance import maintain as run_maintenance
    from lakehouse_core.layout import Warehouse

    given = given_config(config_path)
    overrides = {
        "vacuum_retention_hours": vacuum_retention_hours,
        "bronze_retention_days": bronze_retention_days,
    }
    from lakehouse.run.lease import holding  # one pipeline per warehouse

    with (
        spark_session(spark_mode, master) as spark,
        holding(spark, Warehouse.from_path(warehouse), "maintain"),
    ):
        config = declarations(given, warehouse, spark).config
        kept = {k: v for k, v in overrides.items() if v is not None}
        config = replace(config, maintenance=replace(config.maintenance, **kept))
        report = run_maintenance(spark, Warehouse.from_path(warehouse), config, datetime.now(UTC))
    rows = [
        [
            t.table,
            _change(t.before.files, t.after.files if t.after else None),
            _change(t.before.bytes, t.after.bytes if t.after else None, _size),
            _change(t.before.files_on_disk, t.after.files_on_disk if t.after else None),
            t.rows_removed,
        ]
        for t in report.tables
    ]
    print_table("Maintenance", ["table", "files", "bytes", "files on disk", "rows removed"], rows)
    for note in report.notes:
        console.print(f"note: {note}", markup=False)
    for refusal in report.refused:
        console.print(f"bronze retention refused: {refusal}", markup=False)
    if report.refused:
        sys.exit(1)


def _change(before: int, after: int | None, render: Callable[[int], str] = str) -> str:
    return f"{render(before)} -> {render(after)}" if after is not None else render(before)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    value, unit = count / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"
