"""The public Python API refuses bad calls with one clear LakehouseError, before Spark starts.
(Its runs, tables, SQL and verify are exercised by the quickstart notebook.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import lakehouse
from core.errors import ConfigError, StatementRefusedError
from lakehouse import Lakehouse

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
