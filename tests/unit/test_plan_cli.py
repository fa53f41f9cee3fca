"""``lakehouse plan`` and ``--declarations``: what a run with the given declarations would do to
a warehouse (per change from those it recorded), and pipelines declared in Python given to the
command line (a file, ``file.py:name``, ``module:name``), with one error line for each mistake.
No Spark: the warehouse is its recorded declarations and a silver table's log directory."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from lakehouse.cli.declared import load_declarations
from lakehouse.run.declarations import comparable, version_file
from lakehouse_core.config import PipelineConfig, load_config
from lakehouse_core.errors import ConfigError
from lakehouse_core.layout import Warehouse
from lakehouse_demo.job import DEMO_CONFIG
from lakehouse_demo.settings import SHOP_CONFIG
from tests.cli import SHOP_TOML, run_cli

pytestmark = pytest.mark.unit

#: The shop's pipeline declared in Python, its clickstream keyed by two columns.
REKEYED = """
    from lakehouse import Lakehouse, events_table, gold_table, measure, tumbling

    lh = Lakehouse(
        {warehouse!r},
        tables=[events_table("clickstream", topic="shop.clickstream",
                             keys=["event_id", "user_id"], sequence_by="ts")],
        gold=[gold_table("revenue_per_minute", source="orders", event_time="created_at",
                         window=tumbling("5 minutes"),
                         measures=[measure.sum("total", name="revenue")])],
    )
    """


def recorded_warehouse(tmp_path: Path, config: PipelineConfig = SHOP_CONFIG) -> Path:
    """A warehouse that recorded ``config`` and holds silver.clickstream (its log directory)."""
    root = tmp_path / "warehouse"
    folder = Path(Warehouse.from_path(root).declarations)
    folder.mkdir(parents=True)
    (folder / version_file(1)).write_text(config.to_toml(), encoding="utf-8")
    (root / "silver" / "clickstream" / "_delta_log").mkdir(parents=True)
    return root


def python_file(tmp_path: Path, source: str, name: str = "my_pipeline.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def test_plan_of_the_same_declarations_changes_nothing(tmp_path: Path) -> None:
    root = recorded_warehouse(tmp_path)
    result = run_cli("plan", "--warehouse", root, "--config", SHOP_TOML)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"compared with the declarations {root} last ran with (version 1)",
        "no changes: a run goes on as before",
    ]


def test_plan_names_each_change_and_what_it_implies(tmp_path: Path) -> None:
    root = recorded_warehouse(tmp_path)
    demo = python_file(
        tmp_path, "from lakehouse_demo.job import DEMO_CONFIG as demo\n", "demo_decl.py"
    )
    result = run_cli("plan", "--warehouse", root, "--declarations", demo)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "8 changes:"
    assert (
        "  added gold spend_last_hour: new: the run backfills gold.spend_last_hour from "
        "silver.orders" in lines
    )
    assert (
        "  added pattern abandoned_carts: new: the run backfills gold.abandoned_carts from "
        "silver.clickstream" in lines
    )


def test_plan_says_a_run_refuses_a_changed_silver_contract(tmp_path: Path) -> None:
    root = recorded_warehouse(tmp_path)
    declared = python_file(tmp_path, REKEYED.format(warehouse=str(root)))
    result = run_cli("plan", "--warehouse", root, "--declarations", declared)
    assert result.returncode == 3, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1:4] == [
        "3 changes:",
        "  changed table clickstream (keys, schema): silver.clickstream must be rebuilt from "
        "bronze: lakehouse replay --table clickstream (a run refuses until then)",
        "  removed gold user_sessions: gold.user_sessions stays in place, no longer updated "
        "(orphaned); to remove it: lakehouse drop gold.user_sessions --yes",
    ]
    assert lines[4].startswith("  changed gold revenue_per_minute (window, measures): ")
    assert lines[5].startswith(
        "a run refuses: The declarations change how silver.clickstream merges its records"
    )
    assert len(lines) == 6


def test_plan_of_a_new_warehouse_lists_what_a_first_run_makes(tmp_path: Path) -> None:
    result = run_cli("plan", "--warehouse", tmp_path / "new", "--config", SHOP_TOML)
    assert result.returncode == 0, result.stderr
    assert "has no recorded declarations: a first run makes everything declared" in (result.stdout)
    assert "  added table clickstream: new: the run makes silver.clickstream" in result.stdout


def test_plan_needs_declarations(tmp_path: Path) -> None:
    result = run_cli("plan", "--warehouse", tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("error: lakehouse plan compares declarations")


def test_declarations_take_a_file_a_name_in_it_or_a_module(tmp_path: Path) -> None:
    root = recorded_warehouse(tmp_path)
    declared = python_file(tmp_path, REKEYED.format(warehouse=str(root)))
    config = load_declarations(str(declared))
    assert config.tables[0].keys == ("event_id", "user_id")
    assert load_declarations(f"{declared}:lh") == config
    assert load_declarations(f"{declared}:lh.config") == config
    assert load_declarations("lakehouse_demo.job:DEMO_CONFIG") == DEMO_CONFIG
    assert load_declarations(str(SHOP_TOML)) == SHOP_CONFIG
    built = python_file(
        tmp_path,
        """
        from lakehouse import pipeline_config, cdc_table

        def pipeline():
            return pipeline_config(tables=[cdc_table("orders", topic="shop.public.orders")])
        """,
        "built.py",
    )
    assert load_declarations(f"{built}:pipeline").tables[0].name == "orders"
    beside = python_file(
        tmp_path,
        """
        from lakehouse import Lakehouse
        from lakehouse_demo.settings import SHOP_CONFIG

        lh = Lakehouse("/nowhere", tables=SHOP_CONFIG.tables)
        """,
        "beside.py",
    )
    mine = load_declarations(str(beside))  # the Lakehouse, not the config it builds from
    assert (mine.tables, mine.gold_tables) == (SHOP_CONFIG.tables, ())


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("missing.py", r"^--declarations missing.py: no such file missing.py: give a Python"),
        (
            "{declared}:nope",
            r"^--declarations .*my_pipeline.py:nope: the file .*my_pipeline.py defines no "
            r"'nope' \(its pipelines: lh\)\.$",
        ),
        ("os:sep", r"^--declarations os:sep: sep is a str, not a pipeline: give a PipelineConfig"),
        ("no_such_module_x:p", r"^--declarations no_such_module_x:p: no module named "),
        ("{declared}:lh.nope", r": lh has no attribute 'nope'\.$"),
        ("{empty}", r"^--declarations .*empty.py: the file .*empty.py defines no pipeline"),
        ("{two}", r"defines 2 pipelines \(a, b\): name the one to run, e\.g\. --declarations"),
        ("{broken}", r"^--declarations .*broken.py: running .*broken.py raised NameError: "),
        ("{shop}:x", r"a TOML file declares one pipeline; drop ':x'\.$"),
    ],
)
def test_declarations_that_cannot_be_read_are_one_line(
    tmp_path: Path, spec: str, message: str
) -> None:
    root = recorded_warehouse(tmp_path)
    files = {
        "declared": python_file(tmp_path, REKEYED.format(warehouse=str(root))),
        "empty": python_file(tmp_path, "x = 1\n", "empty.py"),
        "two": python_file(
            tmp_path,
            "from lakehouse import pipeline_config\na = pipeline_config()\nb = pipeline_config()\n",
            "two.py",
        ),
        "broken": python_file(tmp_path, "undefined_name\n", "broken.py"),
        "shop": SHOP_TOML,
    }
    given = spec.format(**{name: str(path) for name, path in files.items()})
    with pytest.raises(ConfigError, match=message) as raised:
        load_declarations(given)
    assert "\n" not in str(raised.value)
    assert not any(name.startswith("lakehouse_declarations_") for name in sys.modules)


def test_a_command_refuses_both_config_and_declarations(tmp_path: Path) -> None:
    root = recorded_warehouse(tmp_path)
    result = run_cli(
        "plan", "--warehouse", root, "--config", SHOP_TOML, "--declarations", SHOP_TOML
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"error: Both --config {SHOP_TOML} and --declarations {SHOP_TOML} given: give one of "
        "them.\n"
    )


def test_a_missing_module_is_one_error_line_on_the_command_line(tmp_path: Path) -> None:
    result = run_cli("plan", "--warehouse", tmp_path, "--declarations", "nomod:x")
    assert result.returncode == 2
    assert result.stderr.startswith("error: --declarations nomod:x: no module named 'nomod'")


def test_drop_lists_what_it_would_delete_and_refuses_a_declared_table(tmp_path: Path) -> None:
    root = recorded_warehouse(tmp_path)  # declares gold.user_sessions
    for path in (
        "gold/user_sessions/_delta_log",
        "gold/user_sessions_2/_delta_log",
        "_system/checkpoints/gold_user_sessions/commits",
        "_system/checkpoints/gold_user_sessions_2/commits",
    ):
        (root / path).mkdir(parents=True)
    for path in (
        "_system/checkpoints/gold_user_sessions._lakehouse_app_id",
        "_system/checkpoints/gold_user_sessions.applied.json",
        "_system/watermarks/user_sessions.json",
    ):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("{}", encoding="utf-8")
    declared = run_cli("drop", "gold.user_sessions", "--warehouse", root, "--yes")
    assert declared.returncode == 2
    assert declared.stderr == (
        "error: gold.user_sessions is declared ([[gold]] user_sessions): remove its declaration "
        "and run first (the next run would make it again); lakehouse plan shows it as removed "
        "then.\n"
    )
    tables_only = python_file(
        tmp_path,
        "from lakehouse_demo.settings import SHOP_CONFIG\n"
        "from dataclasses import replace\n"
        "tables_only = replace(SHOP_CONFIG, gold_tables=())\n",
        "tables_only.py",
    )
    args = ("drop", "gold.user_sessions", "--warehouse", root, "--declarations", tables_only)
    preview = run_cli(*args)
    assert preview.returncode == 2
    assert preview.stdout.splitlines() == [
        "dropping gold.user_sessions would delete:",
        "  gold/user_sessions",
        "  _system/watermarks/user_sessions.json",
        "  _system/checkpoints/gold_user_sessions",
        "  _system/checkpoints/gold_user_sessions._lakehouse_app_id",
        "  _system/checkpoints/gold_user_sessions.applied.json",
    ]
    assert preview.stderr.endswith(
        "error: nothing dropped: add --yes to drop gold.user_sessions.\n"
    )
    assert (root / "gold" / "user_sessions" / "_delta_log").is_dir()
    bronze = run_cli("drop", "bronze.orders", "--warehouse", root)
    assert bronze.returncode == 2 and "bronze is the system of record" in bronze.stderr
    missing = run_cli("drop", "gold.nothing", "--warehouse", root, "--declarations", tables_only)
    assert missing.stderr.endswith("holds no gold.nothing: nothing to drop.\n")


def test_plan_compares_a_relative_suites_directory_as_a_run_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "q.toml").write_text('[quality]\nsuites = "suites"\n', encoding="utf-8")
    recorded = comparable(load_config(Path("sub/q.toml")))
    root = recorded_warehouse(tmp_path, recorded)
    result = run_cli("plan", "--warehouse", root, "--config", "sub/q.toml")
    assert result.stdout.splitlines()[-1] == "no changes: a run goes on as before", result.stdout
