"""SIGTERM to a run's whole process group (issue 47, defect 6), as systemd's default kill mode
and process supervisors send it: the same clean stop as SIGTERM to the Python process alone,
and no Spark JVM left behind. ``lakehouse serve`` too."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from pyspark.sql import SparkSession

from lakehouse_core.layout import Warehouse
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from lakehouse_local.broker import free_port
from tests import sessions
from tests.cli import LAKEHOUSE, SHOP_TABLES_TOML, run_cli
from tests.runs import Run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

BUDGET_SECONDS = 1700  # each test; every wait in it is bounded by it
JVM_EXIT_SECONDS = 60


def spark_jvms(run: Run) -> list[psutil.Process]:
    """The Java processes the run started (children of its Python process)."""
    children = psutil.Process(run.process.pid).children(recursive=True)
    return [c for c in children if "java" in c.name()]


def assert_gone(processes: list[psutil.Process]) -> None:
    """Each of ``processes`` ends within :data:`JVM_EXIT_SECONDS`."""
    _, alive = psutil.wait_procs(processes, timeout=JVM_EXIT_SECONDS)
    assert not alive, f"left running: {alive}"


@pytest.mark.slow
def test_sigterm_to_the_process_group_stops_cleanly(spark: SparkSession, tmp_path: Path) -> None:
    """``kill -TERM -- -PGID`` during micro-batches: exit 0, the summary, no trace, and no
    JVM left; the next ``--once`` run finds the lease free and brings the rest."""
    deadline = time.monotonic() + BUDGET_SECONDS
    source, warehouse = tmp_path / "source", tmp_path / "warehouse"
    records = generate(WorkloadConfig(events=300, seed=5, malformed_rate=0.02))
    write_files(records, source, lines_per_file=50)
    run = Run(
        [
            str(LAKEHOUSE),
            "run",
            "--config",
            str(SHOP_TABLES_TOML),
            "--source",
            f"files:{source}",
            "--warehouse",
            str(warehouse),
            "--processing-time",
            "2s",
            "--max-files-per-trigger",
            "1",
        ]
    )
    commits = warehouse / "_system" / "checkpoints" / "bronze" / "commits"
    try:
        while not (commits / "0").exists():
            assert run.process.poll() is None, run.output()
            assert time.monotonic() < deadline, f"no bronze batch in time:\n{run.output()}"
            time.sleep(0.2)
        jvms = spark_jvms(run)
        assert jvms, "the run's Spark JVM was not found"
        os.killpg(run.process.pid, signal.SIGTERM)  # the run is its process group's leader
        code = run.finish(deadline)
    finally:
        if run.process.poll() is None:
            run.kill()
    output = "\n".join(line for _, line in run.lines)
    shown = "\n".join(output.splitlines()[:40])
    assert code == 0, shown
    assert "records of this run, per silver table" in output, shown
    assert "Traceback" not in output and "stopped SparkContext" not in output, shown
    assert "Exception" not in output, shown
    assert_gone(jvms)

    finished = run_cli(
        "run",
        "--config",
        SHOP_TABLES_TOML,
        "--source",
        f"files:{source}",
        "--warehouse",
        warehouse,
        "--once",
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    bronze = sum(
        spark.read.format("delta").load(str(warehouse / "bronze" / name)).count()
        for name in Warehouse.from_path(warehouse).table_names("bronze")
    )
    assert bronze == len(records)


@pytest.mark.slow
def test_serve_stops_on_sigterm_to_its_process_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``lakehouse serve`` signalled as a service: exit 0, ``stopped``, no JVM left."""
    deadline = time.monotonic() + BUDGET_SECONDS
    warehouse = tmp_path / "warehouse"
    (warehouse / "gold").mkdir(parents=True)
    port = free_port()
    monkeypatch.chdir(tmp_path)  # the server's Hive client files land here
    # The server sets its driver's class path and Java options itself (lakehouse.sql.serve).
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", sessions.submit_args_for_own_driver())
    run = Run([str(LAKEHOUSE), "serve", "--warehouse", str(warehouse), "--port", str(port)])
    try:
        while not any("serving jdbc:hive2" in line for _, line in run.lines):
            assert run.process.poll() is None, run.output()
            assert time.monotonic() < deadline, f"serve did not start in time:\n{run.output()}"
            time.sleep(0.5)
        jvms = spark_jvms(run)
        assert jvms, "the server's Spark JVM was not found"
        os.killpg(run.process.pid, signal.SIGTERM)
        code = run.finish(deadline)
    finally:
        if run.process.poll() is None:
            run.kill()
    output = run.output()
    assert code == 0, output
    assert output.splitlines()[-1] == "stopped", output
    assert "Traceback" not in output, output
    assert_gone(jvms)
