"""Registers a warehouse's Delta tables so SQL can name them ``<layer>.<table>``."""

from __future__ import annotations

from urllib.parse import urlparse

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from core.errors import ConfigError
from core.identifiers import quote_identifier
from core.layout import LAYERS, Warehouse

#: The name of the event log (``<warehouse>/_system/event_log``) in SQL.
EVENT_LOG = "system.event_log"
#: Session setting prefix recording the catalog entries this project registered (and where).
REGISTERED_PREFIX = "lakehouse.catalog.registered."


def register_tables(spark: SparkSession, warehouse: Warehouse) -> list[str]:
    """Create (or re-point) external catalog entries for every table; return their names.

    An entry this session registered is re-pointed; one that already points at the table is
    kept. Any other entry of the same name is someone else's table and is never dropped.

    Raises:
        ConfigError: a catalog entry of the same name holds another table.
    """
    registered = []
    for layer in LAYERS:
        names = warehouse.table_names(layer)
        if not names:
            continue
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(layer, 'layer')}")
        for name in names:
            qualified = f"{layer}.{name}"
            path = warehouse.table(layer, name)
            quoted = f"{quote_identifier(layer)}.{quote_identifier(name)}"
            if spark.catalog.tableExists(qualified):
                location = _location(spark, quoted)
                if _same_place(location, path):
                    registered.append(qualified)
                    continue
                if spark.conf.get(REGISTERED_PREFIX + qualified, None) is None:
                    raise ConfigError(
                        f"The catalog already has a table {qualified} (at {location}) that this "
                        f"project did not register, so it is left alone. Drop or rename it, or "
                        "run SQL in a session with its own catalog."
                    )
                spark.sql(f"DROP TABLE {quoted}")
            spark.catalog.createTable(qualified, path=path, source="delta")
            spark.conf.set(REGISTERED_PREFIX + qualified, path)
            registered.append(qualified)
    if _register_event_log(spark, warehouse):
        registered.append(EVENT_LOG)
    return registered


def _register_event_log(spark: SparkSession, warehouse: Warehouse) -> bool:
    """Register the pipeline's event log as ``system.event_log`` (if a run wrote it), never
    replacing a table of that name this project did not register."""
    path = warehouse.event_log
    if not DeltaTable.isDeltaTable(spark, path):
        return False
    spark.sql("CREATE DATABASE IF NOT EXISTS system")
    if spark.catalog.tableExists(EVENT_LOG):
        if _same_place(_location(spark, EVENT_LOG), path):
            return True
        if spark.conf.get(REGISTERED_PREFIX + EVENT_LOG, None) is None:
            return False  # someone else's table: left alone, and not shown as ours
        spark.sql(f"DROP TABLE {EVENT_LOG}")
    spark.catalog.createTable(EVENT_LOG, path=path, source="delta")
    spark.conf.set(REGISTERED_PREFIX + EVENT_LOG, path)
    return True


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
