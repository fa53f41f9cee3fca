"""``lakehouse sql``: a statement over the warehouse's tables by name."""

from __future__ import annotations

from pathlib import Path

import click

from core.errors import LakehouseError
from lakehouse.commands.common import (
    EXISTING_WAREHOUSE,
    first_line,
    print_table,
    show,
    spark_options,
    spark_session,
)


@click.command()
@EXISTING_WAREHOUSE
@click.option(
    "--limit", default=100, show_default=True, type=click.IntRange(min=1), help="Rows to print."
)
@click.argument("statement")
@spark_options
def sql(warehouse: Path, limit: int, statement: str, spark_mode: str, master: str) -> None:
    """Run a SQL statement; tables are named <layer>.<table> (e.g. gold.revenue_per_minute)."""
    from pyspark.errors import AnalysisException, ParseException

    from core.catalog import run_sql
    from core.layout import Warehouse

    with spark_session(spark_mode, master) as spark:
        try:
            frame = run_sql(spark, Warehouse.from_path(warehouse), statement)
        except (AnalysisException, ParseException) as error:
            raise LakehouseError(f"SQL error: {first_line(str(error))}") from error
        rows = [[show(v) for v in row] for row in frame.limit(limit).collect()]
        print_table(None, frame.columns, rows)
