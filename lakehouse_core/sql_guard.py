"""What a SQL statement may do, decided by parsing it; the read-only and never-bronze rules.

The statement is parsed with sqlglot (Spark dialect), never matched as text, and sorted into:

- **read**: SELECT (with CTEs, set operations, subqueries), VALUES, SHOW, DESCRIBE (also
  ``DESCRIBE HISTORY`` / ``DETAIL``), EXPLAIN of a read;
- **session**: SET, USE, CACHE / UNCACHE TABLE, REFRESH, DECLARE VARIABLE: they change the
  state of the session that runs them, no table;
- **write**: anything that changes a table or the catalog (INSERT, UPDATE, DELETE, MERGE,
  TRUNCATE, LOAD DATA, CREATE, ALTER, DROP, COMMENT ON, ANALYZE, GRANT, ...), with the tables
  it changes;
- **code**: ADD JAR / FILE / ARCHIVE, CREATE FUNCTION and calls of ``reflect`` /
  ``java_method`` / ``try_reflect``: they bring code or files into Spark, which no check of the
  statement can follow;
- **unknown**: text that does not parse, more than one statement, statements sqlglot keeps as
  an opaque command whose keyword is not known to be harmless (OPTIMIZE, VACUUM, MSCK, EXECUTE
  IMMEDIATE, ...), and names given through ``IDENTIFIER(...)``.

:func:`check` applies the rules: without ``allow_writes`` only reads and session statements
run, and no read of files by path (``text.`/etc/hostname```, ``delta.`/wh/bronze/x```,
``read_files(...)``); with it, writes run too, unless a table they change is in a protected
schema (bronze), is named by a path, has no schema, or the write points a table at files
(LOCATION, OPTIONS). Code and unknown statements never run. Everything fails closed: what the
guard cannot tell is refused. Pure: no Spark.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokenizer_core import Token

from lakehouse_core.errors import StatementRefusedError

#: Schemas whose tables ``lakehouse sql`` never changes: bronze is the record everything is
#: rebuilt from, and changes only through ``lakehouse forget`` and ``lakehouse maintain``.
PROTECTED_SCHEMAS = frozenset({"bronze"})

#: Names Spark resolves as a data source in ``<source>.`<path>``` (a read of files by path).
#: A schema part with a dot (a data source class name) or a table part that looks like a path
#: counts too; ``spark.sql.runSQLOnFiles=false`` at run time is the second line of defence.
DATA_SOURCES = frozenset(
    {
        "avro",
        "binaryfile",
        "cloudfiles",
        "csv",
        "delta",
        "deltasharing",
        "hive",
        "hudi",
        "iceberg",
        "image",
        "jdbc",
        "json",
        "kafka",
        "libsvm",
        "noop",
        "orc",
        "parquet",
        "rate",
        "socket",
        "statestore",
        "text",
        "xml",
    }
)

#: Table-valued functions that compute rows from their arguments (no files, no sources).
TABLE_FUNCTIONS = frozenset(
    {
        "EXPLODE",
        "EXPLODE_OUTER",
        "INLINE",
        "INLINE_OUTER",
        "JSON_TUPLE",
        "POSEXPLODE",
        "POSEXPLODE_OUTER",
        "RANGE",
        "SQL_KEYWORDS",
        "STACK",
        "VARIANT_EXPLODE",
        "VARIANT_EXPLODE_OUTER",
    }
)

#: Functions that call Java methods named by their arguments.
JAVA_CALLS = frozenset({"JAVA_METHOD", "REFLECT", "TRY_REFLECT"})

#: EXPLAIN's modes (``EXPLAIN EXTENDED SELECT ...``).
EXPLAIN_MODES = frozenset({"CODEGEN", "COST", "EXTENDED", "FORMATTED", "LOGICAL"})

_READS = (exp.Query, exp.Values, exp.Describe)
_SESSION = (exp.Set, exp.Use, exp.Cache, exp.Uncache, exp.Refresh, exp.Declare)
_CHANGES_DATA = (
    exp.Insert,
    exp.Delete,
    exp.Update,
    exp.Merge,
    exp.TruncateTable,
    exp.LoadData,
)
_CHANGES_TABLES = (
    exp.Create,
    exp.Alter,
    exp.Drop,
    exp.Comment,
    exp.Analyze,
    exp.Grant,
    exp.Revoke,
)
_STATEMENTS = (*_CHANGES_DATA, *_CHANGES_TABLES, exp.Command, exp.Into)
_VERBS: dict[type[exp.Expr], str] = {
    exp.TruncateTable: "TRUNCATE TABLE",
    exp.LoadData: "LOAD DATA",
    exp.Comment: "COMMENT ON",
    exp.Cache: "CACHE TABLE",
    exp.Uncache: "UNCACHE TABLE",
    exp.Into: "SELECT INTO",
}
_SCHEMA_KINDS = frozenset({"SCHEMA", "DATABASE", "NAMESPACE"})
_READ_COMMANDS = frozenset({"SHOW", "DESCRIBE", "DESC"})
_SESSION_COMMANDS = frozenset({"SET", "REFRESH"})
_MAINTENANCE_COMMANDS = frozenset({"OPTIMIZE", "VACUUM", "REORG", "RESTORE"})

_RUNS = (
    "It runs SELECT, SHOW, DESCRIBE and EXPLAIN (with --allow-writes also changes to silver "
    "and gold tables)."
)
_BRONZE_WAY = "bronze changes only through `lakehouse forget` and `lakehouse maintain`"


class Kind(Enum):
    """What a statement does, as far as the rules are concerned."""

    READ = "read"
    SESSION = "session"
    WRITE = "write"
    CODE = "code"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Target:
    """A table (or schema) a write changes, or a directory it writes files to."""

    text: str  # as written in the statement
    schema: str = ""  # lower case; "" when the statement does not name one
    is_path: bool = False


@dataclass(frozen=True)
class Statement:
    """One classified statement.

    ``verb`` names it in messages (``DELETE``, ``DROP TABLE``, ``ADD JAR``); ``targets`` are
    what a write changes; ``file_reads`` the files it reads by path or through a table
    function, as written; ``problem`` says why a code, unknown or unsafe write statement is
    refused, as a sentence for the user.
    """

    verb: str
    kind: Kind
    targets: tuple[Target, ...] = ()
    file_reads: tuple[str, ...] = ()
    problem: str = ""
    effect: str = field(default="changes data")


class _Dialect(Spark):
    """Spark's dialect, plus Delta's ``DESCRIBE DETAIL`` (sqlglot knows only HISTORY)."""

    class Parser(SparkParser):
        DESCRIBE_STYLES = {*SparkParser.DESCRIBE_STYLES, "DETAIL"}  # noqa: RUF012


_DIALECT = _Dialect()
#: The dialect the guard parses with (Spark's, plus ``DESCRIBE DETAIL``): for other checks of
#: the statements it lets run (:mod:`lakehouse_core.models`).
DIALECT: Spark = _DIALECT


def check(
    text: str, *, allow_writes: bool = False, protected: Collection[str] = PROTECTED_SCHEMAS
) -> Statement:
    """The statement in ``text`` if the rules let it run.

    Raises:
        StatementRefusedError: naming what was refused and the way out, if any.
    """
    statement = classify(text)
    message = refusal(statement, allow_writes=allow_writes, protected=protected)
    if message:
        raise StatementRefusedError(message)
    return statement


def refusal(
    statement: Statement, *, allow_writes: bool, protected: Collection[str] = PROTECTED_SCHEMAS
) -> str | None:
    """Why ``statement`` may not run (one line for the user), or None if it may."""
    verb = statement.verb
    if statement.kind is Kind.UNKNOWN:
        return statement.problem
    if statement.kind is Kind.CODE:
        return (
            f"lakehouse sql does not run {verb}: it {statement.problem}, which no check of the "
            "statement can follow. Run such code in a Spark job of your own."
        )
    if statement.kind is Kind.WRITE:
        if not allow_writes:
            return (
                f"lakehouse sql is read-only: {verb} {statement.effect}. Use --allow-writes to "
                f"change silver or gold tables; {_BRONZE_WAY}."
            )
        return statement.problem or _target_refusal(statement, {s.lower() for s in protected})
    if statement.file_reads and not allow_writes:
        return (
            f"lakehouse sql is read-only and does not read files by path "
            f"({', '.join(statement.file_reads)}). Query the warehouse's tables by name "
            "(bronze.<table>, silver.<table>, gold.<table>)."
        )
    return None


def _target_refusal(statement: Statement, protected: set[str]) -> str | None:
    if not statement.targets:
        return (
            f"lakehouse sql cannot tell which table {statement.verb} changes, so it does not "
            "run it."
        )
    for target in statement.targets:
        if target.is_path:
            return (
                f"lakehouse sql does not write to a path ({target.text}). Name the table as "
                "<schema>.<table>, e.g. silver.orders or gold.revenue_per_minute."
            )
        if not target.schema:
            return (
                f"lakehouse sql needs the schema of the table {statement.verb} changes: write "
                f"{target.text} as silver.{target.text} or gold.{target.text}."
            )
        if target.schema in protected:
            return (
                f"lakehouse sql never changes bronze ({statement.verb} on {target.text}): it is "
                "the record silver and gold are rebuilt from. A key's data is removed with "
                "`lakehouse forget`, old records with `lakehouse maintain`."
            )
    return None


def classify(text: str) -> Statement:
    """Parse ``text`` (one Spark SQL statement, an optional trailing ``;``) and classify it."""
    try:
        with _quiet_sqlglot():
            trees = [tree for tree in _DIALECT.parse(text) if tree is not None]
    except ParseError as error:
        return _unknown(
            text,
            f"lakehouse sql could not parse the statement ({_where(error)}), "
            f"so it does not run it. {_RUNS}",
        )
    except SqlglotError as error:
        return _unknown(
            text,
            f"lakehouse sql could not parse the statement ({_first_line(error)}), so it "
            f"does not run it. {_RUNS}",
        )
    except Exception:  # sqlglot fails on some odd input with internal errors: fail closed
        return _unknown(
            text, f"lakehouse sql could not parse the statement, so it does not run it. {_RUNS}"
        )
    if not trees:
        return Statement(
            "",
            Kind.UNKNOWN,
            problem='lakehouse sql got no statement: pass one, e.g. "SELECT * FROM '
            'gold.revenue_per_minute".',
        )
    if len(trees) > 1:
        return Statement(
            "",
            Kind.UNKNOWN,
            problem=f"lakehouse sql runs one statement at a time; this text holds {len(trees)} "
            "(separated by ';'). Run them one by one.",
        )
    return _classify_tree(trees[0], text)


def _classify_tree(root: exp.Expr, text: str) -> Statement:
    if isinstance(root, exp.Command):
        return _classify_command(root, text)
    verb = _verb(root, text)
    if any(_name(call) == "IDENTIFIER" for call in root.find_all(exp.Anonymous)):
        return _unknown(
            text,
            f"lakehouse sql does not run statements that name a table or function through "
            f"IDENTIFIER(...) ({verb}): it cannot check them. Write the name itself.",
            verb,
        )
    java = sorted({_name(call) for call in root.find_all(exp.Func)} & JAVA_CALLS)
    if java:
        return Statement(f"{java[0].lower()}()", Kind.CODE, problem="calls Java methods")
    if isinstance(root, exp.Create) and str(root.args.get("kind") or "").upper() == "FUNCTION":
        return Statement(verb, Kind.CODE, problem="loads a function's code")
    reads = _file_reads(root)
    if isinstance(root, _READS + _SESSION):
        nested = next((node for node in root.find_all(*_STATEMENTS)), None)
        if nested is not None:
            return _unknown(
                text,
                f"lakehouse sql cannot check {verb} with a nested "
                f"{_verb(nested, text)}, so it does not run it.",
                verb,
            )
        kind = Kind.READ if isinstance(root, _READS) else Kind.SESSION
        return Statement(verb, kind, file_reads=reads)
    if isinstance(root, _CHANGES_DATA + _CHANGES_TABLES):
        effect = "changes data" if isinstance(root, _CHANGES_DATA) else "changes tables"
        return Statement(
            verb,
            Kind.WRITE,
            targets=tuple(_targets(root)),
            file_reads=reads,
            problem=_location_problem(root, verb),
            effect=effect,
        )
    return _unknown(
        text,
        f"lakehouse sql does not know the statement {verb}, so it does not run it. {_RUNS}",
        verb,
    )


def _classify_command(command: exp.Command, text: str) -> Statement:
    """A statement sqlglot keeps as a keyword and unparsed text (SHOW, EXPLAIN, ADD JAR, ...)."""
    verb = str(command.this).upper()
    rest = command.expression.name if isinstance(command.expression, exp.Expr) else ""
    if verb == "EXPLAIN":
        return _explain(rest)
    if verb in _READ_COMMANDS:
        return Statement(verb, Kind.READ, file_reads=_path_names(rest))
    if verb in _SESSION_COMMANDS:
        return Statement(verb, Kind.SESSION)
    if verb.split()[0] == "ADD":
        return Statement(verb, Kind.CODE, problem="loads files or code into Spark")
    hint = (
        " OPTIMIZE and VACUUM run through `lakehouse maintain`."
        if verb in _MAINTENANCE_COMMANDS
        else f" {_RUNS}"
    )
    return _unknown(
        text,
        f"lakehouse sql cannot tell what {verb} changes, so it does not run it.{hint}",
        verb,
    )


def _explain(rest: str) -> Statement:
    """``EXPLAIN [mode] statement``: what the explained statement is (EXPLAIN of a read reads)."""
    tokens = _tokens(rest)
    if tokens and tokens[0].text.upper() in EXPLAIN_MODES:
        rest = rest[tokens[0].end + 1 :]
    inner = classify(rest)
    if inner.kind is Kind.UNKNOWN:
        return inner
    effect = "explains a write" if inner.kind is Kind.WRITE else inner.effect
    return Statement(
        f"EXPLAIN {inner.verb}",
        inner.kind,
        targets=inner.targets,
        file_reads=inner.file_reads,
        problem=inner.problem,
        effect=effect,
    )


def _verb(node: exp.Expr, text: str) -> str:
    """The statement's name for messages: ``DELETE``, ``DROP TABLE``, ``INSERT OVERWRITE``."""
    kind = str(node.args.get("kind") or "").upper()
    if isinstance(node, exp.Query):
        return "SELECT"
    if isinstance(node, exp.Insert):
        return "INSERT OVERWRITE" if node.args.get("overwrite") else "INSERT"
    if isinstance(node, exp.Create):
        return f"CREATE {'OR REPLACE ' if node.args.get('replace') else ''}{kind}".strip()
    if isinstance(node, exp.Alter | exp.Drop):
        return f"{node.key.upper()} {kind}".strip()
    if type(node) in _VERBS:
        return _VERBS[type(node)]
    if isinstance(node, _READS + _SESSION + _CHANGES_DATA + _CHANGES_TABLES):
        return node.key.upper()
    tokens = _tokens(text)
    return tokens[0].text.upper() if tokens else ""


