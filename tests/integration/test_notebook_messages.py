"""What a notebook user sees, in a new Python process as a notebook's kernel is: ``lh.start``
says that it waits for Spark's JVM to start, and when the session is ready; a statement
``lh.sql`` fails raises one ``LakehouseError`` line and prints nothing on stderr before it
(no PySpark log of the error with its Java stack trace)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lakehouse.api import SPARK_STARTING

pytestmark = pytest.mark.integration

NOTEBOOK = textwrap.dedent(
    """
    import logging, sys
    from lakehouse import LOGGERS, Lakehouse

    logging.basicConfig(format="- %(message)s", stream=sys.stdout)
    for name in LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    lh = Lakehouse(sys.argv[1])
    p = lh.start(f"files:{sys.argv[2]}", trigger="1 second")
    p.stop()
    print("stopped", flush=True)
    try:
        lh.sql("SELECT nope FROM gold.missing_table")
    except Exception as error:
        print(f"{type(error).__name__}: {error}", flush=True)
    """
)


def test_start_says_it_waits_for_spark_and_a_failing_sql_prints_one_line(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", NOTEBOOK, str(tmp_path / "warehouse"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"- {SPARK_STARTING}", done.stdout
    assert lines[1].startswith("- spark: ready after ") and lines[1].endswith(" s"), done.stdout
    error = lines[-1]
    assert error.startswith(
        "LakehouseError: SQL error: [TABLE_OR_VIEW_NOT_FOUND] The table or view "
        "`gold`.`missing_table` cannot be found."
    ), done.stdout
    said = done.stderr
    assert "SQLQueryContextLogger" not in said and "at org.apache" not in said, said[:2000]
    assert len(said) < 1000, said[:2000]
