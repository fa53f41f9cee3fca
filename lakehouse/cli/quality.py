"""``lakehouse validate``: the data-quality suites run by Great Expectations on the tables."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from lakehouse.cli.common import (
    CONFIG,
    EXISTING_WAREHOUSE,
    console,
    declarations,
    declarations_name,
    given_config,
    print_table,
    spark_options,
    spark_session,
)


@click.command()
@EXISTING_WAREHOUSE
@CONFIG
@click.option(
    "--docs",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the Great Expectations project and its Data Docs (HTML).",
)
@spark_options
def validate(
    warehouse: str,
    config_path: Path | None,
    docs: Path | None,
    spark_mode: str,
    master: str | None,
) -> None:
    """Run every table's suite through Great Expectations (table-level expectations too);
    exit 1 if a fail-level expectation does not hold. Without --config: the suites of the
    declarations the warehouse last ran with, else the demo's."""
    from expectations.validate import validate_warehouse
    from lakehouse_core.config import QualitySpec
    from lakehouse_core.errors import ConfigError
    from lakehouse_core.layout import Warehouse

    given = given_config(config_path)
    if given is not None and not given.quality.enabled:
        raise ConfigError(
            f"{declarations_name(config_path)} names no suites and declares no expectations: "
            "set 'suites' (a directory) or 'packaged_suites = true' in its [quality] table, or "
            "declare expectations on its tables ([tables.expect], [tables.expect_or_fail], ...)."
        )
    with spark_session(spark_mode, master) as spark:
        quality = declarations(given, warehouse, spark).config.quality
        if not quality.enabled:
            quality = QualitySpec(packaged_suites=True)
        result = validate_warehouse(spark, Warehouse.from_path(warehouse), quality, docs)
    rows = [
        [v.table, v.expectation, v.action, "ok" if v.success else "BROKEN", _count(v.unexpected)]
        for v in result.verdicts
    ]
    print_table("Expectations", ["table", "expectation", "action", "verdict", "unexpected"], rows)
    for name in result.missing:
        console.print(f"{name}: has a suite but no table in {warehouse}; skipped")
    if result.docs is not None:
        console.print(f"Data Docs: {result.docs}")
    broken = [v for v in result.verdicts if not v.success and v.action == "fail"]
    if broken:
        names = ", ".join(f"{v.table}.{v.expectation}" for v in broken)
        console.print(f"fail-level expectations broken: {names}")
        sys.exit(1)


def _count(unexpected: int | None) -> str:
    """Unexpected values, or "" for an expectation about the whole column (e.g. its type)."""
    return "" if unexpected is None else str(unexpected)
