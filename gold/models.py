"""The refresh of SQL models (:mod:`lakehouse_core.models`): ``gold.<name>`` kept equal to the
model's query over its input tables, written once per change of those inputs, exactly once.

A refresh (:func:`refresh`):

1. reads the Delta version (and table id) of each input table;
2. does nothing (no commit) when they are the versions the last refresh recorded and the
   model's SQL and key are the same;
3. else evaluates the query over the inputs pinned at those versions: each table reference
   is rewritten (sqlglot) to a temporary view of ``versionAsOf`` that version, aliased by the
   table's own name, so a concurrent commit to an input cannot mix versions into one result;
4. writes ``gold.<name>`` in one commit: an overwrite, or with a ``key`` a MERGE of only the
   rows that differ (rows compared null-safely; none differ: no commit). The commit carries
   Delta's transaction id (``txnAppId`` = the model and its state's generation,
   ``txnVersion`` = the refresh number) and the new state in its ``userMetadata``;
5. then records the state in ``_system/models/<name>.json``.

A crash between 4 and 5 is safe: the next refresh finds the newer state in the table's last
commit and adopts it (:func:`recorded_state`); a refresh run twice with the same number is
skipped by Delta's transaction id.

A keyed model whose query is key-local (:mod:`gold.model_shapes`) is recomputed for the keys
that changed only: the keys its inputs' change feeds show between the recorded versions and
the new ones (:func:`changed_keys`), its query evaluated over just those keys' input rows and
compared with just those keys' rows of the table. Any other model, or one whose inputs have
no readable change feed for those versions, is evaluated whole; :attr:`Refreshed.how` says
which, and why.

The pure parts (:func:`pinned_query`, :func:`is_current`, :func:`versions_behind`,
:func:`changed_rows`) are separate from the I/O that reads versions and writes tables.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from enum import Enum
from functools import reduce
from typing import Any

from delta.tables import DeltaTable
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType
from sqlglot import exp

from gold.model_shapes import IncrementalPlan, incremental_plan
from lakehouse_core import storage
from lakehouse_core.config import PipelineConfig
from lakehouse_core.delta_io import (
    TXN_APP_ID,
    TXN_VERSION,
    USER_METADATA,
    current_version,
    merge_materialized,
    newest_commit_messages,
    table_exists,
    table_flag,
)
from lakehouse_core.errors import ConfigError
from lakehouse_core.failures import Failure, TableFailure
from lakehouse_core.identifiers import is_plain_identifier, require_identifier
from lakehouse_core.layout import Layer, Warehouse
from lakehouse_core.models import SqlModel, check_models
from lakehouse_core.parallel import in_session, session_copy
from lakehouse_core.sql_guard import DIALECT
from silver.verify import MAX_REPORTED, TableCheck

log = logging.getLogger(__name__)
#: An input table as a model names it (``silver.auctions``), and its (table id, version).
InputVersions = dict[str, tuple[str, int]]
#: The marker column of :func:`changed_rows`: ``upsert`` or ``delete``.
CHANGE = "__model_change"
#: Doubles (``avg``) summed in another order differ in their last bits: verify rounds them.
DOUBLE_DIGITS = 9
_STATE_MARK = "sql_model"
#: Delta's table property that keeps a change feed.
CHANGE_FEED = "delta.enableChangeDataFeed"
#: Changed keys up to this many are a literal filter of the inputs' scans and of the MERGE
#: (Delta skips the files whose statistics rule them out); up to BROADCAST_KEYS, a broadcast.
LITERAL_KEYS = 1_000
BROADCAST_KEYS = 100_000
#: Key values written as literals (others, e.g. structs, are broadcast).
_LITERALS = (bool, int, float, str, Decimal, date, datetime)


@dataclass(frozen=True)
class ModelState:
    """What a model's last refresh read and wrote: the model's ``digest``, the ``inputs``
    versions, the refresh number and the ``generation`` (a fresh id for each new state chain:
    the transaction ids of a rebuilt table never collide with an older table's)."""

    model: str
    digest: str
    generation: str
    refresh: int
    inputs: InputVersions

    @property
    def app_id(self) -> str:
        """Delta's ``txnAppId`` of this model's commits."""
        return f"sql_model_{self.model}_{self.generation}"

    def to_json(self) -> str:
        return json.dumps(
            {
                _STATE_MARK: self.model,
                "digest": self.digest,
                "generation": self.generation,
                "refresh": self.refresh,
                "inputs": {name: list(pair) for name, pair in sorted(self.inputs.items())},
            },
            sort_keys=True,
        )

    @staticmethod
    def from_json(text: str | None, model: str) -> ModelState | None:
        """The state in ``text`` if it is one of ``model`` (None for anything else)."""
        try:
            document = json.loads(text or "")
        except ValueError:
            return None
        if not isinstance(document, dict) or document.get(_STATE_MARK) != model:
            return None
        inputs = {str(k): (str(v[0]), int(v[1])) for k, v in document["inputs"].items()}
        return ModelState(
            model, document["digest"], document["generation"], int(document["refresh"]), inputs
        )


class Outcome(Enum):
    """What a refresh did."""

    CURRENT = "current"  # the inputs had not moved: nothing written
    WRITTEN = "written"  # one commit to gold.<name>
    UNCHANGED = "unchanged"  # keyed: the result had no changed row, no commit
    WAITING = "waiting"  # an input table does not exist yet


@dataclass(frozen=True)
class Refreshed:
    """The outcome of one refresh; ``missing``: the inputs that do not exist yet; ``how``:
    ``incremental: ...`` (the changed keys' count and the query's shape) or ``full recompute:
    <why>`` when the query was evaluated (empty otherwise)."""

    model: str
    outcome: Outcome
    missing: tuple[str, ...] = ()
    rows_changed: int | None = None
    how: str = ""


# --- pure parts ------------------------------------------------------------------------------


def input_name(schema: str, table: str) -> str:
    """``silver.auctions``."""
    return f"{schema}.{table}"


def is_current(state: ModelState | None, model: SqlModel, inputs: InputVersions) -> bool:
    """Whether the last refresh read exactly ``inputs`` for this very model."""
    return state is not None and state.digest == model.digest and state.inputs == inputs


def versions_behind(state: ModelState, inputs: InputVersions) -> int | None:
    """How many commits the inputs have had since the refresh recorded in ``state`` (None when
    an input is another table now: rebuilt, or new to the model)."""
    behind = 0
    for name, (table_id, version) in inputs.items():
        recorded = state.inputs.get(name)
        if recorded is None or recorded[0] != table_id:
            return None
        behind += max(0, version - recorded[1])
    return behind


def pinned_query(model: SqlModel, views: Mapping[tuple[str, str], str]) -> str:
    """The model's query with each input table read from its view in ``views`` (by
    ``(schema, table)``), aliased as the query aliased it, else by the table's own name (so
    ``auctions.id`` still resolves). Built from the parsed tree, never by pasting text."""
    tree = model.tree()
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in list(tree.find_all(exp.Table)):
        if not isinstance(table.this, exp.Identifier):
            continue
        if not table.db and table.name.lower() in ctes:
            continue
        view = views[(table.db.lower(), table.name)]
        alias = table.alias or table.name
        table.replace(
            exp.Table(
                this=exp.to_identifier(view), alias=exp.TableAlias(this=exp.to_identifier(alias))
            )
        )
    return tree.sql(dialect=DIALECT)


def _same(left: str, right: str, columns: Sequence[str]) -> Column:
    return reduce(
        lambda a, b: a & b,
        [F.col(f"{left}.{c}").eqNullSafe(F.col(f"{right}.{c}")) for c in columns],
        F.lit(True),
    )


def changed_rows(result: DataFrame, current: DataFrame, key: Sequence[str]) -> DataFrame:
    """The rows that turn ``current`` into ``result`` (same columns, ``key`` unique in each):
    each new or changed row of ``result`` with :data:`CHANGE` ``upsert``, and the key of each
    row of ``current`` whose key ``result`` lacks with ``delete``. Compared null-safely."""
    columns = result.columns
    s = result.withColumn("__in_result", F.lit(True)).alias("s")
    t = current.select(*columns).withColumn("__in_current", F.lit(True)).alias("t")
    joined = s.join(t, _same("s", "t", key), "full_outer")
    upserts = joined.where(
        F.col("s.__in_result").isNotNull()
        & (F.col("t.__in_current").isNull() | ~_same("s", "t", columns))
    ).select(*(F.col(f"s.{c}").alias(c) for c in columns), F.lit("upsert").alias(CHANGE))
    deletes = joined.where(F.col("s.__in_result").isNull()).select(
        *(F.col(f"t.{c}").alias(c) for c in columns), F.lit("delete").alias(CHANGE)
    )
    return upserts.unionByName(deletes)


# --- I/O -------------------------------------------------------------------------------------


def state_path(warehouse: Warehouse, name: str) -> str:
    """Where the state of model ``name`` is recorded."""
    return f"{warehouse.root}/_system/models/{require_identifier(name, 'model name')}.json"


def input_versions(
    spark: SparkSession, warehouse: Warehouse, model: SqlModel
) -> tuple[InputVersions, list[str]]:
    """The (table id, version) of each input table that exists, and the inputs that do not."""
    found: InputVersions = {}
    missing = []
    for schema, table in model.inputs:
        layer: Layer = schema  # type: ignore[assignment]  # lakehouse_core.models allows only layers
        path = warehouse.table(layer, table)
        name = input_name(schema, table)
        if not table_exists(spark, path):
            missing.append(name)
            continue
        detail = DeltaTable.forPath(spark, path).detail().select("id").first()
        assert detail is not None
        found[name] = (str(detail.id), current_version(spark, path))
    return found, missing


def evaluate_at(
    spark: SparkSession,
    warehouse: Warehouse,
    model: SqlModel,
    inputs: InputVersions,
    only: tuple[IncrementalPlan, ChangedKeys] | None = None,
) -> DataFrame:
    """The model's query over its inputs as of the versions in ``inputs``; with ``only`` (a
    plan and keys), over just the input rows whose key columns hold one of those keys.

    Raises:
        ConfigError: an output column without a plain name (Delta could not store it).
    """
    keyed = {} if only is None else {(i.schema, i.table): i for i in only[0].inputs}
    views: dict[tuple[str, str], str] = {}
    for number, (schema, table) in enumerate(model.inputs):
        layer: Layer = schema  # type: ignore[assignment]
        version = inputs[input_name(schema, table)][1]
        view = f"__sql_model_{model.name}_{number}"
        reader = spark.read.format("delta").option("versionAsOf", version)
        rows = reader.load(warehouse.table(layer, table))
        if only is not None and (schema, table) in keyed:
            rows = only[1].rows_of(rows, keyed[(schema, table)].columns)
        rows.createOrReplaceTempView(view)
        views[(schema, table)] = view
    try:
        result = spark.sql(pinned_query(model, views))
    finally:
        for view in views.values():
            spark.catalog.dropTempView(view)
    _check_columns(model, result)
    return result


@dataclass(frozen=True)
class ChangedKeys:
    """The keys whose input rows changed: ``frame`` (materialized; columns named as the
    model's ``key``), their ``count``, and when they are few (:data:`LITERAL_KEYS`) the
    ``values`` themselves."""

    frame: DataFrame
    key: tuple[str, ...]
    count: int
    values: tuple[tuple[Any, ...], ...] | None

    @staticmethod
    def found(frame: DataFrame, key: Sequence[str]) -> ChangedKeys:
        """The keys in ``frame``: collected when few (one Spark job), else counted."""
        few = frame.limit(LITERAL_KEYS + 1).collect()
        plain = all(v is None or isinstance(v, _LITERALS) for row in few for v in row)
        if len(few) <= LITERAL_KEYS and plain:
            values = tuple(tuple(row) for row in few)
            return ChangedKeys(frame, tuple(key), len(values), values)
        return ChangedKeys(frame, tuple(key), frame.count(), None)

    def literal(self, columns: Sequence[Column]) -> Column | None:
        """Whether ``columns`` hold one of the keys, as a filter of literals (None: too many)."""
        if self.values is None:
            return None
        if len(columns) == 1:
            present = [v for (v,) in self.values if v is not None]
            found = columns[0].isin(present) if present else F.lit(False)
            return found | columns[0].isNull() if len(present) < self.count else found
        rows = [
            reduce(
                Column.__and__,
                [
                    c.isNull() if v is None else c == F.lit(v)
                    for c, v in zip(columns, t, strict=True)
                ],
            )
            for t in self.values
        ]
        return reduce(Column.__or__, rows, F.lit(False))

    def rows_of(self, rows: DataFrame, columns: Sequence[str]) -> DataFrame:
        """The ``rows`` whose ``columns`` hold one of the keys, null-safely."""
        literal = self.literal([rows[c] for c in columns])
        if literal is not None:
            return rows.where(literal)
        renamed = self.frame.select(
            *(F.col(k).alias(f"__model_key_{i}") for i, k in enumerate(self.key))
        )
        if self.count <= BROADCAST_KEYS:
            renamed = F.broadcast(renamed)
        same = reduce(
            Column.__and__,
            [rows[c].eqNullSafe(renamed[f"__model_key_{i}"]) for i, c in enumerate(columns)],
        )
        return rows.join(renamed, same, "left_semi")


def changed_keys(
    spark: SparkSession,
    warehouse: Warehouse,
    model: SqlModel,
    plan: IncrementalPlan,
    before: InputVersions,
    after: InputVersions,
) -> DataFrame | str | None:
    """The keys (columns named as the model's key, each once, materialized) of the input rows
    that changed from the versions ``before`` to ``after``, as the inputs' change feeds show
    them (a row's key before and after an update); None when no input of ``plan`` moved; or
    why they cannot be known (an input replaced, or without a readable change feed over those
    versions)."""
    feeds = []
    for keyed in plan.inputs:
        was, now = before.get(keyed.name), after[keyed.name]
        if was is None or was[0] != now[0]:
            return f"{keyed.name} is another table than at the last refresh"
        if now[1] == was[1]:
            continue
        path = warehouse.table(keyed.schema, keyed.table)  # type: ignore[arg-type]
        if now[1] < was[1] or not table_flag(spark, path, CHANGE_FEED):
            return f"{keyed.name} has no change feed since the last refresh"
        feed = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", was[1] + 1)
            .option("endingVersion", now[1])
        )
        named = zip(keyed.columns, model.key, strict=True)
        try:  # the feed off for some of those versions, or no such column (the query says)
            feeds.append(feed.load(path).select(*(F.col(c).alias(k) for c, k in named)))
        except PySparkException as error:
            return f"{keyed.name}'s change feed cannot be read ({error.getCondition()})"
    if not feeds:
        return None
    types = {tuple(f.dataType for f in feed.schema.fields) for feed in feeds}
    if len(types) > 1:
        return "its join's key columns differ in type"
    try:
        return reduce(DataFrame.unionByName, feeds).distinct().localCheckpoint()
    except PySparkException as error:  # e.g. a version's change files vacuumed
        return f"the inputs' change feeds cannot be read ({error.getCondition()})"


