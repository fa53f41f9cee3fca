"""The wheel declares what it imports: every third-party module the product's packages import
is provided by a distribution in ``[project] dependencies`` (or one of its extras), and every
declared dependency allows the version ``requirements.lock`` pins.

Fast and offline: it reads the sources and the installed distributions' metadata; it does not
install the wheel into a fresh virtualenv."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

import pytest
from packaging.requirements import Requirement

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares it (``Pydantic_Core`` -> ``pydantic-core``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def product_packages() -> list[str]:
    """The top-level packages the wheel ships: the directories with an ``__init__.py`` that
    ``[tool.setuptools.packages.find]``'s ``include`` patterns match and ``exclude`` does not."""
    find = PROJECT["tool"]["setuptools"]["packages"]["find"]
    include, exclude = find.get("include", ["*"]), find.get("exclude", [])
    return sorted(
        path.parent.name
        for path in ROOT.glob("*/__init__.py")
        if any(fnmatch(path.parent.name, p) for p in include)
        and not any(fnmatch(path.parent.name, p) for p in exclude)
    )


def own_packages() -> set[str]:
    """Every top-level package of this repository (the product's, the tests', the benchmarks')."""
    return {path.parent.name for path in ROOT.glob("*/__init__.py")}


def third_party_imports(package: str) -> Iterator[tuple[str, str]]:
    """``(top-level module, "file:line")`` of each absolute import in ``package`` of a module
    that is neither in the standard library nor one of this repository's packages (imports
    inside functions and under ``TYPE_CHECKING`` included)."""
    skip = set(sys.stdlib_module_names) | own_packages() | {"__future__"}
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.partition(".")[0]
                if top not in skip:
                    yield top, f"{path.relative_to(ROOT)}:{node.lineno}"


def declared() -> dict[str, Requirement]:
    """The requirements of ``[project] dependencies`` and of every optional extra, by name."""
    project = PROJECT["project"]
    texts = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        texts += extra
    return {normalized(req.name): req for req in map(Requirement, texts)}


def test_the_product_is_found() -> None:
    assert {"lakehouse_core", "cdc", "bronze", "silver", "gold", "expectations"} <= set(
        product_packages()
    )


def test_every_third_party_import_of_the_product_is_a_declared_dependency() -> None:
    provided_by = importlib.metadata.packages_distributions()
    names = declared()
    missing: dict[str, list[str]] = {}
    for package in product_packages():
        for module, where in third_party_imports(package):
            distributions = {normalized(d) for d in provided_by.get(module, [])}
            if not distributions & names.keys():
                missing.setdefault(module, []).append(where)
    assert not missing, "Imported by the product but not in [project] dependencies:\n" + "\n".join(
        f"  {module} (distribution: {', '.join(provided_by.get(module, ['none installed']))}): "
        f"{', '.join(places[:3])}{' ...' if len(places) > 3 else ''}"
        for module, places in sorted(missing.items())
    )


def locked() -> dict[str, str]:
    """The versions ``requirements.lock`` pins, by normalized name."""
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines():
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep:
            pins[normalized(name.split("[")[0])] = version.split(";")[0].strip()
    return pins


def test_every_dependency_allows_the_version_the_lock_pins() -> None:
    """Each of ``[project] dependencies`` is pinned in the lock at a version it allows; an
    extra's requirement, where the lock pins it (``jsoniq`` is installed apart, ``--no-deps``)."""
    pins = locked()
    required = {normalized(Requirement(text).name) for text in PROJECT["project"]["dependencies"]}
    wrong = [
        f"{name}: {req.specifier} does not allow the locked {pins.get(name, '(not in the lock)')}"
        for name, req in sorted(declared().items())
        if (name in required and name not in pins)
        or (name in pins and not req.specifier.contains(pins[name], prereleases=True))
    ]
    assert not wrong, "\n".join(wrong)