def _targets(root: exp.Expr) -> Iterator[Target]:
    """What a write changes: every table it names outside the queries it reads from."""
    schema_level = str(root.args.get("kind") or "").upper() in _SCHEMA_KINDS
    for table in root.find_all(exp.Table):
        if _is_read_part(table, root):
            continue
        text = table.sql(dialect=_DIALECT)
        if _is_path(table):
            yield Target(text, is_path=True)
        elif table.db:
            yield Target(text, schema=table.db.lower())
        elif schema_level:
            yield Target(text, schema=table.name.lower())
        else:
            yield Target(text)
    for directory in root.find_all(exp.Directory):
        yield Target(directory.sql(dialect=_DIALECT), is_path=True)


def _is_read_part(node: exp.Expr, root: exp.Expr) -> bool:
    """Whether ``node`` sits in a part the write only reads: a query, MERGE's source, a
    CLONE's source."""
    child, parent = node, node.parent
    while parent is not None and child is not root:
        if isinstance(parent, exp.Query | exp.CTE | exp.Clone):
            return True
        if isinstance(parent, exp.Merge) and child.arg_key == "using":
            return True
        child, parent = parent, parent.parent
    return False


def _location_problem(root: exp.Expr, verb: str) -> str:
    """A write that points a table at files (LOCATION, OPTIONS): refused, it can alias bronze."""
    located = root.find(exp.LocationProperty, exp.OptionsProperty) is not None or any(
        alter_set.args.get("location") is not None for alter_set in root.find_all(exp.AlterSet)
    )
    if not located:
        return ""
    return (
        f"lakehouse sql does not point tables at files ({verb} with LOCATION or OPTIONS): such "
        "a table could be another name for a bronze table. Create tables by name only."
    )


