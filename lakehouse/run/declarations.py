"""The declarations each pipeline run ran with, recorded in the warehouse, so that commands run
later on it need no ``--config``.

Each version is ``<warehouse>/_system/declarations/<NNNNNNNNNN>.toml`` (the config as
:meth:`~lakehouse_core.specs.PipelineConfig.to_toml` writes it) with a JSON file beside it
(``<NNNNNNNNNN>.json``: when, which command, host and pid). A run writes a new version only
when its declarations differ from the newest one. Files are written whole through
:mod:`lakehouse_core.storage` (any Hadoop URI; the JSON first, so a version exists once its
TOML does) and read back as plain files for a local warehouse, without Spark.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.run.changes import declaration_changes, refusal, replay_needed
from lakehouse.run.rebuild import drop_for_rebuild
from lakehouse_core import storage
from lakehouse_core.config import PipelineConfig, config_from_toml
from lakehouse_core.errors import ConfigError
from lakehouse_core.layout import Warehouse, is_uri

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: Digits of a version's file name (``0000000003.toml``): names sort as numbers.
VERSION_DIGITS = 10
_VERSION_FILE = re.compile(rf"^(\d{{{VERSION_DIGITS}}})\.toml$")


def version_file(version: int, suffix: str = "toml") -> str:
    """The file name of a version: ``0000000003.toml`` (``suffix``: ``json`` for its notes)."""
    if not 0 < version < 10**VERSION_DIGITS:
        raise ValueError(f"declarations version {version} is out of range")
    return f"{version:0{VERSION_DIGITS}d}.{suffix}"


def recorded_versions(names: Iterable[str]) -> list[int]:
    """The versions among a directory's entry ``names`` (their TOML files), oldest first."""
    return sorted(int(m.group(1)) for name in names if (m := _VERSION_FILE.match(name)))


@dataclass(frozen=True)
class Recorded:
    """One recorded version of the declarations: the config, and when and by what command it
    was recorded (None where its JSON file is missing or unreadable)."""

    version: int
    config: PipelineConfig
    at: datetime | None = None
    command: str | None = None

    def describe(self) -> str:
        """``run --once of 2026-01-02 10:00:00 UTC``, or ``version 3`` without its notes."""
        if self.at is None:
            return f"version {self.version}"
        when = self.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"{self.command or 'run'} of {when}"


def comparable(config: PipelineConfig) -> PipelineConfig:
    """``config`` as recorded: a relative local ``[quality]`` suites directory made absolute,
    so the record means the same from any working directory."""
    suites = config.quality.suites
    if suites is None or is_uri(suites) or Path(suites).is_absolute():
        return config
    return replace(config, quality=replace(config.quality, suites=str(Path(suites).resolve())))


_SECTIONS = (
    ("table", "tables"),
    ("gold", "gold_tables"),
    ("pattern", "patterns"),
    ("model", "models"),
    ("alert", "alerts"),
)
_SETTINGS = ("maintenance", "quality", "catalog")


def differences(given: PipelineConfig, recorded: PipelineConfig) -> list[str]:
    """What ``given`` changes of ``recorded``, by name: ``added gold spend_last_hour``,
    ``removed table clickstream``, ``changed pattern order_bursts``, ``changed [quality]``;
    empty when they are equal."""
    found: list[str] = []
    for kind, field in _SECTIONS:
        old = {entry.name: entry for entry in getattr(recorded, field)}
        new = {entry.name: entry for entry in getattr(given, field)}
        found += [f"added {kind} {name}" for name in new if name not in old]
        found += [f"removed {kind} {name}" for name in old if name not in new]
        found += [
            f"changed {kind} {name}" for name in new if name in old and new[name] != old[name]
        ]
    found += [
        f"changed [{name}]" for name in _SETTINGS if getattr(given, name) != getattr(recorded, name)
    ]
    if not found and given != recorded:  # the same entries in another order
        found.append("reordered entries")
    return found


@dataclass(frozen=True)
class Choice:
    """The declarations a command runs with, and the note to print about them (None: none)."""

    config: PipelineConfig
    note: str | None = None
    recorded: bool = False  # the config is the warehouse's recorded one


def choose(given: PipelineConfig | None, recorded: Recorded | None) -> Choice:
    """The declarations of a command: ``given`` (its ``--config``) if any, with a note when they
    differ from the warehouse's newest ``recorded`` ones; else the recorded ones; else none
    (a pipeline without declarations)."""
    if given is None:
        if recorded is None:
            return Choice(PipelineConfig())
        return Choice(recorded.config, recorded=True)
    if recorded is None:
        return Choice(given)
    changed = differences(given, recorded.config)
    if not changed:
        return Choice(given)
    note = (
        "note: the declarations given differ from those the warehouse last ran with "
        f"({recorded.describe()}): {', '.join(changed)}"
    )
    return Choice(given, note)


# --- reading and writing ----------------------------------------------------------------------


@dataclass(frozen=True)
class Files:
    """How a directory is listed and a file read: plain files, Spark's Hadoop file system, or
    another reader (``lakehouse status`` reads URIs with ``pyarrow``)."""

    names: Callable[[str], Sequence[str]]
    read_text: Callable[[str], str | None]


def _plain_names(path: str) -> list[str]:
    folder = Path(path)
    return [entry.name for entry in folder.iterdir()] if folder.is_dir() else []


