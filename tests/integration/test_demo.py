"""The command line end to end: the demo (``python -m lakehouse_demo demo``), ``lakehouse sql``
and user errors.

``demo`` and ``sql`` run in this process (:func:`tests.cli.run_demo_cli`, ``run_cli``: the test
session's Spark); the user errors run through the installed ``lakehouse`` console script, as a
user would run it: a user error must end with exit status 2 and one ``error:`` line on stderr,
never a Python or Java stack trace.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lakehouse.api import Lakehouse
from lakehouse.ops.table_list import warehouse_tables
from lakehouse_core.config import load_config
from lakehouse_core.layout import Warehouse
from lakehouse_core.spark import get_spark
from lakehouse_demo.job import DEMO_CONFIG
from tests.cli import SHOP_TOML, lakehouse, run_cli, run_demo_cli, table_cells
from tests.delta_rs import assert_delta_rs_reads_same_rows

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def assert_user_error(result: subprocess.CompletedProcess[str], *phrases: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1, result.stderr
    for phrase in phrases:
        assert phrase in error_lines[0], error_lines[0]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("demo")
    # Enough for every case the tests look for: quarantined records and late changes to final
    # windows (1,000 events of seed 42: 10 and 188; the fixed cost of the run is most of it).
    return root, run_demo_cli("demo", "--events", 1000, "--warehouse", root)


def test_demo_runs_every_layer_and_verifies(
    demo: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    _, result = demo
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    names = [row[0] for row in table_cells(out) if row and "." in row[0]]
    for layer in ("bronze", "silver", "gold"):
        assert any(name.startswith(f"{layer}.") for name in names), (layer, names)
    assert "silver.quarantine" in names
    assert re.search(r"^quarantined records: [1-9][0-9]*$", out, re.MULTILINE), out
    assert "silver equals the reference fold" in out
    # The generator sent some clicks late on purpose; the second arrival's corrected sessions
    # the watermark had closed, and gold.late_events recorded them.
    assert re.search(
        r"^late data: [1-9][0-9]* changes landed in windows already final", out, re.M
    ), out
    # The quality summary: the shop's suites ran in every layer's stream, on every silver
    # table; none dropped a row.
    quality = [row for row in table_cells(out) if len(row) == 6 and row[1] in ("warn", "fail")]
    assert {row[0].split(".")[0] for row in quality} == {"bronze", "silver", "gold"}, quality
    silver = {row[0].split(".")[1] for row in quality if row[0].startswith("silver.")}
    assert silver == {"clickstream", "customers", "orders"}
    assert all(row[4] == "0" for row in quality), quality
    assert "silver.orders.total_mostly_not_negative" in {row[0] for row in quality}, quality
    # The gold query's result: rows of (window_start, orders, revenue).
    gold_rows = [
        row
        for row in table_cells(out)
        if len(row) == 3 and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row[0])
    ]
    assert gold_rows, out
    _, orders, revenue = gold_rows[0]
    assert int(orders) > 0 and float(revenue) > 0, gold_rows[0]


def test_the_rows_printed_are_the_rows_spark_counts(
    demo: tuple[Path, subprocess.CompletedProcess[str]], spark: SparkSession
) -> None:
    """The demo prints each table's rows from its Delta log (no Spark job): the rows Spark
    counts in each, for every table of bronze, silver and gold."""
    root, result = demo
    assert result.returncode == 0
    warehouse = Warehouse.from_path(root / "warehouse")
    printed = {
        row[0]: int(row[1])
        for row in table_cells(result.stdout)
        if len(row) == 2 and row[0].split(".")[0] in ("bronze", "silver", "gold")
    }
    assert {"bronze", "silver", "gold"} == {name.split(".")[0] for name in printed}, printed
    on_disk = {
        f"{path.parent.name}.{path.name}"
        for path in (root / "warehouse").glob("*/*")
        if path.parent.name in ("bronze", "silver", "gold") and (path / "_delta_log").is_dir()
    }
    assert set(printed) == on_disk
    counted = {
        name: spark.read.format("delta").load(warehouse.table(*name.split("."))).count()
        for name in printed
    }
    assert printed == counted


def test_a_session_from_the_factory_names_the_tables_without_a_helper(
    demo: tuple[Path, subprocess.CompletedProcess[str]], spark: SparkSession
) -> None:
    root, _ = demo
    warehouse = Warehouse.from_path(root / "warehouse")
    want = spark.read.format("delta").load(warehouse.table("gold", "revenue_per_minute")).count()
    assert want > 0
    for entry in ("gold.revenue_per_minute", "silver.orders", "system.event_log"):
        spark.sql(f"DROP TABLE IF EXISTS {entry}")  # as in a new process: no names yet
    session = get_spark(warehouse=warehouse)
    fresh = session.newSession()
    assert fresh.sql("SELECT * FROM gold.revenue_per_minute").count() == want
    assert fresh.sql("SELECT count(*) FROM silver.orders").first()[0] > 0
    assert fresh.sql("SELECT count(*) FROM system.event_log").first()[0] > 0
    spark.sql("DROP TABLE gold.revenue_per_minute")
    notebook = Lakehouse(root / "warehouse", spark=spark)
    notebook.register_tables()  # the getter names nothing: registering is explicit
    assert notebook.spark.sql("SELECT * FROM gold.revenue_per_minute").count() == want


def test_sql_counts_gold_sessions(demo: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    root, result = demo
    assert result.returncode == 0
    query = "SELECT count(*) AS n FROM gold.user_sessions"
    sql = run_cli("sql", "--warehouse", root / "warehouse", "--format", "table", query)
    assert sql.returncode == 0, sql.stdout + sql.stderr
    cells = table_cells(sql.stdout)
    assert len(cells) == 1 and cells[0][0].isdigit() and int(cells[0][0]) > 0, sql.stdout


def test_sql_attributes_orders_to_their_clicks(
    demo: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """gold.order_attribution (the demo's stream join, checked by verify with the others):
    orders follow a checkout click of their customer, so most have clicks before them."""
    root, result = demo
    assert result.returncode == 0
    query = (
        "SELECT count(*) AS n, count_if(clicks > 0 AND last_page IS NOT NULL) AS attributed "
        "FROM gold.order_attribution"
    )
    sql = run_cli("sql", "--warehouse", root / "warehouse", "--format", "table", query)
    assert sql.returncode == 0, sql.stdout + sql.stderr
    (cells,) = table_cells(sql.stdout)
    assert 0 < int(cells[1]) <= int(cells[0]), sql.stdout


def test_the_warehouse_records_its_declarations_and_commands_use_them(
    demo: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """The demo's two runs --once had the same declarations: one version; the demo then
    recorded its alerts too (a second). ``status`` and ``verify`` without --config use them
    (every gold table listed, verify exits 0); a --config that differs gets a note."""
    root, result = demo
    assert result.returncode == 0
    warehouse = Warehouse.from_path(root / "warehouse")
    folder = Path(warehouse.declarations)
    names = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    assert names == ["0000000001.json", "0000000001.toml", "0000000002.json", "0000000002.toml"]
    first = json.loads((folder / "0000000001.json").read_text(encoding="utf-8"))
    second = json.loads((folder / "0000000002.json").read_text(encoding="utf-8"))
    assert (first["command"], second["command"]) == ("run --once", "demo")
    assert load_config(folder / "0000000001.toml") == replace(DEMO_CONFIG, alerts=())
    assert load_config(folder / "0000000002.toml") == DEMO_CONFIG

    status = run_cli("status", "--warehouse", warehouse.root, "--json")
    assert status.returncode == 0 and status.stderr == "", status.stdout + status.stderr
    gold = {entry["table"] for entry in json.loads(status.stdout)["gold"]}
    declared = {f"gold.{t.name}" for t in (*DEMO_CONFIG.gold_tables, *DEMO_CONFIG.patterns)}
    assert declared <= gold, gold

    verify = run_cli("verify", "--warehouse", warehouse.root)
    assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-3000:]
    assert "note:" not in verify.stderr, verify.stderr
    assert "gold.user_sessions: " in verify.stdout and "silver.clickstream: " in verify.stdout

    other = run_cli("status", "--warehouse", warehouse.root, "--config", SHOP_TOML)
    assert other.returncode == 0, other.stdout + other.stderr
    assert other.stderr.splitlines() == [
        "note: the declarations given differ from those the warehouse last ran with (demo of "
        f"{second['recorded_at'][:19].replace('T', ' ')} UTC): "
        "removed gold revenue_by_tier, removed gold spend_last_hour, removed gold order_blocks, "
        "removed gold order_attribution, removed pattern order_bursts, removed pattern "
        "abandoned_carts, removed alert big_orders, changed [quality]"
    ], other.stderr
    assert len(names) == 4  # commands that only read record nothing


def test_every_table_opens_with_delta_rs(
    spark: SparkSession, demo: tuple[Path, subprocess.CompletedProcess[str]]
) -> None:
    """Every Delta table of the demo warehouse (bronze, silver, gold and the job tables) reads
    the same in delta-rs as in Spark: none needs a reader feature delta-rs lacks."""
    root, result = demo
    assert result.returncode == 0
    tables = sorted(log.parent for log in (root / "warehouse").rglob("_delta_log"))
    layers = {table.relative_to(root / "warehouse").parts[0] for table in tables}
    assert {"bronze", "silver", "gold"} <= layers, tables
    for table in tables:
        assert_delta_rs_reads_same_rows(spark, str(table))


@pytest.fixture(scope="module")
def sql_error(
    demo: tuple[Path, subprocess.CompletedProcess[str]],
) -> subprocess.CompletedProcess[str]:
    root, _ = demo
    return lakehouse("sql", "--warehouse", root / "warehouse", "SELECT * FROM nope.nothing")


def test_sql_error_is_one_line(sql_error: subprocess.CompletedProcess[str]) -> None:
    assert_user_error(sql_error, "TABLE_OR_VIEW_NOT_FOUND")


def test_sql_error_has_no_stack_trace(sql_error: subprocess.CompletedProcess[str]) -> None:
    assert sql_error.returncode == 2
    assert "stacktrace" not in sql_error.stderr
    assert not re.search(r"\bat (org|java|scala)\.", sql_error.stderr), sql_error.stderr[:2000]


@pytest.fixture(scope="module")
def bogus_source(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """One refused run in a new process (in a pipe), read by the two tests below."""
    warehouse = tmp_path_factory.mktemp("bogus")
    return lakehouse("run", "--source", "bogus:x", "--warehouse", warehouse, wide=False)


def test_run_rejects_unknown_source(bogus_source: subprocess.CompletedProcess[str]) -> None:
    assert_user_error(bogus_source, "Invalid source 'bogus:x'", "files:DIR")


def test_user_error_is_one_line_in_a_pipe(bogus_source: subprocess.CompletedProcess[str]) -> None:
    assert bogus_source.returncode == 2
    assert bogus_source.stderr.count("\n") == 1, bogus_source.stderr
    assert bogus_source.stderr.rstrip("\n").endswith("comma-separated)."), bogus_source.stderr


def test_a_new_user_runs_the_commands_the_demo_names_without_config(
    demo: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """What a new user does after the demo: the commands its last lines name, on its
    warehouse, none with --config, each giving the right answer: verify passes on every table;
    status lists every table the demo declares with behind 0, nothing orphaned, and draws them
    all on the page; validate checks every table that has a suite; sql answers; ``replay
    --table orders`` and ``forget`` keep every table (the replay rebuilds the same rows).

    The last test of the module: the replay and forget change the shared demo warehouse."""
    root, result = demo
    assert result.returncode == 0
    warehouse = Warehouse.from_path(root / "warehouse")
    printed = result.stdout.splitlines()
    commands = [shlex.split(line) for line in printed[printed.index("try:") + 1 :]]
    assert [c[1] for c in commands] == [
        "status", "status", "verify", "validate", "sql", "replay", "forget"
    ], printed[-10:]  # fmt: skip
    for command in commands:
        assert command[0] == "lakehouse" and "--config" not in command, command
        assert command[command.index("--warehouse") + 1] == warehouse.root, command
    page = tmp_path / "pipeline.html"
    ran = {}
    for command in commands[:5]:  # the ones that only read
        args = [str(page) if arg == "pipeline.html" else arg for arg in command[1:]]
        if args[0] == "validate":
            args += ["--docs", str(tmp_path / "docs")]
        done = run_cli(*args)
        assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
        assert "note:" not in done.stderr and "Traceback" not in done.stderr, done.stderr
        ran["status --html" if "--html" in args else args[0]] = done

    declared = check_status(warehouse, ran["status"], page)
    assert "silver.clickstream: " in ran["verify"].stdout
    for table in declared:
        assert re.search(f"^{table}: .*: ok$", ran["verify"].stdout, re.M), ran["verify"].stdout
    validated = {row[0] for row in table_cells(ran["validate"].stdout) if len(row) == 5}
    assert {"silver.orders", "silver.customers", "silver.clickstream"} <= validated, validated
    assert {"gold.revenue_per_minute", "gold.user_sessions"} <= validated, validated
    assert (tmp_path / "docs").is_dir()
    header, *sessions = ran["sql"].stdout.splitlines()  # CSV: stdout is no terminal
    assert "user_id" in header.split(",") and 1 <= len(sessions) <= 5, ran["sql"].stdout

    def held() -> dict[str, int]:
        return {
            t.name: t.rows
            for t in warehouse_tables(warehouse, datetime.now(UTC))
            if t.layer in ("silver", "gold")
        }

    before = held()
    replay, forget = commands[5], commands[6]
    replayed = run_cli(*replay[1:])
    assert replayed.returncode == 0, replayed.stdout[-3000:] + replayed.stderr[-3000:]
    # Every table kept, rebuilt to the same rows; gold.alerts too, though not to the same
    # rows: it keeps the notifications sent, and an incremental run sent one for a burst a
    # later batch changed.
    assert set(held()) == set(before)
    assert {t: n for t, n in held().items() if t != "gold.alerts"} == {
        t: n for t, n in before.items() if t != "gold.alerts"
    }
    customer = json.loads(forget[forget.index("--key") + 1])
    forgot = run_cli(*forget[1:])
    assert forgot.returncode == 0, forgot.stdout[-3000:] + forgot.stderr[-3000:]
    assert "none holds the key" in forgot.stdout, forgot.stdout
    after = held()
    assert set(after) == set(before)
    assert after["silver.customers"] == before["silver.customers"] - 1
    ids = spark_free_ids(warehouse.table("silver", "customers"))
    assert customer["id"] not in ids and ids, ids


def check_status(
    warehouse: Warehouse, printed: subprocess.CompletedProcess[str], page: Path
) -> set[str]:
    """``status`` of the demo's warehouse after its complete runs: every gold table and
    pattern it declares (8), each behind 0 with its last batch, silver behind 0, nothing
    orphaned, each named in the text and drawn on the page; the names of the gold tables."""
    declared = {f"gold.{t.name}" for t in DEMO_CONFIG.gold_tables}
    declared |= {f"gold.{p.name}" for p in DEMO_CONFIG.patterns}
    assert len(declared) == 8
    status = json.loads(run_cli("status", "--warehouse", warehouse.root, "--json").stdout)
    gold = {g["table"]: g for g in status["gold"]}
    assert set(gold) == declared, sorted(gold)
    assert {t: g["versions_behind"] for t, g in gold.items()} == dict.fromkeys(declared, 0)
    assert all(g["last_batch"] is not None for g in gold.values()), gold
    assert {s["table"]: s["records_behind"] for s in status["silver"]} == {
        "silver.clickstream": 0, "silver.customers": 0, "silver.orders": 0
    }  # fmt: skip
    assert status["orphaned"] == [] and status["models"] == []
    shown = {row[0]: row for row in table_cells(printed.stdout)}
    assert declared <= set(shown), printed.stdout
    drawn = set(re.findall(r'data-table="([^"]+)"', page.read_text(encoding="utf-8")))
    assert declared | {"silver.orders", "silver.customers", "silver.clickstream"} <= drawn
    return declared


def spark_free_ids(path: str) -> list[int]:
    """The ``id`` column of the Delta table at ``path``, read with ``deltalake``."""
    return [int(v) for v in DeltaTable(path).to_pyarrow_table(columns=["id"])["id"].to_pylist()]
