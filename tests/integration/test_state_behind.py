"""A table whose log is behind what was committed is named before a run writes (issue 61, item 2).

One small warehouse (part 1 of a shop workload; customers kept as SCD type 2, so it has a
history table and log) is made once and restored before each test at the same absolute path.
A test deletes the newest commit (its JSON, its checksum and their hidden checksums, as a bad
sync or a restore of the directory from an older copy leaves it) of one table of each kind, and
``lakehouse run --once`` must exit 2 with one ``error:`` line naming the table, the missing
version and the fix, and write nothing. The last test checks that nothing is named on the same
warehouse after a maintenance (OPTIMIZE, VACUUM), a reset checkpoint and a replay.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdc.sources import SourceSpec
from lakehouse.run.pipeline import run_once
from lakehouse.run.state_check import VERSIONS_FILE, check_damage, recorded_versions
from lakehouse_core.config import TableSpec
from lakehouse_core.layout import Warehouse
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from lakehouse_demo.settings import SHOP_CONFIG
from tests.cli import run_cli
from tests.warehouses import Bundle

#: The module's fixture runs the pipeline once before the first test.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

CONFIG = dataclasses.replace(
    SHOP_CONFIG,
    tables=(
        *SHOP_CONFIG.tables,
        TableSpec(name="customers", topic="shop.public.customers", stored_as_scd_type=2),
    ),
)


@pytest.fixture(scope="module")
def bundle(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    made = Bundle(tmp_path_factory.mktemp("behind"))
    made.config.write_text(CONFIG.to_toml())
    workload = generate(WorkloadConfig(events=240, seed=46, malformed_rate=0.01))
    parts = write_files(workload, made.later / "parts", 120)
    made.source.mkdir(parents=True)
    shutil.move(parts[0], made.source / parts[0].name)
    for part in parts[1:]:
        shutil.move(part, made.later / part.name)
    (made.later / "parts").rmdir()
    warehouse = Warehouse.from_path(made.warehouse)
    run_once(spark, SourceSpec("files", str(made.source)), warehouse, CONFIG)
    shutil.copytree(made.live, made.pristine)
    return made


@pytest.fixture
def live(bundle: Bundle) -> Iterator[Bundle]:
    bundle.restore()
    yield bundle


def run(bundle: Bundle) -> tuple[int, str]:
    result = run_cli(
        "run",
        "--config",
        bundle.config,
        "--once",
        "--source",
        f"files:{bundle.source}",
        "--warehouse",
        bundle.warehouse,
    )
    return result.returncode, result.stdout + result.stderr


def delete_newest_commit(table: Path) -> int:
    """Delete the newest commit of the Delta table at ``table`` (JSON and checksum, and the
    hidden checksums of both); returns its version."""
    log = table / "_delta_log"
    version = max(int(p.name.split(".")[0]) for p in log.glob("*.json"))
    for suffix in ("json", "crc"):
        name = f"{version:020d}.{suffix}"
        (log / name).unlink(missing_ok=suffix == "crc")
        (log / f".{name}.crc").unlink(missing_ok=True)
    return version


def log_listing(table: Path) -> list[str]:
    return sorted(p.name for p in (table / "_delta_log").iterdir())


@pytest.mark.parametrize(
    ("table", "name", "fix"),
    [
        ("bronze/shop_public_orders", "bronze.shop_public_orders", "replay its source"),
        ("silver/orders", "silver.orders", "lakehouse replay --table orders"),
        ("silver/customers", "silver.customers", "lakehouse replay --table customers"),
        (
            "silver/customers_history",
            "silver.customers_history",
            "lakehouse replay --table customers",
        ),
        ("gold/revenue_per_minute", "gold.revenue_per_minute", "lakehouse replay --table orders"),
        ("gold/user_sessions", "gold.user_sessions", "lakehouse replay --table clickstream"),
        (
            "_system/tombstones/orders",
            "_system.tombstones.orders",
            "lakehouse replay --table orders",
        ),
        (
            "_system/history_log/customers",
            "_system.history_log.customers",
            "lakehouse replay --table customers",
        ),
    ],
)
def test_a_table_missing_its_newest_commit_is_named_before_the_run_writes(
    live: Bundle, table: str, name: str, fix: str
) -> None:
    live.arrive()
    assert_named_before_writing(live, table, name, fix)


def test_a_run_with_nothing_new_names_a_table_behind_too(live: Bundle) -> None:
    """A run --once that finds nothing new (it may end before Spark starts) still names it."""
    assert_named_before_writing(
        live, "silver/customers_history", "silver.customers_history", "replay --table customers"
    )


def assert_named_before_writing(live: Bundle, table: str, name: str, fix: str) -> None:
    """Delete the newest commit of ``table``; a run exits 2 with one error line naming it and
    ``fix``, and writes nothing."""
    version = delete_newest_commit(live.warehouse / table)
    before = {t: log_listing(live.warehouse / t) for t in ("silver/orders", "gold/user_sessions")}
    code, output = run(live)
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert code == 2, output
    assert len(errors) == 1, output
    assert f"{name} is damaged (its newest commit, version {version}, is missing)" in errors[0]
    assert fix in errors[0], errors[0]
    for noise in ("Traceback", "py4j", "\tat ", "done:"):
        assert noise not in output, output
    after = {t: log_listing(live.warehouse / t) for t in before}
    assert after == before  # the run wrote nothing


def test_nothing_is_named_after_maintenance_a_reset_checkpoint_or_a_replay(
    spark: SparkSession, live: Bundle
) -> None:
    root = str(live.warehouse)
    recorded = recorded_versions(spark, root)
    assert recorded["silver/customers_history"][1] >= 1, recorded  # the run recorded its tables
    assert (live.warehouse / "_system" / VERSIONS_FILE).exists()
    check_damage(spark, root)

    maintained = run_cli("maintain", "--warehouse", root, "--vacuum-retention-hours", "0")
    assert maintained.returncode == 0, maintained.stdout + maintained.stderr
    check_damage(spark, root)

    shutil.rmtree(live.warehouse / "_system" / "checkpoints" / "gold_revenue_per_minute")
    check_damage(spark, root)

    replayed = run_cli("replay", "--warehouse", root, "--table", "customers")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    check_damage(spark, root)
