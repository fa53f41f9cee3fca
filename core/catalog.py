"""Registers a warehouse's Delta tables so SQL can name them ``<layer>.<table>``."""

from __future__ import annotations

from urllib.parse import urlparse

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from core.errors import ConfigError
from core.identifiers import quote_identifier
from core.layout import LAYERS, Warehouse

#: Session setting prefix recording the catalog entries this project registered (and where).
REGISTERED_PREFIX = "lakehouse.catalog.registered."
#: The SQL names of the pipeline's own tables: ``system.quality`` (``Warehouse.quality``, the
#: data-quality metrics) and ``system.event_log`` (``Warehouse.event_log``, one row per
#: micro-batch of each streaming query).
SYSTEM_DATABASE, QUALITY_NAME, EVENT_LOG_NAME = "system", "quality", "event_log"


def register_tables(spark: SparkSession, warehouse: Warehouse) -> list[str]:
    """Create (or re-point) external catalog entries for every table; return their names.

    An entry this session registered is re-pointed; one that already points at the table is
    kept. Any other entry of the same name is someone else's table and is never dropped.

    Raises:
        ConfigError: a catalog entry of the same name holds another table.
    """
    registered = []
    for layer in LAYERS:
        names = warehouse.table_names(layer, spark)
        if not names:
            continue
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(layer, 'layer')}")
        for name in names:
            registered.append(_register(spark, layer, name, warehouse.table(layer, name)))
    for name, path in ((QUALITY_NAME, warehouse.quality()), (EVENT_LOG_NAME, warehouse.event_log)):
        if DeltaTable.isDeltaTable(spark, path):
            spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(SYSTEM_DATABASE)}")
            registered.append(_register(spark, SYSTEM_DATABASE, name, path))
    return registered


def _register(spark: SparkSession, database: str, name: str, path: str) -> str:
    """Point catalog entry ``<database>.<name>`` at the Delta table at ``path``."""
    qualified = f"{database}.{name}"
    quoted = f"{quote_identifier(database)}.{quote_identifier(name)}"
    if spark.catalog.tableExists(qualified):
        location = _location(spark, quoted)
        if _same_place(location, path):
            return qualified
        if spark.conf.get(REGISTERED_PREFIX + qualified, None) is None:
            raise ConfigError(
                f"The catalog already has a table {qualified} (at {location}) that this "
                f"project did not register, so it is left alone. Drop or rename it, or "
                "run SQL in a session with its own catalog."
            )
        spark.sql(f"DROP TABLE {quoted}")
    spark.catalog.createTable(qualified, path=path, source="delta")
    spark.conf.set(REGISTERED_PREFIX + qualified, path)
    return qualified


def _location(spark: SparkSession, quoted: str) -> str:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {quoted}").collect()
    return next((str(r.data_type) for r in rows if r.col_name == "Location"), "")


def _same_place(location: str, path: str) -> bool:
    def plain(uri: str) -> str:
        parsed = urlparse(uri)
        return (parsed.path if parsed.scheme in ("", "file") else uri).rstrip("/")

    return bool(location) and plain(location) == plain(path)


def run_sql(spark: SparkSession, warehouse: Warehouse, statement: str) -> DataFrame:
    """Run a user's SQL statement against the registered warehouse tables."""
    register_tables(spark, warehouse)
    return spark.sql(statement)
