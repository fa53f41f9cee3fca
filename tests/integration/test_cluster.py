"""The jobs under ``spark-submit``: the submitted session (its master, jars and settings) is
used as is, never replaced by a local session of this project's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from lakehouse_core.spark import local_delta_jars

pytestmark = pytest.mark.slow

SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"

#: A driver script: the command line as a spark-submit application, then what its session is.
SUBMITTED_SQL = """
import sys
from pyspark.sql import SparkSession
from lakehouse.cli import main

try:
    main(["sql", "--warehouse", sys.argv[1], "--format", "csv", "SELECT 1 AS one"])
except SystemExit as exit_:
    assert not exit_.code, exit_.code
session = SparkSession.getActiveSession()
print("master=" + session.sparkContext.master)
print("extensions=" + session.conf.get("spark.sql.extensions"))
print("app=" + session.conf.get("spark.app.name"))
"""


def submit_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def test_spark_submit_keeps_the_submitted_master_and_settings(tmp_path: Path) -> None:
    """Under spark-submit, a command runs in the submitted session: its master (not the local
    default ``local[2]``) and app name; Delta's SQL extension, not submitted, is added."""
    script = tmp_path / "driver.py"
    script.write_text(SUBMITTED_SQL, encoding="utf-8")
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    done = subprocess.run(
        [
            str(SPARK_SUBMIT),
            "--master",
            "local[1]",
            "--name",
            "submitted-app",
            "--jars",
            ",".join(str(jar) for jar in local_delta_jars()),
            "--conf",
            "spark.ui.enabled=false",
            str(script),
            str(warehouse),
        ],
        env=submit_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "one" in lines and "1" in lines, done.stdout
    assert "master=local[1]" in lines, done.stdout
    assert "app=submitted-app" in lines, done.stdout
    assert "extensions=io.delta.sql.DeltaSparkSessionExtension" in lines, done.stdout
