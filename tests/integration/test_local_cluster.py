"""The jobs on ``local-cluster[2,1,1024]``: two executor JVMs apart from the driver, each with
its own Python workers, as on a real cluster (tasks, the Delta jars and the Python data source
must reach other processes; nothing may rely on sharing the driver's memory).

The demo workload runs end to end there as its own command (a session needs its own JVM), with
its ``verify``; its tables equal those of the same workload in local mode (this process)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from core.layout import Warehouse
from tests.cli import lakehouse, run_cli
from tests.warehouses import assert_same_tables

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

MASTER = "local-cluster[2,1,1024]"
#: The smallest workload the demo takes: every layer still gets rows (and the demo's two
#: arrivals make silver and gold incremental).
EVENTS = "100"
VERIFIED = "verify: silver equals the reference fold of bronze, gold its declarations"


def test_the_demo_on_a_local_cluster_gives_the_tables_of_local_mode(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``lakehouse demo --master local-cluster[2,1,1024]`` passes its verify, and its silver
    and gold tables equal the local run's (apart from the columns that record run times)."""
    cluster, local = tmp_path / "cluster", tmp_path / "local"
    done = lakehouse("demo", "--events", EVENTS, "--warehouse", cluster, "--master", MASTER)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert VERIFIED in done.stdout, done.stdout[-3000:]
    reference = run_cli("demo", "--events", EVENTS, "--warehouse", local)
    assert reference.returncode == 0, reference.stdout[-3000:] + reference.stderr[-3000:]
    compared = assert_same_tables(
        spark,
        Warehouse.from_path(local / "warehouse"),
        Warehouse.from_path(cluster / "warehouse"),
    )
    assert {"silver.orders", "gold.revenue_per_minute", "gold.user_sessions"} <= set(compared)
