"""One pipeline per warehouse (issue 47, defect 1): two real ``lakehouse run`` processes on one
warehouse and source; and bronze's write path alone never holds a batch twice."""

from __future__ import annotations

import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from bronze.job import append_batch_by_topic
from cdc.records import Record
from lakehouse.ops.audit import check_bronze_coordinates
from lakehouse.run.lease import (
    HISTORY_WINDOW,
    Holder,
    PipelineRunningError,
    _commit,
    current,
    holder_of,
    holding,
    lease_path,
)
from lakehouse_core.delta_io import note_query_start
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import Warehouse
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from tests.cli import LAKEHOUSE, SHOP_TABLES_TOML, lakehouse, run_cli
from tests.helpers import bronze_frame, customer_change, spark_jobs
from tests.runs import Run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

TOPIC = "shop.public.customers"
TABLE = table_name_for_topic(TOPIC)

BUDGET_SECONDS = 1700  # each test; every wait in it is bounded by it
LINE = re.compile(
    r"^error: a pipeline \(pid \d+ on host \S+, started \d\d:\d\d\) is running on this "
    r"warehouse; stop it or wait$",
    re.MULTILINE,
)


def workload(tmp_path: Path, events: int, seed: int) -> tuple[Path, list[Record]]:
    source = tmp_path / "source"
    records = generate(WorkloadConfig(events=events, seed=seed, malformed_rate=0.02))
    write_files(records, source, lines_per_file=50)
    return source, records


def run_args(source: Path, warehouse: Path, *trigger: str) -> list[str]:
    return [
        str(LAKEHOUSE),
        "run",
        "--config",
        str(SHOP_TABLES_TOML),
        "--source",
        f"files:{source}",
        "--warehouse",
        str(warehouse),
        *(trigger or ("--once",)),
    ]


def bronze_coordinates(spark: SparkSession, warehouse: Path) -> Counter[tuple[object, ...]]:
    """How many rows of bronze hold each record (by topic, partition, offset, file)."""
    found: Counter[tuple[object, ...]] = Counter()
    for name in Warehouse.from_path(warehouse).table_names("bronze", spark):
        frame = spark.read.format("delta").load(str(warehouse / "bronze" / name))
        for row in frame.where("offset IS NOT NULL").collect():
            found[(row.topic, row.partition, row.offset, row._source)] += 1
    return found


def assert_bronze_once(spark: SparkSession, warehouse: Path, records: list[Record]) -> None:
    """Bronze holds each readable record of the source exactly once (the plain model: the
    generated records, by their coordinates)."""
    found = bronze_coordinates(spark, warehouse)
    twice = {k: n for k, n in found.items() if n > 1}
    assert not twice, f"{len(twice)} records in bronze more than once: {list(twice)[:3]}"
    readable = {(r.topic, r.partition, r.offset) for r in records}
    assert {k[:3] for k in found} == readable


def holds_in_turn(spark: SparkSession, warehouse: Path) -> bool:
    """Whether, in the lease table's commits, each run's first commit comes after the run
    before it released the lease."""
    path = lease_path(Warehouse.from_path(warehouse))
    history = DeltaTable.forPath(spark, path).history().orderBy("version").collect()
    holder = None
    for row in history:
        now = Holder.from_text(row.userMetadata)
        if now is None:
            continue
        if holder is not None and now.run != holder.run and not holder.released:
            return False
        holder = now
    return True


@pytest.mark.slow
@pytest.mark.parametrize("attempt", [1, 2])
def test_two_runs_started_together_one_runs(
    spark: SparkSession, tmp_path: Path, attempt: int
) -> None:
    """Two ``run --once`` started at the same moment: one runs, the other prints the one line
    and exits 2 (or, if one finished before the other began, both run, one after the other);
    either way bronze holds each record once and verify passes."""
    deadline = time.monotonic() + BUDGET_SECONDS
    source, records = workload(tmp_path, events=300, seed=attempt)
    warehouse = tmp_path / "warehouse"
    runs = [Run(run_args(source, warehouse)) for _ in range(2)]
    try:
        codes = sorted(run.finish(deadline) for run in runs)
    finally:
        for run in runs:
            if run.process.poll() is None:
                run.kill()
    outputs = ["\n".join(line for _, line in run.lines) for run in runs]
    both = "\n---\n".join(outputs)
    assert codes in ([0, 2], [0, 0]), both
    if codes == [0, 2]:
        loser = next(o for o, run in zip(outputs, runs, strict=True) if run.process.returncode)
        assert LINE.search(loser), loser
        assert "Traceback" not in loser and len(loser.splitlines()) <= 3, loser
    else:  # one ended before the other claimed: their holds did not overlap
        assert holds_in_turn(spark, warehouse), both
    assert_bronze_once(spark, warehouse, records)
    verified = run_cli("verify", "--config", SHOP_TABLES_TOML, "--warehouse", warehouse)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "bronze." in verified.stdout, verified.stdout


