"""The demo shop's settings live with the demo: the TOML file equals the Python declarations,
the product has no defaults, and an import-linter contract keeps the product from importing
the demo (a wrong-way import breaks it)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from lakehouse.cli import cli
from lakehouse_core.config import PipelineConfig, load_config
from lakehouse_core.errors import ConfigError
from lakehouse_demo.cli import next_commands
from lakehouse_demo.job import DEMO_CONFIG
from lakehouse_demo.settings import SHOP_CONFIG, ShopGoldSpec, shop_gold_tables
from tests.cli import SHOP_TABLES_TOML, SHOP_TOML

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("lakehouse_core", "cdc", "bronze", "silver", "gold", "expectations")
CONTRACT = "The product imports nothing of the demo"


def test_the_shop_toml_loads_equal_to_the_python_settings() -> None:
    assert load_config(SHOP_TOML) == SHOP_CONFIG
    assert SHOP_CONFIG.gold_tables == shop_gold_tables(ShopGoldSpec())
    assert [t.name for t in SHOP_CONFIG.gold_tables] == ["revenue_per_minute", "user_sessions"]


def test_the_demo_toml_is_what_the_demo_declares() -> None:
    """examples/demo.toml, the file a user reads and reuses, is exactly the demo's declarations
    (what ``python -m lakehouse_demo demo`` runs with and records in its warehouse)."""
    assert load_config(ROOT / "examples" / "demo.toml") == DEMO_CONFIG


def test_the_demo_names_the_commands_that_work_on_its_warehouse() -> None:
    """Its last lines: one command a line, none needing --config, each one the command line
    has (the demo's own warehouse and a customer it holds)."""
    lines = next_commands("/tmp/my demo/warehouse", 7)
    assert lines[0] == "try:"
    commands = [shlex.split(line) for line in lines[1:]]
    assert all(c[0] == "lakehouse" and "--config" not in c for c in commands), lines
    assert all(c[c.index("--warehouse") + 1] == "/tmp/my demo/warehouse" for c in commands)
    assert [c[1] for c in commands] == [
        "status", "status", "verify", "validate", "sql", "replay", "forget"
    ]  # fmt: skip
    assert commands[-1][-2:] == ["--key", '{"id": 7}']
    assert cli.commands.keys() >= {c[1] for c in commands}
    assert next_commands("w", None)[-1].split()[1] == "replay"  # no customer: no forget


def test_the_shop_tables_toml_is_the_shop_without_gold() -> None:
    assert load_config(SHOP_TABLES_TOML) == replace(SHOP_CONFIG, gold_tables=())


def test_no_config_is_no_declarations() -> None:
    config = load_config(None)
    assert config == PipelineConfig()
    assert (config.tables, config.gold_declarations, config.alerts, config.patterns) == (
        (),
        (),
        (),
        (),
    )
    assert config.spec_for_topic("shop.clickstream").format == "debezium"  # not guessed


def test_the_older_gold_table_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "old.toml"
    path.write_text('[gold]\nrevenue_window = "5 minutes"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert "\n" not in str(raised.value)
    assert "[[gold]]" in str(raised.value) and "examples/shop.toml" in str(raised.value)


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the packages under ``root`` (with the project's contracts)."""
    script = Path(sys.executable).parent / "lint-imports"
    return subprocess.run(
        [str(script), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": str(Path(sys.executable).parent)},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_a_product_import_of_the_demo_breaks_the_contract(tmp_path: Path) -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (demo,) = [
        c for c in contracts["tool"]["importlinter"]["contracts"] if c["name"].startswith(CONTRACT)
    ]
    assert demo["type"] == "forbidden" and set(PRODUCT) <= set(demo["source_modules"])
    assert demo["forbidden_modules"] == ["lakehouse_demo"]
    copy = tmp_path / "tree"
    for package in (*PRODUCT, "lakehouse", "lakehouse_local", "lakehouse_demo"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    kept = lint_imports(copy)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    wrong = copy / "gold" / "verify.py"
    line = "\nfrom lakehouse_demo.settings import SHOP_CONFIG  # noqa\n"
    wrong.write_text(wrong.read_text(encoding="utf-8") + line, encoding="utf-8")
    broken = lint_imports(copy)
    assert broken.returncode != 0, broken.stdout
    assert f"{CONTRACT} (lakehouse_demo) BROKEN" in broken.stdout
    assert "gold.verify -> lakehouse_demo.settings" in broken.stdout, broken.stdout
