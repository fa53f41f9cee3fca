"""The demo, outside the product's wheel: the shop's workload (``generator``, ``shop``,
``producer``), its pipeline settings (``settings``), an example scoring function
(``custom_scores``), the main job that runs it through every layer (``job``), its command line
(``python -m lakehouse_demo``: ``cli``, ``workload_cli``) and its Python API (``api``)::

    from lakehouse_demo import demo_lakehouse, generate_workload

(imported on first use). The product imports nothing of it (an import-linter contract).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakehouse_demo.api import demo_lakehouse, generate_workload

__all__ = ["demo_lakehouse", "generate_workload"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("lakehouse_demo.api"), name)
    raise AttributeError(f"module 'lakehouse_demo' has no attribute {name!r}")
