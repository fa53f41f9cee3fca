"""Which SQL models a refresh can recompute for the keys that changed, read from the parsed
query (sqlglot), never from its text.

A model with ``key`` is *key-local* when each row of its result depends only on the input rows
whose key columns hold that row's key: then the keys whose input rows changed since the last
refresh are the only keys whose result rows can change, and recomputing the query over just
those input rows gives exactly those result rows. :func:`incremental_plan` recognizes these
shapes (a single ``SELECT``; each key column a plain column of an input, as is or renamed):

- a projection and filter of one input (``WHERE``, ``DISTINCT``, no aggregate);
- a ``GROUP BY`` over one input whose grouping columns include every key column (``HAVING``
  allowed);
- either of those over an inner join of two inputs, or a left join whose key is the left
  input's, whose ``ON`` equates each key column of one input with a column of the other.

Anything else is recomputed whole, with the reason: ``WITH``, set operations, subqueries,
window functions, ``LIMIT``, ``QUALIFY``, ``LATERAL VIEW``, ``TABLESAMPLE``, ``ROLLUP``/``CUBE``/
``GROUPING SETS``/``GROUP BY ALL``, an aggregate without ``GROUP BY``, a key computed by an
expression, more than two tables or the same table twice, outer joins other than that left
join, joins without an ``ON`` equality of the key, and functions whose value is not a
function of their row (``rand()``, ``current_timestamp()``, ...). Pure: no Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from lakehouse_core.models import SqlModel

#: Functions whose value depends on more than their arguments: a key recomputed alone would
#: not give what a whole recompute gives.
_VOLATILE_NAMES = frozenset(
    {
        "rand",
        "randn",
        "random",
        "uuid",
        "shuffle",
        "now",
        "current_timestamp",
        "current_date",
        "current_time",
        "localtimestamp",
        "unix_timestamp",
        "monotonically_increasing_id",
        "spark_partition_id",
        "input_file_name",
        "input_file_block_start",
        "input_file_block_length",
        "current_user",
        "user",
        "session_user",
    }
)
_VOLATILE_TYPES: tuple[type[exp.Expression], ...] = (
    exp.Rand,
    exp.Randn,
    exp.Uuid,
    exp.CurrentTimestamp,
    exp.CurrentDate,
    exp.CurrentTime,
    exp.CurrentDatetime,
    exp.CurrentUser,
)
#: The parts of a ``SELECT`` a key-local query may have (others, set: recomputed whole).
_ALLOWED_PARTS = frozenset(
    {"kind", "expressions", "from_", "joins", "where", "group", "having", "order", "distinct"}
)


@dataclass(frozen=True)
class KeyedInput:
    """An input table of a key-local model and its columns that hold the model's key, in the
    order of the model's ``key``."""

    schema: str
    table: str
    columns: tuple[str, ...]

    @property
    def name(self) -> str:
        """``silver.auctions``."""
        return f"{self.schema}.{self.table}"


@dataclass(frozen=True)
class IncrementalPlan:
    """How a key-local model is recomputed for changed keys: its ``inputs`` (each read only
    where its key columns hold a changed key) and the ``shape`` recognized, for the log."""

    inputs: tuple[KeyedInput, ...]
    shape: str


def incremental_plan(model: SqlModel) -> IncrementalPlan | str:
    """The plan that recomputes ``model`` for changed keys only, or why it is recomputed
    whole (one phrase, e.g. ``'it has a window function'``)."""
    if not model.key:
        return "it has no key"
    tree = model.tree()
    if not isinstance(tree, exp.Select):
        return "it is not a single SELECT (WITH or a set operation)"
    extra = sorted(k for k, v in tree.args.items() if v and k not in _ALLOWED_PARTS)
    if extra:
        named = ", ".join(part.rstrip("_").replace("_", " ").upper() for part in extra)
        return f"it has {named}"
    if tree.args.get("kind"):
        return "it is not a plain SELECT"
    distinct = tree.args.get("distinct")
    if distinct is not None and distinct.args.get("on") is not None:
        return "it has DISTINCT ON"
    reason = _unsupported_node(tree)
    if reason:
        return reason
    tables = list(tree.find_all(exp.Table))
    aliases: dict[str, tuple[str, str]] = {}
    for table in tables:
        if set(k for k, v in table.args.items() if v) - {"this", "db", "alias"}:
            return f"it reads {table.sql()} with a table option (sampling, time travel)"
        alias = (table.alias or table.name).lower()
        if alias in aliases:
            return "it reads the same name twice"
        aliases[alias] = (table.db.lower(), table.name)
    if len(set(aliases.values())) != len(tables) or len(tables) not in (1, 2):
        return "it reads more than two tables, or a table twice"
    sources = _key_sources(tree, model.key, aliases)
    if isinstance(sources, str):
        return sources
    shape = _grouping(tree, sources)
    if shape.startswith("it "):
        return shape
    if len(tables) == 1:
        (only,) = aliases.values()
        columns = tuple(column for _, column in sources)
        return IncrementalPlan((KeyedInput(only[0], only[1], columns),), shape)
    joined = _join_inputs(tree, sources, aliases)
    if isinstance(joined, str):
        return joined
    return IncrementalPlan(joined, f"{shape} over a join on the key")


