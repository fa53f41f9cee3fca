"""Spark work in threads (:func:`lakehouse_core.parallel.run_side_by_side`): the tasks overlap, run
as the calling thread would (its session, its local properties, which they cannot change for
it), and a failure is raised only once every task has ended."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from lakehouse_core.parallel import run_side_by_side

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

    def task(rows: int) -> tuple[str | None, bool, int]:
        both_started.wait(timeout=60)
        seen = spark.sparkContext.getLocalProperty(PROPERTY)
        active = jvm.org.apache.spark.sql.SparkSession.getActiveSession().get()
        spark.sparkContext.setLocalProperty(PROPERTY, f"task {rows}")  # its own copy
        return seen, bool(active.equals(spark._jsparkSession)), spark.range(rows).count()

    results = run_side_by_side(spark, [lambda: task(3), lambda: task(5)])

    assert results == [(caller_property, True, 3), (caller_property, True, 5)]
    assert spark.sparkContext.getLocalProperty(PROPERTY) == caller_property


def test_a_failure_is_raised_once_every_task_has_ended(spark: SparkSession) -> None:
    both_started = threading.Barrier(2)
    ended: list[str] = []

    def fails() -> int:
        both_started.wait(timeout=60)
        raise ValueError("the first task failed")

    def slower() -> int:
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
    assert run_side_by_side(spark, [threading.get_ident]) == [caller]
    assert run_side_by_side(spark, []) == []