def _check_columns(model: SqlModel, result: DataFrame) -> None:
    bad = [c for c in result.columns if not is_plain_identifier(c)]
    if bad:
        raise ConfigError(
            f"Model {model.name!r}: its query gives column(s) {', '.join(map(repr, bad))}, "
            "which a table cannot hold; name each computed column with AS (e.g. "
            "count(*) AS orders)."
        )
    repeated = sorted({c for c in result.columns if result.columns.count(c) > 1})
    if repeated:
        raise ConfigError(
            f"Model {model.name!r}: its query gives column(s) {', '.join(repeated)} more than "
            "once; give each output column its own name with AS."
        )
    missing = [k for k in model.key if k not in result.columns]
    if missing:
        raise ConfigError(
            f"Model {model.name!r}: key column(s) {', '.join(missing)} are not columns of its "
            f"result ({', '.join(result.columns)}). Fix 'key' or the SELECT."
        )


def recorded_state(
    spark: SparkSession,
    warehouse: Warehouse,
    model: SqlModel,
    inputs: InputVersions | None = None,
) -> ModelState | None:
    """The state of the model's last refresh: the recorded file, or the newer state in the
    table's last commit when a refresh stopped between its commit and the file (then the file
    is written now). None when the model's table does not exist.

    With the current ``inputs``: a file that records them is taken as is (it is written after
    its commit, and inputs only move forward), without reading the table's history."""
    path = warehouse.table("gold", model.name)
    if not table_exists(spark, path):
        return None
    state = ModelState.from_json(
        storage.read_text(spark, state_path(warehouse, model.name)), model.name
    )
    if state is not None and inputs is not None and is_current(state, model, inputs):
        return state
    newest = next(newest_commit_messages(spark, path, 1), None)
    committed = None if newest is None else ModelState.from_json(newest[1], model.name)
    if committed is not None and (
        state is None
        or (committed.generation == state.generation and committed.refresh > state.refresh)
    ):
        storage.write_text(spark, state_path(warehouse, model.name), committed.to_json())
        return committed
    return state