def _unsupported_node(tree: exp.Select) -> str | None:
    for node in tree.walk():
        if node is tree:
            continue
        if isinstance(node, exp.Select | exp.Subquery | exp.With | exp.SetOperation):
            return "it has a subquery"
        if isinstance(node, exp.Window):
            return "it has a window function"
        if isinstance(node, exp.Lateral | exp.Unnest | exp.Pivot | exp.TableSample):
            return "it has LATERAL VIEW, UNNEST, PIVOT or TABLESAMPLE"
        if isinstance(node, _VOLATILE_TYPES) or (
            isinstance(node, exp.Func) and _function_name(node) in _VOLATILE_NAMES
        ):
            return f"it calls {_function_name(node)}(), whose value is not one of its row"
    return None


def _function_name(node: object) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return type(node).__name__.lower()


def _key_sources(
    tree: exp.Select, key: tuple[str, ...], aliases: dict[str, tuple[str, str]]
) -> list[tuple[str, str]] | str:
    """Per key column, the input (its alias, lower case) and column it is a plain copy of."""
    by_name: dict[str, exp.Expression] = {}
    for projection in tree.expressions:
        by_name.setdefault(projection.alias_or_name.lower(), projection)
    sources = []
    for column in key:
        projection = by_name.get(column.lower())
        source = projection.unalias() if projection is not None else None
        if not isinstance(source, exp.Column) or not isinstance(source.this, exp.Identifier):
            return f"its key column {column} is not a column of an input as it is"
        qualifier = source.table.lower()
        if not qualifier and len(aliases) == 1:
            qualifier = next(iter(aliases))
        if qualifier not in aliases:
            return f"its key column {column} does not name its table (write t.{source.name})"
        sources.append((qualifier, source.name))
    return sources


def _grouping(tree: exp.Select, sources: list[tuple[str, str]]) -> str:
    """The shape's name, or why the grouping is not key-local (a phrase starting ``it``)."""
    group = tree.args.get("group")
    if group is None:
        if any(_has_aggregate(p) for p in tree.expressions) or tree.args.get("having"):
            return "it aggregates without GROUP BY"
        return "a projection of rows"
    if set(k for k, v in group.args.items() if v) != {"expressions"}:
        return "it has ROLLUP, CUBE, GROUPING SETS or GROUP BY ALL"
    grouped = set()
    for expression in group.expressions:
        if isinstance(expression, exp.Column) and isinstance(expression.this, exp.Identifier):
            grouped.add((expression.table.lower(), expression.name.lower()))
        elif _has_aggregate(expression) or isinstance(expression, exp.Cube | exp.Rollup):
            return "it has ROLLUP, CUBE, GROUPING SETS or GROUP BY ALL"
    single = len({alias for alias, _ in sources}) == 1 and not tree.args.get("joins")
    for alias, column in sources:
        if (alias, column.lower()) not in grouped and not (
            single and ("", column.lower()) in grouped
        ):
            return f"it does not GROUP BY its key column {column} (as a column of its input)"
    return "a GROUP BY of the key"


def _has_aggregate(node: exp.Expression) -> bool:
    return any(isinstance(n, exp.AggFunc) for n in node.walk())


def _join_inputs(
    tree: exp.Select, sources: list[tuple[str, str]], aliases: dict[str, tuple[str, str]]
) -> tuple[KeyedInput, ...] | str:
    """The two inputs of a join on the key, each with its key columns."""
    (join,) = tree.args["joins"]
    if set(k for k, v in join.args.items() if v) - {"this", "side", "kind", "on"}:
        return "it joins with USING, NATURAL or a join hint (write ON a.k = b.k)"
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    if kind not in ("", "INNER") or side not in ("", "LEFT"):
        return f"it has a {side or kind} join (only inner joins and left joins keep keys apart)"
    left = tree.args["from_"].this.alias_or_name.lower()
    right = join.this.alias_or_name.lower()
    if side == "LEFT" and any(alias != left for alias, _ in sources):
        return "its key comes from the right side of a LEFT JOIN"
    equal = _on_equalities(join.args.get("on"))
    columns: dict[str, list[str]] = {left: [], right: []}
    for alias, column in sources:
        other = right if alias == left else left
        match = equal.get((alias, column.lower()), {}).get(other)
        if match is None:
            return f"its join does not equate {alias}.{column} with a column of {other}"
        columns[alias].append(column)
        columns[other].append(match)
    return tuple(KeyedInput(*aliases[alias], tuple(columns[alias])) for alias in (left, right))


def _on_equalities(on: exp.Expression | None) -> dict[tuple[str, str], dict[str, str]]:
    """From the top-level ``AND``s of ``on``: per (alias, column), the column of each other
    alias it is equal to (``=`` or ``<=>``)."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    conjuncts = list(on.flatten()) if isinstance(on, exp.And) else [on] if on else []
    for conjunct in conjuncts:
        if not isinstance(conjunct, exp.EQ | exp.NullSafeEQ):
            continue
        a, b = conjunct.this, conjunct.expression
        if not all(isinstance(c, exp.Column) and c.table for c in (a, b)):
            continue
        for one, two in ((a, b), (b, a)):
            found.setdefault((one.table.lower(), one.name.lower()), {})[two.table.lower()] = (
                two.name
            )
    return found
