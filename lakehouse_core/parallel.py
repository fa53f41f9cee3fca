"""Spark sessions per thread: independent writes of one micro-batch run side by side, each in
a thread and session of its own, and the session active in a thread.

Much of a small Delta write is driver time (reading the log, planning, the commit), which
writes to different tables can overlap even where the executors' cores are few.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession

T = TypeVar("T")


def run_side_by_side(spark: SparkSession, tasks: Sequence[Callable[[SparkSession], T]]) -> list[T]:
    """Run ``tasks`` at once, each in its own thread; wait for all of them; return their
    results in order, or raise the first failure (in task order) once all have ended.

    Each task is given a session of its own (:func:`session_copy` of ``spark``: the same
    settings, views and functions), which is also its thread's active session in the JVM,
    where Delta looks up a commit's settings: the settings a task makes for its commits (a
    batch mark, a transaction id: :func:`lakehouse_core.delta_io.session_settings`) reach
    neither another task's commits nor ``spark``. Each thread gets a copy of the caller's local
    properties (its job group, so stopping a stream cancels their jobs too). A single task runs
    in the calling thread, with ``spark``.
    """
    if len(tasks) <= 1:
        return [task(spark) for task in tasks]
    context = SparkContext._active_spark_context
    assert context is not None and context._jvm is not None
    properties = context._jsc.sc().getLocalProperties()
    sessions = context._jvm.org.apache.spark.sql.SparkSession

    def in_thread(task: Callable[[SparkSession], T]) -> T:
        context._jsc.sc().setLocalProperties(properties.clone())
        own = session_copy(spark)
        sessions.setActiveSession(own._jsparkSession)
        return task(own)

    with ThreadPoolExecutor(max_workers=len(tasks), thread_name_prefix="side-by-side") as pool:
        futures = [pool.submit(in_thread, task) for task in tasks]
    return [future.result() for future in futures]


def session_copy(spark: SparkSession, settings: Mapping[str, str] | None = None) -> SparkSession:
    """A new session with the settings, temporary views and functions ``spark`` has now
    (Spark's ``cloneSession``), and ``settings`` besides; a setting changed in one does not
    change the other."""
    own = SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())
    for key, value in (settings or {}).items():
        own.conf.set(key, value)
    return own


def in_session(frame: DataFrame, session: SparkSession) -> DataFrame:
    """``frame`` as a DataFrame of ``session``: the frames derived from it, the tables read
    and the commits made through their session take ``session``'s settings."""
    return DataFrame(frame._jdf, session)


def active_session() -> SparkSession | None:
    """The session active in this thread (Spark keeps one per thread), None if none is.

    Not PySpark's ``SparkSession.getActiveSession()``: that returns the session of the whole
    process that last created a DataFrame from local data, in any thread; a streaming query's
    micro-batch or a side-by-side task, each in a session of its own, would then pass theirs
    to a command run next in the caller's thread."""
    context = SparkContext._active_spark_context
    if context is None or context._jvm is None:  # no JVM here (Spark Connect): PySpark's
        return SparkSession.getActiveSession()
    active = context._jvm.org.apache.spark.sql.SparkSession.getActiveSession()
    if not active.isDefined():
        return None
    session = active.get()
    for known in (SparkSession._activeSession, SparkSession._instantiatedSession):
        if known is not None and known._jsparkSession.equals(session):
            return known
    return SparkSession(context, session)


@contextmanager
def active_session_kept() -> Iterator[None]:
    """Keep this thread's active session across the block: PySpark's ``createDataFrame`` makes
    its own session the active one, and a session copy's would otherwise stay active for the
    commands run next in this thread (:func:`active_session`)."""
    before = active_session()
    try:
        yield
    finally:
        if before is not None:
            make_active(before)


def make_active(spark: SparkSession) -> None:
    """Make ``spark`` the active session, in Python and on this thread in the JVM, as PySpark's
    own ``createDataFrame`` does."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    SparkSession._activeSession = spark