def _plain_text(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


#: A local warehouse's files, read without Spark.
PLAIN_FILES = Files(_plain_names, _plain_text)


def hadoop_files(spark: SparkSession) -> Files:
    """Files at any Hadoop URI, through ``spark``'s file system (:mod:`lakehouse_core.storage`)."""
    return Files(lambda uri: storage.names(spark, uri), lambda uri: storage.read_text(spark, uri))


def newest_recorded(warehouse: Warehouse, files: Files | None = None) -> Recorded | None:
    """The newest declarations recorded in ``warehouse`` (None: it has none), read with
    ``files`` (default: plain files; give one for a URI).

    Raises:
        ConfigError: the newest record is no longer a valid pipeline TOML file.
    """
    files = files or PLAIN_FILES
    versions = recorded_versions(files.names(warehouse.declarations))
    if not versions:
        return None
    version = versions[-1]
    path = f"{warehouse.declarations}/{version_file(version)}"
    text = files.read_text(path)
    if text is None:
        return None
    try:
        config = config_from_toml(text)
    except ConfigError as error:
        raise ConfigError(
            f"The warehouse's recorded declarations {path} cannot be read ({error}): give the "
            "--config to run with."
        ) from None
    notes = _notes(files.read_text(f"{warehouse.declarations}/{version_file(version, 'json')}"))
    at = notes.get("recorded_at")
    command = notes.get("command")
    return Recorded(
        version,
        config,
        datetime.fromisoformat(at) if isinstance(at, str) else None,
        command if isinstance(command, str) else None,
    )


def _notes(text: str | None) -> dict[str, Any]:
    try:
        notes = json.loads(text) if text else {}
    except ValueError:
        return {}
    return notes if isinstance(notes, dict) else {}


#: The commands that rebuild silver from bronze with the declarations they record, and so may
#: record a change of a silver table's contract (keys, sequence, SCD type) that a run refuses.
REBUILDING_COMMANDS = frozenset({"replay"})


def held_tables(warehouse: Warehouse, layer: str, files: Files | None = None) -> list[str]:
    """The tables of ``layer`` that ``warehouse`` holds (directories with a Delta log), listed
    with ``files`` (default: plain files)."""
    files = files or PLAIN_FILES
    folder = f"{warehouse.root.rstrip('/')}/{layer}"
    return [
        name
        for name in files.names(folder)
        if not name.startswith((".", "_")) and "_delta_log" in files.names(f"{folder}/{name}")
    ]


def refuse_unrebuilt(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig, rebuilt: Collection[str]
) -> None:
    """Before a replay of the entities ``rebuilt`` records ``config``: refuse when it changes
    the contract of another silver table the warehouse holds (recording it would let later
    runs take that table's rows, merged under the old contract, for ones merged under the new).

    Raises:
        ConfigError: one line naming those tables and the replay that takes them too.
    """
    files = PLAIN_FILES if not is_uri(warehouse.root) else hadoop_files(spark)
    try:
        newest = newest_recorded(warehouse, files)
    except ConfigError:
        return
    if newest is None:
        return
    held = held_tables(warehouse, "silver", files)
    needed = replay_needed(declaration_changes(newest.config, comparable(config), held), held)
    others = [change for change in needed if change.name not in rebuilt]
    if others:
        tables = ", ".join(f"silver.{change.name}" for change in others)
        raise ConfigError(
            f"replay of {', '.join(rebuilt)} refused: the declarations given also change how "
            f"{tables} merges its records ({'; '.join(change.what for change in others)}), "
            "which this replay does not rebuild: replay them together (lakehouse replay "
            "rebuilds every table). Nothing was changed."
        )


def record_declarations(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    command: str,
    now: datetime | None = None,
    rebuilt: Collection[str] = (),
) -> int | None:
    """Record ``config`` as the declarations ``command`` runs ``warehouse`` with, unless they
    equal the newest recorded ones; return the new version (None: nothing written). Each
    change from the newest is logged at INFO with what it implies
    (:func:`lakehouse.run.changes.declaration_changes`), and a gold table or pattern whose
    change rebuilds it is dropped with its state first (:mod:`lakehouse.run.rebuild`: the
    run then backfills it from silver), unless ``rebuilt`` names it (a replay rebuilt it).

    Raises:
        ConfigError: ``config`` changes the contract of a silver table the warehouse holds
            (:func:`lakehouse.run.changes.replay_needed`), which only a replay can make, and
            ``command`` is not one (:data:`REBUILDING_COMMANDS`): nothing is written.
    """
    config = comparable(config)
    files = PLAIN_FILES if not is_uri(warehouse.root) else hadoop_files(spark)
    try:
        newest = newest_recorded(warehouse, files)
    except ConfigError:
        newest = None  # an unreadable record: the given declarations replace it
    if newest is not None and newest.config == config:
        return None
    if newest is not None:
        held = held_tables(warehouse, "silver", files)
        changes = declaration_changes(newest.config, config, held)
        needed = replay_needed(changes, held)
        if needed and command not in REBUILDING_COMMANDS:
            raise ConfigError(refusal(needed))
        for change in changes:  # what each change implies, as lakehouse plan says it
            log.info(f"declarations: {change.line()}")
        # Before the record: a run cut short in between finds the change again.
        drop_for_rebuild(spark, warehouse, config, changes, files.names, rebuilt)
    versions = recorded_versions(files.names(warehouse.declarations))
    version = (versions[-1] if versions else 0) + 1
    at = (now or datetime.now(UTC)).astimezone(UTC)
    notes = {
        "version": version,
        "recorded_at": at.isoformat(),
        "command": command,
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
    folder = warehouse.declarations
    storage.write_text(spark, f"{folder}/{version_file(version, 'json')}", json.dumps(notes) + "\n")
    storage.write_text(spark, f"{folder}/{version_file(version)}", config.to_toml())
    return version