@pytest.mark.slow
def test_a_run_during_a_continuous_run_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    """A ``run --once`` and a ``maintain`` started while a ``--processing-time`` run holds the
    warehouse each print the one line and exit 2; the continuous run goes on unharmed and
    stops cleanly; after it, the lease is released, a ``--once`` run reads the rest, and
    bronze holds each record once."""
    deadline = time.monotonic() + BUDGET_SECONDS
    source, records = workload(tmp_path, events=150, seed=7)
    warehouse = tmp_path / "warehouse"
    trigger = ("--processing-time", "1s", "--max-files-per-trigger", "1")
    continuous = Run(run_args(source, warehouse, *trigger))
    try:
        commits = warehouse / "_system" / "checkpoints" / "bronze" / "commits"
        while not (commits / "0").exists():
            assert continuous.process.poll() is None, continuous.output()
            assert time.monotonic() < deadline, continuous.output()
            time.sleep(0.2)
        second = lakehouse(*run_args(source, warehouse)[1:])
        assert second.returncode == 2, second.stdout + second.stderr
        assert LINE.search(second.stderr), second.stderr
        assert "Traceback" not in second.stdout + second.stderr
        maintain = lakehouse("maintain", "--warehouse", warehouse)
        assert maintain.returncode == 2 and LINE.search(maintain.stderr), maintain.stderr
        assert continuous.process.poll() is None, continuous.output()
        continuous.process.send_signal(signal.SIGTERM)  # it stops cleanly, as usual
        code = continuous.finish(deadline)
    finally:
        if continuous.process.poll() is None:
            continuous.kill()
    output = continuous.output()
    assert code == 0, output
    assert "CONCURRENT" not in output and "Traceback" not in output, output
    _, holder = current(spark, lease_path(Warehouse.from_path(warehouse)))
    assert holder is not None and holder.released
    finished = run_cli(*run_args(source, warehouse)[1:])  # the rest, in this process
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert_bronze_once(spark, warehouse, records)


