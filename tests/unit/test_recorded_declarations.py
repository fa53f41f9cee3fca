"""The declarations a warehouse records of its runs (:mod:`lakehouse.run.declarations`): version
names, what differs between two configs, which declarations a command runs with and the note
it prints, reading the newest version as plain files, and writing a version only when the
declarations change. No Spark: writes go to plain files in place of Hadoop's."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lakehouse.run import declarations
from lakehouse.run.declarations import (
    Recorded,
    choose,
    comparable,
    differences,
    newest_recorded,
    record_declarations,
    recorded_versions,
    version_file,
)
from lakehouse_core.config import (
    MaintenanceSpec,
    PipelineConfig,
    QualitySpec,
    config_from_toml,
    load_config,
)
from lakehouse_core.errors import ConfigError
from lakehouse_core.layout import Warehouse
from lakehouse_demo.job import DEMO_CONFIG, REVENUE_BY_TIER
from lakehouse_demo.settings import SHOP_CONFIG
from tests.cli import SHOP_TOML

pytestmark = pytest.mark.unit

AT = datetime(2026, 1, 2, 10, 0, tzinfo=UTC)


def test_version_files_sort_as_numbers() -> None:
    assert version_file(1) == "0000000001.toml"
    assert version_file(12, "json") == "0000000012.json"
    names = [version_file(n) for n in (10, 2, 1)] + ["0000000003.json", ".0000000009.toml.crc"]
    assert recorded_versions([*names, "notes.toml", "00000000001.toml"]) == [1, 2, 10]
    with pytest.raises(ValueError, match="out of range"):
        version_file(0)


@pytest.mark.parametrize("config", [DEMO_CONFIG, SHOP_CONFIG, PipelineConfig()])
def test_declarations_read_back_equal(config: PipelineConfig) -> None:
    assert config_from_toml(config.to_toml()) == config


def test_the_shop_file_reads_back_equal() -> None:
    shop = load_config(SHOP_TOML)
    assert config_from_toml(shop.to_toml()) == shop == SHOP_CONFIG


def test_differences_name_what_changed() -> None:
    given = replace(
        DEMO_CONFIG,
        tables=(),
        gold_tables=tuple(g for g in DEMO_CONFIG.gold_tables if g.name != REVENUE_BY_TIER.name),
        patterns=(replace(DEMO_CONFIG.patterns[0], within="9 minutes"), *DEMO_CONFIG.patterns[1:]),
        maintenance=MaintenanceSpec(bronze_retention_days=3),
    )
    assert differences(given, DEMO_CONFIG) == [
        "removed table clickstream",
        f"removed gold {REVENUE_BY_TIER.name}",
        "changed pattern order_bursts",
        "changed [maintenance]",
    ]
    assert differences(DEMO_CONFIG, replace(DEMO_CONFIG, alerts=())) == ["added alert big_orders"]
    assert differences(DEMO_CONFIG, DEMO_CONFIG) == []
    reordered = replace(DEMO_CONFIG, patterns=DEMO_CONFIG.patterns[::-1])
    assert differences(reordered, DEMO_CONFIG) == ["reordered entries"]


def test_a_command_without_config_runs_with_the_recorded_declarations() -> None:
    recorded = Recorded(3, SHOP_CONFIG, AT, "run --once")
    assert choose(None, recorded).config == SHOP_CONFIG
    assert choose(None, recorded).note is None and choose(None, recorded).recorded
    assert choose(None, None).config == PipelineConfig()  # nothing recorded: none
    assert choose(SHOP_CONFIG, None).note is None


def test_config_given_wins_with_a_note_when_it_differs() -> None:
    recorded = Recorded(3, SHOP_CONFIG, AT, "run --once")
    same = choose(SHOP_CONFIG, recorded)
    assert same.config == SHOP_CONFIG and same.note is None
    other = choose(PipelineConfig(), recorded)
    assert other.config == PipelineConfig() and not other.recorded
    assert other.note == (
        "note: the declarations given differ from those the warehouse last ran with (run --once "
        "of 2026-01-02 10:00:00 UTC): removed table clickstream, removed gold "
        "revenue_per_minute, removed gold user_sessions"
    )
    unnoted = choose(PipelineConfig(), Recorded(4, SHOP_CONFIG))
    assert unnoted.note is not None and "(version 4)" in unnoted.note


def test_a_relative_suites_directory_is_recorded_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = PipelineConfig(quality=QualitySpec(suites="suites"))
    assert comparable(config).quality.suites == str(tmp_path.resolve() / "suites")
    assert comparable(SHOP_CONFIG) is SHOP_CONFIG


@pytest.fixture
def plain_storage(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hadoop's writes as plain file writes (a local warehouse), so no Spark is needed."""

    def write_text(_spark: object, uri: str, text: str) -> None:
        Path(uri).parent.mkdir(parents=True, exist_ok=True)
        Path(uri).write_text(text, encoding="utf-8")

    monkeypatch.setattr(declarations.storage, "write_text", write_text)


@pytest.mark.usefixtures("plain_storage")
def test_a_version_is_written_only_when_the_declarations_change(tmp_path: Path) -> None:
    warehouse = Warehouse.from_path(tmp_path)
    assert newest_recorded(warehouse) is None
    assert record_declarations(None, warehouse, SHOP_CONFIG, "run --once", AT) == 1  # type: ignore[arg-type]
    assert record_declarations(None, warehouse, SHOP_CONFIG, "run --once") is None  # type: ignore[arg-type]
    assert record_declarations(None, warehouse, DEMO_CONFIG, "demo") == 2  # type: ignore[arg-type]
    assert record_declarations(None, warehouse, DEMO_CONFIG, "replay") is None  # type: ignore[arg-type]
    folder = Path(warehouse.declarations)
    assert sorted(p.name for p in folder.iterdir()) == [
        "0000000001.json",
        "0000000001.toml",
        "0000000002.json",
        "0000000002.toml",
    ]
    first = json.loads((folder / "0000000001.json").read_text(encoding="utf-8"))
    assert (first["version"], first["command"], first["recorded_at"]) == (
        1,
        "run --once",
        "2026-01-02T10:00:00+00:00",
    )
    newest = newest_recorded(warehouse)
    assert newest is not None
    assert (newest.version, newest.config, newest.command) == (2, DEMO_CONFIG, "demo")
    (folder / "0000000003.toml").write_text("[[tables]]\nnope = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^The warehouse's recorded declarations .*0003\.toml"):
        newest_recorded(warehouse)
