"""The README is a quick start that holds: its first lines are the two commands, its TOML and
Python examples load to the pipeline of ``examples/shop.toml``, its command table names every
command, and every relative link of the README and of ``docs/*.md`` leads to a file (and to a
heading, when it names one)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lakehouse import Lakehouse, config_from_toml
from lakehouse.cli import cli
from lakehouse_core.config import load_config

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(README.read_text()) if lang == language]


def test_the_readme_starts_with_the_two_commands() -> None:
    lines = README.read_text().splitlines()
    assert lines[2:6] == [
        "```bash",
        "make demo   # installs everything it needs, then runs the demo (no broker needed)",
        "make test   # installs everything it needs, then runs lint, types and all tests",
        "```",
    ]


def test_the_readme_toml_is_the_shop_pipeline() -> None:
    (toml,) = blocks("toml")
    assert config_from_toml(toml) == load_config(ROOT / "examples" / "shop.toml")


def test_the_readme_python_declares_the_same_pipeline(tmp_path: Path) -> None:
    """The Python example runs as written (declaring starts no Spark) and gives the same
    config as the TOML file."""
    (code,) = blocks("python")
    namespace: dict[str, object] = {}
    code = code.replace('"/tmp/wh"', repr(str(tmp_path / "wh")))
    exec(compile(code, "README.md", "exec"), namespace)
    lh = namespace["lh"]
    assert isinstance(lh, Lakehouse)
    assert lh.config == load_config(ROOT / "examples" / "shop.toml")


def test_the_command_table_names_every_command() -> None:
    text = README.read_text()
    table = text[text.index("## Commands") :]
    missing = [name for name in cli.commands if f"| `lakehouse {name}` |" not in table]
    assert not missing, f"commands missing from the README's command table: {missing}"


def _slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _headings(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```$", "", path.read_text(), flags=re.S | re.M)
    return {_slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


@pytest.mark.parametrize(
    "page",
    [README, *sorted((ROOT / "docs").glob("*.md"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_relative_link_resolves(page: Path) -> None:
    text = re.sub(r"^```.*?^```$", "", page.read_text(), flags=re.S | re.M)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _headings(resolved):
            broken.append(f"{target}: no heading #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"
