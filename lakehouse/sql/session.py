"""Running one checked SQL statement in a session: shared by ``lakehouse sql`` and the Python API.

:mod:`lakehouse_core.sql_guard` decides whether a statement may run; this module runs it as it was
checked (no ``${...}`` substitution; read-only, no SQL on files) and turns Spark's errors into
one :class:`~lakehouse_core.errors.LakehouseError` line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.errors import AnalysisException, ParseException, UnsupportedOperationException
from pyspark.sql import DataFrame, SparkSession

from lakehouse_core.catalog import run_sql
from lakehouse_core.config import CatalogSpec
from lakehouse_core.errors import LakehouseError
from lakehouse_core.layout import Warehouse
from lakehouse_core.sql_guard import check

#: What is said when a statement would change an append-only table.
APPEND_ONLY = (
    "SQL error: the table is append-only (bronze is the system of record), so DELETE, UPDATE "
    "and MERGE cannot change it. To remove one key's data from every layer use 'lakehouse "
    "forget'; to drop bronze records older than N days, 'lakehouse maintain "
    "--bronze-retention-days N'."
)
#: PySpark's loggers that write a failing query's error, with the whole Java stack trace as
#: JSON, to stderr as the error is raised (``pyspark.errors.exceptions.base``): the raised
#: error says the same in its first line.
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
#: Spark's setting that lets SQL read files by path (``text.`/etc/hostname```).
SQL_ON_FILES = "spark.sql.runSQLOnFiles"
#: Spark's setting that replaces ``${name}`` in a statement's text before parsing it.
SUBSTITUTE = "spark.sql.variable.substitute"


def run_checked(
    spark: SparkSession,
    warehouse: Warehouse,
    statement: str,
    allow_writes: bool = False,
    catalog: CatalogSpec | None = None,
) -> DataFrame:
    """Check ``statement`` (:func:`lakehouse_core.sql_guard.check`), then run it over the
    warehouse's tables named ``<layer>.<table>``; a write statement has run on return.

    Raises:
        StatementRefusedError: the statement may not run (nothing ran).
        LakehouseError: Spark refused it (one line: Spark's first line, or how to change an
            append-only table).
    """
    names = catalog or CatalogSpec()
    check(statement, allow_writes=allow_writes, protected={names.schema("bronze")})
    with as_checked(spark, allow_writes), spark_errors():
        return run_sql(spark, warehouse, statement, names)


@contextmanager
def spark_errors() -> Iterator[None]:
    """Spark's analysis, parse and append-only errors as one-line LakehouseErrors, without
    PySpark's log of the error's Java trace on stderr (:func:`quiet_query_context`)."""
    try:
        with quiet_query_context():
            yield
    except UnsupportedOperationException as error:
        if error.getCondition() == "DELTA_CANNOT_MODIFY_APPEND_ONLY":
            raise LakehouseError(APPEND_ONLY) from error
        raise LakehouseError(f"SQL error: {first_line(str(error))}") from error
    except (AnalysisException, ParseException) as error:
        raise LakehouseError(f"SQL error: {first_line(str(error))}") from error


@contextmanager
def quiet_query_context() -> Iterator[None]:
    """While inside, PySpark logs nothing through :data:`QUERY_CONTEXT_LOGGERS`; their
    levels are as before afterwards. The loggers are made as PySpark makes them (its
    ``PySparkLogger``, whose ``exception`` takes the error's context as keywords), so that a
    record logged afterwards still works."""
    from pyspark.logger import PySparkLogger

    loggers = [PySparkLogger.getLogger(name) for name in QUERY_CONTEXT_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


@contextmanager
def as_checked(spark: SparkSession, allow_writes: bool) -> Iterator[None]:
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
