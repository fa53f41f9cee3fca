"""Running the ``lakehouse`` command line (and the demo's, ``python -m lakehouse_demo``) from
tests: in this process (the default, reusing the test session's Spark), or in a new process
(the installed console script) where the process itself is tested."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from lakehouse.cli import main
from lakehouse.cli.common import console
from lakehouse_demo.cli import main as demo_main

LAKEHOUSE = Path(sys.executable).parent / "lakehouse"
#: The demo shop's settings (``lakehouse_demo.settings.SHOP_CONFIG`` as TOML), for ``--config``.
SHOP_TOML = Path(__file__).resolve().parent.parent / "examples" / "shop.toml"
#: The shop's tables without its gold declarations, for tests of a run's failure modes.
SHOP_TABLES_TOML = Path(__file__).resolve().parent / "data" / "shop_tables.toml"
COMMAND_TIMEOUT = 900
WIDE = 250  # columns: rich does not wrap the tables it prints


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """Run a command through :func:`lakehouse.cli.main` in this process (Spark: the active
    session), capturing what it prints and its exit status."""
    return _in_process(main, args)


def run_demo_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """:func:`run_cli` for the demo's command line (``demo``, ``generate``, ``produce``:
    :func:`lakehouse_demo.cli.main`)."""
    return _in_process(demo_main, args)


def _in_process(
    entry: Callable[[list[str]], None], args: tuple[str | Path, ...]
) -> subprocess.CompletedProcess[str]:
    argv = [str(arg) for arg in args]
    stdout, stderr = io.StringIO(), io.StringIO()
    width = console.width
    console.width = WIDE
    code: int | str | None = 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                entry(argv)
            except SystemExit as exit_:
                code = exit_.code
    finally:
        console.width = width
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return subprocess.CompletedProcess(argv, returncode, stdout.getvalue(), stderr.getvalue())


def lakehouse(*args: str | Path, wide: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the console script in a new process. ``wide``: a wide terminal, so that rich does
    not wrap tables; otherwise the environment of a pipe (no ``COLUMNS``), as in a script or a
    CI log."""
    return _new_process([str(LAKEHOUSE)], args, wide)


def lakehouse_demo(*args: str | Path, wide: bool = True) -> subprocess.CompletedProcess[str]:
    """:func:`lakehouse` for the demo's command line, ``python -m lakehouse_demo``."""
    return _new_process([sys.executable, "-m", "lakehouse_demo"], args, wide)


def _new_process(
    command: list[str], args: tuple[str | Path, ...], wide: bool
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if wide:
        env["COLUMNS"] = str(WIDE)
    return subprocess.run(
        [*command, *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=COMMAND_TIMEOUT,
        env=env,
    )


RULE = re.compile(r"^ *-+( +-+)*$")


def table_cells(output: str) -> list[list[str]]:
    """The body rows of the plain tables a command printed (see
    :func:`lakehouse.cli.plain.table_lines`), as cells: each column spans the dashes under
    its header, and a table ends at a blank line."""
    rows: list[list[str]] = []
    spans: list[tuple[int, int]] = []
    for line in output.splitlines():
        if RULE.match(line):
            spans = [(m.start(), m.end()) for m in re.finditer(r"-+", line)]
        elif not line.strip():
            spans = []
        elif spans:
            rows.append([line[start:end].strip() for start, end in spans])
    return rows
