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

#: What ``lakehouse sql`` says when a statement would change an append-only (bronze) table.
APPEND_ONLY = (
    "SQL error: the table is append-only (bronze is the system of record), so DELETE, UPDATE "
    "and MERGE cannot change it. To remove one key's data from every layer use 'lakehouse "
    "forget'; to drop bronze records older than N days, 'lakehouse maintain "
    "--bronze-retention-days N'."
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
    from pyspark.errors import AnalysisException, ParseException, UnsupportedOperationException

    from core.catalog import run_sql
    from core.layout import Warehouse

    with spark_session(spark_mode, master) as spark:
        try:
            frame = run_sql(spark, Warehouse.from_path(warehouse), statement)
        except UnsupportedOperationException as error:
            if error.getCondition() == "DELTA_CANNOT_MODIFY_APPEND_ONLY":
                raise LakehouseError(APPEND_ONLY) from error
            raise LakehouseError(f"SQL error: {first_line(str(error))}") from error
        except (AnalysisException, ParseException) as error:
            raise LakehouseError(f"SQL error: {first_line(str(error))}") from error
        rows = [[show(v) for v in row] for row in frame.limit(limit).collect()]
        print_table(None, frame.columns, rows)
