"""``lakehouse serve``: Spark's Thrift JDBC/ODBC server (HiveServer2 protocol) over the
warehouse's tables, every statement checked by :mod:`lakehouse_core.sql_guard` before Spark
parses it.

How the check is hooked in (Spark 4.0, no Scala code of ours): the server gets a session of its
own whose ``SparkSessionExtensions`` carry one more parser, a Python object behind a Py4J proxy
(:class:`GuardedParser`) that wraps Spark's (and Delta's) parser. Each client connection gets
``newSession()`` of that session (``spark.sql.hive.thriftServer.singleSession=false``), which
builds its parser from the same extensions, so the text of every statement a client sends goes
through :func:`refusal` first. A refused statement is replaced by ``SELECT raise_error(<why>)``:
the client gets the reason as its error. What guards what:

- writes (INSERT, UPDATE, DELETE, MERGE, CREATE, ALTER, DROP, ...): refused by the read-only
  rule unless ``allow_writes``; then refused on bronze and on paths (the sql_guard rules);
- reads of files by path (``text.`/etc/hostname```, ``delta.`/wh/bronze/x```, ``read_files``):
  refused by the guard in every mode, and ``spark.sql.runSQLOnFiles=false`` makes Spark refuse
  any it did not recognise;
- ``SET key=value``: refused (the server's settings are fixed when it starts); before each
  statement the guard also resets the settings that keep it sound (no ``${...}`` substitution,
  no SQL on files) in the client's session, in case a JDBC URL set them when it connected;
- code (ADD JAR, CREATE FUNCTION, ``reflect``) and whatever the guard cannot parse: refused.

Catalog browsing (JDBC ``getTables``/``getColumns``) does not parse SQL and only reads names.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import SparkSession
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import SqlglotError

from lakehouse.sql.session import SQL_ON_FILES, SUBSTITUTE
from lakehouse_core.catalog import register_tables
from lakehouse_core.config import CatalogSpec
from lakehouse_core.errors import EnvironmentSetupError
from lakehouse_core.layout import Warehouse
from lakehouse_core.spark import DRIVER_JAVA_OPTIONS, local_delta_jars
from lakehouse_core.sql_guard import Kind, classify
from lakehouse_core.sql_guard import refusal as guard_refusal

#: Settings the guard relies on, fixed in every client session.
GUARD_SETTINGS = {SQL_ON_FILES: "false", SUBSTITUTE: "false"}
#: Seconds between two looks for tables created since the server started.
REFRESH_SECONDS = 10.0
#: Seconds to wait for the server to listen.
START_SECONDS = 120.0

_THRIFT_SERVER = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
_DIALECT = Spark()


def session_settings(scratch: Path, mode: str) -> dict[str, str]:
    """Spark settings of the session ``lakehouse serve`` starts (``scratch``: a directory of
    its own, for the Hive client's ``derby.log``).

    The Thrift server opens client sessions in threads whose class loader sees only the
    driver's class path, so in ``local-jars`` mode the Delta jars go there too.
    """
    options = f"{DRIVER_JAVA_OPTIONS} -Dderby.stream.error.file={scratch}/derby.log"
    settings = {
        **GUARD_SETTINGS,
        "spark.sql.hive.thriftServer.singleSession": "false",
        "spark.driver.extraJavaOptions": options,
    }
    if mode in ("auto", "local-jars"):
        jars = os.pathsep.join(str(jar) for jar in local_delta_jars())
        settings["spark.driver.extraClassPath"] = jars
    return settings


def scratch_dir() -> Path:
    """A new temporary directory for the server's Hive client files."""
    return Path(tempfile.mkdtemp(prefix="lakehouse-serve-"))


def refusal(text: str, allow_writes: bool, catalog: CatalogSpec) -> str | None:
    """Why ``lakehouse serve`` does not run ``text`` (one line), or None if it may."""
    statement = classify(text)
    why = guard_refusal(statement, allow_writes=allow_writes, protected={catalog.schema("bronze")})
    if why is None and statement.file_reads:
        why = (
            f"lakehouse serve does not read files by path ({', '.join(statement.file_reads)}). "
            "Query the warehouse's tables by name (bronze.<table>, silver.<table>, gold.<table>)."
        )
    if why is None and statement.kind is Kind.SESSION and _assigns(text):
        why = (
            "lakehouse serve does not change settings (SET key=value): they are fixed when the "
            "server starts. SET alone, or SET <key>, shows them."
        )
    # The guard's messages name `lakehouse sql`, the command it was written for.
    return None if why is None else why.replace("lakehouse sql", "lakehouse serve")


def _assigns(text: str) -> bool:
    """Whether a SET statement assigns a value (``SET k=v``), as opposed to showing one."""
    try:
        trees = _DIALECT.parse(text)
    except SqlglotError:
        return True
    tree = trees[0] if trees else None
    if isinstance(tree, exp.Set):
        return bool(tree.expressions)
    if isinstance(tree, exp.Command):
        rest = tree.expression.name if isinstance(tree.expression, exp.Expr) else ""
        return "=" in rest
    return False


def refused_plan_text(why: str) -> str:
    """The statement run instead of a refused one: it fails with ``why`` as its message."""
    return exp.select(exp.func("raise_error", exp.Literal.string(why))).sql(dialect=_DIALECT)


class GuardedParser:
    """Spark's ``ParserInterface`` (through Py4J): checks each statement, then hands it to
    Spark's own parser (``delegate``); every other kind of parsing goes straight to it."""

    def __init__(
        self,
        session: Any,
        delegate: Any,
        check: Callable[[str], str | None],
        refused: Callable[[str], None],
    ) -> None:
        self._session, self._delegate = session, delegate
        self._check, self._refused = check, refused

    def parsePlan(self, text: str) -> Any:
        conf = self._session.conf()
        for key, value in GUARD_SETTINGS.items():
            conf.set(key, value)
        try:
            why = self._check(text)
        except Exception:  # fail closed: a statement the guard cannot judge does not run
            why = "lakehouse serve could not check the statement, so it does not run it."
        if why is not None:
            self._refused(why)
            return self._delegate.parsePlan(refused_plan_text(why))
        return self._delegate.parsePlan(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._delegate, name)

    class Java:
        implements = ("org.apache.spark.sql.catalyst.parser.ParserInterface",)


class GuardedParserBuilder:
    """``(SparkSession, ParserInterface) => ParserInterface`` for ``injectParser``."""

    def __init__(self, check: Callable[[str], str | None], refused: Callable[[str], None]):
        self._check, self._refused = check, refused

    def apply(self, session: Any, delegate: Any) -> GuardedParser:
        return GuardedParser(session, delegate, self._check, self._refused)

    class Java:
        implements = ("scala.Function2",)


def require_free(host: str, port: int) -> None:
    """Raise if nothing can listen on ``host:port``.

    Raises:
        EnvironmentSetupError: the port is taken or the host is not an address of this machine.
    """
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError as error:
            raise EnvironmentSetupError(
                f"lakehouse serve cannot listen on {host}:{port} ({error.strerror}): pick "
                "another --port, or a --host address of this machine."
            ) from None


def serve(
    spark: SparkSession,
    warehouse: Warehouse,
    catalog: CatalogSpec,
    host: str,
    port: int,
    stop: threading.Event,
    allow_writes: bool = False,
    said: Callable[[str], None] = lambda _: None,
    refresh_seconds: float = REFRESH_SECONDS,
) -> None:
    """Serve the warehouse's tables over JDBC/ODBC at ``host:port`` until ``stop`` is set.

    Tables created while it runs get their names within ``refresh_seconds``; ``said`` hears
    that the server listens and each refusal.

    Raises:
        EnvironmentSetupError: the port is taken, or the server did not start listening.
        ConfigError: a table's name is held by someone else's table.
    """
    require_free(host, port)
    register_tables(spark, warehouse, catalog)
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]

    def check(text: str) -> str | None:
        return refusal(text, allow_writes, catalog)

    jsession = spark._jsparkSession
    jsession.extensions().injectParser(
        GuardedParserBuilder(check, lambda why: said(f"refused: {why}"))
    )
    served = jsession.newSession()
    for key, value in {
        "hive.server2.thrift.bind.host": host,
        "hive.server2.thrift.port": str(port),
        **GUARD_SETTINGS,
    }.items():
        served.conf().set(key, value)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    server = getattr(jvm, _THRIFT_SERVER).startWithSparkSession(served, False)
    try:
        _wait_listening(host, port, stop)
        said(f"serving jdbc:hive2://{host}:{port}/default (Ctrl-C or SIGTERM stops)")
        while not stop.wait(refresh_seconds):
            register_tables(spark, warehouse, catalog)
    finally:
        server.stop()


def _wait_listening(host: str, port: int, stop: threading.Event) -> None:
    waited = 0.0
    while not stop.is_set():
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            if waited >= START_SECONDS:
                raise EnvironmentSetupError(
                    f"Spark's Thrift server did not listen on {host}:{port} within "
                    f"{START_SECONDS:.0f} s; the Spark errors printed above say why."
                ) from None
            stop.wait(0.5)
            waited += 0.5
