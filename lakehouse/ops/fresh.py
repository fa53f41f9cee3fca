"""A fresh read of a silver table: its rows as of its last MERGE with the bronze records its
query has not applied yet folded over them (:mod:`silver.fresh`), pinned and bounded.

The read pins its pair in this order: the bronze version silver's query has applied (its
checkpoint, as ``lakehouse status`` reads it), silver's tables' versions, then bronze's newest
version ``W``. Silver only applies bronze that exists, so whatever it committed meanwhile is
within ``W``, and folding a record twice changes nothing: the read equals silver after it has
applied bronze through ``W``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlglot
import sqlglot.errors
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from sqlglot import exp

from expectations.checks import load_checks
from lakehouse.ops.status import bronze_topics, silver_applied_version
from lakehouse_core.columns import METADATA_COLUMNS
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.delta_io import current_version, table_exists
from lakehouse_core.errors import TableNotFoundError
from lakehouse_core.layout import Warehouse
from silver.check import Checked
from silver.fresh import (
    FreshLimits,
    FreshReadError,
    PendingCommit,
    Snapshot,
    TailCache,
    bronze_commits,
    decode_tail,
    fold_checked,
    tail_frame,
)
from silver.job import bronze_path, entity_tables
from silver.parse import order_of


@dataclass(frozen=True)
class FreshRead:
    """A fresh read: its ``rows``, and the pair it is pinned to: silver's version (None: no
    table yet), the bronze version silver had applied (-1: none) and bronze's version ``W``
    the rows are current with; ``pending``: the records and commits it folded."""

    rows: DataFrame
    silver_version: int | None
    applied_version: int
    bronze_version: int
    pending_records: int
    pending_commits: int


def fresh_read(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    name: str,
    limits: FreshLimits | None = None,
    now: datetime | None = None,
) -> FreshRead:
    """A fresh read of ``silver.<name>`` (see the module docstring) at ``now`` (default: the
    clock; the age bound is measured from it).

    Raises:
        FreshReadError: ``name`` is an SCD type 2 history table, or the unapplied bronze is
            over ``limits`` (the message says so, and that the plain table can be read).
        TableNotFoundError: no declared silver table ``name``, or its bronze table is missing.
    """
    spec = _entity(warehouse, config, name)
    applied = silver_applied_version(warehouse, spec.name)
    return fresh_read_after(spark, warehouse, config, spec, applied, limits, now)


def fresh_read_after(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    spec: TableSpec,
    applied: int | None,
    limits: FreshLimits | None = None,
    now: datetime | None = None,
) -> FreshRead:
    """:func:`fresh_read` of the entity ``spec`` whose query has applied bronze through
    version ``applied`` (None: none), as its checkpoint says; ``limits`` default to the
    config's ``[fresh]`` bound.

    Raises:
        FreshReadError: the unapplied bronze is over ``limits``.
        TableNotFoundError: the entity's bronze table is missing.
    """
    bound = config.fresh
    limits = limits or FreshLimits(bound.max_records, timedelta(seconds=bound.max_age_seconds))
    name = spec.name
    tables = entity_tables(warehouse, spec)
    bronze = bronze_path(warehouse, spec)
    if not table_exists(spark, bronze):
        raise TableNotFoundError(
            f"No bronze table for silver.{name} in {warehouse.root}: run the pipeline first."
        )
    after = -1 if applied is None else applied
    pinned = {
        path: current_version(spark, path) if table_exists(spark, path) else None
        for path in (tables.silver, tables.tombstones, tables.truncations)
    }
    through = current_version(spark, bronze)  # read last: silver applied nothing past it
    commits, removals = bronze_commits(spark, bronze, after, through)
    records = _records(spark, bronze, through, commits)
    check_bound(name, commits, records, limits, now or datetime.now(UTC))
    silver = _at(spark, tables.silver, pinned[tables.silver])
    columns = None if silver is None else _data_columns(silver)
    checks = load_checks(spark, config.quality, warehouse, "silver", spec.name)
    cache = _cache(bronze)
    key = (spec, columns, checks)

    def decode_commits(chosen: list[PendingCommit]) -> Checked:
        tail = tail_frame(spark, bronze, through, chosen)
        return decode_tail(spec, tables, columns, tail, checks, cache.schemas)

    def fold() -> DataFrame:
        checked = cache.checked(key, commits, removals, after, through, decode_commits)
        if checked is None:
            return silver if silver is not None else spark.createDataFrame([], StructType())
        snapshot = Snapshot(
            rows=silver,
            tombstones=_at(spark, tables.tombstones, pinned[tables.tombstones]),
            floor=_floor(_at(spark, tables.truncations, pinned[tables.truncations])),
            columns=columns,
        )
        return fold_checked(snapshot, checked)

    rows = cache.rows((key, tuple(pinned.values()), after, through), fold)
    return FreshRead(rows, pinned[tables.silver], after, through, records, len(commits))


#: Per bronze table, what its entity's fresh reads keep between reads (a
#: :class:`silver.fresh.TailCache`: everything in it is used only under the entity's settings,
#: table columns and checks it was made under, so a stale entry costs a decode, never a wrong
#: read).
_TAIL_CACHES: dict[str, TailCache] = {}


def forget_kept_tails() -> None:
    """Let go of what fresh reads keep between reads (the next read of each table decodes its
    whole tail again)."""
    _TAIL_CACHES.clear()


def _cache(bronze: str) -> TailCache:
    """The :class:`silver.fresh.TailCache` of the fresh reads from the bronze table ``bronze``."""
    return _TAIL_CACHES.setdefault(bronze, TailCache())


def _entity(warehouse: Warehouse, config: PipelineConfig, name: str) -> TableSpec:
    """The silver entity ``name``: declared, or made from a bronze topic as a run makes it.

    Raises:
        FreshReadError: ``name`` is an entity's SCD type 2 history table.
        TableNotFoundError: no entity is named ``name``.
    """
    specs = [*config.tables, *(config.spec_for_topic(t) for t in bronze_topics(warehouse))]
    for spec in specs:
        if spec.name == name:
            return spec
        if spec.history_name == name:
            raise FreshReadError(
                f"silver.{name} keeps SCD type 2 history and has no fresh read: read "
                f"silver.{spec.name} fresh for the current rows, or silver.{name} as it is."
            )
    known = ", ".join(sorted({f"silver.{s.name}" for s in specs})) or "none yet"
    raise TableNotFoundError(f"No silver table {name!r} to read fresh; there are: {known}.")


def _records(spark: SparkSession, bronze: str, through: int, commits: list[PendingCommit]) -> int:
    """The records the ``commits`` added: from their statistics, else counted (one job)."""
    if all(c.records is not None for c in commits):
        return sum(c.records or 0 for c in commits)
    return tail_frame(spark, bronze, through, commits).count()


def check_bound(
    name: str, commits: list[PendingCommit], records: int, limits: FreshLimits, now: datetime
) -> None:
    """Raise FreshReadError if the unapplied bronze is over ``limits``."""
    oldest = min((c.timestamp_ms for c in commits), default=None)
    age = timedelta(0) if oldest is None else now - datetime.fromtimestamp(oldest / 1000, UTC)
    if records > limits.max_records or age > limits.max_age:
        raise FreshReadError(
            f"silver.{name} is {records} bronze records ({len(commits)} commits, the oldest "
            f"{age.total_seconds():.0f} s old) behind, over the fresh read's bound "
            f"({limits.max_records} records, {limits.max_age.total_seconds():.0f} s): read "
            f"silver.{name} as it is, or let silver catch up first."
        )


def _at(spark: SparkSession, path: str, version: int | None) -> DataFrame | None:
    if version is None:
        return None
    return spark.read.format("delta").option("versionAsOf", version).load(path)


def _floor(truncations: DataFrame | None) -> Row | None:
    """The newest truncate's order (None: never truncated), as silver reads its floor."""
    if truncations is None:
        return None
    newest: Row | None = truncations.select(F.max(order_of()).alias("o")).collect()[0].o
    return newest


