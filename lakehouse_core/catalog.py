"""Registers a warehouse's Delta tables so SQL can name them ``<layer>.<table>``."""

from __future__ import annotations

from urllib.parse import urlparse

from pyspark.sql import DataFrame, SparkSession

from lakehouse_core.config import CatalogSpec
from lakehouse_core.errors import ConfigError
from lakehouse_core.identifiers import quote_identifier
from lakehouse_core.layout import LAYERS, Warehouse
from lakehouse_core.storage import is_dir

#: Session setting prefix recording the catalog entries this project registered (and where).
REGISTERED_PREFIX = "lakehouse.catalog.registered."
#: The SQL names of the pipeline's own tables: ``system.quality`` (``Warehouse.quality``, the
#: data-quality metrics) and ``system.event_log`` (``Warehouse.event_log``, one row per
#: micro-batch of each streaming query).
SYSTEM_DATABASE, QUALITY_NAME, EVENT_LOG_NAME = "system", "quality", "event_log"


def register_tables(
    spark: SparkSession, warehouse: Warehouse, catalog: CatalogSpec | None = None
) -> list[str]:
    """Create (or re-point) external catalog entries for every table; return their names.

    Names are ``<layer>.<table>`` and ``system.<table>``, or as ``catalog`` says (a catalog and
    a schema prefix, for a shared metastore). Cheap to repeat: an entry this session already
    pointed at the table is not looked at again, so a running pipeline calls it after each
    step to make new tables visible. An entry that points elsewhere is re-pointed if this
    session registered it or its location is inside this warehouse (a table the project
    made); any other entry of the same name is someone else's table and is never dropped.

    Raises:
        ConfigError: a catalog entry of the same name holds another table.
    """
    names = catalog or CatalogSpec()
    registered = []
    tables: list[tuple[str, str, str]] = [
        (layer, name, warehouse.table(layer, name))
        for layer in LAYERS
        for name in warehouse.table_names(layer, spark)
    ]
    tables += [
        (SYSTEM_DATABASE, name, path)
        for name, path in (
            (QUALITY_NAME, warehouse.quality()),
            (EVENT_LOG_NAME, warehouse.event_log),
        )
        if is_dir(spark, f"{path}/_delta_log")
    ]
    present: dict[str, set[str]] = {}
    for schema, name, path in tables:
        database = _quoted(names.name, names.schema(schema))
        if database not in present:
            dotted = ".".join(part for part in (names.name, names.schema(schema)) if part)
            if not spark.catalog.databaseExists(dotted):
                spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
            present[database] = _table_names(spark, database)
        exists = _catalog_name(spark, name) in present[database]
        registered.append(_register(spark, names, schema, name, path, warehouse.root, exists))
    return registered


def catalog_outlives_session(spark: SparkSession) -> bool:
    """Whether the session's catalog keeps its entries after the session ends (a Hive
    metastore, or another catalog than Spark's in-memory one): only then are names worth
    registering in a process that ends after its run."""
    return spark.conf.get("spark.sql.catalogImplementation", "in-memory") != "in-memory"


def _table_names(spark: SparkSession, database: str) -> set[str]:
    """The permanent tables' names in ``database`` (quoted), as the catalog keeps them: read
    from the catalog alone, without opening a table (which would read its Delta log)."""
    rows = spark.sql(f"SHOW TABLES IN {database}").collect()
    return {str(row.tableName) for row in rows if not row.isTemporary}


def _catalog_name(spark: SparkSession, name: str) -> str:
    """``name`` as the catalog stores it (lower case unless the session is case sensitive)."""
    return name if spark.conf.get("spark.sql.caseSensitive", "false") == "true" else name.lower()


def sql_name(catalog: CatalogSpec, layer: str, table: str) -> str:
    """The name SQL uses for a warehouse table (``gold.revenue_per_minute``,
    ``main.shop_gold.revenue_per_minute``)."""
    parts = [catalog.name] if catalog.name else []
    return ".".join([*parts, catalog.schema(layer), table])


def _quoted(*parts: str | None) -> str:
    return ".".join(quote_identifier(part) for part in parts if part)


def _register(
    spark: SparkSession,
    names: CatalogSpec,
    layer: str,
    name: str,
    path: str,
    root: str,
    exists: bool,
) -> str:
    """Point the catalog entry of ``<layer>.<name>`` (``exists`` if the catalog has one) at the
    Delta table at ``path``."""
    qualified = sql_name(names, layer, name)
    quoted = _quoted(names.name, names.schema(layer), name)
    memo = REGISTERED_PREFIX + qualified
    if exists:
        if spark.conf.get(memo, None) == path:
            return qualified
        location = _location(spark, quoted)
        if _same_place(location, path):
            spark.conf.set(memo, path)
            return qualified
        if spark.conf.get(memo, None) is None and not _inside(location, root):
            raise ConfigError(
                f"The catalog already has a table {qualified} (at {location}) that this "
                f"project did not register, so it is left alone. Drop or rename it, or "
                "set [catalog] schema_prefix (or name) in the config to register the "
                "warehouse under other names."
            )
        spark.sql(f"DROP TABLE {quoted}")
    spark.catalog.createTable(qualified, path=path, source="delta")
    spark.conf.set(memo, path)
    return qualified


def _location(spark: SparkSession, quoted: str) -> str:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {quoted}").collect()
    return next((str(r.data_type) for r in rows if r.col_name == "Location"), "")


def _plain(uri: str) -> str:
    parsed = urlparse(uri)
    return (parsed.path if parsed.scheme in ("", "file") else uri).rstrip("/")


def _same_place(location: str, path: str) -> bool:
    return bool(location) and _plain(location) == _plain(path)


def _inside(location: str, root: str) -> bool:
    """Whether ``location`` is a table inside the warehouse at ``root``."""
    return bool(location) and _plain(location).startswith(_plain(root) + "/")


def run_sql(
    spark: SparkSession, warehouse: Warehouse, statement: str, catalog: CatalogSpec | None = None
) -> DataFrame:
    """Run a user's SQL statement against the registered warehouse tables."""
    register_tables(spark, warehouse, catalog)
    return spark.sql(statement)
