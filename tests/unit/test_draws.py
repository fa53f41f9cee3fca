"""tests.draws: a seed draws the same examples in any process, whatever it imported before.

The history property test once failed in CI and passed alone with the same seed: Hypothesis
had drawn some numbers from the literals of the project modules the CI worker happened to
have loaded. Each draw here runs in a fresh interpreter with its own hash seed; one of them
first imports a module full of small integer literals (the constants Hypothesis would pick
up), as a worker that ran other tests first has.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
#: Draws the history property test's first scenarios, after importing the modules named.
DRAW = """
import importlib.util, sys
for n, path in enumerate(sys.argv[1:]):
    spec = importlib.util.spec_from_file_location(f"loaded_{n}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
from tests.draws import draw_examples
from tests.integration.test_silver_history_property import scenario_strategy
print(repr(draw_examples(scenario_strategy(), 20261123, 30)))
"""


def _draw(hash_seed: str, *modules: Path) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run(
        [sys.executable, "-c", DRAW, *map(str, modules)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_seed_draws_the_same_examples_whatever_the_process_loaded(tmp_path: Path) -> None:
    literals = tmp_path / "many_literals.py"
    numbers = [*range(0, 50), 1_000, 4_096, 30_000, 65_535, 2**16, 2**32]
    literals.write_text("".join(f"N{n} = {n}\n" for n in numbers))

    alone = _draw("1")
    assert alone.startswith("[HistoryScenario(")
    assert _draw("2", literals) == alone
