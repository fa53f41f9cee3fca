"""Spark work in threads (:func:`lakehouse_core.parallel.run_side_by_side`): the tasks overlap, run
as the calling thread would (its local properties, which they cannot change for it) but each
in a session of its own, whose commit settings (a batch mark, a transaction id) reach neither
another task's commits nor the caller's session, and a failure is raised only once every task
has ended."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_core.delta_io import BATCH_MARK, TXN_APP_ID, TXN_VERSION, USER_METADATA, dml_once
from lakehouse_core.parallel import active_session, run_side_by_side
from lakehouse_core.spark import get_spark

pytestmark = pytest.mark.integration

PROPERTY = "lakehouse.test.side-by-side"


@pytest.fixture
def caller_property(spark: SparkSession) -> Iterator[str]:
    spark.sparkContext.setLocalProperty(PROPERTY, "caller")
    yield "caller"
    spark.sparkContext.setLocalProperty(PROPERTY, None)  # type: ignore[arg-type]


def test_tasks_overlap_and_run_as_the_calling_thread(
    spark: SparkSession, caller_property: str
) -> None:
    both_started = threading.Barrier(2)  # breaks (and fails the test) if they run in turn
    jvm = spark.sparkContext._jvm
    assert jvm is not None

    def task(rows: int, session: SparkSession) -> tuple[str | None, bool, bool, int]:
        both_started.wait(timeout=60)
        seen = spark.sparkContext.getLocalProperty(PROPERTY)
        active = jvm.org.apache.spark.sql.SparkSession.getActiveSession().get()
        spark.sparkContext.setLocalProperty(PROPERTY, f"task {rows}")  # its own copy
        own = bool(active.equals(session._jsparkSession))
        shared = bool(active.equals(spark._jsparkSession))
        return seen, own, shared, session.range(rows).count()

    results = run_side_by_side(spark, [partial(task, 3), partial(task, 5)])

    assert results == [(caller_property, True, False, 3), (caller_property, True, False, 5)]
    assert spark.sparkContext.getLocalProperty(PROPERTY) == caller_property


def test_the_callers_thread_keeps_its_active_session(spark: SparkSession) -> None:
    """Tasks that make DataFrames from local data in their sessions (which makes each the
    process's active session for PySpark) leave the caller's thread with its own: a command
    run next in it (``get_spark()``) takes the caller's session, not a task's, whose settings
    (the catalog names a run registered, say) it lacks."""
    spark.createDataFrame([(0,)], "n int").count()  # the caller's session is active here

    def task(rows: int, session: SparkSession) -> int:
        return session.createDataFrame([(n,) for n in range(rows)], "n int").count()

    assert run_side_by_side(spark, [partial(task, 2), partial(task, 3)]) == [2, 3]

    assert SparkSession.getActiveSession() is not spark  # PySpark's: the last task's session
    assert active_session() is spark
    assert get_spark() is spark


def test_a_failure_is_raised_once_every_task_has_ended(spark: SparkSession) -> None:
    both_started = threading.Barrier(2)
    ended: list[str] = []

    def fails(_: SparkSession) -> int:
        both_started.wait(timeout=60)
        raise ValueError("the first task failed")

    def slower(_: SparkSession) -> int:
        both_started.wait(timeout=60)
        time.sleep(0.5)
        count = spark.range(7).count()
        ended.append("slower")
        return count

    with pytest.raises(ValueError, match="the first task failed"):
        run_side_by_side(spark, [fails, slower])
    assert ended == ["slower"]


def test_a_single_task_runs_in_the_calling_thread(spark: SparkSession) -> None:
    caller = threading.get_ident()
    assert run_side_by_side(spark, [lambda session: (threading.get_ident(), session)]) == [
        (caller, spark)
    ]
    assert run_side_by_side(spark, []) == []


def test_each_task_commits_with_its_own_mark_and_transaction_id(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Two exactly-once DELETEs side by side (as two gold declarations of one query write),
    interleaved so that one commits while the other's settings are set: each commit carries
    its own batch mark and transaction id, and the caller's session is left without them.
    (With one session for both, the first commit carried the other task's mark and id, and
    the settings the other task found and restored stayed set.)"""
    paths = {name: str(tmp_path / name) for name in ("a", "b")}
    for path in paths.values():
        spark.range(3).write.format("delta").save(path)
    a_inside, b_inside, a_committed = threading.Event(), threading.Event(), threading.Event()

    def task_a(session: SparkSession) -> None:
        def delete() -> None:
            a_inside.set()
            assert b_inside.wait(timeout=120)  # b's settings were set after a's
            DeltaTable.forPath(session, paths["a"]).delete("id = 0")
            a_committed.set()

        dml_once(session, paths["a"], "query-a", 7, delete)

    def task_b(session: SparkSession) -> None:
        def delete() -> None:
            b_inside.set()
            assert a_committed.wait(timeout=120)
            DeltaTable.forPath(session, paths["b"]).delete("id = 1")

        assert a_inside.wait(timeout=120)
        dml_once(session, paths["b"], "query-b", 3, delete)

    run_side_by_side(spark, [task_a, task_b])

    assert _newest_commit(paths["a"]) == (BATCH_MARK.format("query-a", 7), {"query-a": 7})
    assert _newest_commit(paths["b"]) == (BATCH_MARK.format("query-b", 3), {"query-b": 3})
    assert [spark.conf.get(key, None) for key in (USER_METADATA, TXN_APP_ID, TXN_VERSION)] == [
        None,
        None,
        None,
    ]


def _newest_commit(path: str) -> tuple[str | None, dict[str, int]]:
    """The ``userMetadata`` of the newest commit of the Delta table at ``path`` and the
    transaction ids (application id: version) it carries, read from its log file."""
    newest = max(Path(path, "_delta_log").glob("*.json"))
    actions = [json.loads(line) for line in newest.read_text().splitlines() if line]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    return info.get("userMetadata"), {
        a["txn"]["appId"]: a["txn"]["version"] for a in actions if "txn" in a
    }
