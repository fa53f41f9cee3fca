"""The local servers' processes (the Kafka broker, PostgreSQL, the Debezium capture): whether
one runs, waiting for one to answer, and stopping one (psutil)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import psutil


def command_line(pid: int) -> list[str]:
    """The command line of a running, non-zombie process ``pid`` (empty if none runs)."""
    try:
        process = psutil.Process(pid)
        return [] if process.status() == psutil.STATUS_ZOMBIE else process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def wait_until(ready: Callable[[], bool], timeout_s: float, interval_s: float = 0.1) -> bool:
    """Ask ``ready`` every ``interval_s`` seconds until it says True (then True) or
    ``timeout_s`` seconds have passed (then False). ``ready`` may raise to stop waiting."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)
    return True


def stop_process(pid: int, first: signal.Signals, timeout_s: float) -> None:
    """Send ``first`` to ``pid``, wait up to ``timeout_s`` seconds for it to end (reaping it if
    it is our child), then SIGKILL it."""
    try:
        process = psutil.Process(pid)
        process.send_signal(first)
        try:
            process.wait(timeout_s)
        except psutil.TimeoutExpired:
            process.kill()
            process.wait()
    except psutil.NoSuchProcess:
        return