def _data_columns(rows: DataFrame) -> StructType:
    """The key and row columns of silver's rows (as :func:`silver.tables.data_columns`)."""
    return StructType([f for f in rows.schema.fields if f.name not in METADATA_COLUMNS])


#: The SQL schema whose tables are fresh reads: ``SELECT * FROM fresh.orders``.
FRESH_SCHEMA = "fresh"
#: The prefix of the temporary views that hold a statement's fresh reads.
FRESH_VIEW_PREFIX = "__fresh_"


def fresh_tables(statement: str, schema: str = FRESH_SCHEMA) -> tuple[exp.Expr, list[str]]:
    """The parsed ``statement`` (Spark SQL) and the tables it names in ``schema``, lower case,
    each once (pure). Raises sqlglot's SqlglotError on text it cannot parse."""
    tree = sqlglot.parse_one(statement, read="spark")
    names = [
        table.name.lower()
        for table in tree.find_all(exp.Table)
        if table.db.lower() == schema.lower() and not table.catalog
    ]
    return tree, list(dict.fromkeys(names))


def with_fresh_views(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    statement: str,
    limits: FreshLimits | None = None,
) -> str:
    """The SQL to run for ``statement``: itself if it names no ``fresh.<table>``; else each
    such table is made a temporary view of :func:`fresh_read` of ``silver.<table>`` and the
    statement is rewritten, through its parse tree, to read the view (aliased by the table's
    name, so ``orders.id`` still names its column).

    Raises:
        FreshReadError: a named table has no fresh read, or is over ``limits``.
        TableNotFoundError: no silver table of that name.
    """
    schema = config.catalog.schema(FRESH_SCHEMA)
    try:
        tree, names = fresh_tables(statement, schema)
    except sqlglot.errors.SqlglotError:
        return statement  # Spark gives the parse error in its own words
    if not names:
        return statement
    views = {}
    for name in names:
        view = f"{FRESH_VIEW_PREFIX}{name}"
        fresh_read(spark, warehouse, config, name, limits).rows.createOrReplaceTempView(view)
        views[name] = view

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Table) and node.db.lower() == schema.lower() and not node.catalog:
            alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
            return exp.Table(this=exp.to_identifier(views[node.name.lower()]), alias=alias)
        return node

    return tree.transform(rewrite).sql(dialect="spark")
