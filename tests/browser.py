"""Headless Chromium for tests that look at generated HTML (GX Data Docs).

Chromium comes from the Debian package ``chromium``, installed with apt-get where it is missing
(``make chromium`` runs the same step: ``python -m tests.browser``). Where apt-get is not there
(or we are not root) the tests that need a browser are skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

NAMES = ("chromium", "chromium-browser")
INSTALL_TIMEOUT = 900
RUN_TIMEOUT = 120
#: Flags for a headless run as root in a container: no sandbox, no GPU, no first-run chores.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--hide-scrollbars",
    "--allow-file-access-from-files",
)


class Browser(NamedTuple):
    """Chromium's executable, or None and why it is missing."""

    executable: str | None
    reason: str


def find_chromium() -> str | None:
    """The Chromium executable on ``PATH``, if any."""
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def install_chromium() -> tuple[str | None, str]:
    """Chromium's executable, installed from Debian's package where missing; with None, the
    reason it could not be (no apt-get, not root, apt-get failed)."""
    found = find_chromium()
    if found:
        return found, "installed"
    if shutil.which("apt-get") is None:
        return None, "Chromium is not installed and apt-get is not available to install it"
    if os.geteuid() != 0:
        return None, "Chromium is not installed and apt-get needs root to install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"],
    ):
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=INSTALL_TIMEOUT, check=False
        )
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
            return None, f"'{' '.join(command)}' failed: {' '.join(tail)}"
    found = find_chromium()
    return found, "installed" if found else "apt-get installed chromium but it is not on PATH"


def dump_dom(chromium: str, page: Path) -> str:
    """The DOM of ``page`` after Chromium ran its scripts, as HTML text."""
    done = subprocess.run(
        [chromium, *FLAGS, "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=True,
    )
    return done.stdout


def screenshot(chromium: str, page: Path, png: Path, size: str = "1280,1600") -> Path:
    """A PNG of ``page`` rendered at ``size`` (width,height pixels) written to ``png``."""
    subprocess.run(
        [
            chromium,
            *FLAGS,
            "--virtual-time-budget=5000",
            f"--window-size={size}",
            f"--screenshot={png}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=True,
    )
    return png


#: Flags that keep Chromium off the network even on a machine with internet: every host name
#: fails to resolve and every request goes to a proxy on a closed local port.
OFFLINE = ("--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9")


def dump_dom_offline(chromium: str, page: Path) -> str:
    """The DOM of ``page`` after Chromium ran its scripts with the network off, as HTML."""
    done = subprocess.run(
        [chromium, *FLAGS, *OFFLINE, "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=True,
    )
    return done.stdout


def screenshot_offline(chromium: str, page: Path, png: Path, size: str = "1280,1600") -> Path:
    """A PNG of ``page`` rendered at ``size`` with the network off, written to ``png``."""
    subprocess.run(
        [
            chromium,
            *FLAGS,
            *OFFLINE,
            "--virtual-time-budget=5000",
            f"--window-size={size}",
            f"--screenshot={png}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=True,
    )
    return png


if __name__ == "__main__":
    executable, why = install_chromium()
    print(f"chromium: {executable}" if executable else f"chromium: not available: {why}")
    sys.exit(0)