def refresh(spark: SparkSession, warehouse: Warehouse, model: SqlModel) -> Refreshed:
    """Bring ``gold.<name>`` up to date with the model's inputs (see the module docstring).

    Raises:
        ConfigError: the query's result cannot be the model's table (columns, key not unique).
        Exception: Spark's error when the query fails (an unknown column, a type error).
    """
    inputs, missing = input_versions(spark, warehouse, model)
    if missing:
        return Refreshed(model.name, Outcome.WAITING, tuple(missing))
    state = recorded_state(spark, warehouse, model, inputs)
    if is_current(state, model, inputs):
        return Refreshed(model.name, Outcome.CURRENT)
    generation = uuid.uuid4().hex[:12] if state is None else state.generation
    number = 1 if state is None else state.refresh + 1
    new = ModelState(model.name, model.digest, generation, number, inputs)
    if not model.key:
        why = "it has no key"
    elif state is None:
        why = "its first refresh"
    elif state.digest != model.digest:
        why = "its SQL or key changed"
    else:
        done = _refresh_keys(spark, warehouse, model, state, new)
        if isinstance(done, Refreshed):
            return done
        why = done
    result = evaluate_at(spark, warehouse, model, inputs)
    path = warehouse.table("gold", model.name)
    changed = None
    if model.key:
        result = result.localCheckpoint()  # evaluated once: checked, compared, written
        _require_unique_key(model, result)
        if table_exists(spark, path):
            changed = _merge_changes(spark, path, model, result, new)
    if changed is None:
        (
            result.write.format("delta")
            .mode("overwrite")
            .option("overwriteSchema", "true")
            .option("txnAppId", new.app_id)
            .option("txnVersion", new.refresh)
            .option("userMetadata", new.to_json())
            .save(path)
        )
    storage.write_text(spark, state_path(warehouse, model.name), new.to_json())
    outcome = Outcome.UNCHANGED if changed == 0 else Outcome.WRITTEN
    return Refreshed(model.name, outcome, rows_changed=changed, how=f"full recompute: {why}")


