"""A replay cut short on an object store: the next command finishes or discards it.

A replay on ``objstore://`` installs its sealed rebuild by one Delta commit per table and one
pointer write per checkpoint (:mod:`lakehouse.run.commit_swap`). A crash between two of those
leaves some tables rebuilt and others not. The next ``run`` (or ``replay``) must first finish
the install (the rebuild was sealed) or discard the rebuild (it was not), say so in one line,
and leave the warehouse wholly rebuilt or wholly old, never mixed.

One replay is staged and sealed; each case works on a copy of that warehouse (the object
store is a local folder underneath), so the rebuild itself runs once.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse.ops.replay import replay
from lakehouse.run import commit_swap
from lakehouse.run.recovery import MESSAGES
from lakehouse_core import checkpoints
from lakehouse_core.delta_io import has_commit
from lakehouse_core.layout import Warehouse
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from lakehouse_demo.settings import SHOP_CONFIG
from tests.cli import SHOP_TOML, run_cli
from tests.faults import CommitFaults, InjectedCrash
from tests.logs import logged
from tests.objstore import objstore_uri
from tests.warehouses import assert_same_tables

pytestmark = pytest.mark.integration

#: The install steps of :func:`lakehouse.run.commit_swap.swap`, each a commit of its own.
INSTALL_STEPS = ("_overwrite", "_install_checkpoint", "_retire")


def rebuilt_parts(spark: SparkSession, folder: Path, generation: str) -> tuple[set[str], set[str]]:
    """The silver and gold tables that hold the rebuild's install commit, and the checkpoints
    that point at its generation (relative paths)."""
    root = objstore_uri(folder)
    warehouse = Warehouse.from_path(root)
    marker = f"{commit_swap.REPLAY_COMMIT} {generation}"
    tables = {
        f"{layer}/{name}"
        for layer in ("silver", "gold")
        for name in warehouse.table_names(layer)
        if has_commit(spark, warehouse.table(layer, name), marker)
    }
    pointed = {
        path.name.removesuffix(checkpoints.POINTER_SUFFIX)
        for path in (folder / "_system" / "checkpoints").glob(f"*{checkpoints.POINTER_SUFFIX}")
        if json.loads(path.read_text(encoding="utf-8"))["generation"] == generation
    }
    return tables, {f"_system/checkpoints/{name}" for name in pointed}


def command(name: str, folder: Path, *args: str) -> str:
    """Run a command on the warehouse in ``folder`` (at its ``objstore://`` URI); its output."""
    done = run_cli(name, *args, "--warehouse", objstore_uri(folder), "--config", SHOP_TOML)
    assert done.returncode == 0, (name, folder.name, done.stdout, done.stderr)
    return done.stdout


def sealed_replay(spark: SparkSession, monkeypatch: pytest.MonkeyPatch, folder: Path) -> str:
    """Replay the warehouse in ``folder`` and crash right after the rebuild is sealed (nothing
    installed yet); the rebuild's generation."""
    faults = CommitFaults(monkeypatch, [(commit_swap, "seal")])
    faults.arm(1)
    with pytest.raises(InjectedCrash):
        replay(spark, Warehouse.from_path(objstore_uri(folder)), SHOP_CONFIG)
    monkeypatch.undo()
    manifest = folder / commit_swap.STAGING / commit_swap.MANIFEST
    return str(json.loads(manifest.read_text(encoding="utf-8"))["generation"])


def replay_until_its_rebuild(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, folder: Path
) -> list[str]:
    """Start a replay of the warehouse in ``folder`` and stop it where its rebuild would begin
    (once its staging root is prepared: the earlier replay's install is done by then); what it
    said."""
    prepare = commit_swap.prepare
    CommitFaults(monkeypatch, [(commit_swap, "prepare")], crash_after=1)
    with pytest.raises(InjectedCrash), logged() as said:
        replay(spark, Warehouse.from_path(objstore_uri(folder)), SHOP_CONFIG)
    monkeypatch.setattr(commit_swap, "prepare", prepare)
    return said


def test_the_next_command_finishes_or_discards_an_interrupted_replay(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Crashes after the first table commit and after the first checkpoint pointer (every
    table installed): the next ``replay`` or ``run`` finishes the install (every table and
    checkpoint of the rebuild; the tables of an uninterrupted replay and run). A rebuild
    that was never sealed is discarded: no table or checkpoint of it is installed."""
    parts = write_files(generate(WorkloadConfig(events=80, seed=5)), tmp_path / "parts", 40)
    source = tmp_path / "source"
    source.mkdir()
    parts[0].rename(source / parts[0].name)
    sealed = tmp_path / "sealed"

    def run(folder: Path) -> str:
        return command("run", folder, "--once", "--source", f"files:{source}")

    def copy(name: str) -> Path:
        shutil.copytree(sealed, tmp_path / name)
        return tmp_path / name

    run(sealed)
    generation = sealed_replay(spark, monkeypatch, sealed)
    assert rebuilt_parts(spark, sealed, generation) == (set(), set())
    for part in parts[1:]:  # the runs after the replay have new records to process
        part.rename(source / part.name)

    faults = CommitFaults(monkeypatch, [(commit_swap, step) for step in INSTALL_STEPS])
    reference = copy("reference")
    assert commit_swap.recover(spark, objstore_uri(reference))
    steps = list(faults.calls)
    run(reference)
    everything = rebuilt_parts(spark, reference, generation)
    assert everything[0] and everything[1], everything

    first_checkpoint = steps.index("_install_checkpoint") + 1
    cases = {"first-table": 1, "first-pointer": first_checkpoint}  # tables or pointers mixed
    for case, crash_after in cases.items():
        folder = copy(case)
        faults.arm(crash_after)
        with pytest.raises(InjectedCrash):
            commit_swap.recover(spark, objstore_uri(folder))
        faults.arm(None)
        assert rebuilt_parts(spark, folder, generation) != everything, case  # mixed now
        if case == "first-table":  # the next replay finishes it before it rebuilds again
            said = replay_until_its_rebuild(spark, monkeypatch, folder)
            assert MESSAGES["finished"] in said, said
            assert rebuilt_parts(spark, folder, generation) == everything, case
            run(folder)
        else:
            output = run(folder)
            assert f"- {MESSAGES['finished']}" in output.splitlines(), (case, output)
            assert rebuilt_parts(spark, folder, generation) == everything, case
        assert not (folder / commit_swap.STAGING).exists(), case
        assert_same_tables(
            spark, Warehouse.from_path(str(reference)), Warehouse.from_path(str(folder))
        )

    # As if the replay had died just before it sealed the rebuild (in place: a gold checkpoint
    # copied elsewhere keeps its old place in its schema log until a fresh one replaces it).
    unsealed = sealed
    (unsealed / commit_swap.STAGING / commit_swap.MANIFEST).unlink()
    output = run(unsealed)
    assert f"- {MESSAGES['discarded']}" in output.splitlines(), output
    assert rebuilt_parts(spark, unsealed, generation) == (set(), set())
    assert not (unsealed / commit_swap.STAGING).exists()
