"""The roof of cdc-lakehouse: the command line, pipeline wiring and the operations
(replay, forget, maintain, verify) over the layers below (see docs/architecture.md).

The public Python API is :mod:`lakehouse.api` and the declarations of :mod:`lakehouse.declare`,
re-exported here::

    from lakehouse import Lakehouse, cdc_table, gold_table, measure, tumbling

(imported on first use, so that the command line starts without loading Spark).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakehouse.api import (
        Fit,
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
    )
    from lakehouse.declare import (
        Absent,
        AlertSpec,
        CatalogSpec,
        Expectation,
        GoldTable,
        Join,
        MaintenanceSpec,
        Measure,
        Pattern,
        PatternMeasure,
        PipelineConfig,
        QualitySpec,
        SqlModel,
        Step,
        StreamJoin,
        TableSpec,
        TopN,
        Window,
        absent,
        alert,
        catalog,
        cdc_table,
        config_from_toml,
        count_window,
        events_table,
        expect,
        expect_all,
        expect_all_or_drop,
        expect_all_or_fail,
        expect_or_drop,
        expect_or_fail,
        gold_table,
        hopping,
        join,
        match_measure,
        measure,
        pattern,
        pipeline_config,
        quality,
        retention,
        session,
        sliding,
        sql_model,
        step,
        stream_join,
        top_n,
        tumbling,
    )

__version__ = "0.1.0"
#: The loggers of the project's packages: each module logs what it does under its own name
#: (``lakehouse.run.pipeline``, ``gold.models``, ...), at INFO one line per step. Nothing here
#: configures them; a notebook or script shows the lines with, e.g.::
#:
#:     logging.basicConfig(format="- %(message)s")
#:     for name in LOGGERS:
#:         logging.getLogger(name).setLevel(logging.INFO)
LOGGERS = ("lakehouse_core", "cdc", "expectations", "bronze", "silver", "gold", "lakehouse")

__all__ = [
    "LOGGERS",
    "Absent",
    "AlertSpec",
    "CatalogSpec",
    "Expectation",
    "Fit",
    "ForgetReport",
    "GoldTable",
    "Join",
    "Lakehouse",
    "MaintenanceReport",
    "MaintenanceSpec",
    "Measure",
    "Pattern",
    "PatternMeasure",
    "Pipeline",
    "PipelineConfig",
    "PipelineStatus",
    "QualitySpec",
    "ReplayReport",
    "RunReport",
    "SqlModel",
    "Step",
    "StreamJoin",
    "TableCheck",
    "TableInfo",
    "TableSpec",
    "TopN",
    "Verification",
    "Window",
    "__version__",
    "absent",
    "alert",
    "catalog",
    "cdc_table",
    "config_from_toml",
    "count_window",
    "events_table",
    "expect",
    "expect_all",
    "expect_all_or_drop",
    "expect_all_or_fail",
    "expect_or_drop",
    "expect_or_fail",
    "gold_table",
    "hopping",
    "join",
    "match_measure",
    "measure",
    "pattern",
    "pipeline_config",
    "quality",
    "retention",
    "session",
    "sliding",
    "sql_model",
    "step",
    "stream_join",
    "top_n",
    "tumbling",
]
#: The names :mod:`lakehouse.api` defines; the other exports are :mod:`lakehouse.declare`'s.
_API = frozenset(
    {
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
    }
)


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module("lakehouse.api"), name)
    if name in __all__:
        return getattr(importlib.import_module("lakehouse.declare"), name)
    raise AttributeError(f"module 'lakehouse' has no attribute {name!r}")
