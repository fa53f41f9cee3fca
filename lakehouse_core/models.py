"""SQL models: a gold table defined by one read-only Spark SQL query over bronze, silver and
gold tables (``[[models]]``), kept equal to its query by :mod:`gold.models`.

A model says what a gold declaration cannot (an aggregate of a join, gold over gold). It is
checked when it is declared: its name is a plain identifier; its SQL parses (sqlglot, Spark
dialect) as one read (SELECT, WITH, set operations) that :mod:`lakehouse_core.sql_guard` lets run
(no write, no read of files by path, no Java call, no ``IDENTIFIER(...)``); every table it reads
is ``bronze.<t>``, ``silver.<t>`` or ``gold.<t>`` with a plain name; its ``key`` columns are
plain names (and output columns of the query, where its projections name them).
:func:`check_models` then checks a pipeline's models together: names unique and free, and the
models that read each other in an order without cycles. Pure: no Spark.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError

from lakehouse_core.alerting import AlertSpec
from lakehouse_core.errors import ConfigError
from lakehouse_core.identifiers import is_plain_identifier, require_identifier
from lakehouse_core.layout import LATE_EVENTS
from lakehouse_core.sql_guard import DIALECT, Kind, classify

#: The schemas a model may read, as it names them.
MODEL_SCHEMAS = ("bronze", "silver", "gold")
#: The gold table of the alerts (:mod:`gold.alerts`; the ground cannot import it).
ALERTS_TABLE = "alerts"
_ALLOWED = "bronze.<table>, silver.<table> or gold.<table>"


@dataclass(frozen=True)
class SqlModel:
    """A gold table ``gold.<name>`` that holds the result of ``sql``.

    ``key``: columns that identify a row of the result; with them a refresh writes only the
    rows that changed (a MERGE), without them it replaces the table. ``sql`` is kept as
    written; :attr:`inputs` are the tables it reads.

    Raises:
        ConfigError: one line naming the problem and the fix (see the module docstring).
    """

    name: str
    sql: str
    key: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.key, str | list):
            object.__setattr__(
                self, "key", (self.key,) if isinstance(self.key, str) else tuple(self.key)
            )
        require_identifier(self.name, "model name")
        if not isinstance(self.sql, str) or not self.sql.strip():
            raise ConfigError(
                f"Model {self.name!r} needs 'sql': one SELECT over {_ALLOWED} tables."
            )
        tree = _read_tree(self.name, self.sql)
        object.__setattr__(self, "_inputs", _inputs_of(self.name, tree))
        self._check_key(tree)

    @property
    def inputs(self) -> tuple[tuple[str, str], ...]:
        """The tables the query reads, as ``(schema, table)``, sorted, each once."""
        inputs: tuple[tuple[str, str], ...] = object.__getattribute__(self, "_inputs")
        return inputs

    @property
    def digest(self) -> str:
        """A digest of what the model's table holds (its SQL and key): a refresh after either
        changed recomputes, even over the same input versions."""
        text = json.dumps({"sql": self.sql, "key": list(self.key)})
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def reads_models(self, names: Iterable[str]) -> list[str]:
        """Which of the models ``names`` this one reads (``gold.<name>``)."""
        wanted = set(names)
        return [table for schema, table in self.inputs if schema == "gold" and table in wanted]

    def tree(self) -> exp.Query:
        """The parsed query (a fresh tree each call: callers may rewrite it)."""
        return _read_tree(self.name, self.sql)

    def _check_key(self, tree: exp.Query) -> None:
        if not all(isinstance(column, str) for column in self.key):
            raise ConfigError(
                f"Model {self.name!r}: 'key' must be a list of column names, not {self.key!r}."
            )
        for column in self.key:
            if not is_plain_identifier(column):
                raise ConfigError(
                    f"Model {self.name!r}: key column {column!r} is not a plain name; use "
                    "letters, digits and underscores, as the query names its output column."
                )
        repeated = sorted({c for c in self.key if self.key.count(c) > 1})
        if repeated:
            raise ConfigError(
                f"Model {self.name!r}: 'key' lists {', '.join(repeated)} more than once; "
                "name each key column once."
            )
        selected = list(tree.named_selects)
        if "*" not in selected:
            unnamed = [s or "(an expression)" for s in selected if not is_plain_identifier(s)]
            if unnamed:
                raise ConfigError(
                    f"Model {self.name!r}: its query has output column(s) without a plain "
                    f"name ({', '.join(unnamed)}); name each computed column with AS, e.g. "
                    "count(*) AS orders."
                )
            lowered = [s.lower() for s in selected]
            twice = sorted({s for s in selected if lowered.count(s.lower()) > 1})
            if twice:
                raise ConfigError(
                    f"Model {self.name!r}: its query gives column(s) {', '.join(twice)} more "
                    "than once; give each output column its own name with AS."
                )
        if self.key and "*" not in selected:
            missing = [c for c in self.key if c.lower() not in {s.lower() for s in selected}]
            if missing:
                raise ConfigError(
                    f"Model {self.name!r}: key column(s) {', '.join(missing)} are not columns "
                    f"of its query (it selects {', '.join(selected)}). Fix 'key' or the SELECT."
                )


def _read_tree(name: str, sql: str) -> exp.Query:
    """The query of model ``name``, if the SQL guard lets it run as a read.

    Raises:
        ConfigError: it does not parse, is not one read, or reads files or calls Java.
    """
    statement = classify(sql)
    where = f"Model {name!r}"
    if statement.kind is Kind.UNKNOWN:
        problem = statement.problem.removeprefix("lakehouse sql ")
        first = problem.split(", so it")[0].split(". ")[0].rstrip(".")
        raise ConfigError(
            f"{where}: its SQL is refused: the SQL guard {first}. Write one SELECT over "
            f"{_ALLOWED} tables."
        )
    if statement.kind is Kind.CODE:
        raise ConfigError(
            f"{where}: its SQL calls {statement.verb}, which {statement.problem}; a model "
            "runs only SQL the guard can check. Remove the call."
        )
    if statement.kind is not Kind.READ:
        raise ConfigError(
            f"{where}: its SQL ({statement.verb}) {statement.effect}; a model is one "
            "read-only SELECT (its refresh writes gold.<name> itself)."
        )
    if statement.verb != "SELECT":
        raise ConfigError(
            f"{where}: its SQL ({statement.verb}) is not a query; a model is one SELECT "
            "(WITH and UNION / INTERSECT / EXCEPT allowed)."
        )
    if statement.file_reads:
        raise ConfigError(
            f"{where}: its SQL reads files by path ({', '.join(statement.file_reads)}); read "
            f"tables by name instead: {_ALLOWED}."
        )
    try:
        trees = [tree for tree in DIALECT.parse(sql) if tree is not None]
    except SqlglotError:  # classify parsed it already; kept for safety
        raise ConfigError(f"{where}: its SQL does not parse. Write one SELECT.") from None
    tree = trees[0] if len(trees) == 1 else None
    if not isinstance(tree, exp.Query):
        raise ConfigError(
            f"{where}: its SQL ({statement.verb}) is not a query; a model is one SELECT "
            "(WITH and UNION / INTERSECT / EXCEPT allowed)."
        )
    return tree


def _inputs_of(name: str, tree: exp.Query) -> tuple[tuple[str, str], ...]:
    """The ``(schema, table)`` pairs ``tree`` reads; CTE names and row-making table functions
    (``range``, ``explode``: :mod:`lakehouse_core.sql_guard` refused the others) are not tables."""
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    found = set()
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue  # a table function
        schema, table_name = table.db, table.name
        if not schema and not table.catalog and table_name.lower() in ctes:
            continue
        if table.catalog or schema.lower() not in MODEL_SCHEMAS:
            written = table.sql(dialect=DIALECT)
            raise ConfigError(
                f"Model {name!r} reads {written}: a model reads only warehouse tables, named "
                f"{_ALLOWED}. Write the table with its layer, e.g. silver.{table_name}."
            )
        if not is_plain_identifier(table_name):
            raise ConfigError(
                f"Model {name!r} reads {schema}.{table_name!r}: table names are plain names "
                "(letters, digits, underscores). Fix the table name."
            )
        found.add((schema.lower(), table_name))
    if not found:
        raise ConfigError(
            f"Model {name!r} reads no table: a model is a query over {_ALLOWED} tables."
        )
    return tuple(sorted(found))


def reserved_gold_names(
    gold_tables: Iterable[str], alerts: Iterable[AlertSpec] = ()
) -> dict[str, str]:
    """The gold table names a model may not take, each with what holds it."""
    taken = {table: "a gold declaration ([[gold]])" for table in gold_tables}
    taken[LATE_EVENTS] = "the log of late changes (gold.late_events)"
    taken[ALERTS_TABLE] = "the alerts table (gold.alerts)"
    for alert in alerts:
        taken[alert.baseline_table] = f"the baseline of alert {alert.name!r}"
    return taken


def check_models(models: Sequence[SqlModel], taken: Mapping[str, str]) -> tuple[SqlModel, ...]:
    """``models`` in an order where each comes after the models it reads (declaration order
    otherwise).

    ``taken``: the other gold tables of the pipeline, each with what holds it
    (:func:`reserved_gold_names`).

    Raises:
        ConfigError: two models share a name, a model takes the name of another gold table,
            reads a gold table nothing writes, or models read each other in a cycle.
    """
    names = [model.name for model in models]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(
            f"Model names must be unique; repeated: {', '.join(repeated)}. Rename one."
        )
    for model in models:
        if model.name in taken:
            raise ConfigError(
                f"Model name {model.name!r} is taken by {taken[model.name]}: pick another name."
            )
        for schema, table in model.inputs:
            if schema == "gold" and table not in taken and table not in names:
                known = ", ".join(sorted({*taken, *names}))
                raise ConfigError(
                    f"Model {model.name!r} reads gold.{table}, which no gold declaration or "
                    f"model writes. Gold tables: {known}."
                )
    return _ordered(models)


def _ordered(models: Sequence[SqlModel]) -> tuple[SqlModel, ...]:
    """Topological order (depth first, declaration order among independent models).

    Raises:
        ConfigError: naming a cycle (``a -> b -> a``).
    """
    by_name = {model.name: model for model in models}
    done: list[SqlModel] = []
    placed: set[str] = set()

    def visit(model: SqlModel, path: list[str]) -> None:
        if model.name in placed:
            return
        if model.name in path:
            cycle = [*path[path.index(model.name) :], model.name]
            raise ConfigError(
                f"Models read each other in a cycle: {' -> '.join(cycle)} (each reads "
                "gold.<next>). Break it: a model cannot depend on itself."
            )
        for read in model.reads_models(by_name):
            visit(by_name[read], [*path, model.name])
        placed.add(model.name)
        done.append(model)

    for model in models:
        visit(model, [])
    return tuple(done)


def models_to_toml(models: Iterable[SqlModel]) -> list[dict[str, Any]]:
    """``models`` as ``[[models]]`` entries (what :func:`lakehouse_core.loader.model_from` reads
    back)."""
    return [
        {"name": m.name, "sql": m.sql, **({"key": list(m.key)} if m.key else {})} for m in models
    ]
