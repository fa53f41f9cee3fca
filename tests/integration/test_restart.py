"""Crash safety: a pipeline run killed with SIGKILL, then run to completion, leaves the same
warehouse as a run that was never interrupted. The killed run's warehouse is on the tests'
``objstore://`` scheme (no directory rename), the reference's on a local path.

The workload is written as many small files and read one file per micro-batch, so a run has many
micro-batches to interrupt. A reference run (in this process) into a second warehouse measures
how long each phase takes; the kill is placed at a seeded random fraction of a silver phase,
after its progress line. The killed run is the console script in its own process group, killed
whole, so the Spark JVM dies too. (Every commit boundary of a silver micro-batch is tested
deterministically and in process by ``test_commit_boundaries``; Kafka's kill test is in
``test_kafka_pipeline``.)

A second test crashes the gold sessions job right after its first commit, before its checkpoint
(a watermark-based version of that job lost its pending sessions at such a point).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import gold.batch
from cdc.sources import SourceSpec
from lakehouse.run.pipeline import run_once
from lakehouse_core.errors import LakehouseError
from lakehouse_core.layout import LAYERS, QUARANTINE_TABLE, Warehouse
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from lakehouse_demo.settings import SHOP_CONFIG
from tests.cli import LAKEHOUSE, SHOP_TOML, run_cli
from tests.faults import GUARDED_REPLACEMENT, CommitFaults
from tests.logs import logged
from tests.objstore import objstore_uri
from tests.runs import (
    PHASES,
    Run,
    assert_same_rows,
    bronze_multiset,
    described,
    load,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

SESSIONS = next(t for t in SHOP_CONFIG.gold_declarations if t.name == "user_sessions")
SESSIONS_TABLE = SESSIONS.name
SESSIONS_QUERY = f"gold_{SESSIONS_TABLE}"

SEED = 7
EVENTS = 2000
LINES_PER_FILE = 500  # 4 files, one bronze micro-batch each
BUDGET_SECONDS = 1200  # for the whole test; every wait below is bounded by it
# (phase, which of its progress lines (None: a seeded random one), the lowest and highest
# fraction of the time that line's work took in the reference run, at which to kill).
KILL_PLAN = [("silver", None, 0.1, 0.7)]
QUARANTINE_RUN_COLUMNS = ("_quarantined_at", "_batch_id")


# --------------------------------------------------------------------------------------------
# Running the command line
# --------------------------------------------------------------------------------------------


def run_args(source: Path, warehouse: Path | str, files_per_batch: int = 1) -> list[str]:
    return [
        str(LAKEHOUSE),
        "run",
        "--config",
        str(SHOP_TOML),
        "--source",
        f"files:{source}",
        "--warehouse",
        str(warehouse),
        "--once",
        "--max-files-per-trigger",
        str(files_per_batch),
    ]


def phase_durations(progress: list[tuple[float, str]], end: float) -> dict[str, list[float]]:
    """Per phase, the seconds from each of its progress lines to the next line (or the end)."""
    durations: dict[str, list[float]] = {phase: [] for phase in PHASES}
    for (at, phase), (following, _) in zip(progress, [*progress[1:], (end, "")], strict=True):
        durations[phase].append(following - at)
    return durations


# --------------------------------------------------------------------------------------------
# Comparing warehouses
# --------------------------------------------------------------------------------------------


def assert_same_warehouse(spark: SparkSession, reference: Path, killed: Path) -> None:
    """Bronze: the same records, each once; silver and gold: the same rows (quarantine without
    its run-time columns)."""
    names = {layer: Warehouse.from_path(reference).table_names(layer) for layer in LAYERS}
    for layer in LAYERS:
        assert Warehouse.from_path(killed).table_names(layer) == names[layer], layer

    for name in names["bronze"]:
        want = bronze_multiset(load(spark, reference, "bronze", name))
        got = bronze_multiset(load(spark, killed, "bronze", name))
        duplicated = Counter({row: n for row, n in got.items() if n > 1})
        assert not duplicated, f"bronze.{name} duplicates: {described(duplicated)}"
        assert got == want, (
            f"bronze.{name}: missing {described(want - got)}, extra {described(got - want)}"
        )

    for name in names["silver"]:
        want_frame = load(spark, reference, "silver", name)
        got_frame = load(spark, killed, "silver", name)
        if name == QUARANTINE_TABLE:
            want_frame = want_frame.drop(*QUARANTINE_RUN_COLUMNS)
            got_frame = got_frame.drop(*QUARANTINE_RUN_COLUMNS)
        assert_same_rows("silver", name, want_frame, got_frame)

    # The gold jobs write exactly once too, whatever the micro-batches were.
    for name in names["gold"]:
        want_frame, got_frame = (
            load(spark, reference, "gold", name),
            load(spark, killed, "gold", name),
        )
        assert_same_rows("gold", name, want_frame, got_frame)


# --------------------------------------------------------------------------------------------
# The test
# --------------------------------------------------------------------------------------------


def run_with_kills(
    source: Path, warehouse: Path | str, durations: dict[str, list[float]], deadline: float
) -> list[str]:
    """Run KILL_PLAN against ``warehouse``, then once to completion (in this process); return
    where the kills landed.

    Each kill waits for the planned progress line, then a seeded random fraction of the time
    that line's work took in the reference run. A run that ends before its kill ends the plan.
    """
    rng = random.Random(SEED)
    kills: list[str] = []
    runs: list[Run] = []
    try:
        for phase, occurrence, low, high in KILL_PLAN:
            which = occurrence or rng.randint(1, len(durations[phase]))
            # The gold jobs start together (their lines come at once), then run: use the rest.
            work = durations[phase][which - 1 : None if phase == "gold" else which]
            delay = rng.uniform(low, high) * sum(work)
            run = Run(run_args(source, warehouse))
            runs.append(run)
            started = run.wait_for(phase, which, deadline)
            if started is not None:
                time.sleep(max(0.0, started + delay - time.monotonic()))
            if run.process.poll() is not None:
                assert run.process.returncode == 0, run.output()
                kills.append(f"none: the run finished before {phase} #{which} + {delay:.1f} s")
                break
            kills.append(f"{run.phase_now()} ({phase} #{which} + {delay:.1f} s)")
            run.kill()
        # The run after the kills is not what is tested: it runs in this process.
        finished = run_cli(*run_args(source, warehouse)[1:])
        assert finished.returncode == 0, finished.stdout + finished.stderr
    finally:
        for started_run in runs:
            if started_run.process.poll() is None:
                started_run.kill()
    return kills


@dataclass(frozen=True)
class Workload:
    source: Path
    reference: Path  # the warehouse of an uninterrupted run
    durations: dict[str, list[float]]  # per phase, the seconds each progress line's work took
    deadline: float  # time.monotonic() by which the tests of this module must end


@pytest.fixture(scope="module")
def workload(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Workload:
    """The source files and an uninterrupted run over them (in this process), timed per phase."""
    deadline = time.monotonic() + BUDGET_SECONDS
    root = tmp_path_factory.mktemp("restart")
    source, reference = root / "source", root / "reference"
    config = WorkloadConfig(events=EVENTS, seed=SEED, malformed_rate=0.01)
    files = write_files(generate(config), source, lines_per_file=LINES_PER_FILE)
    assert len(files) == EVENTS // LINES_PER_FILE
    progress: list[tuple[float, str]] = []

    def record(message: str) -> None:
        phase = message.split(":", 1)[0]
        if phase in PHASES:
            progress.append((time.monotonic(), phase))

    spec = replace(SourceSpec.parse(f"files:{source}"), max_files_per_trigger=1)
    with logged(record):
        run_once(spark, spec, Warehouse.from_path(reference), SHOP_CONFIG)
    durations = phase_durations(progress, time.monotonic())
    for phase, occurrence, _, _ in KILL_PLAN:
        assert len(durations[phase]) >= (occurrence or 1), durations
    return Workload(source, reference, durations, deadline)


def test_a_killed_run_on_an_object_store_converges_to_the_uninterrupted_result(
    spark: SparkSession, workload: Workload, tmp_path: Path
) -> None:
    """A run on a warehouse at ``objstore://`` (no directory rename; checkpoints and
    idempotency ids through Hadoop's FileSystem), killed during silver and run again, leaves
    the tables of the uninterrupted run on a local path, and passes ``verify``.

    The one real SIGKILL of the files source: a local path's commits are covered at every
    boundary by ``test_commit_boundaries``, and the object store is the stricter place."""
    killed = tmp_path / "killed"  # the folder under the warehouse's objstore:// URI
    uri = objstore_uri(killed)
    kills = run_with_kills(workload.source, uri, workload.durations, workload.deadline)
    landed = Counter(kill.split(" ", 1)[0] for kill in kills if not kill.startswith("none"))
    assert landed.total() == 1, kills
    assert_same_warehouse(spark, workload.reference, killed)
    verify = run_cli("verify", "--config", SHOP_TOML, "--warehouse", uri)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    print(f"kills on {uri}: {kills}; phase durations of the reference run: {workload.durations}")


def test_sessions_survive_a_crash_after_their_first_commit(
    spark: SparkSession, workload: Workload, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Crash the run right after the sessions job commits its first batch, before the batch's
    checkpoint commit; the next run replays that batch and ends with the reference's sessions."""
    want = load(spark, workload.reference, "gold", SESSIONS_TABLE)
    assert not want.isEmpty()
    warehouse = Warehouse.from_path(tmp_path / "crashed")
    source = SourceSpec.parse(f"files:{workload.source}")
    # Only the sessions job runs, so the first gold commit is its.
    config = replace(SHOP_CONFIG, gold_tables=(SESSIONS,))
    faults = CommitFaults(monkeypatch, [(gold.batch, GUARDED_REPLACEMENT)], crash_after=1)
    with pytest.raises(LakehouseError):
        run_once(spark, source, warehouse, config)
    assert faults.crashed == ["replace_windows"]
    checkpoint = Path(warehouse.checkpoint(SESSIONS_QUERY))
    assert (checkpoint / "offsets" / "0").exists() and not (checkpoint / "commits" / "0").exists()
    faults.arm(None)
    run_once(spark, source, warehouse, config)
    assert faults.calls, "the sessions batch was not run again"
    assert_same_rows(
        "gold", SESSIONS_TABLE, want, load(spark, Path(warehouse.root), "gold", SESSIONS_TABLE)
    )
