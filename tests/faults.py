"""Deterministic fault injection: the process "dies" right after a chosen Delta commit.

A :class:`CommitFaults` wraps the functions a job calls to commit (looked up by name in the
job's modules) so that each call is recorded, and the call chosen by ``crash_after`` raises
:class:`InjectedCrash` after it returned: its commit is in the table, nothing after it ran.
Running the same micro-batch again then shows what a restart after a crash at that commit
boundary does. Cheaper and exact where a SIGKILL at a random moment is neither.

A module's :func:`lakehouse_core.delta_io.dml_once` (:data:`GUARDED_DML`) or
:func:`~lakehouse_core.delta_io.replace_once` (:data:`GUARDED_REPLACEMENT`) is recorded by the
name of the DML it guards (``partial(merge_silver, ...)``: ``merge_silver``), whether that DML ran
or was skipped because its batch had landed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest

#: The site name of a module's exactly-once DML (see above).
GUARDED_DML = "dml_once"
GUARDED_REPLACEMENT = "replace_once"


class InjectedCrash(Exception):
    """Stands for the process dying right after a commit."""


@dataclass
class CommitFaults:
    """Records commit-site calls; ``crash_after`` (1-based, None: never) picks the crash."""

    monkeypatch: pytest.MonkeyPatch
    sites: list[tuple[ModuleType, str]]
    crash_after: int | None = None
    calls: list[str] = field(default_factory=list)
    crashed: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for module, name in self.sites:
            original = getattr(module, name)
            self.monkeypatch.setattr(module, name, self._wrapped(name, original))

    def arm(self, crash_after: int | None) -> None:
        """Forget the calls so far and crash after the ``crash_after``-th call from now."""
        self.calls.clear()
        self.crash_after = crash_after

    def _wrapped(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)
            guarded = name in (GUARDED_DML, GUARDED_REPLACEMENT)
            site = _guarded_name(*args, **kwargs) if guarded else name
            self.calls.append(site)
            if self.crash_after == len(self.calls):
                self.crashed.append(site)
                raise InjectedCrash(f"after commit #{len(self.calls)} ({site})")
            return result

        return call


def _guarded_name(*args: Any, **kwargs: Any) -> str:
    """The name of the DML function a ``dml_once`` or ``replace_once`` call guards (a
    ``functools.partial``, its fifth argument)."""
    dml = args[4] if len(args) >= 5 else kwargs["dml" if "dml" in kwargs else "replace"]
    return str(dml.func.__name__)