def _file_reads(root: exp.Expr) -> tuple[str, ...]:
    """Reads of files by path (``text.`/etc/hostname```) or through a table function."""
    reads = []
    for table in root.find_all(exp.Table):
        source = table.this
        if isinstance(source, exp.Func):
            if _name(source) not in TABLE_FUNCTIONS:
                reads.append(f"{_name(source).lower()}(...)")
        elif _is_path(table):
            reads.append(table.sql(dialect=_DIALECT))
    return tuple(reads)


def _is_path(table: exp.Table) -> bool:
    """``<data source>.`<path>```: Spark reads the files at the path (``runSQLOnFiles``)."""
    return _is_path_name(table.db, table.name)


def _is_path_name(schema: str, name: str) -> bool:
    return (
        schema.lower() in DATA_SOURCES
        or "." in schema
        or any(mark in name for mark in ("/", ":", "\\"))
    )


def _path_names(text: str) -> tuple[str, ...]:
    """Path names in the unparsed text of a command (``SHOW COLUMNS IN csv.`/x```)."""
    tokens = _tokens(text)
    found = []
    for before, dot, after in zip(tokens, tokens[1:], tokens[2:], strict=False):
        if dot.text == "." and _is_path_name(before.text, after.text):
            found.append(f"{before.text}.`{after.text}`")
    return tuple(found)


def _tokens(text: str) -> list[Token]:
    try:
        return list(_DIALECT.tokenize(text))
    except SqlglotError:
        return []


def _name(function: exp.Expr) -> str:
    """A function's name in upper case (``read_files``, ``explode_outer`` -> upper)."""
    if isinstance(function, exp.Anonymous):
        return str(function.name).upper()
    return str(function.sql_name()).upper() if isinstance(function, exp.Func) else ""


def _first_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _where(error: ParseError) -> str:
    first = error.errors[0] if error.errors else {}
    if not first:
        return _first_line(error)
    near = (first.get("highlight") or "").strip()
    return f"{first.get('description')} at line {first.get('line')}, column {first.get('col')}" + (
        f", near {near!r}" if near else ""
    )


def _unknown(text: str, problem: str, verb: str = "") -> Statement:
    if not verb:
        tokens = _tokens(text)
        verb = tokens[0].text.upper() if tokens else ""
    return Statement(verb, Kind.UNKNOWN, problem=problem)


@contextmanager
def _quiet_sqlglot() -> Iterator[None]:
    """Silence sqlglot's warning that it keeps a statement as an opaque command."""
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
