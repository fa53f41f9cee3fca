"""``lakehouse serve``: a JDBC/ODBC SQL endpoint (Spark's Thrift server) over the warehouse."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from lakehouse.cli.common import (
    CONFIG,
    EXISTING_WAREHOUSE,
    console,
    declarations,
    given_config,
    spark_options,
)

#: Signals that stop the server (it then exits 0).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@click.command()
@EXISTING_WAREHOUSE
@CONFIG
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; only this machine can connect to the default.",
)
@click.option(
    "--port",
    default=10000,
    show_default=True,
    type=click.IntRange(1, 65535),
    help="TCP port (10000 is HiveServer2's usual port).",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Let clients change silver and gold tables (never bronze; never files by path).",
)
@spark_options
def serve(
    warehouse: str,
    config_path: Path | None,
    host: str,
    port: int,
    allow_writes: bool,
    spark_mode: str,
    master: str | None,
) -> None:
    """Serve the warehouse's tables to JDBC/ODBC clients and BI tools (HiveServer2 protocol,
    URL jdbc:hive2://HOST:PORT/default), read-only unless --allow-writes; stops on SIGTERM
    or Ctrl-C."""
    from lakehouse.sql.serve import require_free, scratch_dir, serve, session_settings
    from lakehouse_core.layout import Warehouse
    from lakehouse_core.spark import get_spark

    given = given_config(config_path)
    require_free(host, port)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in STOP_SIGNALS}
    try:
        with console.status("starting Spark"):
            spark = get_spark(
                mode=spark_mode,  # type: ignore[arg-type]
                master=master,
                app_name="cdc-lakehouse-serve",
                extra_conf=session_settings(scratch_dir(), spark_mode),
            )
        spark.sparkContext.setLogLevel("ERROR")
        config = declarations(given, warehouse, spark).config
        serve(
            spark,
            Warehouse.from_path(warehouse),
            config.catalog,
            host,
            port,
            stop,
            allow_writes,
            said=lambda line: console.print(line, markup=False, highlight=False),
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    console.print("stopped", markup=False)
