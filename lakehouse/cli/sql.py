"""``lakehouse sql``: one statement over the warehouse's tables by name, read-only by default."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from lakehouse.cli.common import (
    CONFIG,
    EXISTING_WAREHOUSE,
    declarations,
    errors,
    given_config,
    print_table,
    spark_options,
    spark_session,
)
from lakehouse.cli.results import (
    FORMATS,
    Format,
    cell_text,
    check_columns,
    write_csv,
    write_json,
)


@click.command()
@EXISTING_WAREHOUSE
@CONFIG
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
    warehouse: str,
    config_path: Path | None,
    limit: int,
    output: Format | None,
    allow_writes: bool,
    statement: str,
    spark_mode: str,
    master: str | None,
) -> None:
    """Run one SQL statement; tables are named <layer>.<table> (e.g. gold.revenue_per_minute).

    Read-only unless --allow-writes: SELECT, SHOW, DESCRIBE and EXPLAIN run, nothing that
    changes a table, and no file is read by path. Bronze never changes here, not even with
    --allow-writes: use `lakehouse forget` and `lakehouse maintain`. The tables have the names
    the [catalog] of the declarations gives them (--config's, else the warehouse's last run's).
    """
    from lakehouse.ops.fresh import with_fresh_views
    from lakehouse.sql.session import as_checked, spark_errors
    from lakehouse_core.catalog import run_sql
    from lakehouse_core.config import PipelineConfig
    from lakehouse_core.layout import Warehouse
    from lakehouse_core.sql_guard import check

    given = given_config(config_path)
    given_names = (given or PipelineConfig()).catalog
    # Before Spark starts: a refusal is quick.
    check(statement, allow_writes=allow_writes, protected={given_names.schema("bronze")})
    output = output or ("table" if sys.stdout.isatty() else "csv")
    with (
        spark_session(spark_mode, master) as spark,
        as_checked(spark, allow_writes),
        spark_errors(),
    ):
        config = declarations(given, warehouse, spark).config
        names = config.catalog
        if names != given_names:  # the recorded [catalog] names bronze otherwise
            check(statement, allow_writes=allow_writes, protected={names.schema("bronze")})
        statement = with_fresh_views(spark, Warehouse.from_path(warehouse), config, statement)
        frame = run_sql(spark, Warehouse.from_path(warehouse), statement, names)
        check_columns(output, frame.columns)
        rows = [tuple(row) for row in (frame.limit(limit + 1) if limit else frame).collect()]
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
