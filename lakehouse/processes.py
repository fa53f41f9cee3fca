"""Watching the local server processes the roof starts (the Kafka broker, PostgreSQL) by PID."""

from __future__ import annotations

import os
from pathlib import Path


def reap(pid: int) -> bool:
    """True once ``pid`` has exited (collecting it if it is our child)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return not is_alive(pid)
    return done == pid


def is_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"
