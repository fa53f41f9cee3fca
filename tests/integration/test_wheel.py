"""The product's wheel holds the product only, and works installed on its own.

The wheel is built once (from a copy of the checkout, so that nothing left in the checkout's
``build/`` can slip into it) and installed without the checkout into a new virtualenv. Its
files are listed: the product's packages and nothing of the demo (``lakehouse_demo``) or the
local test servers (``lakehouse_local``), which stay in the source tree. The installed console
script answers ``--help`` and runs a pipeline ``--once``.

The new virtualenv gets the wheel alone (``--no-deps``: this machine reaches PyPI, but a
resolve of pyspark and the rest would be minutes of downloads per test run). Its dependencies
are what the wheel declares and only that: the distributions its ``Requires-Dist`` names (with
the ``local-jars`` extra, the Delta jars) and theirs, resolved among the project's virtualenv's
installed ones and linked into a directory on its path. A package the product imports but does
not declare is then missing there, as after a ``pip install`` of the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from lakehouse_demo import generate_workload

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = {"lakehouse_core", "lakehouse", "cdc", "bronze", "silver", "gold", "expectations"}
SHOP_TABLES = ("silver.clickstream", "silver.customers", "silver.orders")
NOT_SHIPPED = ("lakehouse_demo", "lakehouse_local", "lakehouse/demo", "lakehouse/local")
#: What the copy of the checkout leaves out: caches, the virtualenv, earlier build output and
#: the benchmarks' work directories.
LEFT_OUT = shutil.ignore_patterns(
    ".*", "build", "*.egg-info", "__pycache__", "*.pyc", "work", "node_modules"
)
TIMEOUT = 900


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The product's wheel, built by pip (setuptools in an isolated build environment) from a
    copy of the checkout."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    source.mkdir()
    for entry in ROOT.iterdir():
        if entry.name.startswith(".") or entry.name == "build" or entry.suffix == ".egg-info":
            continue
        if entry.is_dir():
            shutil.copytree(entry, source / entry.name, ignore=LEFT_OUT)
        else:
            shutil.copy2(entry, source / entry.name)
    out = base / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", out, source],
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (path,) = out.glob("cdc_lakehouse-*.whl")
    return path


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv with the wheel installed (the ``bin`` directory), and on its path the
    distributions the wheel declares (:func:`declared_distributions`)."""
    home = tmp_path_factory.mktemp("fresh") / "venv"
    venv.create(home, with_pip=False)
    python = home / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dependencies = home.parent / "dependencies"
    link_distributions(declared_distributions(wheel), dependencies)
    Path(purelib, "declared_dependencies.pth").write_text(f"{dependencies}\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", wheel],
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return home / "bin"


def declared_distributions(wheel: Path) -> list[metadata.Distribution]:
    """The installed distributions the wheel's requirements (and the ``local-jars`` extra's)
    need, with their own requirements, recursively; jsoniq's own are not followed (it is
    installed with ``--no-deps`` for its jars). A requirement not installed here fails."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        requires = Parser().parsestr(archive.read(name).decode()).get_all("Requires-Dist") or []
    todo = [(Requirement(line), ("", "local-jars")) for line in requires]
    found: dict[str, metadata.Distribution] = {}
    while todo:
        requirement, extras = todo.pop()
        marker = requirement.marker
        if marker is not None and not any(marker.evaluate({"extra": e}) for e in extras):
            continue
        key = canonicalize_name(requirement.name)
        if key in found:
            continue
        try:
            found[key] = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{requirement.name} (needed by the wheel) is not installed here")
        if key != "jsoniq":
            wanted = ("", *requirement.extras)
            todo += [(Requirement(line), wanted) for line in found[key].requires or []]
    return list(found.values())


def link_distributions(distributions: list[metadata.Distribution], target: Path) -> None:
    """Symbolic links in ``target`` to the top-level files and directories (packages, modules,
    metadata) of ``distributions``."""
    target.mkdir()
    for distribution in distributions:
        assert distribution.files is not None, distribution.metadata["Name"]
        for top in {file.parts[0] for file in distribution.files if file.parts[0] != ".."}:
            link = target / top
            if top != "__pycache__" and not top.endswith(".pth") and not link.exists():
                link.symlink_to(Path(str(distribution.locate_file(top))))


def _run(
    command: list[str | Path], cwd: Path, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``command`` in ``cwd`` (outside the checkout), without the checkout on its path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env={**env, **(extra or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT,
    )


def test_the_wheel_holds_the_product_and_nothing_of_the_demo(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    shipped = [name for name in names if name.startswith(NOT_SHIPPED)]
    assert not shipped, f"the wheel ships the demo or the local servers: {shipped[:10]}"
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == PRODUCT, sorted(top)
    assert "lakehouse/cli/__init__.py" in names and "lakehouse_core/spark.py" in names
    assert any(name.startswith("expectations/suites/") for name in names)
    metadata = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "lakehouse = lakehouse.cli:main" in zipfile.ZipFile(wheel).read(metadata).decode()


def test_the_installed_wheel_runs_without_the_checkout(installed: Path, tmp_path: Path) -> None:
    where = _run(
        [
            installed / "python",
            "-c",
            "import importlib.util, lakehouse.cli; print(lakehouse.cli.__file__); "
            "print([importlib.util.find_spec(n) for n in ('lakehouse_demo', 'lakehouse_local', "
            "'hypothesis')])",
        ],
        tmp_path,
    )
    assert where.returncode == 0, where.stderr[-3000:]
    module, specs = where.stdout.splitlines()
    assert Path(module).is_relative_to(installed.parent), module
    assert specs == "[None, None, None]", specs  # hypothesis: the tests', not declared

    overview = _run([installed / "lakehouse", "--help"], tmp_path)
    assert overview.returncode == 0, overview.stderr[-3000:]
    assert "status" in overview.stdout and "demo" not in overview.stdout, overview.stdout
    status = _run([installed / "lakehouse", "status", "--help"], tmp_path)
    assert status.returncode == 0, status.stderr[-3000:]
    assert status.stdout.startswith("Usage: lakehouse status"), status.stdout[:500]


def test_the_installed_wheel_runs_a_pipeline_once(installed: Path, tmp_path: Path) -> None:
    """A ``--once`` run of the demo shop's pipeline (its settings as TOML) by the installed
    console script in its own process and JVM; then its ``status`` (no JVM): silver has caught
    up with bronze in each of the shop's tables."""
    source = tmp_path / "shop"
    generate_workload(source, events=300, seed=5, malformed_rate=0.0)
    config = tmp_path / "shop.toml"
    shutil.copy(ROOT / "examples" / "shop.toml", config)
    warehouse = tmp_path / "wh"
    command: list[str | Path] = [installed / "lakehouse", "run", "--config", config]
    command += ["--source", f"files:{source}", "--warehouse", warehouse, "--once"]
    run = _run(
        command,
        tmp_path,
        {"COLUMNS": "200"},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "done: " in run.stdout, run.stdout[-3000:]
    status = _run([installed / "lakehouse", "status", "--warehouse", warehouse, "--json"], tmp_path)
    assert status.returncode == 0, status.stderr[-3000:]
    silver = {s["table"]: s["records_behind"] for s in json.loads(status.stdout)["silver"]}
    assert silver == dict.fromkeys(SHOP_TABLES, 0), silver
