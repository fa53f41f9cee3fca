"""A local Kafka-protocol broker for tests and demos: install, start, wait, stop (stdlib only).

The server is noida-db's Kafka emulation (chosen by ``tests/kafka/test_broker_conformance.py``),
installed from PyPI with a pinned hash into its own folder, run on 127.0.0.1 and stopped by the
PID this module recorded, so it never touches another process. Product code never depends on it:
any Kafka works through ``--source kafka:HOST:PORT`` or ``KAFKA_BOOTSTRAP_SERVERS``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lakehouse_core.errors import EnvironmentSetupError
from lakehouse_local.processes import command_line, stop_process, wait_until

PACKAGE = "noida-db==0.2.3"
#: sha256 of noida_db-0.2.3-py3-none-manylinux_2_17_x86_64.whl, the only wheel of that release.
PACKAGE_SHA256 = "40a2fb15567e3d344e7483df62bb439e7d64ac6fb232f4f223554aed58204f82"
DEFAULT_PORT = 19092
HOST = "127.0.0.1"
START_TIMEOUT_S = 60.0


class BrokerError(EnvironmentSetupError):
    """The local broker could not be installed, started or stopped; the message says why."""


@dataclass(frozen=True)
class LocalBroker:
    """A broker folder: ``pkg/`` (the server), ``data/``, ``broker.pid`` and ``broker.log``."""

    home: Path
    port: int = DEFAULT_PORT

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def binary(self) -> Path:
        return self.home / "pkg" / "noida_db" / "noida-db"

    @property
    def pid_file(self) -> Path:
        return self.home / "broker.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "broker.log"

    def install(self) -> None:
        """Install the server into ``<home>/pkg`` unless it is there already."""
        if self.binary.is_file():
            return
        self.home.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as requirements:
            requirements.write(f"{PACKAGE} --hash=sha256:{PACKAGE_SHA256}\n")
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        command += ["--no-deps", "--require-hashes", "--target", str(self.home / "pkg")]
        command += ["-r", requirements.name]
        try:
            result = subprocess.run(command, capture_output=True, text=True, check=False)
        finally:
            os.unlink(requirements.name)
        if result.returncode != 0 or not self.binary.is_file():
            detail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            raise BrokerError(f"could not install {PACKAGE} from PyPI: {detail[0]}")

    def running_pid(self) -> int | None:
        """The PID of this folder's live server, else None (a stale PID file is removed)."""
        try:
            pid_text, port_text = self.pid_file.read_text().split()
            pid = int(pid_text)
        except (OSError, ValueError):
            return None
        cmdline = command_line(pid)
        if not cmdline or str(self.binary) != cmdline[0] or port_text != str(self.port):
            self.pid_file.unlink(missing_ok=True)
            return None
        return pid

    def start(self, timeout_s: float = START_TIMEOUT_S) -> int:
        """Start the server (installing it first) and wait until it answers; return its PID."""
        pid = self.running_pid()
        if pid is not None:
            return pid
        if port_answers(self.port):
            raise BrokerError(
                f"port {self.port} on {HOST} is taken by another process; "
                "choose another with --port or stop that process"
            )
        self.install()
        data_dir = self.home / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        command = [str(self.binary), "start", "--data-dir", str(data_dir), "--host", HOST]
        command += ["--only", "kafka", "--kafka-port", str(self.port)]
        with self.log_file.open("ab") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
            )
        self.pid_file.write_text(f"{process.pid} {self.port}\n")

        def answers() -> bool:
            if process.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise BrokerError(f"the broker exited at start-up; see {self.log_file}")
            return kafka_answers(self.port)

        if wait_until(answers, timeout_s, interval_s=0.2):
            return process.pid
        self.stop()
        raise BrokerError(f"the broker did not answer in {timeout_s:.0f} s; see {self.log_file}")

    def stop(self, timeout_s: float = 15.0) -> bool:
        """Stop this folder's server (SIGTERM, then SIGKILL); False if it was not running."""
        pid = self.running_pid()
        if pid is None:
            return False
        stop_process(pid, signal.SIGTERM, timeout_s)
        self.pid_file.unlink(missing_ok=True)
        return True


def port_answers(port: int) -> bool:
    """True if something accepts TCP connections on ``HOST:port``."""
    try:
        with socket.create_connection((HOST, port), timeout=1.0):
            return True
    except OSError:
        return False


def kafka_answers(port: int) -> bool:
    """True if ``HOST:port`` answers a Kafka ApiVersions (v0) request."""
    client_id = b"lakehouse-broker-check"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        with socket.create_connection((HOST, port), timeout=2.0) as connection:
            connection.settimeout(2.0)
            connection.sendall(struct.pack(">i", len(body)) + body)
            header = connection.recv(8)
    except OSError:
        return False
    return len(header) == 8 and struct.unpack(">ii", header)[1] == 1


def default_home() -> Path:
    """``$LAKEHOUSE_BROKER_HOME``, else ``.lakehouse/kafka-broker`` in the source checkout, else
    ``~/.cache/cdc-lakehouse/kafka-broker``."""
    configured = os.environ.get("LAKEHOUSE_BROKER_HOME")
    if configured:
        return Path(configured)
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file():
        return checkout / ".lakehouse" / "kafka-broker"
    return Path.home() / ".cache" / "cdc-lakehouse" / "kafka-broker"


def free_port() -> int:
    """A TCP port on ``HOST`` that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
    return port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kafka-broker",
        description="Install, start, stop or inspect the local Kafka-protocol broker "
        "used by the tests and `python -m lakehouse_demo demo --kafka`.",
    )
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port on 127.0.0.1")
    parser.add_argument("--home", type=Path, default=None, help="folder for the server and data")
    args = parser.parse_args(argv)
    broker = LocalBroker(home=args.home or default_home(), port=args.port)
    try:
        if args.action == "start":
            started = broker.start()
            print(f"kafka broker running at {broker.bootstrap} (pid {started}, in {broker.home})")
            return 0
        if args.action == "stop":
            stopped = broker.stop()
            print("kafka broker stopped" if stopped else "kafka broker was not running")
            return 0
        pid = broker.running_pid()
        if pid is None:
            print(f"kafka broker not running (folder {broker.home})")
            return 3
        print(f"kafka broker running at {broker.bootstrap} (pid {pid})")
        return 0
    except BrokerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
