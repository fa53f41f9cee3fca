"""A command that starts Spark prints our lines first: none of what the JVM and Spark print
as a session starts (Java's notice of the incubating vector module, Spark's default log
level and how to change it), while what Spark reports as an error still reaches stderr."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakehouse_core.spark import JVM_START_NOTICE, _copy_lines
from tests.cli import COMMAND_TIMEOUT, LAKEHOUSE

pytestmark = pytest.mark.integration

NOISE = (
    "WARNING: Using incubator modules",
    'Setting default log level to "WARN"',
    "To adjust logging level use sc.setLogLevel",
)


def test_a_command_that_starts_spark_begins_with_our_line(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    write_deltalake(str(root / "silver" / "orders"), pa.table({"id": list(range(7))}))
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    done = subprocess.run(
        [str(LAKEHOUSE), "sql", "--warehouse", str(root), "--format", "json",
         "SELECT count(*) AS n FROM silver.orders"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, env=env,
        timeout=COMMAND_TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout
    assert not any(noise in done.stdout for noise in NOISE), done.stdout
    assert done.stdout.splitlines()[0] == "["  # our first line: the JSON result's
    assert json.loads(done.stdout) == [{"n": 7}], done.stdout


def test_the_jvm_stderr_keeps_everything_but_the_start_notice() -> None:
    """The copy of the JVM's stderr leaves out the notice alone: Spark's errors, and lines
    that only mention the notice's words, pass in order."""
    read_end, write_end = os.pipe()
    target_read, target_write = os.pipe()
    lines = [
        JVM_START_NOTICE + b"jdk.incubator.vector\n",
        b"12:00:01 ERROR SparkContext: Error initializing SparkContext.\n",
        b"java.lang.IllegalStateException: boom\n",
        b"  WARNING: Using incubator modules: quoted, not at the start\n",
        b"no newline at the end",
    ]
    copier = threading.Thread(target=_copy_lines, args=(read_end, target_write))
    copier.start()
    with os.fdopen(write_end, "wb") as jvm:
        for line in lines:
            jvm.write(line)
    copier.join(timeout=10)
    os.close(target_write)
    with os.fdopen(target_read, "rb") as copied:
        assert copied.read() == b"".join(lines[1:])
