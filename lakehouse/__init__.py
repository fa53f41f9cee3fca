"""The roof of cdc-lakehouse: the command line, pipeline wiring, the demo and the operations
(replay, forget, maintain, verify) over the layers below (see docs/architecture.md).

The public Python API is :mod:`lakehouse.api`, re-exported here::

    from lakehouse import Lakehouse, generate_workload

(imported on first use, so that the command line starts without loading Spark).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakehouse.api import (
        ForgetReport,
        Lakehouse,
        MaintenanceReport,
        Pipeline,
        PipelineStatus,
        ReplayReport,
        RunReport,
        TableCheck,
        TableInfo,
        Verification,
        generate_workload,
    )

__version__ = "0.1.0"

__all__ = [
    "Fit",
    "ForgetReport",
    "Lakehouse",
    "MaintenanceReport",
    "Pipeline",
    "PipelineStatus",
    "ReplayReport",
    "RunReport",
    "TableCheck",
    "TableInfo",
    "Verification",
    "__version__",
    "generate_workload",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("lakehouse.api"), name)
    raise AttributeError(f"module 'lakehouse' has no attribute {name!r}")
