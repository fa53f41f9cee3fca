"""What a steady ``run --once`` of the demo's whole pipeline costs: Spark jobs and Delta commits
(its three sources, every gold declaration, both patterns; 100 new records), bounded from
above so that a change that adds jobs or commits fails here. ``make bench``
(``benchmarks/batch_jobs.py``) reports the same counts per query and table, with times.

The run is made under Spark's and Delta's defaults for joins and metadata queries, as a user's
session has them, not under the test sessions' settings (:data:`tests.sessions.FEWER_JOBS`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc.sources import SourceSpec
from lakehouse.demo.generator import WorkloadConfig
from lakehouse.demo.job import DEMO_CONFIG, write_workload
from lakehouse.run.pipeline import run_once
from lakehouse_core.delta_io import session_settings
from lakehouse_core.layout import Warehouse
from tests.sessions import FEWER_JOBS

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

#: Spark's and Delta's defaults of the settings the test sessions change to run fewer jobs.
USER_DEFAULTS = {
    "spark.sql.autoBroadcastJoinThreshold": "10MB",
    "spark.databricks.delta.optimizeMetadataQuery.enabled": "true",
}
assert USER_DEFAULTS.keys() == FEWER_JOBS.keys()

#: Upper bounds of the steady run here (this workload in a test session: 204 jobs and 22
#: commits while gold batches broadcast their joins, 145 and 22 since they do not).
STEADY_JOBS = 160
STEADY_COMMITS = 24
#: A run that finds nothing new: the lease's two commits, and the jobs that find no new data
#: (2 here).
IDLE_JOBS = 4
IDLE_COMMITS = 2


def jobs_started(spark: SparkSession) -> int:
    """How many Spark jobs this application has started so far (in every thread)."""
    return int(spark.sparkContext._jsc.sc().dagScheduler().nextJobId())


def delta_commits(root: Path) -> int:
    """The commit files of every Delta table under ``root``."""
    return sum(
        1 for log in root.rglob("_delta_log") for f in log.glob("*.json") if f.stem.isdigit()
    )


@pytest.fixture
def user_defaults(spark: SparkSession) -> Iterator[None]:
    with session_settings(spark, USER_DEFAULTS):
        yield


def test_a_steady_run_of_the_whole_pipeline_stays_within_its_jobs_and_commits(
    spark: SparkSession, tmp_path: Path, user_defaults: None
) -> None:
    arrivals, source_dir = tmp_path / "arrivals", tmp_path / "source"
    write_workload(arrivals, WorkloadConfig(events=800, seed=7), parts=8)
    parts = sorted(arrivals.glob("part-*.jsonl"))
    source_dir.mkdir()
    warehouse = Warehouse.from_path(tmp_path / "warehouse")
    source = SourceSpec("files", str(source_dir))
    config = replace(DEMO_CONFIG, alerts=())

    def run(new_parts: list[Path]) -> tuple[int, int]:
        for part in new_parts:
            part.rename(source_dir / part.name)
        jobs, commits = jobs_started(spark), delta_commits(warehouse_root)
        run_once(spark, source, warehouse, config)
        return jobs_started(spark) - jobs, delta_commits(warehouse_root) - commits

    warehouse_root = Path(warehouse.root)
    run(parts[:6])  # the tables are created
    run(parts[6:7])  # every query has run a batch in this process
    steady_jobs, steady_commits = run(parts[7:8])
    idle_jobs, idle_commits = run([])
    assert steady_jobs <= STEADY_JOBS, f"a steady run took {steady_jobs} jobs"
    assert steady_commits <= STEADY_COMMITS, f"a steady run made {steady_commits} commits"
    assert idle_jobs <= IDLE_JOBS, f"a run with nothing new took {idle_jobs} jobs"
    assert idle_commits <= IDLE_COMMITS, f"a run with nothing new made {idle_commits} commits"
