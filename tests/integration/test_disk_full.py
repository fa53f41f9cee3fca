"""A full disk is one line naming the full location, saying nothing committed was lost and
that the next run continues (issue 47, defect 5).

The disk: ``lakehouse.tests.FullLocalFileSystem`` (``tests/hadoop_fs``), the tests' local
file system that fails every write under the warehouse with ``IOException: No space left on
device`` once the files written there hold a set number of bytes. It is Hadoop's
``file:`` file system of a ``lakehouse run`` process of its own (no mount, no root needed);
the limit is a third of what a clean run of the same input writes, so the disk fills mid-run.
After "freeing space" (the next run without the limit) everything arrives once.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc.sources import SourceSpec
from lakehouse.run.pipeline import run_once
from lakehouse_core.config import load_config
from lakehouse_core.layout import Warehouse
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from tests import sessions
from tests.cli import COMMAND_TIMEOUT, LAKEHOUSE, SHOP_TABLES_TOML, WIDE
from tests.warehouses import assert_same_tables

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FULL_FS = "lakehouse.tests.FullLocalFileSystem"
FULL_FS_CONTEXT = "lakehouse.tests.FullLocalFs"


def lakehouse_on(disk_bytes: int | None, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``lakehouse *args`` in a process whose warehouse disk holds ``disk_bytes`` (None: room
    enough)."""
    settings: dict[str, str] = {}
    if disk_bytes is not None:
        warehouse = str(args[list(args).index("--warehouse") + 1])
        settings = {
            "spark.hadoop.fs.file.impl": FULL_FS,
            "spark.hadoop.fs.AbstractFileSystem.file.impl": FULL_FS_CONTEXT,
            "spark.hadoop.lakehouse.tests.fullDisk.under": warehouse,
            "spark.hadoop.lakehouse.tests.fullDisk.bytes": str(disk_bytes),
        }
    env = {k: v for k, v in os.environ.items() if k not in ("LINES", "LAKEHOUSE_DEBUG")}
    env["COLUMNS"] = str(WIDE)
    env["PYSPARK_SUBMIT_ARGS"] = sessions.submit_args(settings)
    return subprocess.run(
        [str(LAKEHOUSE), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=COMMAND_TIMEOUT,
        env=env,
    )


def size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_a_full_disk_is_one_line_and_the_next_run_continues(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    write_files(generate(WorkloadConfig(events=600, seed=5, malformed_rate=0.01)), source, 150)
    reference = Warehouse.from_path(tmp_path / "reference")
    run_once(spark, SourceSpec("files", str(source)), reference, load_config(SHOP_TABLES_TOML))
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    run = (
        "run",
        "--config",
        SHOP_TABLES_TOML,
        "--once",
        "--source",
        f"files:{source}",
        "--warehouse",
        warehouse,
    )

    full = lakehouse_on(size(tmp_path / "reference") // 3, *run)

    output = full.stdout + full.stderr
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert full.returncode == 2, output
    assert len(errors) == 1, output
    assert "is full (No space left on device)" in errors[0], errors[0]
    assert "nothing committed was lost" in errors[0], errors[0]
    assert "continues where this one stopped" in errors[0], errors[0]
    for noise in ("Traceback", "py4j", "\tat ", "done:"):
        assert noise not in output, output
    assert str(warehouse) in errors[0], errors[0]

    again = lakehouse_on(None, *run)
    assert again.returncode == 0, again.stdout + again.stderr
    got = Warehouse.from_path(warehouse)
    assert_same_tables(spark, reference, got)
    for name in reference.table_names("bronze"):
        want = spark.read.format("delta").load(reference.table("bronze", name))
        have = spark.read.format("delta").load(got.table("bronze", name))
        coordinates = have.select("topic", "partition", "offset").distinct().count()
        assert have.count() == want.count() == coordinates, name
