"""Independent Spark writes of one micro-batch run side by side, in threads.

Much of a small Delta write is driver time (reading the log, planning, the commit), which
writes to different tables can overlap even where the executors' cores are few.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pyspark import SparkContext
from pyspark.sql import SparkSession

T = TypeVar("T")


def run_side_by_side(spark: SparkSession, tasks: Sequence[Callable[[], T]]) -> list[T]:
    """Run ``tasks`` at once, each in its own thread; wait for all of them; return their
    results in order, or raise the first failure (in task order) once all have ended.

    Each thread runs its Spark jobs as the calling thread would: ``spark`` is its active
    session in the JVM (where Delta looks up a commit's settings), and it gets a copy of the
    caller's local properties (its job group, so stopping a stream cancels their jobs too).
    A single task runs in the calling thread.
    """
    if len(tasks) <= 1:
        return [task() for task in tasks]
    context = SparkContext._active_spark_context
    assert context is not None and context._jvm is not None
    properties = context._jsc.sc().getLocalProperties()
    sessions = context._jvm.org.apache.spark.sql.SparkSession

    def in_thread(task: Callable[[], T]) -> T:
        context._jsc.sc().setLocalProperties(properties.clone())
        sessions.setActiveSession(spark._jsparkSession)
        return task()

    with ThreadPoolExecutor(max_workers=len(tasks), thread_name_prefix="side-by-side") as pool:
        futures = [pool.submit(in_thread, task) for task in tasks]
    return [future.result() for future in futures]