def test_the_bronze_write_alone_keeps_a_batch_once(spark: SparkSession, tmp_path: Path) -> None:
    """Without the lease, two writers of the same bronze batch (one checkpoint, each sure the
    batch is new) leave it once in bronze, whether they write one after the other or at the
    same moment; ``verify``'s bronze check finds nothing to report."""
    warehouse = Warehouse(str(tmp_path))
    topic = TOPIC
    frames = [
        bronze_frame(spark, [customer_change(topic, i, "c", i, (1, i)) for i in range(3)]),
        bronze_frame(
            spark, [customer_change(topic, 3 + i, "c", 3 + i, (1, 3 + i)) for i in (0, 1)]
        ),
    ]
    app_id = "two-writers"
    note_query_start(app_id, None)  # every batch is new to both writers
    first, second = (append_batch_by_topic(warehouse, app_id) for _ in range(2))
    first(frames[0], 0)
    second(frames[0], 0)  # one after the other
    errors: list[BaseException] = []

    def write(append: Callable[[DataFrame, int], None]) -> None:
        try:
            append(frames[1], 1)
        except BaseException as error:  # the loser's commit may be rejected
            errors.append(error)

    threads = [threading.Thread(target=write, args=(w,)) for w in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(errors) <= 1, errors
    if errors:
        assert "ConcurrentTransaction" in str(errors[0]), errors[0]
    table = warehouse.table("bronze", TABLE)
    offsets = sorted(r.offset for r in spark.read.format("delta").load(table).collect())
    assert offsets == [0, 1, 2, 3, 4]
    check = check_bronze_coordinates(spark, warehouse, TABLE)
    assert check.ok and check.actual_rows == check.expected_rows == 5, check


def test_verify_reports_a_record_held_twice(spark: SparkSession, tmp_path: Path) -> None:
    """Bronze holding records twice (as two runs before the lease left it): the bronze check
    counts the extra rows and says what to do."""
    warehouse = Warehouse(str(tmp_path))
    topic = TOPIC
    frame = bronze_frame(spark, [customer_change(topic, i, "c", i, (1, i)) for i in range(4)])
    table = warehouse.table("bronze", TABLE)
    frame.write.format("delta").save(table)
    frame.where("offset < 2").write.format("delta").mode("append").save(table)
    check = check_bronze_coordinates(spark, warehouse, TABLE)
    assert (check.actual_rows, check.expected_rows) == (6, 4)
    assert len(check.differences) == 1
    assert check.differences[0].startswith("2 rows repeat a record already in bronze")
    assert "partition 0 offset 0 (2 times)" in check.differences[0], check.differences
    assert "new warehouse" in check.differences[0]


def test_the_lease_is_held_once_per_process(spark: SparkSession, tmp_path: Path) -> None:
    """In one process: a block inside another on the same warehouse shares its lease; after
    both end it is released; a lease left by a run of this process that ended without releasing
    it is taken over."""
    warehouse = Warehouse(str(tmp_path))
    path = lease_path(warehouse)
    with holding(spark, warehouse, "outer") as outer:
        with holding(spark, warehouse, "inner") as inner:
            assert inner is outer
        _, holder = current(spark, path)
        assert holder is not None and holder.run == outer.holder.run and not holder.released
    _, holder = current(spark, path)
    assert holder is not None and holder.released
    with holding(spark, warehouse, "left") as left:
        left._stop.set()
    # Pretend the release never happened: the newest commit names a run that no block holds.
    from lakehouse.run import lease

    version, _ = current(spark, path)
    lease._commit(spark, path, version, left.holder)
    with holding(spark, warehouse, "next") as taken:
        assert taken.holder.run != left.holder.run
        for _ in range(5):
            assert taken.renew()
    assert issubclass(PipelineRunningError, Exception)
    # However often it was claimed, renewed and released, the table holds at most one file
    # (its commits change a table property and write none; appends left one file per commit).
    assert DeltaTable.forPath(spark, path).detail().first().numFiles <= 1


def test_the_lease_is_claimed_read_and_released_without_a_spark_job(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Once the lease table exists, a claim, a read and a release run no Spark job (the
    commits change a table property, the reads take the newest commits from the table's log),
    and a read agrees with Delta's own history of the table."""
    warehouse = Warehouse(str(tmp_path))
    path = lease_path(warehouse)
    with holding(spark, warehouse, "first"):
        pass
    seen: dict[str, Any] = {}

    def claim_read_release() -> None:
        with holding(spark, warehouse, "second") as held:
            seen["held"], seen["holder"] = held.holder, current(spark, path)[1]

    assert spark_jobs(spark, "lease", claim_read_release) == 0
    assert seen["holder"] == seen["held"]
    history = DeltaTable.forPath(spark, path).history(HISTORY_WINDOW).collect()
    commits = [(row.version, row.userMetadata) for row in history]
    released = current(spark, path)
    assert released == (max(version for version, _ in commits), holder_of(commits))
    assert released[1] == replace(seen["held"], released=True)


@pytest.mark.slow
def test_a_run_whose_lease_was_taken_over_stops_with_one_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A continuous run whose lease another run took over (as after a stall longer than the
    lease) stops after its running micro-batches and exits 2 with one line naming the new
    holder, instead of writing beside it; bronze holds what it read once."""
    deadline = time.monotonic() + BUDGET_SECONDS
    source, records = workload(tmp_path, events=150, seed=11)
    warehouse = tmp_path / "warehouse"
    continuous = Run(run_args(source, warehouse, "--processing-time", "1s"))
    try:
        commits = warehouse / "_system" / "checkpoints" / "bronze" / "commits"
        while not (commits / "0").exists():
            assert continuous.process.poll() is None, continuous.output()
            assert time.monotonic() < deadline, continuous.output()
            time.sleep(0.2)
        path = lease_path(Warehouse.from_path(warehouse))
        version, holder = current(spark, path)
        assert holder is not None and not holder.released
        started = datetime.now(UTC)
        usurper = Holder(
            run="another run",
            pid=4242,
            host="elsewhere",
            command="run --once",
            started=started.isoformat(),
            expires=(started + timedelta(hours=1)).isoformat(),
        )
        for _ in range(10):  # a renewal of the run may land first: read again and retry
            error = _commit(spark, path, version, usurper)
            version, holder = current(spark, path)
            if holder is not None and holder.run == usurper.run:
                break
        assert holder is not None and holder.run == usurper.run, error
        code = continuous.finish(deadline)
    finally:
        if continuous.process.poll() is None:
            continuous.kill()
    output = continuous.output()
    assert code == 2, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: this run stopped after its running micro-batches: pid 4242 on host elsewhere "
        "took over the warehouse's lease after this run missed its renewals (a stalled driver "
        "or storage); one pipeline writes a warehouse at a time: stop one of them, then run "
        "again"
    ], output
    assert "Traceback" not in output, output
    _, holder = current(spark, path)
    assert holder is not None and holder.run == "another run"  # not released by the loser
    found = bronze_coordinates(spark, warehouse)
    assert found and max(found.values()) == 1, found.most_common(3)
    assert {k[:3] for k in found} <= {(r.topic, r.partition, r.offset) for r in records}
