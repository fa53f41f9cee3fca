"""``lakehouse ui``: the pipeline page (:mod:`lakehouse.ops.pipeline_page`) served on this machine
only, made anew from the warehouse at each request and reloaded by the browser every
``--interval`` seconds, so it follows a pipeline while it runs."""

from __future__ import annotations

import signal
import threading
from datetime import UTC, datetime
from pathlib import Path

import click

from lakehouse.cli.common import CONFIG, EXISTING_WAREHOUSE, console, declarations, given_config

#: Signals that stop the server (it then exits 0).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@click.command()
@EXISTING_WAREHOUSE
@CONFIG
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Loopback address to listen on (the page is for this machine only).",
)
@click.option(
    "--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="TCP port."
)
@click.option(
    "--interval",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=1.0),
    help="Seconds between two reloads of the page in the browser.",
)
def ui(warehouse: str, config_path: Path | None, host: str, port: int, interval: float) -> None:
    """Serve the pipeline page (the graph of `status --html`) at http://HOST:PORT/, read
    from the warehouse at each request without Spark; Ctrl-C stops it."""
    from lakehouse.ops.pipeline_page import pipeline_server, read_batches, render_pipeline_page
    from lakehouse.ops.status import pipeline_status, status_json
    from lakehouse_core.layout import Warehouse

    config = declarations(given_config(config_path), warehouse).config
    place = Warehouse.from_path(warehouse)

    def page() -> str:
        report = pipeline_status(None, place, config, datetime.now(UTC))
        return render_pipeline_page(status_json(report), read_batches(place), interval)

    server = pipeline_server(page, host, port)
    console.print(
        f"pipeline page: http://{host}:{server.server_port}/ (Ctrl-C stops)", markup=False
    )
    for stop in STOP_SIGNALS:  # shutdown() waits for serve_forever: call it from a thread
        signal.signal(stop, lambda *_: threading.Thread(target=server.shutdown).start())
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
