"""Installing rebuilt tables on an object store: Delta commits and pointer objects, no renames.

The rebuild is staged as :mod:`lakehouse.run.swap` does (``_system/replay/staging`` mirrors the
warehouse), but object stores (S3, GCS, ADLS without hierarchical namespace) cannot rename a
directory atomically, so nothing is moved into place:

* each staged Delta table replaces the live table's contents, schema included, in one Delta
  commit (an overwrite, :func:`lakehouse_core.delta_io.replace_contents`): the live table keeps its
  identity and history, and a reader sees the old or the new contents, never a mixture. When
  the rebuild kept the schema (the usual case) the table's NOT NULL columns and properties
  stay as they were; a changed schema comes with every column nullable (Delta's limit);
* each staged silver checkpoint is copied to a new generation directory beside the live one
  and a pointer object (:mod:`lakehouse_core.checkpoints`, one PUT) makes it current; a gold query
  gets a fresh generation that starts reading its silver table after the overwrite (its rebuilt gold
  table already holds everything before);
* each staged state file (a gold table's watermark) replaces the live one whole;
* derived state the rebuild did not produce is deleted.

The manifest (one PUT, after the staging tree is complete) decides: without it an interrupted
rebuild is discarded, with it :func:`recover` installs it again. Every step can be repeated,
so a crash at any point leaves the old state or the new one once the next command recovers.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from lakehouse.run.swap import retirable
from lakehouse_core import checkpoints, storage
from lakehouse_core.delta_io import commit_message, has_commit, replace_contents, table_exists
from lakehouse_core.streaming import APP_ID_FILE

STAGING = "_system/replay/staging"
MANIFEST = "_swap.json"
CHECKPOINTS = "_system/checkpoints/"
#: ``userMetadata`` of the commit that installs a rebuilt table (with the rebuild's generation).
REPLAY_COMMIT = "lakehouse replay"
#: Directories whose children are installed as units (``_system`` entries one level deeper).
_LAYERS = ("silver", "gold")


def staging_root(root: str) -> str:
    return f"{root.rstrip('/')}/{STAGING}"


def recover(spark: SparkSession, root: str) -> bool:
    """Install a sealed rebuild that was cut short, and discard an unsealed one.

    Returns True if a rebuild was installed.
    """
    staging = staging_root(root)
    finished = storage.exists(spark, f"{staging}/{MANIFEST}")
    if finished:
        swap(spark, root)
    storage.delete_tree(spark, staging)
    return finished


def prepare(spark: SparkSession, root: str) -> str:
    """The (empty) staging root for ``root``, after :func:`recover`."""
    recover(spark, root)
    return staging_root(root)


def staged_paths(spark: SparkSession, staging: str) -> list[str]:
    """Relative paths of every table, checkpoint and marker file the staging tree holds."""
    found = [
        f"{layer}/{name}"
        for layer in _LAYERS
        for name in storage.subdirectories(spark, f"{staging}/{layer}")
    ]
    for kind in storage.subdirectories(spark, f"{staging}/_system"):
        found += [
            f"_system/{kind}/{name}" for name in storage.names(spark, f"{staging}/_system/{kind}")
        ]
    return sorted(found)


def seal(
    spark: SparkSession, staging: str, retire: Iterable[str], inputs: Mapping[str, str]
) -> None:
    """Mark the staging tree complete (one write of the manifest).

    ``retire``: relative paths of live derived state to delete unless the rebuild produced it
    (never a silver or gold table it did not make: :func:`lakehouse.run.swap.retirable`);
    ``inputs``: for each gold checkpoint (relative path), the silver table it reads.
    """
    install = staged_paths(spark, staging)
    manifest = {
        "generation": uuid.uuid4().hex,
        "install": install,
        "retire": retirable(install, retire),
        "inputs": dict(inputs),
    }
    storage.write_text(spark, f"{staging}/{MANIFEST}", json.dumps(manifest, indent=1))


def swap(spark: SparkSession, root: str) -> list[str]:
    """Install the sealed staging tree of ``root``; return the installed relative paths."""
    root = root.rstrip("/")
    staging = staging_root(root)
    text = storage.read_text(spark, f"{staging}/{MANIFEST}")
    assert text is not None, "swap() needs a sealed staging tree"
    manifest = json.loads(text)
    install: list[str] = manifest["install"]
    inputs: dict[str, str] = manifest["inputs"]
    generation: str = manifest["generation"]
    for relative in install:
        staged = f"{staging}/{relative}"
        if relative.startswith(CHECKPOINTS):
            continue
        if table_exists(spark, staged):
            _overwrite(spark, staged, f"{root}/{relative}", generation)
        elif not storage.is_dir(spark, staged):  # a state file (a gold table's watermark)
            text = storage.read_text(spark, staged)
            assert text is not None
            storage.write_text(spark, f"{root}/{relative}", text)  # replaced whole, repeatable
    for relative in manifest["retire"]:
        if relative not in install:
            _retire(spark, f"{root}/{relative}")
    for relative in install:
        if relative.startswith(CHECKPOINTS) and not relative.endswith(f".{APP_ID_FILE}"):
            _install_checkpoint(spark, root, staging, relative, generation, inputs.get(relative))
    for relative, table in inputs.items():
        if relative not in install:  # a gold job the rebuild did not run: it starts afresh
            _install_checkpoint(spark, root, staging, relative, generation, table)
    storage.delete_tree(spark, staging)
    return install


def _overwrite(spark: SparkSession, staged: str, live: str, generation: str) -> None:
    """Replace the live table's rows and schema by the staged table's, in one commit marked
    with the rebuild's ``generation`` (so a swap repeated after a crash does not write it
    again). A live table that does not exist is first created, empty, as the staged one is
    (its columns' nullability and properties).
    """
    marker = f"{REPLAY_COMMIT} {generation}"
    frame = spark.read.format("delta").load(staged)
    if not table_exists(spark, live):
        detail = DeltaTable.forPath(spark, staged).detail().select("properties").first()
        builder = DeltaTable.createIfNotExists(spark).location(live).addColumns(frame.schema)
        for key, value in (detail.properties if detail is not None else {}).items():
            builder = builder.property(key, value)
        builder.execute()
    elif has_commit(spark, live, marker):
        return  # installed before a crash
    with commit_message(spark, marker):
        replace_contents(spark, frame, live)


def _install_checkpoint(
    spark: SparkSession,
    root: str,
    staging: str,
    relative: str,
    generation: str,
    input_table: str | None,
) -> None:
    """Point the live checkpoint ``relative`` at a new generation: a copy of the staged one
    (with its idempotency id), or, for a gold query (``input_table``), an empty one that reads
    the live input table from after its current version."""
    base = f"{root}/{relative}"
    target = checkpoints.generation(base, generation)
    previous = checkpoints.current(spark, base).location
    if previous == target:
        return  # installed before a crash
    storage.delete_tree(spark, target)
    if input_table is None:
        storage.copy_tree(spark, f"{staging}/{relative}", target)
        app_id = storage.read_text(spark, f"{staging}/{relative}.{APP_ID_FILE}")
        if app_id is not None:
            storage.write_text(spark, f"{target}.{APP_ID_FILE}", app_id)
        checkpoints.point(spark, base, generation)
    else:
        source = f"{root}/{input_table}"
        start = _latest_version(spark, source) + 1 if table_exists(spark, source) else 0
        checkpoints.point(spark, base, generation, start)
    storage.delete_tree(spark, previous)
    storage.delete_tree(spark, f"{previous}.{APP_ID_FILE}")


def _retire(spark: SparkSession, location: str) -> None:
    """Delete live derived state (a table, a checkpoint with its pointer, a marker file)."""
    if location.rsplit("/", 2)[-2] == "checkpoints" and not location.endswith(APP_ID_FILE):
        current = checkpoints.current(spark, location).location
        storage.delete_tree(spark, checkpoints.pointer(location))
        storage.delete_tree(spark, current)
        storage.delete_tree(spark, f"{current}.{APP_ID_FILE}")
    storage.delete_tree(spark, location)


def _latest_version(spark: SparkSession, path: str) -> int:
    row = DeltaTable.forPath(spark, path).history(1).select("version").first()
    return int(row.version) if row is not None else -1
