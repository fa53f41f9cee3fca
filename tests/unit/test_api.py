"""The public Python API refuses bad calls with one clear LakehouseError, before Spark starts.
(Its runs, tables, SQL and verify are exercised by the quickstart notebook.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import lakehouse
from core.errors import ConfigError, StatementRefusedError
from lakehouse import Lakehouse, generate_workload
from tests.cli import run_cli

pytestmark = pytest.mark.unit


def test_the_package_exports_the_api() -> None:
    for name in lakehouse.__all__:
        assert getattr(lakehouse, name) is not None
    with pytest.raises(AttributeError):
        _ = lakehouse.no_such_name  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda lh: lh.table("orders"), ConfigError, r"^Invalid table name 'orders': write "),
        (lambda lh: lh.table("platinum.x"), ConfigError, r"^Invalid table name 'platinum.x'"),
        (lambda lh: lh.sql("DELETE FROM gold.x"), StatementRefusedError, r"--allow-writes"),
        (
            lambda lh: lh.sql("DROP TABLE bronze.x", allow_writes=True),
            StatementRefusedError,
            r"bronze",
        ),
        (
            lambda lh: lh.run("files:/x", once=True, processing_time="10s"),
            ConfigError,
            r"^Use either once=True or processing_time, not both\.$",
        ),
        (lambda lh: lh.run("files:/x", once=False), ConfigError, r"needs a processing_time"),
        (lambda lh: lh.run("ftp:/x"), ConfigError, r"^Invalid source 'ftp:/x'"),
        (
            lambda lh: lh.run("files:/x", processing_time="soon"),
            ConfigError,
            r"^Invalid processing time",
        ),
        (lambda lh: lh.fit(), ConfigError, r"^No alert to fit: declare one in an \[\[alerts\]\]"),
    ],
)
def test_bad_calls_are_refused_before_spark_starts(
    tmp_path: Path, call: Callable[[Lakehouse], object], error: type[Exception], message: str
) -> None:
    lh = Lakehouse(tmp_path / "wh")
    with pytest.raises(error, match=message):
        call(lh)
    assert lh._spark is None


def test_a_missing_config_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^Config file .*missing.toml not found\.$"):
        Lakehouse(tmp_path, config=tmp_path / "missing.toml")


def test_a_workload_in_parts_keeps_every_record_in_delivery_order(tmp_path: Path) -> None:
    whole = generate_workload(tmp_path / "whole", events=300, seed=3, late_rate=0.05)
    split = generate_workload(tmp_path / "split", events=300, seed=3, late_rate=0.05, parts=3)
    files = sorted((tmp_path / "split").glob("part-*.jsonl"))
    assert whole == split and len(files) == 3
    joined = "".join(f.read_text(encoding="utf-8") for f in files)
    assert joined == (tmp_path / "whole" / "part-00000.jsonl").read_text(encoding="utf-8")

    result = run_cli(
        "generate",
        "--out",
        tmp_path / "cli",
        "--events",
        "300",
        "--seed",
        "3",
        "--late-rate",
        "0.05",
        "--parts",
        "3",
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.read_text() for p in (tmp_path / "cli").glob("*.jsonl")) == sorted(
        f.read_text() for f in files
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"parts": 0}, r"^parts must be a whole number"), ({"late_rate": 0.9}, r"late_rate")],
)
def test_bad_workload_settings_are_refused(
    tmp_path: Path, settings: dict[str, float], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        generate_workload(tmp_path, events=10, **settings)  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())