def _refresh_keys(
    spark: SparkSession, warehouse: Warehouse, model: SqlModel, state: ModelState, new: ModelState
) -> Refreshed | str:
    """Refresh a keyed model from the table its last refresh (``state``) wrote, for the keys
    whose input rows changed since; or why it must be recomputed whole (nothing written)."""
    plan = incremental_plan(model)
    if isinstance(plan, str):
        return plan
    keys = changed_keys(spark, warehouse, model, plan, state.inputs, new.inputs)
    if isinstance(keys, str):
        return keys
    found = None if keys is None else ChangedKeys.found(keys, model.key)
    count = 0 if found is None else found.count
    how = f"incremental: {count} changed key(s), {plan.shape}"
    path = warehouse.table("gold", model.name)
    changed: int | None = 0
    if found is not None and count:
        only = (plan, found)
        result = evaluate_at(spark, warehouse, model, new.inputs, only).localCheckpoint()
        _require_unique_key(model, result)
        changed = _merge_changes(spark, path, model, result, new, found)
        if changed is None:
            return "its result's columns or types changed"
    storage.write_text(spark, state_path(warehouse, model.name), new.to_json())
    outcome = Outcome.UNCHANGED if changed == 0 else Outcome.WRITTEN
    return Refreshed(model.name, outcome, rows_changed=changed, how=how)


