"""The streaming queries of a continuous run, isolated per table: a query stopped by a schema
change of its input starts again from its checkpoint at once; a query that fails (or does not
start) starts again after a delay that doubles with each failure in a row, while the others go
on; its failure is in the run's summary (and so in ``lakehouse status``) until it has done a
micro-batch again."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from lakehouse.run.summary import RunSummary
from lakehouse_core.errors import ConfigError, SourceUnavailableError
from lakehouse_core.failures import Failure, TableFailure, raise_failures
from lakehouse_core.spark import mute_jvm_stderr
from lakehouse_core.streaming import (
    MAX_SCHEMA_RESTARTS,
    Trigger,
    between_batches,
    failure_of,
    last_batch_id,
    stopped_by_schema_change,
)

log = logging.getLogger(__name__)
#: How often a stopping run looks whether a query is between micro-batches.
PAUSE_POLL_SECONDS = 0.1
#: How long a continuous run waits for an unreachable source before it stops (30 minutes).
DEFAULT_GIVE_UP_SECONDS = 1800.0


class SourceGoneError(SourceUnavailableError):
    """The source stayed unreachable for longer than the run's give-up time."""


@dataclass(frozen=True)
class Backoff:
    """The delay before a failed query starts again: ``first_seconds`` after its first failure,
    doubled after each further one in a row, at most ``max_seconds``; a source that stays
    unreachable (:class:`~lakehouse_core.errors.SourceUnavailableError`) for more than
    ``give_up_seconds`` stops the run (None: never)."""

    first_seconds: float = 5.0
    max_seconds: float = 300.0
    give_up_seconds: float | None = DEFAULT_GIVE_UP_SECONDS

    def __post_init__(self) -> None:
        if not 0 < self.first_seconds <= self.max_seconds:
            raise ConfigError(
                f"Invalid backoff {self.first_seconds} s to {self.max_seconds} s: the first "
                "delay must be above 0 and at most the longest."
            )
        if self.give_up_seconds is not None and self.give_up_seconds <= 0:
            raise ConfigError(
                f"Invalid give-up time {self.give_up_seconds:g} s: give a duration above 0 "
                "(e.g. 30m)."
            )

    def delay(self, attempts: int) -> float:
        """Seconds to wait after ``attempts`` failures in a row."""
        return min(self.max_seconds, self.first_seconds * 2.0 ** max(0, attempts - 1))


#: A failed query's delays: 5 s, 10 s, 20 s, ... up to 5 minutes.
RETRY_BACKOFF = Backoff()


def give_up_seconds(text: str) -> float | None:
    """The give-up time ``text`` says: a duration such as ``30m``, ``90s`` or ``2h``, or
    ``never`` (None).

    Raises:
        ConfigError: anything else.
    """
    if text.strip().lower() == "never":
        return None
    try:
        seconds = Trigger.parse(text).interval_seconds
    except ConfigError:
        seconds = 0.0
    if seconds <= 0:
        raise ConfigError(
            f"Invalid --give-up-after {text!r}: write a duration above 0 such as '30m', '90s' "
            "or '2h', or 'never'."
        )
    return seconds


class Job(NamedTuple):
    """A streaming query of a run: its name, the table it keeps as the run names it
    (``silver.orders``; ``bronze`` for the bronze query), and what starts it."""

    name: str
    table: str
    start: Callable[[], StreamingQuery]


