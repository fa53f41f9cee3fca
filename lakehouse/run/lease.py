"""One pipeline per warehouse: a lease claimed, renewed and released by Delta commits.

The lease is the Delta table ``<warehouse>/_system/lease``. It holds no rows and no files: each
claim, renewal and release is a commit that changes only a table property, :data:`FOLLOWS`, to
the table version it follows, and whose ``userMetadata`` names the holder (run id, pid, host,
command, when it started, when the lease expires) and that version again. A commit counts only
if it landed right after the version it follows; the holder is the one the newest commit that
counts names. Two writers that read the same version both write commits that follow it: only
the first lands right after it (Delta numbers commits one by one; a concurrent change of the
same property may also be rejected), so only one counts. Each writer then reads the lease back
and holds it only if it names its run. So exactly one of two claimers wins wherever Delta's
commits are atomic, on a local disk or an object store, with no lock file and no rename; and a
commit is cheap, as it writes no data (no Spark job, unlike a write under Delta's transaction
id, which reads the table's state), and so is a read of the lease: its newest commits are read
from the table's log on the driver, not through Delta's history (a Spark job per read).

A holder renews the lease every :data:`RENEW_SECONDS` (three heartbeats) from a
thread of its own, and releases it when it ends. A lease past its expiry (a run that was
killed) may be taken over; on the same host, so may the lease of a process that has ended (its
Spark JVM ended too), at once.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, ParamSpec, TypeVar

from delta.tables import DeltaTable
from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from lakehouse.run.event_log import HEARTBEAT_SECONDS
from lakehouse_core.delta_io import (
    USER_METADATA,
    discard_half_created,
    newest_commit_messages,
    quoted_path,
)
from lakehouse_core.errors import LakehouseError
from lakehouse_core.layout import Warehouse
from lakehouse_core.parallel import active_session_kept, session_copy

#: The table property each lease commit sets to the version it follows.
FOLLOWS = "lakehouse.lease.follows"
#: The newest commits read to find the newest one that counts (each claimer that lost a race
#: leaves at most one that does not, per attempt).
HISTORY_WINDOW = 32
#: Seconds between two renewals of a held lease (three heartbeats).
RENEW_SECONDS = 3 * HEARTBEAT_SECONDS
#: Seconds a lease holds without renewal: three missed renewals.
LEASE_SECONDS = 3 * RENEW_SECONDS
#: How long a claimer waits for the Spark JVM of a holder that ended on this host to end too.
JVM_EXIT_SECONDS = 60.0
#: Claims tried before giving up when other claimers keep winning the race to commit.
CLAIM_ATTEMPTS = 8
P = ParamSpec("P")
R = TypeVar("R")
_SCHEMA = StructType([StructField("holder", StringType())])
#: Table properties of the lease table: its log keeps an hour of commits, cleaned at each
#: checkpoint (every hundred commits: a checkpoint is a Spark job, a commit is not), so a run
#: renewing for days keeps a bounded number of files.
_PROPERTIES = {
    "delta.logRetentionDuration": "interval 1 hours",
    "delta.checkpointInterval": "100",
}


class PipelineRunningError(LakehouseError):
    """Another pipeline holds the warehouse's lease."""


class LeaseLostError(LakehouseError):
    """Another run took over the lease this run held (it had missed its renewals)."""


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) the lease, and until when."""

    run: str
    pid: int
    host: str
    command: str
    started: str  # ISO instant, UTC
    expires: str  # ISO instant, UTC
    jvm_pid: int | None = None
    released: bool = False

    def to_text(self, follows: int | None = None) -> str:
        """The ``userMetadata`` of a commit naming this holder (that follows version
        ``follows``)."""
        fields = asdict(self) if follows is None else {**asdict(self), "follows": follows}
        return json.dumps(fields, sort_keys=True)

    @staticmethod
    def from_text(text: str | None) -> Holder | None:
        """The holder a commit's ``userMetadata`` names (None: not a lease commit)."""
        try:
            value = json.loads(text or "")
            if not isinstance(value, dict):
                return None
            value.pop("follows", None)
            return Holder(**value)
        except (ValueError, TypeError):
            return None

    def line(self) -> str:
        """The error line a second run prints."""
        started = datetime.fromisoformat(self.started).astimezone().strftime("%H:%M")
        return (
            f"a pipeline (pid {self.pid} on host {self.host}, started {started}) is running on "
            "this warehouse; stop it or wait"
        )


def lease_path(warehouse: Warehouse) -> str:
    return f"{warehouse.root}/_system/lease"