def _merge_changes(
    spark: SparkSession,
    path: str,
    model: SqlModel,
    result: DataFrame,
    new: ModelState,
    keys: ChangedKeys | None = None,
) -> int | None:
    """MERGE only the rows of ``result`` that differ from the table at ``path`` (of its rows
    whose key is one of ``keys``, if given; few keys also bound the MERGE's scan), in one
    commit marked with ``new``; the number of rows written (0: no commit), or None when the
    result's columns or types differ from the table's (the caller overwrites it). ``result``
    is materialized, its key unique."""
    current = spark.read.format("delta").load(path)
    shape = [(f.name, f.dataType) for f in result.schema.fields]
    if shape != [(f.name, f.dataType) for f in current.schema.fields]:
        return None
    if keys is not None:
        current = keys.rows_of(current, model.key)
    changes = changed_rows(result, current, model.key).localCheckpoint()
    count = changes.count()
    if count == 0:
        return 0
    # The commit's mark and transaction id are settings of a session of its own: the run's
    # session is shared with the event log's thread and, under a pipeline handle, with the
    # notebook's own writes, which would carry them (and be skipped as already written).
    settings = {TXN_APP_ID: new.app_id, TXN_VERSION: str(new.refresh), USER_METADATA: new.to_json()}
    own = session_copy(spark, settings)
    changes = in_session(changes, own)
    set_columns: dict[str, str | Column] = {c: F.col(f"s.{c}") for c in result.columns}
    matches = _same("t", "s", model.key)
    bound = None if keys is None else keys.literal([F.col(f"t.{k}") for k in model.key])
    merge = (
        DeltaTable.forPath(own, path)
        .alias("t")
        .merge(changes.alias("s"), matches if bound is None else matches & bound)
        .whenMatchedDelete(condition=F.col(f"s.{CHANGE}") == "delete")
        .whenMatchedUpdate(set=set_columns)
        .whenNotMatchedInsert(condition=F.col(f"s.{CHANGE}") == "upsert", values=set_columns)
    )
    merge_materialized(merge, changes)
    return count