class RunningQueries:
    """The streaming queries of a continuous run, by name, each with the job that starts it.

    ``summary`` (if given) is told each failure and recovery; ``backoff`` spaces the attempts
    of a failing query (default :data:`RETRY_BACKOFF`).
    """

    def __init__(
        self,
        summary: RunSummary | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self._jobs: dict[str, Job] = {}
        self._queries: dict[str, StreamingQuery] = {}
        self._failing: dict[str, TableFailure] = {}
        self._due: dict[str, float] = {}  # a failed query's next start (time.monotonic)
        self._unreachable_since: dict[str, float] = {}  # source unreachable (time.monotonic)
        self._summary = summary
        self._backoff = RETRY_BACKOFF if backoff is None else backoff

    def __contains__(self, name: object) -> bool:
        return name in self._jobs

    def names(self) -> set[str]:
        """The queries started, or waiting to start again."""
        return set(self._jobs)

    def query(self, name: str) -> StreamingQuery:
        """The current query of ``name`` (a new one after each restart)."""
        return self._queries[name]

    def failing(self) -> list[TableFailure]:
        """The failures of the queries that have not done a micro-batch since they failed."""
        return sorted(self._failing.values(), key=lambda f: f.table)

    def start(
        self, name: str, starter: Callable[[], StreamingQuery], table: str | None = None
    ) -> StreamingQuery | None:
        """Start query ``name`` (keeping ``table``, default its name); None if it could not
        start (it is tried again, see :meth:`failed`)."""
        self._jobs[name] = Job(name, table or name, starter)
        self._launch(name)
        return self._queries.get(name)

    def failed(self, job: Job, failure: Failure, logged: bool = True) -> None:
        """Note that ``job``'s table failed outside a query of its own (one hop's part of it):
        its query starts after the backoff (``logged``: the event log has the failure)."""
        self._jobs[job.name] = job
        self._fail(job.name, failure, logged)

    def check(self) -> None:
        """Restart the queries a schema change of their input stopped, note the failure of
        those that failed, start the failed ones whose delay is over, and clear the failure of
        those that have done a micro-batch since."""
        for name, query in list(self._queries.items()):
            if query.isActive:
                if name in self._failing and query.lastProgress is not None:
                    self._recovered(name)
                continue
            error = query.exception()
            if stopped_by_schema_change(error):
                self._restart(name)
            elif error is not None:
                self._fail(name, failure_of(query, error))
        now = time.monotonic()
        for name, due in list(self._due.items()):
            if due <= now:
                del self._due[name]
                self._launch(name)

    def catch_up(self) -> None:
        """Block until every query has processed what is available now, in the order they
        were started (upstream first); the queries keep running. For notebooks and tests.

        Raises:
            LakehouseError: queries failed for another reason than a schema change (after
                the others caught up; they start again after their backoff).
        """
        failed = []
        for name in list(self._queries):
            restarts = 0
            while name in self._queries:
                query = self._queries[name]
                try:
                    query.processAllAvailable()
                    break
                except StreamingQueryException as error:
                    if restarts == MAX_SCHEMA_RESTARTS or not stopped_by_schema_change(error):
                        failed.append(self._fail(name, failure_of(query, error)))
                        break
                restarts += 1
                self._restart(name)
        raise_failures(failed)

    def stop(self) -> None:
        """Stop every query at once (a running micro-batch is interrupted); none starts again."""
        self._due.clear()
        for query in self._queries.values():
            if query.isActive:
                query.stop()

    def stop_between_batches(
        self,
        spark: SparkSession,
        interval_seconds: float,
        timeout_seconds: float,
        at_once: threading.Event,
    ) -> list[str]:
        """Stop every query between two of its micro-batches: each as soon as its running
        batch has committed and before its next trigger (see
        :func:`lakehouse_core.streaming.between_batches`), upstream first when several are; none
        starts again. A query whose batches outlast its trigger starts the next batch the
        moment one commits: it is stopped as soon as the batch running now has committed,
        the next one interrupted at its start (the next run does it).

        After ``timeout_seconds``, or once ``at_once`` is set, the queries still in a batch are
        interrupted (their checkpoints make the next run do that batch again), with Spark's
        logging silenced first. Returns the names of the queries interrupted in the batch that
        was running when the stop began.
        """
        self._due.clear()
        deadline = time.monotonic() + timeout_seconds
        left = dict(self._queries)
        finished = {name: last_batch_id(query) for name, query in left.items()}
        while True:
            for name, query in list(left.items()):
                if between_batches(query, interval_seconds):
                    if query.isActive:
                        query.stop()
                    del left[name]
                elif last_batch_id(query) > finished[name]:
                    _silence(spark)  # the batch it is in has just begun: stopped quietly
                    query.stop()
                    del left[name]
            if not left or at_once.wait(PAUSE_POLL_SECONDS) or time.monotonic() > deadline:
                break
        if left:
            _silence(spark)
            for query in left.values():
                query.stop()
        return list(left)

    def _launch(self, name: str) -> None:
        try:
            self._queries[name] = self._jobs[name].start()
        except Exception as error:
            self._fail(name, Failure.of(error), logged=False)

    def _restart(self, name: str) -> None:
        log.info(f"{name}: its input changed schema; continuing from its checkpoint")
        self._launch(name)

    def _fail(self, name: str, failure: Failure, logged: bool = True) -> TableFailure:
        """Note a failure of ``name`` and when it starts again."""
        self._queries.pop(name, None)
        previous = self._failing.get(name)
        attempts = 1 if previous is None else previous.attempts + 1
        delay = self._backoff.delay(attempts)
        now = datetime.now(UTC)
        noted = TableFailure(
            name, self._jobs[name].table, failure, now, attempts, now + timedelta(seconds=delay)
        )
        self._failing[name] = noted
        self._due[name] = time.monotonic() + delay
        if self._summary is not None:
            self._summary.failing(noted, logged)
        if isinstance(failure.error, SourceUnavailableError):
            self._wait_for_source(noted, delay)
        else:
            log.info(
                f"{noted.table}: failed ({failure.line}); the other tables go on; "
                f"attempt {attempts + 1} in {delay:g} s"
            )
        return noted

    def _wait_for_source(self, noted: TableFailure, delay: float) -> None:
        """Say that the source is unreachable and the run waits for it (one line each
        attempt); stop the run once it has been unreachable longer than the give-up time.

        Raises:
            SourceGoneError: unreachable for longer than ``backoff.give_up_seconds``.
        """
        now = time.monotonic()
        since = self._unreachable_since.setdefault(noted.query, now)
        give_up = self._backoff.give_up_seconds
        reason = noted.failure.first_line
        if give_up is not None and now - since >= give_up:
            raise SourceGoneError(
                f"{noted.table}: the source has been unreachable for {now - since:.0f} s, "
                f"longer than the give-up time ({give_up:g} s, --give-up-after): {reason} "
                "Start the run again once it is back: it continues from its checkpoint."
            )
        left = "" if give_up is None else f", giving up in {give_up - (now - since):.0f} s"
        log.info(
            f"{noted.table}: the source is unreachable ({reason}); waiting for it: attempt "
            f"{noted.attempts + 1} in {delay:g} s{left}"
        )

    def _recovered(self, name: str) -> None:
        noted = self._failing.pop(name)
        self._unreachable_since.pop(name, None)
        if self._summary is not None:
            self._summary.recovered(name)
        times = "once" if noted.attempts == 1 else f"{noted.attempts} times"
        log.info(f"{noted.table}: running again (it failed {times})")


def _silence(spark: SparkSession) -> None:
    """Silence Spark's and Py4J's logging for the rest of the session, before queries are
    interrupted mid-batch: each interrupted write logs pages of stack traces, for a stop the
    user asked for."""
    spark.sparkContext.setLogLevel("OFF")
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    mute_jvm_stderr()
