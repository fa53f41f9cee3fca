"""What a steady ``run --once`` of the demo's whole pipeline costs: Spark jobs and Delta commits
(its three sources, every gold declaration, both patterns; 100 new records), bounded from
above so that a change that adds jobs or commits fails here. ``make bench``
(``benchmarks/batch_jobs.py``) reports the same counts per query and table, with times.

Between the runs, the check that lets ``lakehouse run --once`` skip Spark when nothing is new
(:func:`lakehouse.ops.idle.nothing_new`) is asked of the same warehouse: it must say "nothing
new" only where the run then finds nothing, and never where a run has work.

The run is made under Spark's and Delta's defaults for joins and metadata queries, as a user's
session has them, not under the test sessions' settings (:data:`tests.sessions.FEWER_JOBS`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc.sources import SourceSpec
from lakehouse.ops.idle import nothing_new
from lakehouse.run.lease import lease_path
from lakehouse.run.pipeline import run_once
from lakehouse_core.config import PipelineConfig
from lakehouse_core.delta_io import optimize, session_settings
from lakehouse_core.layout import Warehouse
from lakehouse_demo.generator import WorkloadConfig
from lakehouse_demo.job import DEMO_CONFIG, write_workload
from tests.sessions import FEWER_JOBS

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

#: Spark's and Delta's defaults of the settings the test sessions change to run fewer jobs.
USER_DEFAULTS = {
    "spark.sql.autoBroadcastJoinThreshold": "10MB",
    "spark.databricks.delta.optimizeMetadataQuery.enabled": "true",
}
assert USER_DEFAULTS.keys() == FEWER_JOBS.keys()

#: Upper bounds of the steady run here (this workload in a test session: 204 jobs and 22
#: commits while gold batches broadcast their joins, 145 and 22 since they do not; 146 and 20
#: before quality metrics and the event log were appended from the driver and a shared gold
#: query kept its batch in one job, 140 and 20 since; 124 and 20 since gold and pattern tables
#: take their replacement rows and late events from the driver; 90 since they read their own
#: tables, check their schemas and raise their alerts from the driver; 77 since naming the
#: tables asks the catalog, not each table's log, and a join's key check reads from the
#: driver). Commits are counted without the lease's: it renews on a clock, so a slower run
#: makes more of them.
STEADY_JOBS = 84
STEADY_COMMITS = 21
#: A run that finds nothing new: no commit, and the jobs that find no new data (2 here).
IDLE_JOBS = 4
IDLE_COMMITS = 0


def jobs_started(spark: SparkSession) -> int:
    """How many Spark jobs this application has started so far (in every thread)."""
    return int(spark.sparkContext._jsc.sc().dagScheduler().nextJobId())


def delta_commits(root: Path) -> Counter[str]:
    """The commit files of each Delta table under ``root`` but the lease's, by its path."""
    return Counter(
        str(log.parent.relative_to(root))
        for log in root.rglob("_delta_log")
        if log.parent != Path(lease_path(Warehouse.from_path(root)))
        for f in log.glob("*.json")
        if f.stem.isdigit()
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

    def run(new_parts: list[Path]) -> tuple[int, Counter[str]]:
        for part in new_parts:
            part.rename(source_dir / part.name)
        assert (nothing_new(source, warehouse, config) is None) is bool(new_parts)
        jobs, commits = jobs_started(spark), delta_commits(warehouse_root)
        run_once(spark, source, warehouse, config)
        return jobs_started(spark) - jobs, delta_commits(warehouse_root) - commits

    warehouse_root = Path(warehouse.root)
    run(parts[:6])  # the tables are created
    run(parts[6:7])  # every query has run a batch in this process
    steady_jobs, steady_commits = run(parts[7:8])
    idle_jobs, idle_commits = run([])
    assert nothing_new(source, warehouse, config)
    assert_idle_check_sees_work(spark, source, warehouse, config)
    assert steady_jobs <= STEADY_JOBS, f"a steady run took {steady_jobs} jobs"
    assert steady_commits.total() <= STEADY_COMMITS, f"a steady run made {steady_commits}"
    assert idle_jobs <= IDLE_JOBS, f"a run with nothing new took {idle_jobs} jobs"
    assert idle_commits.total() <= IDLE_COMMITS, f"a run with nothing new made {idle_commits}"


def assert_idle_check_sees_work(
    spark: SparkSession, source: SourceSpec, warehouse: Warehouse, config: PipelineConfig
) -> None:
    """After a complete run: each thing that leaves a run work to do makes the check answer
    "maybe"; a commit that changes no data (OPTIMIZE) does not."""
    root = Path(warehouse.root)
    assert not nothing_new(source, warehouse, replace(config, patterns=config.patterns[:1]))
    spark_kafka = SourceSpec("kafka", "127.0.0.1:1", kafka_format="kafka")
    assert not nothing_new(spark_kafka, warehouse, config)  # Spark's own source: not read here

    hidden = root.parent / "source" / "_hidden.jsonl"  # Spark lists no name starting with _
    hidden.write_text("{}\n")
    assert nothing_new(source, warehouse, config)
    hidden.unlink()

    checkpoint = next((root / "_system" / "checkpoints").glob("gold_shared_orders*/commits"))
    last = max(checkpoint.iterdir(), key=lambda f: int(f.name) if f.name.isdigit() else -1)
    committed = last.read_bytes()
    last.unlink()  # the planned batch did not commit: the run runs it again
    assert not nothing_new(source, warehouse, config)
    last.write_bytes(committed)

    place = root / "_system" / "checkpoints" / "gold_revenue_per_minute.applied.json"
    text = place.read_text()
    behind = json.loads(text) | {"through_version": json.loads(text)["through_version"] - 1}
    place.write_text(json.dumps(behind))  # a declaration that failed stays behind its query
    assert not nothing_new(source, warehouse, config)
    place.write_text(text)
    assert nothing_new(source, warehouse, config)

    silver = warehouse.table("silver", "customers")
    optimize(spark, silver)
    assert nothing_new(source, warehouse, config)
    table = DeltaTable.forPath(spark, silver)
    first = table.toDF().agg(F.min("id")).first()
    assert first is not None
    table.delete(F.col("id") == first[0])  # a change gold's queries read
    assert not nothing_new(source, warehouse, config)