def _require_unique_key(model: SqlModel, result: DataFrame) -> None:
    """Raise ConfigError if two rows of ``result`` have the same ``key`` (null-safe)."""
    twice = result.groupBy(*model.key).count().where(F.col("count") > 1).first()
    if twice is not None:
        found = {k: twice[k] for k in model.key}
        raise ConfigError(
            f"Model {model.name!r}: its key ({', '.join(model.key)}) is not unique in the "
            f"result ({found} is in {twice['count']} rows). Fix 'key' or the query."
        )


def ordered_models(config: PipelineConfig) -> tuple[SqlModel, ...]:
    """The config's models in refresh order, checked together with its gold tables (a config
    built in Python gets the checks ``load_config`` makes).

    Raises:
        ConfigError: see :func:`lakehouse_core.models.check_models`.
    """
    return check_models(config.models, config.taken_gold_names)


def model_query(name: str) -> str:
    """The name a model's refresh has in failures and the event log (``model_<name>``)."""
    return f"model_{name}"


def refresh_models(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    said: set[str] | None = None,
    only: Iterable[str] | None = None,
) -> list[TableFailure]:
    """Refresh every model of ``config`` (of ``only``, if given) in dependency order; a model
    that fails is one :class:`TableFailure` (``gold.<name>``) and the others go on. A model
    whose inputs do not exist yet waits (said once per ``said``). What each model did is logged at
    INFO (logger ``gold.models``)."""
    failures = []
    wanted = None if only is None else set(only)
    said = set() if said is None else said
    for model in ordered_models(config):
        if wanted is not None and model.name not in wanted:
            continue
        try:
            done = refresh(spark, warehouse, model)
        except Exception as error:
            failed = TableFailure(
                model_query(model.name), f"gold.{model.name}", Failure.of(error), datetime.now(UTC)
            )
            failures.append(failed)
            continue
        _say(done, said)
    return failures


def _say(done: Refreshed, said: set[str]) -> None:
    if done.outcome is Outcome.WAITING:
        line = f"gold: model {done.model} waits for {', '.join(done.missing)}"
        if line not in said:
            said.add(line)
            log.info(line)
    elif done.outcome is Outcome.WRITTEN:
        parts = [] if done.rows_changed is None else [f"{done.rows_changed} rows changed"]
        parts += [done.how] if done.how else []
        rows = f" ({'; '.join(parts)})" if parts else ""
        log.info(f"gold: model {done.model} refreshed{rows}")
    elif done.outcome is Outcome.UNCHANGED and done.how:
        log.info(f"gold: model {done.model} unchanged ({done.how})")


