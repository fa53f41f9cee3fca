"""The lock files hold every dependency: ``make`` installs them with ``pip --no-deps`` (nothing
resolved again), so a package missing from a lock would be missing from the virtualenv.
``requirements.lock`` (what ``make demo`` installs) holds the product with its ``postgres``
extra and everything that needs; with ``requirements-dev.lock`` (``make venv``), it also holds
the tools of ``requirements.txt``.

Offline: each locked package's requirements are read from the metadata of the distribution
installed here, which must be the version its lock pins."""

from __future__ import annotations

import importlib.metadata
import tomllib
from collections.abc import Iterable
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as normalized

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_LOCK = ROOT / "requirements.lock"
DEV_LOCK = ROOT / "requirements-dev.lock"


def pins(lock: Path) -> dict[str, str]:
    """``name -> version`` of each line of ``lock`` (comments aside); every line is ``==``."""
    found: dict[str, str] = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        pinned = Requirement(text)
        specifiers = list(pinned.specifier)
        assert [s.operator for s in specifiers] == ["=="], f"{lock.name}: not a pin: {line!r}"
        name = normalized(pinned.name)
        assert name not in found, f"{lock.name}: {name} pinned twice"
        found[name] = specifiers[0].version
    return found


def project_requirements(extras: Iterable[str]) -> list[Requirement]:
    """``[project] dependencies`` of pyproject.toml, with those of the ``extras`` named."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    texts = list(project["dependencies"])
    for extra in extras:
        texts += project["optional-dependencies"][extra]
    return [Requirement(text) for text in texts]


def unmet(roots: list[Requirement], locked: dict[str, str]) -> list[str]:
    """What ``roots`` need, directly or through the locked packages' own requirements (their
    markers evaluated here, with the extras asked for), that ``locked`` does not pin at a
    version the requirement allows; each as one line."""
    problems: list[str] = []
    todo = [(req, "pyproject.toml") for req in roots]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req, wanted_by = todo.pop()
        name = normalized(req.name)
        version = locked.get(name)
        if version is None:
            problems.append(f"{req} (wanted by {wanted_by}) is not pinned")
            continue
        if not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req} (wanted by {wanted_by}) does not allow the pinned {version}")
        key = (name, frozenset(req.extras))
        if key in done:
            continue
        done.add(key)
        installed = importlib.metadata.version(req.name)
        assert installed == version, f"{req.name} {installed} is installed, the lock pins {version}"
        environments = [{"extra": extra} for extra in sorted(req.extras) or [""]]
        for text in importlib.metadata.requires(req.name) or []:
            needed = Requirement(text)
            if needed.marker is None or any(needed.marker.evaluate(e) for e in environments):
                todo.append((needed, f"{req.name} {version}"))
    return sorted(set(problems))


def test_the_locks_pin_each_package_once() -> None:
    runtime, dev = pins(RUNTIME_LOCK), pins(DEV_LOCK)
    assert not runtime.keys() & dev.keys(), sorted(runtime.keys() & dev.keys())


def test_the_runtime_lock_holds_all_the_product_and_the_demo_need() -> None:
    """The product with its ``postgres`` extra (the demo's ``--postgres``), then everything the
    locked packages require: all pinned in requirements.lock, at versions allowed."""
    problems = unmet(project_requirements(["postgres"]), pins(RUNTIME_LOCK))
    assert not problems, "requirements.lock lacks:\n" + "\n".join(problems)


def test_the_two_locks_hold_all_the_tools_need() -> None:
    """requirements.txt's tools (tests, linters, notebooks) with everything they require:
    pinned in one of the two locks."""
    tools = [
        Requirement(line.split("#", 1)[0])
        for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
        if line.split("#", 1)[0].strip()
    ]
    both = pins(RUNTIME_LOCK) | pins(DEV_LOCK)
    problems = unmet([*project_requirements(["postgres"]), *tools], both)
    assert not problems, "requirements.lock and requirements-dev.lock lack:\n" + "\n".join(problems)
