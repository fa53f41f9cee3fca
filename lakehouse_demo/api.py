"""The demo's Python API: the shop's workload as files (what ``python -m lakehouse_demo
generate`` writes) and a :class:`~lakehouse.Lakehouse` with the demo's settings (what ``python -m
lakehouse_demo demo`` runs)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from lakehouse.api import Lakehouse
from lakehouse_core.errors import ConfigError
from lakehouse_core.spark import SparkMode
from lakehouse_demo.generator import WorkloadConfig
from lakehouse_demo.job import DEMO_CONFIG, write_workload

__all__ = ["demo_lakehouse", "generate_workload"]


def generate_workload(
    out: str | Path,
    events: int = 20_000,
    seed: int = 42,
    malformed_rate: float = 0.01,
    late_rate: float = 0.0,
    parts: int | None = None,
) -> int:
    """Write the demo's shop workload (customers and orders CDC, clickstream) as JSON-lines
    files into ``out`` (what ``python -m lakehouse_demo generate`` writes); return the number
    of records. Read it with ``Lakehouse.run(f"files:{out}")``.

    ``late_rate``: the share of clicks sent late on purpose (they land in windows a gold
    table already marked final: see ``gold.late_events``). ``parts``: split the records, in
    delivery order, into this many files (``part-00000.jsonl``, ...) that can arrive one at a
    time; by default one file per 20,000 records.

    Raises:
        ConfigError: a rate outside its range, ``parts`` below 1, or ``out`` already holds a
            workload.
    """
    if parts is not None and (isinstance(parts, bool) or not isinstance(parts, int) or parts < 1):
        raise ConfigError(f"parts must be a whole number of files of at least 1, got {parts!r}.")
    config = WorkloadConfig(
        events=events, seed=seed, malformed_rate=malformed_rate, late_rate=late_rate
    )
    return write_workload(Path(out), config, parts)[1]


def demo_lakehouse(
    warehouse: str | Path,
    spark: SparkSession | None = None,
    *,
    spark_mode: SparkMode = "auto",
    master: str | None = None,
) -> Lakehouse:
    """A lakehouse at ``warehouse`` with the demo shop's settings, those of ``python -m
    lakehouse_demo demo``: its clickstream, its gold tables (``revenue_per_minute``,
    ``user_sessions`` and one of each other window kind and join), alert, patterns and the
    packaged suites; feed it :func:`generate_workload`'s files. ``spark``, ``spark_mode``,
    ``master``: as for :class:`~lakehouse.Lakehouse`."""
    return Lakehouse(warehouse, DEMO_CONFIG, spark, spark_mode=spark_mode, master=master)
