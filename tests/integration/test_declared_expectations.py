"""Expectations declared in Python beside the table (``expect_or_drop``, ``expect_or_fail``)
act in a real pipeline run (files -> bronze -> silver) as a suite file's do: a row that breaks
the drop expectation goes to quarantine with the expectation's name as its reason, a row that
breaks the fail expectation fails the micro-batch and silver keeps its version; GX's
validation of the table (what ``lakehouse validate`` and the Data Docs run) sees both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdc.records import Record
from cdc.sources import SourceSpec
from expectations.validate import validate_warehouse
from lakehouse import events_table, expect_or_drop, expect_or_fail, pipeline_config
from lakehouse.run.pipeline import run_once
from lakehouse_core.delta_io import versions
from lakehouse_core.errors import ExpectationFailedError
from lakehouse_core.layout import QUARANTINE_TABLE, Warehouse
from tests.cli import run_cli

pytestmark = pytest.mark.integration

CONFIG = pipeline_config(
    tables=[
        events_table(
            "users",
            topic="app.users",
            keys=["id"],
            sequence_by="seq",
            schema="id bigint, seq bigint, age int, email string",
            expectations=[
                expect_or_drop("email_has_at", "email LIKE '%@%'"),
                expect_or_fail("age_at_most_150", "age <= 150"),
            ],
        )
    ]
)


def user(offset: int, id_: int, age: int, email: str) -> Record:
    value = {"id": id_, "seq": 1, "age": age, "email": email}
    return Record("app.users", 0, offset, 1_000 + offset, None, value)


def arrive(source: Path, number: int, *records: Record) -> None:
    path = source / f"part-{number:05d}.jsonl"
    hidden = path.with_name(f".{path.name}.tmp")
    hidden.write_text("".join(r.to_line() + "\n" for r in records), encoding="utf-8")
    hidden.rename(path)


def rows(spark: SparkSession, path: str, *columns: str) -> list[tuple[Any, ...]]:
    frame = spark.read.format("delta").load(path)
    return sorted(tuple(r) for r in frame.select(*columns).collect())


def test_python_expect_or_drop_quarantines_and_expect_or_fail_fails(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    warehouse = Warehouse.from_path(tmp_path / "warehouse")
    silver = warehouse.table("silver", "users")
    quarantine = warehouse.table("silver", QUARANTINE_TABLE)
    files = SourceSpec("files", str(source))

    arrive(source, 0, user(0, 1, 30, "a@example.com"), user(1, 2, 40, "no email"))
    run_once(spark, files, warehouse, CONFIG)
    assert rows(spark, silver, "id", "email") == [(1, "a@example.com")]
    assert rows(spark, quarantine, "entity", "reason", "offset") == [
        ("users", "expectation silver.users.email_has_at", 1)
    ]
    validation = validate_warehouse(spark, warehouse, CONFIG.quality)
    assert {(v.table, v.expectation, v.action, v.success) for v in validation.verdicts} == {
        ("silver.users", "email_has_at", "drop", True),
        ("silver.users", "age_at_most_150", "fail", True),
    }

    config = tmp_path / "pipeline.toml"
    config.write_text(CONFIG.to_toml(), encoding="utf-8")
    verified = run_cli("verify", "--warehouse", warehouse.root, "--config", config)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    lines = verified.stdout.splitlines()
    progress = lines.index("- verify: silver.users against the fold of its bronze records")
    assert progress < lines.index("silver.users: 1 rows, expected 1: ok"), verified.stdout
    assert "- verify: bronze.app_users for records written twice" in lines, verified.stdout

    before = versions(spark, silver)
    arrive(source, 1, user(2, 3, 200, "c@example.com"))
    with pytest.raises(ExpectationFailedError) as failed:
        run_once(spark, files, warehouse, CONFIG)
    assert str(failed.value).startswith(
        "Expectation age_at_most_150 (expect_column_values_to_be_between, action fail) of "
        "silver.users broke in micro-batch 1: 1 of 1 rows, e.g. id=3, age=200 "
        "(bronze app.users partition 0 offset 2). Nothing of the batch was written; fix the "
        "data or relax the suite (the expectations declared on silver table 'users')"
    ), str(failed.value)
    assert versions(spark, silver) == before
