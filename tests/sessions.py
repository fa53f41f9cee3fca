"""Spark settings of every session the tests start: the test session of each worker, and the
sessions of the commands, kernels and servers they run as processes (through
``PYSPARK_SUBMIT_ARGS``, which :mod:`tests.conftest` sets unless it is set already).

A test's micro-batch holds a few rows, and Spark spends more CPU compiling the code it generates
for each query (whole-stage and expression code generation, by Janino) than running it: a
100-event demo took 184-185 s of JVM CPU with code generation and 134-145 s without. So the
tests interpret. Results do not depend on it; ``make demo`` and ``make bench`` generate code.

Local paths go through :data:`tests.hadoop_fs.LOCAL_FS`, which spares each file created or
renamed a ``chmod`` or ``readlink`` process.
"""

from __future__ import annotations

import shlex

from tests.hadoop_fs import LOCAL_FS, fs_jar

INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def session_settings() -> dict[str, str]:
    """The settings every test session starts with: :data:`INTERPRETED`, :data:`LOCAL_FS`,
    and the tests' file systems on the classpath of the driver and of any executor."""
    jar = str(fs_jar())
    classpath = {"spark.driver.extraClassPath": jar, "spark.executor.extraClassPath": jar}
    return {**INTERPRETED, **LOCAL_FS, **classpath}


def submit_args(settings: dict[str, str] | None = None) -> str:
    """``PYSPARK_SUBMIT_ARGS`` for a process's own local session: :func:`session_settings`,
    then ``settings``."""
    conf = {**session_settings(), **(settings or {})}
    args = [f"--conf {shlex.quote(f'{key}={value}')}" for key, value in conf.items()]
    return " ".join([*args, "pyspark-shell"])
