"""The Databricks Asset Bundle (databricks.yml, resources/*.yml) parses, and every job task
names something that exists: the wheel's console script, a ``lakehouse`` command and its
options, or a notebook of the repository."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from lakehouse.cli import cli

pytestmark = pytest.mark.unit

ROOT = Path(__file__).parents[2]
#: The schedules the issue asks for: the continuous pipeline, maintain and validate nightly,
#: fit (the alerts' baselines) weekly.
EXPECTED = {"run", "maintain", "validate", "fit"}


def bundle() -> tuple[dict[str, Any], list[tuple[Path, dict[str, Any]]]]:
    """The bundle's root document and each included resource file with its document."""
    root = yaml.safe_load((ROOT / "databricks.yml").read_text(encoding="utf-8"))
    included = sorted({path for glob in root["include"] for path in ROOT.glob(glob)})
    return root, [(p, yaml.safe_load(p.read_text(encoding="utf-8"))) for p in included]


def tasks() -> Iterator[tuple[Path, str, dict[str, Any], dict[str, Any]]]:
    """(file, job name, job, task) of every task of every job."""
    for path, document in bundle()[1]:
        for name, job in document["resources"]["jobs"].items():
            for task in job["tasks"]:
                yield path, name, job, task


def test_the_bundle_parses_and_names_its_variables_and_artifacts() -> None:
    root, resources = bundle()
    assert root["bundle"]["name"] == "cdc-lakehouse"
    assert resources, "databricks.yml includes no resource file"
    variables = set(root["variables"])
    for path, _ in resources:
        used = set(re.findall(r"\$\{var\.(\w+)\}", path.read_text(encoding="utf-8")))
        assert used <= variables, f"{path.name}: undefined variables {used - variables}"
    for artifact in root["artifacts"].values():
        assert artifact["type"] == "whl"
        assert (ROOT / artifact["path"] / "pyproject.toml").exists()


def test_every_task_names_an_entry_point_command_and_options_that_exist() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    package = re.sub(r"[-.]+", "_", project["name"])
    commands: set[str] = set()
    for path, name, job, task in tasks():
        where = f"{path.name}: job {name}, task {task['task_key']}"
        assert "schedule" in job or "continuous" in job, (
            f"{where}: neither scheduled nor continuous"
        )
        if "notebook_task" in task:
            notebook = (path.parent / task["notebook_task"]["notebook_path"]).resolve()
            assert notebook.exists(), f"{where}: no notebook {notebook}"
            continue
        wheel = task["python_wheel_task"]
        assert re.sub(r"[-.]+", "_", wheel["package_name"]) == package, where
        assert wheel["entry_point"] in project["scripts"], f"{where}: no console script"
        assert any("whl" in library for library in task["libraries"]), f"{where}: no wheel"
        command, *arguments = wheel["parameters"]
        commands.add(command)
        assert command in cli.commands, f"{where}: 'lakehouse {command}' does not exist"
        options = {
            option
            for parameter in cli.commands[command].params
            if isinstance(parameter, click.Option)
            for option in parameter.opts
        }
        named = {argument for argument in arguments if argument.startswith("--")}
        assert named <= options, f"{where}: lakehouse {command} has no {named - options}"
    assert commands >= EXPECTED, f"jobs missing for {EXPECTED - commands}"


def test_the_continuous_pipeline_runs_on_a_processing_time_trigger() -> None:
    pipeline = [t for _, _, job, t in tasks() if "continuous" in job]
    assert len(pipeline) == 1
    parameters = pipeline[0]["python_wheel_task"]["parameters"]
    assert parameters[0] == "run" and "--processing-time" in parameters
    assert "--once" not in parameters
