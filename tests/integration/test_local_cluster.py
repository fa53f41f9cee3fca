"""The jobs on ``local-cluster[2,1,1024]``: two executor JVMs apart from the driver, each with
its own Python workers, as on a real cluster (tasks, the Delta jars and the Python data source
must reach other processes; nothing may rely on sharing the driver's memory).

The demo workload runs end to end there as its own command (a session needs its own JVM). Its
``verify`` checks silver against the reference fold of bronze and gold against its
declarations; this test checks that bronze holds every record of the source files exactly once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse_core.layout import Warehouse
from lakehouse_core.spark import LOCAL_SETTINGS
from tests import sessions
from tests.cli import lakehouse_demo
from tests.runs import bronze_multiset, described

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

MASTER = "local-cluster[2,1,1024]"
#: The smallest workload the demo takes: every layer still gets rows (and the demo's two
#: arrivals make silver and gold incremental).
EVENTS = "100"
VERIFIED = "verify: silver equals the reference fold of bronze, gold its declarations"


def test_the_demo_on_a_local_cluster_verifies_and_ingests_every_record_once(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo with ``--master local-cluster[2,1,1024]`` passes its verify, and its bronze
    tables hold each line of the demo's source files once."""
    # The product's task counts, not the tests' one task a stage: both executors get tasks.
    spread = {key: LOCAL_SETTINGS[key] for key in sessions.ONE_TASK}
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", sessions.submit_args(spread))
    done = lakehouse_demo("demo", "--events", EVENTS, "--warehouse", tmp_path, "--master", MASTER)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert VERIFIED in done.stdout, done.stdout[-3000:]

    warehouse = Warehouse.from_path(tmp_path / "warehouse")
    names = warehouse.table_names("bronze")
    assert names, "no bronze table"
    lines = [
        line
        for path in sorted((tmp_path / "source").iterdir())
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    ingested = sum(
        (
            bronze_multiset(spark.read.format("delta").load(warehouse.table("bronze", name)))
            for name in names
        ),
        start=Counter(),
    )
    duplicated = Counter({row: n for row, n in ingested.items() if n > 1})
    assert not duplicated, f"bronze duplicates: {described(duplicated)}"
    assert ingested.total() == len(lines), (ingested.total(), len(lines))