def current(spark: SparkSession, path: str) -> tuple[int, Holder | None]:
    """The lease table's newest version and the holder named by its newest commit that counts
    (:func:`holder_of`); -1, None: no table yet. Its commits are read newest first until one
    counts, from the table's log (:func:`~lakehouse_core.delta_io.newest_commit_messages`)."""
    newest, holder = -1, None
    for version, text in newest_commit_messages(spark, path, HISTORY_WINDOW):
        newest = max(newest, version)
        holder = _counting(version, text)
        if holder is not None:
            break
    return newest, holder


def holder_of(commits: Iterable[tuple[int, str | None]]) -> Holder | None:
    """The holder named by the newest of ``commits`` (version, ``userMetadata``) that counts: a
    lease commit that landed right after the version it follows, or one that names none (the
    lease commits of earlier releases, which Delta's transaction id kept in order). None: no
    lease commit counts."""
    for version, text in sorted(commits, key=lambda commit: commit[0], reverse=True):
        holder = _counting(version, text)
        if holder is not None:
            return holder
    return None


def _counting(version: int, text: str | None) -> Holder | None:
    """The holder a commit (``version``, ``userMetadata``) names if it counts (see
    :func:`holder_of`)."""
    holder = Holder.from_text(text)
    return holder if holder is not None and _follows(text) in (None, version - 1) else None


def _follows(text: str | None) -> int | None:
    """The version a lease commit's ``userMetadata`` says it follows (None: it says none)."""
    value = json.loads(text or "{}")
    follows = value.get("follows") if isinstance(value, dict) else None
    return follows if isinstance(follows, int) else None


def is_free(holder: Holder | None, now: datetime, ours: frozenset[str] = frozenset()) -> bool:
    """Whether a lease its newest commit gives to ``holder`` may be claimed at ``now``: none
    holds it, it was released, it expired, or it is held by a process of this host that has
    ended (and its JVM with it), or by a run of this process that is not among ``ours`` (the
    runs of this process that hold a lease: any other ended without releasing it)."""
    if holder is None or holder.released or datetime.fromisoformat(holder.expires) <= now:
        return True
    if holder.host != socket.gethostname():
        return False
    if holder.pid == os.getpid():
        return holder.run not in ours
    return not _alive(holder.pid) and (holder.jvm_pid is None or not _alive(holder.jvm_pid))


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return True  # no /proc: it answered the signal


def _ended_here(holder: Holder) -> bool:
    """Whether ``holder`` is a process of this host that has ended (its JVM may still run)."""
    return (
        holder.host == socket.gethostname()
        and holder.pid != os.getpid()
        and not _alive(holder.pid)
        and not holder.released
    )


def _commit(spark: SparkSession, path: str, version: int, holder: Holder) -> Exception | None:
    """Write the commit that follows ``version`` of the lease table, naming ``holder`` (only
    one of two such commits counts; see the module's doc). Returns the write's error, if any:
    losing the race may be one (the lease, read back, tells who won)."""
    if version < 0:
        discard_half_created(spark, path)  # a kill while it was first created
        with suppress(Exception):  # a concurrent claimer may create it first: both go on
            builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(_SCHEMA)
            for key, value in _PROPERTIES.items():
                builder = builder.property(key, value)
            builder.execute()
        version = max(version, 0)
    # The holder goes in a session of the commit's own: the caller's session may be writing
    # other tables meanwhile.
    own = session_copy(spark, {USER_METADATA: holder.to_text(follows=version)})
    try:
        own.sql(f"ALTER TABLE {quoted_path(path)} SET TBLPROPERTIES ('{FOLLOWS}' = '{version}')")
    except Exception as error:
        return error
    return None


def _jvm_pid() -> int | None:
    """The pid of the Spark JVM this process started (None: it joined one it did not start)."""
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    return None if proc is None else int(proc.pid)


