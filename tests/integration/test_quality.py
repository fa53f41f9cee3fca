"""Data-quality expectations inside the bronze, silver and gold streams, one scenario per
action, each a real pipeline run (files -> bronze -> silver -> gold) on a few rows:

* warn: the row that breaks the expectation is counted and kept;
* drop: the row goes to the quarantine table, the reason naming the expectation, with its
  bronze coordinates; the other rows are applied;
* ``lakehouse validate`` runs the suite with GX (table-level expectations too), writes Data
  Docs and exits 1 when a fail-level expectation is broken;
* fail: the micro-batch commits nothing (silver and quarantine history unchanged, the
  checkpoint's commit log not advanced), ``lakehouse run`` ends with one error line naming the
  expectation, the table and a failing row; after the suite is relaxed the next run applies
  the same batch; the same for a ``fail`` expectation of bronze (bronze's history and
  checkpoint unchanged) and of gold (gold's).

Bronze's and gold's ``warn`` and bronze's ``drop`` ride in the same runs as silver's.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from pyspark.sql import SparkSession

from bronze.job import append_batch_by_topic
from cdc.records import Record
from cdc.sources import SourceSpec
from expectations.checks import load_checks, load_layer_checks
from lakehouse.ops.audit import verify_warehouse
from lakehouse.ops.forget import forget
from lakehouse.run.pipeline import run_continuously, run_once
from lakehouse_core.config import PipelineConfig, QualityAction, QualitySpec, TableSpec
from lakehouse_core.delta_io import versions
from lakehouse_core.errors import ExpectationFailedError
from lakehouse_core.gold_tables import GoldTable, Measure, Window
from lakehouse_core.layout import QUARANTINE_TABLE, Warehouse
from lakehouse_core.streaming import Trigger
from silver.job import apply_batch, ensure_shared_tables, entity_tables
from tests.browser import Browser, dump_dom, screenshot
from tests.cli import run_cli, table_cells
from tests.helpers import bronze_frame, source_frame, spark_jobs
from tests.logs import logged

pytestmark = pytest.mark.integration

USERS = TableSpec(
    name="users",
    topic="app.users",
    format="events",
    keys=("id",),
    sequence_by=("seq",),
    schema="id bigint, seq bigint, age int, email string, at timestamp",
)
#: A gold table over silver.users: users and the oldest age per minute of ``at``.
PER_MINUTE = GoldTable(
    "users_per_minute",
    "users",
    "at",
    Window("tumbling", size="1 minute"),
    (Measure("users", "count"), Measure("oldest", "max", "age")),
)
#: Each layer's table with a suite.
TABLES = {"bronze": "app_users", "silver": "users", "gold": "users_per_minute"}
GOLD_QUERY = "gold_users_per_minute"
BRONZE_SUITE = {
    "name": "bronze.app_users",
    "expectations": [
        {
            "type": "expect_column_values_to_not_be_in_set",
            "kwargs": {"column": "offset", "value_set": [4]},
            "meta": {"name": "offset_not_4", "action": "drop"},
        },
        {
            "type": "expect_column_values_to_be_in_set",
            "kwargs": {"column": "partition", "value_set": [0]},
            "meta": {"name": "partition_zero", "action": "warn"},
        },
        {
            "type": "expect_compound_columns_to_be_unique",
            "kwargs": {"column_list": ["topic", "partition", "offset"]},
        },
    ],
}
GOLD_SUITE = {
    "name": "gold.users_per_minute",
    "expectations": [
        {
            "type": "expect_column_values_to_be_between",
            "kwargs": {"column": "oldest", "max_value": 150},
            "meta": {"name": "oldest_at_most_150", "action": "warn"},
        },
    ],
}
SUITE = {
    "name": "silver.users",
    "expectations": [
        {
            "type": "expect_column_values_to_be_between",
            "kwargs": {"column": "age", "min_value": 0, "max_value": 150},
            "meta": {"name": "age_range", "action": "warn"},
        },
        {
            "type": "expect_column_values_to_match_regex",
            "kwargs": {"column": "email", "regex": "^[^@]+@[^@]+$"},
            "meta": {"name": "email_format", "action": "drop"},
        },
        {
            "type": "expect_column_values_to_not_be_null",
            "kwargs": {"column": "id"},
        },
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "id"}},
    ],
}


def user(offset: int, id_: int, age: int | None, email: str | None, partition: int = 0) -> Record:
    value = {"id": id_, "seq": 1, "age": age, "email": email, "at": "2026-01-01T00:00:30"}
    return Record(USERS.topic, partition, offset, 1_000 + offset, None, value)


class Lake:
    """A warehouse fed by JSON-lines files, with the suites above in a suites directory."""

    def __init__(self, spark: SparkSession, root: Path) -> None:
        self.spark = spark
        self.source = root / "source"
        self.source.mkdir(parents=True)
        self.suites = root / "suites"
        for layer, table, suite in (
            ("bronze", "app_users", BRONZE_SUITE),
            ("silver", "users", SUITE),
            ("gold", "users_per_minute", GOLD_SUITE),
        ):
            (self.suites / layer).mkdir(parents=True, exist_ok=True)
            (self.suites / layer / f"{table}.json").write_text(json.dumps(suite), encoding="utf-8")
        self.warehouse = Warehouse.from_path(root / "warehouse")
        self.files = 0

    def arrive(self, *records: Record) -> None:
        path = self.source / f"part-{self.files:05d}.jsonl"
        hidden = path.with_name(f".{path.name}.tmp")
        hidden.write_text("".join(r.to_line() + "\n" for r in records), encoding="utf-8")
        hidden.rename(path)
        self.files += 1

    def config(self, **actions: QualityAction) -> PipelineConfig:
        """The pipeline with the suites, ``actions`` overriding ``<layer>__<name>`` (silver
        if no layer is named)."""
        overrides = []
        for name, action in actions.items():
            layer, _, rule = name.rpartition("__")
            layer = layer or "silver"
            overrides.append((f"{layer}.{TABLES[layer]}.{rule}", action))
        quality = QualitySpec(suites=str(self.suites), actions=tuple(overrides))
        return PipelineConfig(tables=(USERS,), quality=quality, gold_tables=(PER_MINUTE,))

    def run(self, **actions: QualityAction) -> None:
        source = SourceSpec("files", str(self.source))
        run_once(self.spark, source, self.warehouse, self.config(**actions))

    def rows(self, path: str, *columns: str) -> list[tuple[Any, ...]]:
        frame = self.spark.read.format("delta").load(path)
        return sorted(tuple(r) for r in frame.select(*columns).collect())

    @property
    def bronze(self) -> str:
        return self.warehouse.table("bronze", "app_users")

    @property
    def silver(self) -> str:
        return self.warehouse.table("silver", "users")

    @property
    def gold(self) -> str:
        return self.warehouse.table("gold", "users_per_minute")

    @property
    def quarantine(self) -> str:
        return self.warehouse.table("silver", QUARANTINE_TABLE)

    def metrics(self, table: str = "silver.users") -> list[tuple[Any, ...]]:
        """The metrics rows of ``table``."""
        frame = self.spark.read.format("delta").load(self.warehouse.quality())
        return sorted(
            tuple(r)
            for r in frame.where(frame.table == table)
            .select(
                "batch_id",
                "expectation",
                "action",
                "rows_counted",
                "rows_failed",
                "rows_dropped",
                "held",
            )
            .collect()
        )

    def commits(self, query: str = "silver_users") -> list[str]:
        commits = Path(self.warehouse.checkpoint(query), "commits")
        return sorted(p.name for p in commits.iterdir() if p.name.isdigit())


def test_warn_keeps_and_drop_quarantines(
    spark: SparkSession, tmp_path: Path, chromium: Browser
) -> None:
    lake = Lake(spark, tmp_path)
    lake.arrive(
        user(0, 1, 30, "a@example.com"),
        user(1, 2, 200, "b@example.com"),  # too old: warn
        user(2, 3, 40, "not an email"),  # drop
        user(3, 4, None, None),  # nulls break neither
        user(4, 5, 31, "e@example.com"),  # offset 4: dropped in bronze
        user(0, 6, 32, "f@example.com", partition=1),  # not partition 0: bronze warns
    )
    lake.run()

    assert lake.rows(lake.bronze, "partition", "offset") == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert lake.rows(lake.silver, "id", "age") == [(1, 30), (2, 200), (4, None), (6, 32)]
    assert lake.rows(lake.quarantine, "entity", "reason", "topic", "partition", "offset") == [
        ("app_users", "expectation bronze.app_users.offset_not_4", "app.users", 0, 4),
        ("users", "expectation silver.users.email_format", "app.users", 0, 2),
    ]
    assert lake.rows(lake.gold, "users", "oldest") == [(4, 200)]  # gold's warn keeps the row
    assert lake.metrics("bronze.app_users") == [
        (0, "offset_not_4", "drop", 6, 1, 1, False),
        (0, "partition_zero", "warn", 6, 1, 0, False),
    ]
    assert lake.metrics() == [
        (0, "age_range", "warn", 4, 1, 0, False),
        (0, "email_format", "drop", 4, 1, 1, False),
        (0, "id_not_be_null", "warn", 5, 0, 0, True),
    ]
    assert lake.metrics("gold.users_per_minute") == [
        (0, "oldest_at_most_150", "warn", 1, 1, 0, False)
    ]
    # verify leaves the dropped records out of the expected state: silver and gold match it.
    assert all(c.ok for c in verify_warehouse(spark, lake.warehouse, lake.config()))
    query = "SELECT sum(rows_failed) AS failed FROM system.quality"
    done = run_cli("sql", "--warehouse", lake.warehouse.root, "--format", "csv", query)
    assert done.returncode == 0 and done.stdout == "failed\n5\n", done.stdout + done.stderr
    status(lake)
    validate(lake, tmp_path, chromium)
    forget_dropped(lake)


def forget_dropped(lake: Lake) -> None:
    """``forget`` finds a key whose only record a bronze expectation dropped to quarantine."""
    report = forget(lake.spark, lake.warehouse, lake.config(), "users", {"id": 5})
    assert report.held, report
    assert ("silver.quarantine", 1) in report.removed, report.removed
    assert lake.rows(lake.quarantine, "entity", "offset") == [("users", 2)]
    assert lake.rows(lake.bronze, "partition", "offset") == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]


def status(lake: Lake) -> None:
    """``lakehouse status`` (and ``--json``) sums each expectation's metrics per table."""
    root = lake.warehouse.root
    done = run_cli("status", "--warehouse", root, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["quality"] == [
        {
            "table": table,
            "expectation": name,
            "action": action,
            "checked": checked,
            "failed": failed,
            "dropped": dropped,
            "broken_batches": broken,
        }
        for table, name, action, checked, failed, dropped, broken in (
            ("bronze.app_users", "offset_not_4", "drop", 6, 1, 1, 1),
            ("bronze.app_users", "partition_zero", "warn", 6, 1, 0, 1),
            ("gold.users_per_minute", "oldest_at_most_150", "warn", 1, 1, 0, 1),
            ("silver.users", "age_range", "warn", 4, 1, 0, 1),
            ("silver.users", "email_format", "drop", 4, 1, 1, 1),
            ("silver.users", "id_not_be_null", "warn", 5, 0, 0, 0),
        )
    ]
    done = run_cli("status", "--warehouse", root)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {tuple(line.split()[:7]) for line in done.stdout.splitlines()}  # plain aligned text
    assert ("silver.users", "email_format", "drop", "4", "1", "1", "1") in rows, done.stdout


def validate(lake: Lake, tmp_path: Path, chromium: Browser) -> None:
    """``lakehouse validate`` on the lake: GX runs the suite, table-level expectations too,
    writes Data Docs, and exits 1 as a fail-level expectation (by override) is broken. The
    Data Docs index, opened in headless Chromium, lists the suite and its failed validation,
    and the result page renders each expectation's verdict."""
    config = tmp_path / "pipeline.toml"
    config.write_text(
        '[quality]\nsuites = "suites"\n[quality.actions]\n"silver.users.age_range" = "fail"\n',
        encoding="utf-8",
    )
    docs = tmp_path / "docs"
    root = lake.warehouse.root
    done = run_cli("validate", "--warehouse", root, "--config", config, "--docs", docs)

    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    index = docs / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    assert f"Data Docs: {index}" in lines
    assert "fail-level expectations broken: silver.users.age_range" in lines
    verdicts = {tuple(cells[:4]) for cells in table_cells(done.stdout)}
    assert {
        ("silver.users", "age_range", "fail", "BROKEN"),
        ("silver.users", "email_format", "drop", "ok"),  # the bad email went to quarantine
        ("silver.users", "id_be_unique", "warn", "ok"),
        ("bronze.app_users", "offset_not_4", "drop", "ok"),  # the record went to quarantine
    } <= verdicts
    assert "silver.users" in index.read_text(encoding="utf-8")

    if chromium.executable is None:
        pytest.skip(f"no headless Chromium to open the Data Docs: {chromium.reason}")
    # The index's two lists are filled by scripts from CDNs (not reachable offline): check
    # the page renders, and the suite and validation-result pages it links, which are static.
    site = index.parent
    assert {"Validation Results", "Expectation Suites"} <= set(text(chromium.executable, index))
    suite = text(chromium.executable, site / "expectations" / "silver" / "users.html")
    assert "silver.users" in suite
    assert "email values must match this regular expression: ^[^@]+@[^@]+$ ." in " ".join(suite)
    [result_page] = (site / "validations" / "silver" / "users").rglob("*.html")
    result = " ".join(text(chromium.executable, result_page))
    for shown in (
        "Expectation Suite: silver.users",
        "Status: Failed",
        "Unsuccessful Expectations 1",
        "Unexpected Value Count 200 1",  # the row with age 200
    ):
        assert shown in result, result
    png = screenshot(chromium.executable, result_page, tmp_path / "data-docs.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 50_000, png.stat().st_size  # a blank page is a few kB


def text(chromium: str, page: Path) -> list[str]:
    """The visible text of ``page`` after Chromium ran it, one string per text node."""
    dom = BeautifulSoup(dump_dom(chromium, page), "html.parser")
    for hidden in dom(["script", "style"]):
        hidden.decompose()
    return [" ".join(t.split()) for t in dom.stripped_strings]


def test_fail_commits_nothing_and_a_relaxed_run_applies_the_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = Lake(spark, tmp_path)
    lake.arrive(user(0, 1, 30, "a@example.com"), user(1, 9, 30, "dropped"))
    lake.run(age_range="fail")
    silver_versions, quarantine_versions = (
        versions(spark, lake.silver),
        versions(spark, lake.quarantine),
    )
    commits = lake.commits()

    lake.arrive(user(2, 2, 200, "b@example.com"), user(3, 3, 40, "broken"))
    # Through the command line: the run ends with one error line, exit status 2.
    config = tmp_path / "pipeline.toml"
    config.write_text(
        '[[tables]]\nname = "users"\ntopic = "app.users"\nformat = "events"\n'
        'keys = ["id"]\nsequence_by = ["seq"]\n'
        'schema = "id bigint, seq bigint, age int, email string, at timestamp"\n'
        f"[quality]\nsuites = {json.dumps(str(lake.suites))}\n"
        '[quality.actions]\n"silver.users.age_range" = "fail"\n',
        encoding="utf-8",
    )
    source = f"files:{lake.source}"
    root = lake.warehouse.root
    done = run_cli("run", "--source", source, "--warehouse", root, "--config", config, "--once")

    assert done.returncode == 2, done.stdout + done.stderr
    suite = lake.suites / "silver" / "users.json"
    # The run before it declared a gold table too: the run says its declarations differ.
    note, error = done.stderr.strip().splitlines()
    assert note.startswith("note: the declarations given differ") and "users_per_minute" in note
    assert error == (
        "error: silver.users: Expectation age_range (expect_column_values_to_be_between, action "
        "fail) of "
        "silver.users broke in micro-batch 1: 1 of 2 rows, e.g. id=2, age=200 "
        "(bronze app.users partition 0 offset 2). Nothing of the batch was written; fix the "
        f"data or relax the suite ({suite}), then run again."
    ), done.stderr
    assert versions(spark, lake.silver) == silver_versions
    assert versions(spark, lake.quarantine) == quarantine_versions
    assert lake.commits() == commits
    assert [m[0] for m in lake.metrics()] == [0, 0, 0]  # no metrics of the failed batch

    lake.run()  # the suite's own action for age_range: warn
    assert lake.rows(lake.silver, "id", "age") == [(1, 30), (2, 200)]
    assert lake.rows(lake.quarantine, "reason", "offset") == [
        ("expectation silver.users.email_format", 1),
        ("expectation silver.users.email_format", 3),
    ]
    assert len(lake.commits()) == len(commits) + 1
    assert [m[:3] for m in lake.metrics() if m[0] == 1] == [
        (1, "age_range", "warn"),
        (1, "email_format", "drop"),
        (1, "id_not_be_null", "warn"),
    ]

    # A fail expectation of bronze: nothing of the batch is in bronze, its checkpoint stays.
    bronze_versions, bronze_commits = versions(spark, lake.bronze), lake.commits("bronze")
    lake.arrive(user(0, 7, 31, "g@example.com", partition=1))
    with pytest.raises(ExpectationFailedError) as failed:
        lake.run(bronze__partition_zero="fail")
    assert str(failed.value) == (
        "Expectation partition_zero (expect_column_values_to_be_in_set, action fail) of "
        "bronze.app_users broke in micro-batch 2: 1 of 1 rows, e.g. partition=1 "
        "(bronze app.users partition 1 offset 0). Nothing of the batch was written; fix the "
        f"data or relax the suite ({lake.suites / 'bronze' / 'app_users.json'}), then run again."
    )
    assert versions(spark, lake.bronze) == bronze_versions
    assert lake.commits("bronze") == bronze_commits
    assert [m[0] for m in lake.metrics("bronze.app_users")] == [0, 0, 1, 1]

    # A fail expectation of gold: the window's row (oldest 200) breaks it; bronze and silver
    # take the batch, gold's history and checkpoint stay.
    gold_versions, gold_commits = versions(spark, lake.gold), lake.commits(GOLD_QUERY)
    gold_metrics = lake.metrics("gold.users_per_minute")
    with pytest.raises(
        ExpectationFailedError,
        match=r"^Expectation oldest_at_most_150 .* of "
        r"gold\.users_per_minute broke in micro-batch \d+: 1 of 1 rows, e\.g\. "
        r"window_start=.*, oldest=200\. Nothing of the batch was written",
    ):
        lake.run(gold__oldest_at_most_150="fail")
    assert lake.rows(lake.silver, "id") == [(1,), (2,), (7,)]
    assert versions(spark, lake.gold) == gold_versions
    assert lake.commits(GOLD_QUERY) == gold_commits
    assert lake.metrics("gold.users_per_minute") == gold_metrics

    lake.run()  # relaxed: gold applies the batch
    assert lake.rows(lake.bronze, "partition", "offset")[-1] == (1, 0)
    assert lake.rows(lake.gold, "users", "oldest") == [(3, 200)]
    assert len(lake.commits(GOLD_QUERY)) == len(gold_commits) + 1
    assert lake.metrics("gold.users_per_minute")[-1][1:] == (
        "oldest_at_most_150",
        "warn",
        1,
        1,
        0,
        False,
    )


def test_more_expectations_run_no_more_spark_jobs(spark: SparkSession, tmp_path: Path) -> None:
    """The checks' counts come from the batch's own aggregate job: a micro-batch with one
    expectation runs as many Spark jobs as one with every expectation of the suite."""
    records = [user(0, 1, 30, "a@ex.com"), user(1, 2, 200, "b@ex.com"), user(2, 3, None, None)]
    jobs = []
    for kept in (1, len(SUITE["expectations"])):
        root = tmp_path / str(kept)
        lake = Lake(spark, root)
        suite = {**SUITE, "expectations": SUITE["expectations"][:kept]}
        (lake.suites / "silver" / "users.json").write_text(json.dumps(suite), encoding="utf-8")
        checks = load_checks(spark, lake.config().quality, lake.warehouse, "silver", "users")
        assert checks is not None and len(checks.suite.rules) == min(kept, 3)
        tables = entity_tables(lake.warehouse, USERS)
        ensure_shared_tables(spark, lake.warehouse)
        frame = bronze_frame(spark, records)
        run = partial(apply_batch, frame, 0, USERS, tables, "jobs-test", checks)
        jobs.append(spark_jobs(spark, f"quality-jobs-{kept}", run))
    assert jobs[0] == jobs[1] > 0, jobs


def test_bronze_expectations_run_no_more_spark_jobs(spark: SparkSession, tmp_path: Path) -> None:
    """A bronze micro-batch runs as many Spark jobs without a suite as with a suite of another
    topic's table, and as many with one expectation of its suite as with all: the counts come
    from the job that counts the batch's records per topic."""
    records = [user(0, 1, 30, "a@ex.com"), user(1, 2, 200, "b@ex.com")]
    jobs = []
    for name, table, kept in (
        ("none", None, 0),
        ("other", "other_topic", 2),
        ("one", "app_users", 1),
        ("all", "app_users", 2),
    ):
        lake = Lake(spark, tmp_path / name)
        for path in (lake.suites / "bronze").iterdir():
            path.unlink()
        if table is not None:
            rules = BRONZE_SUITE["expectations"][:kept]
            suite = {"name": f"bronze.{table}", "expectations": rules}
            (lake.suites / "bronze" / f"{table}.json").write_text(json.dumps(suite), "utf-8")
        checks = load_layer_checks(spark, lake.config().quality, lake.warehouse, "bronze")
        assert len(checks) == (table is not None)
        append = append_batch_by_topic(lake.warehouse, "jobs-test", None, checks)
        run = partial(append, source_frame(spark, records), 0)
        jobs.append(spark_jobs(spark, f"bronze-jobs-{name}", run))
        assert lake.rows(lake.bronze, "offset") == [(0,), (1,)]
    assert jobs[0] == jobs[1] > 0, jobs
    assert jobs[2] == jobs[3] > jobs[0], jobs  # the metrics' append: a few jobs more


#: How long the continuous run of the periodic-validation test may take before it is stopped.
CONTINUOUS_BUDGET_SECONDS = 300
BROKE_IN_VALIDATION = r"at_most_one_user \(.*\) of silver\.users broke in the validation run"


def test_a_continuous_run_validates_every_interval_and_stops_on_a_broken_fail(
    spark: SparkSession, tmp_path: Path
) -> None:
    """With ``validate_every``, a continuous run validates the whole tables (table-level
    expectations too) at that interval, says so in one line, and stops with the expectation's
    name once a ``fail`` one breaks (here: more users than the suite allows)."""
    lake = Lake(spark, tmp_path)
    at_most_one = {
        "name": "silver.users",
        "expectations": [
            {
                "type": "expect_table_row_count_to_be_between",
                "kwargs": {"max_value": 1},
                "meta": {"name": "at_most_one_user", "action": "fail"},
            }
        ],
    }
    (lake.suites / "silver" / "users.json").write_text(json.dumps(at_most_one), encoding="utf-8")
    lake.arrive(user(0, 1, 30, "a@example.com"), user(1, 2, 31, "b@example.com"))
    config = lake.config()
    config = replace(config, quality=replace(config.quality, validate_every="2 seconds"))
    # A run that never stops by itself would hang the test: stop it as a user would.
    stopper = threading.Timer(CONTINUOUS_BUDGET_SECONDS, os.kill, (os.getpid(), signal.SIGTERM))
    stopper.start()
    try:
        with pytest.raises(ExpectationFailedError, match=BROKE_IN_VALIDATION), logged() as said:
            run_continuously(
                spark,
                SourceSpec("files", str(lake.source)),
                lake.warehouse,
                config,
                Trigger("1 second"),
                poll_seconds=1,
            )
    finally:
        stopper.cancel()
    validations = [line for line in said if line.startswith("validate: ")]
    assert validations, said
    assert "broke: silver.users.at_most_one_user (fail)" in validations[-1], validations
    assert lake.rows(lake.silver, "id") == [(1,), (2,)]  # what was committed stays
