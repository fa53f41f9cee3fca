"""What a silver micro-batch runs in: the query's state kept between batches, and the
:class:`BatchContext` every stage of a batch takes (:mod:`silver.job` runs the stages)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql.types import StructType

from expectations.enforce import TableChecks
from lakehouse_core.config import TableSpec
from lakehouse_core.delta_io import EnsuredTables
from lakehouse_core.widening import TypeWidening
from silver.parse import SchemaVersion
from silver.tables import EntityTables, KeyRange, current_orders, data_columns, latest_truncation


class TruncationFloor:
    """The order of an entity's newest truncate (None: never truncated), read once per query:
    while the query runs, its own truncates are the only ones written, and it notes them."""

    def __init__(self) -> None:
        self._known = False
        self._order: Row | None = None

    def order(self, spark: SparkSession, path: str) -> Row | None:
        if not self._known:
            self._order, self._known = latest_truncation(spark, path), True
        return self._order

    def moved(self) -> None:
        """A truncate was written: read the floor again."""
        self._known = False


class SchemaCache:
    """The schema version of a query's last micro-batch, when all its records carried one
    Connect schema (one :data:`~silver.parse.SCHEMA_HASH`: not inferred from values, not broken).

    A later batch is parsed with it first; if all that batch's records carry the same schema
    (checked in the batch's own totals), discovering its versions would have given exactly
    this version, so that query is skipped.
    """

    def __init__(self) -> None:
        self.version: SchemaVersion | None = None

    def remember(self, versions: list[SchemaVersion]) -> None:
        only = versions[0] if len(versions) == 1 else None
        reusable = (
            only is not None
            and only.selector is None
            and not only.inferred
            and only.problem is None
            and len(only.hashes) == 1
            and bool(only.layout.columns)
        )
        self.version = only if reusable else None

    def covers(self, hashes: list[int] | None) -> bool:
        """Whether the cached version is the one version of a batch whose records carry the
        schema ``hashes`` (a batch of only Kafka tombstones is left to discovery)."""
        return self.version is not None and set(hashes or ()) == self.version.hashes

    def forget(self) -> None:
        self.version = None


class QueryState:
    """What a silver query keeps between its micro-batches: the truncation floor, the schema
    version of its last batch (see :class:`SchemaCache`), and the schemas its tables took (so
    a batch of the same shape neither checks nor reads them again)."""

    def __init__(self) -> None:
        self.floor = TruncationFloor()
        self.schemas = SchemaCache()
        self._ensured = EnsuredTables()
        self._columns: StructType | None = None
        self._columns_known = False

    def data_columns(self, spark: SparkSession, path: str) -> StructType | None:
        """The silver table's :func:`~silver.tables.data_columns`, read again only after this
        query changed a table's schema."""
        if not self._columns_known:
            self._columns = data_columns(spark, path)
            self._columns_known = True
        return self._columns

    def ensure_table(
        self,
        spark: SparkSession,
        path: str,
        schema: StructType,
        change_feed: bool,
        widening: TypeWidening,
        deletion_vectors: bool = False,
        defaults: Mapping[str, Column] | None = None,
    ) -> None:
        """:func:`lakehouse_core.delta_io.ensure_table`, once per schema and table in this query."""
        ensured = self._ensured.ensure(
            spark, path, schema, change_feed, widening, deletion_vectors, defaults
        )
        if ensured:
            self._columns_known = False


@dataclass(frozen=True)
class Current:
    """What the tables hold that a batch's writes depend on: the truncation floor before the
    batch (None: never truncated) and the key and order of every live row and tombstone in the
    batch's key range (``orders``, see :func:`silver.tables.current_orders`; None: no table)."""

    floor: Row | None
    orders: DataFrame | None


@dataclass(frozen=True)
class BatchContext:
    """One micro-batch's surroundings, taken by each of its stages: the session, the entity's
    settings and tables, the query's application id (the prefix of its Delta transaction
    markers), the batch id, what the query keeps between batches, and the table's checks
    (None: none)."""

    spark: SparkSession
    spec: TableSpec
    tables: EntityTables
    app_id: str
    batch_id: int
    state: QueryState
    checks: TableChecks | None = None

    def marker(self, role: str) -> str:
        """The transaction application id of the batch's writes of ``role`` (one per table)."""
        return f"{self.app_id}:{role}"

    def current(self, keys: tuple[str, ...], within: KeyRange | None) -> Current:
        """Read what the writes depend on (lazily: the orders are a DataFrame)."""
        floor = self.state.floor.order(self.spark, self.tables.truncations)
        if not keys:
            return Current(floor, None)
        return Current(floor, current_orders(self.spark, self.tables, keys, within))
