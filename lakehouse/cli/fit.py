"""``lakehouse fit``: fit the baseline of every declared alert from silver (a batch job)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from lakehouse.cli.common import (
    CONFIG,
    EXISTING_WAREHOUSE,
    declarations,
    given_config,
    print_table,
    spark_options,
    spark_session,
)
from lakehouse_core.errors import ConfigError

log = logging.getLogger(__name__)


@click.command()
@EXISTING_WAREHOUSE
@CONFIG
@click.option("--alert", "only", default=None, help="Fit only this alert (default: every one).")
@spark_options
def fit(
    warehouse: str, config_path: Path | None, only: str | None, spark_mode: str, master: str | None
) -> None:
    """Fit the per-key baseline of each [[alerts]] entry from its silver table's current rows.

    Each run appends a new baseline_version to gold.<alert>_baseline; the running alert jobs
    score with the newest from their next micro-batch. Schedule it like any batch job.
    """
    from gold.alerts import fit as fit_alert
    from lakehouse_core.layout import Warehouse

    given = given_config(config_path)
    with spark_session(spark_mode, master) as spark:
        config = declarations(given, warehouse, spark).config
        specs = [spec for spec in config.alerts if only is None or spec.name == only]
        if not specs:
            declared = ", ".join(spec.name for spec in config.alerts) or "none"
            raise ConfigError(
                f"No alert to fit{f' named {only!r}' if only else ''} (declared: {declared}). "
                "Declare one in an [[alerts]] entry of the --config file."
            )
        fits = []
        for spec in specs:
            log.info(f"gold: fitting {spec.baseline_table} from silver.{spec.source}")
            fits.append(fit_alert(spark, Warehouse.from_path(warehouse), spec))
    print_table(
        "Baselines fitted",
        ["alert", "table", "baseline_version", "keys", "keys scored"],
        [[f.alert, f.table, f.version, f.keys, f.scored_keys] for f in fits],
    )
