"""Spark settings of every session the tests start: the test session of each worker, and the
sessions of the commands, kernels and servers they run as processes (through
``PYSPARK_SUBMIT_ARGS``, which :mod:`tests.conftest` sets unless it is set already).

A test's micro-batch holds a few rows, and Spark spends more CPU compiling the code it generates
for each query (whole-stage and expression code generation, by Janino) than running it: a
100-event demo took 184-185 s of JVM CPU with code generation and 134-145 s without. So the
tests interpret. Results do not depend on it; ``make demo`` and ``make bench`` generate code.
"""

from __future__ import annotations

INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def submit_args(settings: dict[str, str] | None = None, driver_class_path: str = "") -> str:
    """``PYSPARK_SUBMIT_ARGS`` for a process's own local session: :data:`INTERPRETED`, then
    ``settings``, and ``driver_class_path`` on the driver's classpath."""
    conf = {**INTERPRETED, **(settings or {})}
    args = [f"--conf {key}={value}" for key, value in conf.items()]
    if driver_class_path:
        args.insert(0, f"--driver-class-path {driver_class_path}")
    return " ".join([*args, "pyspark-shell"])
