"""Damaged state gives one line naming it and the fix, never a trace or a silent ``done``
(issue 47, defect 4).

A finished warehouse (part 1 of a shop workload) is restored before each test at the same
absolute path (the file source's checkpoint names its files by absolute path), one piece of
its state is damaged, part 2 arrives, and ``lakehouse run --once`` (in process) must exit 2 with
one ``error:`` line naming the piece and its fix. Where the fix is a command or deleting a
file, the test applies it and checks that the next run's silver and gold equal a clean run of
both parts (nothing lost, nothing applied twice).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc.sources import SourceSpec
from lakehouse.run.pipeline import run_once
from lakehouse_core.layout import LATE_EVENTS, Warehouse
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from lakehouse_demo.settings import SHOP_CONFIG
from tests.cli import SHOP_TOML, run_cli
from tests.warehouses import Bundle, assert_same_tables, comparable, rows

#: The module's fixtures run the pipeline twice before the first test (part 1; part 2 after it).
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def bundle(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    made = Bundle(tmp_path_factory.mktemp("damaged"))
    parts = write_files(
        generate(WorkloadConfig(events=240, seed=46, malformed_rate=0.01)), made.base / "parts", 120
    )
    made.source.mkdir(parents=True)
    made.later.mkdir()
    shutil.copy(parts[0], made.source / parts[0].name)
    for part in parts[1:]:
        shutil.copy(part, made.later / part.name)
    run_once(
        spark,
        SourceSpec("files", str(made.source)),
        Warehouse.from_path(made.warehouse),
        SHOP_CONFIG,
    )
    shutil.copytree(made.live, made.pristine)
    return made


@pytest.fixture(scope="module")
def reference(
    spark: SparkSession, bundle: Bundle, tmp_path_factory: pytest.TempPathFactory
) -> Warehouse:
    """Undamaged runs of part 1, then part 2 (as the live warehouse gets them): part 2 run on
    the pristine warehouse of part 1 (at its live paths, which its checkpoints name), then
    copied aside, and the live warehouse restored."""
    bundle.restore()
    bundle.arrive()
    run_once(
        spark,
        SourceSpec("files", str(bundle.source)),
        Warehouse.from_path(bundle.warehouse),
        SHOP_CONFIG,
    )
    copy = tmp_path_factory.mktemp("damaged-ref") / "wh"
    shutil.copytree(bundle.warehouse, copy)
    bundle.restore()
    return Warehouse.from_path(copy)


def assert_same_results(spark: SparkSession, want: Warehouse, got: Path, replayed: bool) -> None:
    """Silver and gold of ``got`` equal ``want``'s; after a replay without ``gold.late_events``
    (a rebuild reads in one go what arrived late: none of it is late then)."""
    warehouse = Warehouse.from_path(got)
    if not replayed:
        assert_same_tables(spark, want, warehouse)
        return
    assert_same_tables(spark, want, warehouse, layers=("silver",))
    names = [name for name in want.table_names("gold") if name != LATE_EVENTS]
    assert [n for n in warehouse.table_names("gold") if n != LATE_EVENTS] == names
    for name in names:
        assert rows(comparable(spark, warehouse, "gold", name)) == rows(
            comparable(spark, want, "gold", name)
        ), name


@pytest.fixture
def live(bundle: Bundle) -> Iterator[Bundle]:
    bundle.restore()
    yield bundle


def run(bundle: Bundle) -> tuple[int, str]:
    result = run_cli(
        "run",
        "--config",
        SHOP_TOML,
        "--once",
        "--source",
        f"files:{bundle.source}",
        "--warehouse",
        bundle.warehouse,
    )
    return result.returncode, result.stdout + result.stderr


def fails_with_one_line(bundle: Bundle, *expected: str) -> str:
    """Run; it exits 2 with one ``error:`` line holding every ``expected``, no trace, no
    ``done``; returns the line."""
    code, output = run(bundle)
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert code == 2, output
    assert len(errors) == 1, output
    for text in expected:
        assert text in errors[0], errors[0]
    for noise in ("Traceback", "py4j", "\tat ", "done:"):
        assert noise not in output, output
    return errors[0]


def succeeds(bundle: Bundle) -> None:
    code, output = run(bundle)
    assert code == 0, output
    assert "error:" not in output, output


def newest(folder: Path, suffix: str = "") -> Path:
    files = sorted(p for p in folder.iterdir() if p.name[0].isdigit() and p.name.endswith(suffix))
    return max(files, key=lambda p: int(p.name.split(".")[0]))


def crc_of(commit: Path) -> Path:
    return commit.with_name(f"{commit.name.split('.')[0]}.crc")


@pytest.mark.parametrize("with_checksum", [True, False], ids=["crc-kept", "crc-deleted-too"])
def test_silver_missing_its_newest_commit_is_named_and_replay_fixes_it(
    spark: SparkSession, live: Bundle, reference: Warehouse, with_checksum: bool
) -> None:
    log = live.warehouse / "silver" / "orders" / "_delta_log"
    commit = newest(log, ".json")
    version = int(commit.name.split(".")[0])
    commit.unlink()
    if not with_checksum:
        crc_of(commit).unlink(missing_ok=True)
    live.arrive()
    fails_with_one_line(
        live,
        f"silver.orders is damaged (its newest commit, version {version}, is missing)",
        "lakehouse replay --table orders",
    )
    replayed = run_cli(
        "replay", "--config", SHOP_TOML, "--warehouse", live.warehouse, "--table", "orders"
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    succeeds(live)
    assert_same_results(spark, reference, live.warehouse, replayed=True)


def test_a_table_commit_cut_short_is_named(live: Bundle) -> None:
    commit = newest(live.warehouse / "silver" / "customers" / "_delta_log", ".json")
    text = commit.read_bytes()
    commit.write_bytes(text[: len(text) // 2])
    live.arrive()
    fails_with_one_line(live, "silver.customers is damaged", "cut short", "lakehouse replay")


def test_bronze_missing_its_newest_commit_says_to_replay_the_source(live: Bundle) -> None:
    commit = newest(live.warehouse / "bronze" / "shop_public_orders" / "_delta_log", ".json")
    commit.unlink()
    live.arrive()
    fails_with_one_line(live, "bronze.shop_public_orders is damaged", "replay its source")


@pytest.mark.parametrize("query", ["bronze", "silver_orders"])
def test_a_checkpoint_offsets_file_cut_short_is_named(live: Bundle, query: str) -> None:
    offsets = newest(live.warehouse / "_system" / "checkpoints" / query / "offsets")
    offsets.write_text(offsets.read_text()[:25])
    live.arrive()
    fix = "replay the source" if query == "bronze" else "lakehouse replay"
    fails_with_one_line(live, f"checkpoint of query {query} is damaged", str(offsets), fix)


def test_a_checkpoint_commit_file_cut_short_is_fixed_by_deleting_it_exactly_once(
    spark: SparkSession, live: Bundle, reference: Warehouse
) -> None:
    commits = live.warehouse / "_system" / "checkpoints" / "silver_orders" / "commits"
    commit = newest(commits)
    commit.write_text("v1\n{")
    live.arrive()
    fails_with_one_line(live, str(commit), "delete that file", "exactly once")
    commit.unlink()
    crc_of(commit).unlink(missing_ok=True)
    (commits / f".{commit.name}.crc").unlink(missing_ok=True)
    succeeds(live)
    assert_same_results(spark, reference, live.warehouse, replayed=False)


def test_a_damaged_watermark_is_named(live: Bundle) -> None:
    marks = sorted((live.warehouse / "_system" / "watermarks").glob("*.json"))
    assert marks
    marks[0].write_text('{"gold": ')
    live.arrive()
    fails_with_one_line(live, f"watermark of gold.{marks[0].stem}", "lakehouse replay")


def test_an_unreadable_heartbeat_is_named_and_deleting_it_fixes_it(
    spark: SparkSession, live: Bundle, reference: Warehouse
) -> None:
    heartbeat = live.warehouse / "_system" / "pipeline_heartbeat.json"
    heartbeat.write_text('{"pid": 12')
    live.arrive()
    fails_with_one_line(live, "heartbeat", "delete it")
    heartbeat.unlink()
    succeeds(live)
    assert_same_results(spark, reference, live.warehouse, replayed=False)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write a read-only folder")
def test_a_read_only_warehouse_is_one_line(live: Bundle) -> None:
    for folder in (live.warehouse, live.warehouse / "_system"):
        folder.chmod(0o555)
    try:
        fails_with_one_line(live, "read-only", "Permission denied")
    finally:
        for folder in (live.warehouse, live.warehouse / "_system"):
            folder.chmod(0o755)


@pytest.mark.parametrize(
    ("file", "fix"),
    [
        ("gold_user_sessions.applied.json", "lakehouse replay"),
        ("silver_orders._lakehouse_app_id", "lakehouse replay"),
        ("bronze._lakehouse_app_id", "replay the source"),
    ],
)
def test_a_damaged_file_beside_a_checkpoint_is_named(live: Bundle, file: str, fix: str) -> None:
    damaged = live.warehouse / "_system" / "checkpoints" / file
    assert damaged.exists()
    damaged.write_text(damaged.read_text()[:3])
    live.arrive()
    fails_with_one_line(live, f"query {file.split('.')[0]} is damaged", str(damaged), fix)


def test_a_checkpoint_metadata_file_cut_short_is_named(live: Bundle) -> None:
    metadata = live.warehouse / "_system" / "checkpoints" / "silver_customers" / "metadata"
    metadata.write_text('{"id":"12')
    live.arrive()
    fails_with_one_line(live, "checkpoint of query silver_customers is damaged", str(metadata))