@dataclass
class ModelRetries:
    """The models of a continuous run that failed, and when each is tried again: after
    ``delay(attempts)`` seconds (the run's backoff), while the others refresh as usual."""

    delay: Callable[[int], float]
    failing: dict[str, TableFailure] = field(default_factory=dict)
    _due: dict[str, float] = field(default_factory=dict)

    def due(self, names: Iterable[str], now: float) -> list[str]:
        """The models of ``names`` to refresh at ``now`` (monotonic seconds)."""
        return [n for n in names if self._due.get(n, 0.0) <= now]

    def failed(self, failure: TableFailure, now: float) -> TableFailure:
        """Note ``failure`` (of ``model_<name>``); returns it with its attempt and retry time."""
        name = failure.query.removeprefix("model_")
        previous = self.failing.get(name)
        attempts = 1 if previous is None else previous.attempts + 1
        wait = self.delay(attempts)
        retry_at = failure.at + timedelta(seconds=wait)
        noted = TableFailure(
            failure.query, failure.table, failure.failure, failure.at, attempts, retry_at
        )
        self.failing[name] = noted
        self._due[name] = now + wait
        return noted

    def succeeded(self, name: str) -> TableFailure | None:
        """Forget the failure of ``name``; returns it if there was one."""
        self._due.pop(name, None)
        return self.failing.pop(name, None)


# --- verify ----------------------------------------------------------------------------------


@dataclass
class ModelCheck(TableCheck):
    """A model's check; ``note`` says why it was not compared (it is behind its inputs)."""

    note: str = ""


def check_model(spark: SparkSession, warehouse: Warehouse, model: SqlModel) -> ModelCheck | None:
    """``gold.<name>`` against its query over the current input tables, when its recorded
    input versions are the current ones (else a note says how far behind it is; not a
    difference). None when the model or an input does not exist. Logs one progress line
    (``verify: gold.<name> ...``) when it checks."""
    path = warehouse.table("gold", model.name)
    inputs, missing = input_versions(spark, warehouse, model)
    if missing or not table_exists(spark, path):
        return None
    log.info(f"verify: gold.{model.name} against its SQL over the current inputs")
    check = ModelCheck(table=model.name, layer="gold")
    state = recorded_state(spark, warehouse, model, inputs)
    if not is_current(state, model, inputs):
        behind = None if state is None else versions_behind(state, inputs)
        how = "its inputs were replaced" if behind is None else f"by {behind} input version(s)"
        changed = "" if state is None or state.digest == model.digest else " and its SQL changed"
        check.note = f"behind {how}{changed}: not compared; the next run refreshes it"
        return check
    expected = _comparable(evaluate_at(spark, warehouse, model, inputs))
    actual = _comparable(spark.read.format("delta").load(path))
    if expected.columns != actual.columns:
        check.differences.append(
            f"columns {actual.columns}, expected {expected.columns} (its query's)"
        )
        return check
    tagged = expected.withColumns({"__e": F.lit(1), "__a": F.lit(0)}).unionByName(
        actual.withColumns({"__e": F.lit(0), "__a": F.lit(1)})
    )
    counted = (
        tagged.groupBy(*expected.columns)
        .agg(F.sum("__e").alias("__e"), F.sum("__a").alias("__a"))
        .localCheckpoint()
    )
    totals = counted.agg(F.sum("__e").alias("e"), F.sum("__a").alias("a")).first()
    assert totals is not None
    check.expected_rows, check.actual_rows = int(totals.e or 0), int(totals.a or 0)
    for kind, more, fewer in (("missing", "__e", "__a"), ("unexpected", "__a", "__e")):
        surplus = counted.where(F.col(more) > F.col(fewer)).limit(MAX_REPORTED).collect()
        lines = [
            f"{kind} row { {c: row[c] for c in expected.columns} }"
            for row in surplus
            for _ in range(row[more] - row[fewer])
        ]
        check.differences += lines[: MAX_REPORTED - len(check.differences)]
    return check


def _comparable(frame: DataFrame) -> DataFrame:
    def column(name: str, kind: Any) -> Column:
        if isinstance(kind, DoubleType | FloatType):
            return F.round(F.col(name), DOUBLE_DIGITS).alias(name)
        return F.col(name)

    return frame.select(*(column(f.name, f.dataType) for f in frame.schema.fields))


def check_models_of(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig
) -> list[ModelCheck]:
    """:func:`check_model` of each model of ``config`` that exists with its inputs."""
    checks = [check_model(spark, warehouse, model) for model in ordered_models(config)]
    return [check for check in checks if check is not None]
