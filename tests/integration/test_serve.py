"""``lakehouse serve`` over the wire: a JDBC client (Hive's driver from pyspark's jars, run in
the test session's JVM, as a BI tool would use it) gets gold rows, and writes, file reads and
setting changes are refused with the guard's reason; SIGTERM stops the server with exit 0."""

from __future__ import annotations

import signal
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from lakehouse_core.layout import Warehouse
from lakehouse_local.broker import free_port
from tests import sessions
from tests.helpers import table_rows
from tests.runs import Run

pytestmark = pytest.mark.integration

LAKEHOUSE = Path(sys.executable).parent / "lakehouse"
GOLD = "window_start timestamp, revenue double"


def query(connection: Any, statement: str) -> list[tuple[str, ...]]:
    """Rows of ``statement`` as strings, or raise the driver's SQLException."""
    result = connection.createStatement().executeQuery(statement)
    width = result.getMetaData().getColumnCount()
    rows = []
    while result.next():
        rows.append(tuple(result.getString(i + 1) for i in range(width)))
    return rows


def refusal(connection: Any, statement: str) -> str:
    with pytest.raises(Py4JJavaError) as caught:
        query(connection, statement)
    return str(caught.value.java_exception.getMessage())


def wait_for_line(run: Run, text: str, deadline: float) -> None:
    while not any(text in line for _, line in run.lines):
        assert run.process.poll() is None, run.output()
        assert time.monotonic() < deadline, f"no {text!r} in time:\n{run.output()}"
        time.sleep(0.5)


def test_serve_reads_over_jdbc_and_refuses_writes_and_paths(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warehouse = Warehouse.from_path(tmp_path / "warehouse")
    rows = [("2026-01-01 10:00:00", 12.5), ("2026-01-01 10:01:00", 7.25)]
    spark.sql(
        "SELECT to_timestamp(t) AS window_start, r AS revenue FROM VALUES "
        + ", ".join(f"('{t}', {r})" for t, r in rows)
        + " AS v(t, r)"
    ).write.format("delta").save(warehouse.table("gold", "revenue_per_minute"))
    spark.createDataFrame([(b"x",)], "value binary").write.format("delta").save(
        warehouse.table("bronze", "shop_orders")
    )
    port = free_port()
    monkeypatch.chdir(
        tmp_path
    )  # the server's Hive client files must not land in the working directory
    started = time.monotonic()
    # The server sets its driver's class path and Java options itself (lakehouse.sql.serve).
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", sessions.submit_args_for_own_driver())
    run = Run([str(LAKEHOUSE), "serve", "--warehouse", str(warehouse.root), "--port", str(port)])
    try:
        wait_for_line(run, f"serving jdbc:hive2://127.0.0.1:{port}/default", started + 120)
        print(f"serve listening after {time.monotonic() - started:.1f} s")
        url = f"jdbc:hive2://127.0.0.1:{port}/default"
        connection = spark._jvm.java.sql.DriverManager.getConnection(url, "", "")  # type: ignore[union-attr]
        try:
            got = query(connection, "SELECT * FROM gold.revenue_per_minute ORDER BY window_start")
            want = table_rows(spark, warehouse.table("gold", "revenue_per_minute"))
            assert [(datetime.fromisoformat(t), float(r)) for t, r in got] == sorted(
                (r["window_start"], r["revenue"]) for r in want
            )
            messages = {
                statement: refusal(connection, statement)
                for statement in (
                    "DELETE FROM gold.revenue_per_minute",
                    "DROP TABLE bronze.shop_orders",
                    "SELECT * FROM text.`/etc/hostname`",
                    "SET spark.sql.runSQLOnFiles=true",
                    "SELECT * FROM json.`/tmp/it's`",
                )
            }
            assert (
                "lakehouse serve is read-only: DELETE changes data"
                in messages["DELETE FROM gold.revenue_per_minute"]
            )
            assert (
                "lakehouse serve is read-only: DROP TABLE changes tables"
                in messages["DROP TABLE bronze.shop_orders"]
            )
            assert (
                "does not read files by path (text.`/etc/hostname`)"
                in messages["SELECT * FROM text.`/etc/hostname`"]
            )
            assert "does not change settings" in messages["SET spark.sql.runSQLOnFiles=true"]
            # The reason reaches the client unchanged (quotes and all).
            assert "(json.`/tmp/it's`)" in messages["SELECT * FROM json.`/tmp/it's`"]
            print(f"serve queried after {time.monotonic() - started:.1f} s")
            assert query(connection, "SELECT count(*) FROM bronze.shop_orders") == [("1",)]
            assert (
                spark.read.format("delta")
                .load(warehouse.table("gold", "revenue_per_minute"))
                .count()
                == 2
            )

            # A table made while the server runs gets its name without a restart.
            spark.createDataFrame([(1,)], "n int").write.format("delta").save(
                warehouse.table("gold", "made_later")
            )
            deadline = time.monotonic() + 30
            while ("gold", "made_later", "false") not in query(connection, "SHOW TABLES IN gold"):
                assert time.monotonic() < deadline, "gold.made_later never appeared"
                time.sleep(1)
            assert query(connection, "SELECT n FROM gold.made_later") == [("1",)]
            print(f"serve named a new table after {time.monotonic() - started:.1f} s")
        finally:
            connection.close()
        run.process.send_signal(signal.SIGTERM)
        assert run.finish(time.monotonic() + 60) == 0, run.output()
        assert "stopped" in run.output()
        assert not {"derby.log", "metastore_db", "spark-warehouse"} & {
            p.name for p in tmp_path.iterdir()
        }
        print(f"serve test: {time.monotonic() - started:.1f} s")
    finally:
        if run.process.poll() is None:
            run.kill()
