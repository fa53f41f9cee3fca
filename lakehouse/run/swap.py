"""Installing rebuilt tables: a staging directory swapped into the warehouse by renames.

The staging directory mirrors the warehouse layout (``silver/<t>``, ``gold/<t>``,
``_system/<kind>/<name>``). While it is built, the warehouse is untouched; an interrupted build
is simply discarded. Once it is complete, :func:`seal` writes a manifest: the staged paths to
install and the live paths to retire (derived state of the rebuilt entities that the rebuild did
not produce). :func:`swap` then moves each live path aside and the staged one into place. It is
idempotent, so a swap cut short (a crash between two renames) is finished by running it again,
which :func:`recover` does before any command that rewrites tables. Local file systems only.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Collection, Iterable
from pathlib import Path

from lakehouse_core import checkpoints

STAGING = Path("_system/replay/staging")
RETIRED = Path("_system/replay/retired")
CHECKPOINTS = "_system/checkpoints/"
MANIFEST = "_swap.json"
#: Directories whose children are swapped as units (``_system`` entries one level deeper).
_LAYERS = ("silver", "gold")


def recover(root: str | Path) -> bool:
    """Finish a sealed swap that was cut short, and discard an unsealed (interrupted) build.

    Returns True if a swap was finished.
    """
    root = Path(root)
    finished = (root / STAGING / MANIFEST).exists()
    if finished:
        swap(root)
    shutil.rmtree(root / STAGING, ignore_errors=True)
    shutil.rmtree(root / RETIRED, ignore_errors=True)
    return finished


def prepare(root: str | Path) -> Path:
    """An empty staging directory for ``root`` (after :func:`recover`)."""
    recover(root)
    staging = Path(root) / STAGING
    staging.mkdir(parents=True)
    return staging


def staged_paths(staging: Path) -> list[str]:
    """Relative paths of every table, checkpoint and marker file the staging tree holds."""
    found = [
        f"{layer}/{child.name}"
        for layer in _LAYERS
        if (staging / layer).is_dir()
        for child in (staging / layer).iterdir()
    ]
    system = staging / "_system"
    if system.is_dir():
        found += [
            f"_system/{kind.name}/{child.name}"
            for kind in system.iterdir()
            if kind.is_dir()
            for child in kind.iterdir()
        ]
    return sorted(found)


def unreplaced_tables(install: Collection[str], retire: Iterable[str]) -> list[str]:
    """The paths of ``retire`` that are silver or gold tables (``<layer>/<name>``) the rebuild
    does not ``install``: a swap never removes such a table (:func:`retirable`)."""
    return sorted(
        {
            path
            for path in retire
            if path.partition("/")[0] in _LAYERS and path.count("/") == 1 and path not in install
        }
    )


def retirable(install: Collection[str], retire: Iterable[str]) -> list[str]:
    """The paths of ``retire`` a swap may remove: derived state of the rebuilt entities, but
    no silver or gold table the rebuild did not make (:func:`unreplaced_tables`)."""
    retiring = set(retire)
    return sorted(retiring - set(unreplaced_tables(install, retiring)))


def seal(staging: Path, retire: Iterable[str]) -> None:
    """Mark the staging tree complete: write the manifest of what to install and retire
    (:func:`retirable`)."""
    install = staged_paths(staging)
    manifest = {"install": install, "retire": retirable(install, retire)}
    temporary = staging / f".{MANIFEST}.tmp"
    temporary.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    os.replace(temporary, staging / MANIFEST)


def swap(root: str | Path) -> list[str]:
    """Install the sealed staging tree of ``root``; return the installed relative paths.

    Each staged path replaces its live path (moved aside first); each retired path is moved
    aside. The moved-aside copies are deleted at the end.
    """
    root = Path(root)
    staging, retired = root / STAGING, root / RETIRED
    manifest = json.loads((staging / MANIFEST).read_text(encoding="utf-8"))
    install: list[str] = manifest["install"]
    for relative in install:
        if (staging / relative).exists():
            _move(root / relative, retired / relative)
            if relative.startswith(CHECKPOINTS):  # a pointer (one hop's) would hide it
                pointer = checkpoints.pointer(relative)
                _move(root / pointer, retired / pointer)
            _move(staging / relative, root / relative)
    for relative in manifest["retire"]:
        if relative not in install:
            _move(root / relative, retired / relative)
    (staging / MANIFEST).unlink()
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(retired, ignore_errors=True)
    return install


def _move(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target`` if it exists (replacing a stale ``target``)."""
    if not source.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_dir():
        shutil.rmtree(target)
    elif target.exists():
        target.unlink()
    source.rename(target)