class Lease:
    """The lease of one warehouse held by this process's run: renewed from a thread until
    :meth:`release`."""

    def __init__(self, spark: SparkSession, path: str, holder: Holder) -> None:
        self.spark = spark
        self.path = path
        self.holder = holder
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renewing, name="lease", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _renewing(self) -> None:
        while not self._stop.wait(RENEW_SECONDS):
            with suppress(Exception):  # a failed renewal is tried again at the next interval
                if not self.renew():
                    self.lost.set()
                    return

    def renew(self) -> bool:
        """Extend the lease by :data:`LEASE_SECONDS`; False if another run holds it now."""
        version, holder = current(self.spark, self.path)
        if holder is None or holder.run != self.holder.run:
            return False
        expires = datetime.now(UTC) + timedelta(seconds=LEASE_SECONDS)
        renewed = replace(self.holder, expires=expires.isoformat())
        _commit(self.spark, self.path, version, renewed)
        version, holder = current(self.spark, self.path)
        return holder is not None and holder.run == self.holder.run

    def release(self) -> None:
        """Stop renewing and give the lease up (if this run still holds it)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        for _ in range(CLAIM_ATTEMPTS):
            version, holder = current(self.spark, self.path)
            if holder is None or holder.run != self.holder.run or holder.released:
                return
            _commit(self.spark, self.path, version, replace(self.holder, released=True))


def claim(spark: SparkSession, warehouse: Warehouse, command: str) -> Lease:
    """Claim the lease of ``warehouse`` for this process's run of ``command`` (not renewed
    yet: :meth:`Lease.start`).

    Raises:
        PipelineRunningError: another run holds it (the message names its pid, host and start).
    """
    path = lease_path(warehouse)
    started = datetime.now(UTC)
    me = Holder(
        run=uuid.uuid4().hex,
        pid=os.getpid(),
        host=socket.gethostname(),
        command=command,
        started=started.isoformat(),
        expires=(started + timedelta(seconds=LEASE_SECONDS)).isoformat(),
        jvm_pid=_jvm_pid(),
    )
    ours = frozenset(lease.holder.run for lease, _ in _held.values())
    waited_until = time.monotonic() + JVM_EXIT_SECONDS
    for _ in range(CLAIM_ATTEMPTS):
        version, holder = current(spark, path)
        while holder is not None and not is_free(holder, datetime.now(UTC), ours):
            if not (_ended_here(holder) and time.monotonic() < waited_until):
                raise PipelineRunningError(holder.line())
            time.sleep(0.2)  # its JVM ends a moment after it: wait for that, then take over
            version, holder = current(spark, path)
        expires = datetime.now(UTC) + timedelta(seconds=LEASE_SECONDS)
        mine = replace(me, expires=expires.isoformat())
        error = _commit(spark, path, version, mine)
        _, holder = current(spark, path)
        if holder is not None and holder.run == me.run:
            return Lease(spark, path, mine)
    if holder is None:  # no claimer won: the lease cannot be written
        first = str(error).strip().splitlines()[0] if error else "no commit landed"
        raise LakehouseError(
            f"Cannot write the warehouse's lease at {path}: {first}. Check that the warehouse "
            "is writable by this user."
        )
    raise PipelineRunningError(holder.line())


def lost_lease(warehouse: Warehouse) -> threading.Event:
    """Set once the lease this process holds on ``warehouse`` has gone to another run (a new
    event, never set, when this process holds none)."""
    with _held_lock:
        held = _held.get(warehouse.root)
    return threading.Event() if held is None else held[0].lost


def lost_line(spark: SparkSession, warehouse: Warehouse) -> str:
    """What a run that lost its lease says: who holds it now, and what to do."""
    _, holder = current(spark, lease_path(warehouse))
    who = "another run" if holder is None else f"pid {holder.pid} on host {holder.host}"
    return (
        f"this run stopped after its running micro-batches: {who} took over the warehouse's "
        "lease after this run missed its renewals (a stalled driver or storage); one pipeline "
        "writes a warehouse at a time: stop one of them, then run again"
    )


#: The leases this process holds, by warehouse root, with how many blocks hold each.
_held: dict[str, tuple[Lease, int]] = {}
_held_lock = threading.Lock()


@contextmanager
def holding(spark: SparkSession, warehouse: Warehouse, command: str) -> Iterator[Lease]:
    """Hold the lease of ``warehouse`` while the block runs (renewed, then released when it
    ends, also when it raises). A block inside another of this process on the same warehouse
    shares its lease.

    Raises:
        PipelineRunningError: another run holds it.
    """
    with _held_lock:
        held = _held.get(warehouse.root)
        if held is None:
            lease = claim(spark, warehouse, command)
            lease.start()
        else:
            lease = held[0]
        _held[warehouse.root] = (lease, 1 if held is None else held[1] + 1)
    try:
        yield lease
    finally:
        with _held_lock:
            lease, depth = _held.pop(warehouse.root)
            if depth > 1:
                _held[warehouse.root] = (lease, depth - 1)
            else:
                with suppress(Exception):  # an unreleased lease expires, or its pid is gone
                    lease.release()


def leased(
    command: str, first: Callable[[Any], object] | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Make a function that writes a warehouse hold its lease while it runs (see
    :func:`holding`); the function takes the session as ``spark`` and the warehouse as
    ``warehouse`` (by name or position). ``first(config)``, if given, checks the function's
    ``config`` argument before the lease is taken (a mistake then writes nothing)."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            spark, warehouse = bound.arguments["spark"], bound.arguments["warehouse"]
            if first is not None:
                first(bound.arguments["config"])
            # A command run next in this thread takes the session active before this one:
            # none of the sessions the function's work made active stays so.
            with active_session_kept(), holding(spark, warehouse, command):
                return function(*args, **kwargs)

        return run

    return decorate
