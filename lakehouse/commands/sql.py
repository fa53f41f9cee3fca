"""``lakehouse sql``: one statement over the warehouse's tables by name, read-only by default."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from core.errors import LakehouseError
from lakehouse.commands.common import (
    EXISTING_WAREHOUSE,
    errors,
    first_line,
    print_table,
    spark_options,
    spark_session,
)
from lakehouse.commands.results import (
    FORMATS,
    Format,
    cell_text,
    check_columns,
    write_csv,
    write_json,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: What ``lakehouse sql`` says when a statement would change an append-only table.
APPEND_ONLY = (
    "SQL error: the table is append-only (bronze is the system of record), so DELETE, UPDATE "
    "and MERGE cannot change it. To remove one key's data from every layer use 'lakehouse "
    "forget'; to drop bronze records older than N days, 'lakehouse maintain "
    "--bronze-retention-days N'."
)
#: Spark's setting that lets SQL read files by path (``text.`/etc/hostname```).
SQL_ON_FILES = "spark.sql.runSQLOnFiles"
#: Spark's setting that replaces ``${name}`` in a statement's text before parsing it.
SUBSTITUTE = "spark.sql.variable.substitute"


@click.command()
@EXISTING_WAREHOUSE
@click.option(
    "--limit",
    default=100,
    show_default=True,
    type=click.IntRange(min=0),
    help="Rows to print (0: all); a note on stderr says when there were more.",
)
@click.option(
    "--format",
    "output",
    type=click.Choice(FORMATS),
    default=None,
    help="Output: table (default on a terminal), csv (default otherwise) or json.",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Also run statements that change silver or gold tables (never bronze).",
)
@click.argument("statement")
@spark_options
def sql(
    warehouse: Path,
    limit: int,
    output: Format | None,
    allow_writes: bool,
    statement: str,
    spark_mode: str,
    master: str,
) -> None:
    """Run one SQL statement; tables are named <layer>.<table> (e.g. gold.revenue_per_minute).

    Read-only unless --allow-writes: SELECT, SHOW, DESCRIBE and EXPLAIN run, nothing that
    changes a table, and no file is read by path. Bronze never changes here, not even with
    --allow-writes: use `lakehouse forget` and `lakehouse maintain`.
    """
    from pyspark.errors import AnalysisException, ParseException, UnsupportedOperationException

    from core.catalog import run_sql
    from core.layout import Warehouse
    from lakehouse.sql_guard import check

    check(statement, allow_writes=allow_writes)  # before Spark starts: a refusal is quick
    output = output or ("table" if sys.stdout.isatty() else "csv")
    with spark_session(spark_mode, master) as spark, _as_checked(spark, allow_writes):
        try:
            frame = run_sql(spark, Warehouse.from_path(warehouse), statement)
            check_columns(output, frame.columns)
            rows = [tuple(row) for row in (frame.limit(limit + 1) if limit else frame).collect()]
        except UnsupportedOperationException as error:
            if error.getCondition() == "DELTA_CANNOT_MODIFY_APPEND_ONLY":
                raise LakehouseError(APPEND_ONLY) from error
            raise LakehouseError(f"SQL error: {first_line(str(error))}") from error
        except (AnalysisException, ParseException) as error:
            raise LakehouseError(f"SQL error: {first_line(str(error))}") from error
    if limit and len(rows) > limit:
        rows = rows[:limit]
        errors.print(
            f"note: printed the first {limit} rows; there are more (--limit N for more, "
            "--limit 0 for all).",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    _print(output, frame.columns, rows)


def _print(output: Format, columns: list[str], rows: list[tuple[object, ...]]) -> None:
    if output == "csv":
        write_csv(sys.stdout, columns, rows)
    elif output == "json":
        write_json(sys.stdout, columns, rows)
    else:
        print_table(None, columns, [[cell_text(value) for value in row] for row in rows])


@contextmanager
def _as_checked(spark: SparkSession, allow_writes: bool) -> Iterator[None]:
    """Spark runs the statement as it was checked: no ``${...}`` substitution (which could
    change the text after the check, or put a setting or an environment variable into it);
    read-only, Spark itself also refuses reads of files by path (the check refuses them first;
    this covers data source names it does not know). The settings are restored afterwards."""
    settings = {SUBSTITUTE: "false"} | ({} if allow_writes else {SQL_ON_FILES: "false"})
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)
