"""Spark settings of every session the tests start: the test session of each worker, and the
sessions of the commands, kernels and servers they run as processes (through
``PYSPARK_SUBMIT_ARGS``, which :mod:`tests.conftest` sets unless it is set already).

A test's micro-batch holds a few rows, and Spark spends more CPU compiling the code it generates
for each query (whole-stage and expression code generation, by Janino) than running it: a
100-event demo took 184-185 s of JVM CPU with code generation and 134-145 s without. So the
tests interpret. Results do not depend on it; ``make demo`` and ``make bench`` generate code.

The commands, kernels and servers run as processes compile Java with C1 alone
(``-XX:TieredStopAtLevel=1``) and keep what they compiled: C2, the optimizing compiler, took
38 % of the test JVMs' CPU and pays off only in a JVM that runs long (a local-cluster demo:
423 s with it, 203 s without). The workers' own sessions run for the whole suite and keep C2:
with C1 alone, tests late in the run took 20 to 90 % longer. Drivers map the classes they load
from the tests' class archive (:mod:`tests.class_archive`) where ``make test`` has built it.
Every test JVM collects garbage with Java's serial collector (:data:`SERIAL_GC`).

Local paths go through :data:`tests.hadoop_fs.LOCAL_FS`, which spares each file created or
renamed a ``chmod`` or ``readlink`` process.
"""

from __future__ import annotations

import shlex

from lakehouse_core.spark import DRIVER_JAVA_OPTIONS
from tests import class_archive, objstore
from tests.hadoop_fs import LOCAL_FS, fs_jar

INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
#: One task per stage, not two: a test's batch holds a few rows, and the second task doubles
#: the work of scheduling and starting tasks (two test modules: 133 s of CPU with two, 97 s
#: with one). ``test_local_cluster`` keeps two, for its executors.
ONE_TASK = {
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.databricks.delta.snapshotPartitions": "1",
}
#: No join is planned as a broadcast unless a plan asks for one, and Delta answers a count or
#: min/max from the table's files, not its log's statistics: each broadcast, and each answer
#: from the statistics, is one more Spark job, started and planned for a test's few rows,
#: which cost more than the join's shuffle or the read they spare (five gold, silver and
#: replay modules, two pairs in turn, wall time: 441 s against 555 s, 564 s against 581 s).
#: ``make bench`` and a user's session keep Spark's and Delta's defaults.
FEWER_JOBS = {
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.databricks.delta.optimizeMetadataQuery.enabled": "false",
}
#: Java's just-in-time compilation with its quick compiler only.
QUICK_COMPILER = "-XX:TieredStopAtLevel=1"
#: With the quick compiler, compiled code stays in the code cache: by default Java evicts code
#: it has not run lately, and a command, which runs one query shape after another, compiled it
#: again (a 100-event demo: 123-130 s of JVM CPU with eviction, 104-113 s without; a worker's
#: session, with C2, was not faster without it). The quick compiler alone gets a 48 MB code
#: cache, which a 100-event demo fills: Java then stops compiling, and one that then needs a
#: new method-handle stub dies ("Out of space in CodeCache": a demo with Spark's event log on).
#: So the cache gets C2's default size (the demo's CPU did not change).
KEEP_COMPILED = "-XX:-UseCodeCacheFlushing -XX:ReservedCodeCacheSize=240m"
#: Java's serial garbage collector, not G1 (Java's default on two cores): G1's concurrent
#: threads and write barriers cost CPU that a test, which waits for no pause, does not need
#: (a 100-event demo, six runs each: 56-66 s of CPU with G1, 54-58 s with it, less in each
#: pair; ``make test`` on one machine: 933 s of pytest with G1, 818 and 842 s with it).
SERIAL_GC = "-XX:+UseSerialGC"
#: The Java options of a command's JVMs (driver and executors).
QUICK_JVM = f"{QUICK_COMPILER} {KEEP_COMPILED} {SERIAL_GC}"


def driver_java_options(quick_compiler: bool = True, share_classes: bool = True) -> str:
    """Java options of a test driver: :data:`~lakehouse_core.spark.DRIVER_JAVA_OPTIONS`,
    :data:`QUICK_JVM` if asked (else :data:`SERIAL_GC` alone) and, with ``share_classes`` where it
    is built, the tests' class archive."""
    options = [DRIVER_JAVA_OPTIONS, QUICK_JVM if quick_compiler else SERIAL_GC]
    archive = class_archive.archive_path()
    if share_classes and archive.exists():
        # silent where an archive does not fit (it then starts as without one)
        options += [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds*=off"]
    return " ".join(options)


def session_settings(quick_compiler: bool = True) -> dict[str, str]:
    """The settings every test session starts with: :data:`INTERPRETED`, :data:`ONE_TASK`,
    :data:`FEWER_JOBS`, :data:`LOCAL_FS`, the ``objstore://`` scheme, the tests' file systems on
    the classpath of the driver and of any executor, and the Java options of both
    (:func:`driver_java_options`; ``quick_compiler`` False for a worker's own session)."""
    jar = str(fs_jar())
    classpath = {"spark.driver.extraClassPath": jar, "spark.executor.extraClassPath": jar}
    java = {
        "spark.driver.extraJavaOptions": driver_java_options(quick_compiler),
        "spark.executor.extraJavaOptions": QUICK_JVM,
    }
    return {
        **INTERPRETED,
        **ONE_TASK,
        **FEWER_JOBS,
        **LOCAL_FS,
        **objstore.SETTINGS,
        **classpath,
        **java,
    }


def submit_args(settings: dict[str, str] | None = None, quick_compiler: bool = True) -> str:
    """``PYSPARK_SUBMIT_ARGS`` for a process's own local session: :func:`session_settings`,
    then ``settings``."""
    conf = {**session_settings(quick_compiler), **(settings or {})}
    return _as_submit_args(conf)


def submit_args_for_own_driver() -> str:
    """``PYSPARK_SUBMIT_ARGS`` for a command that sets its driver's class path and Java
    options itself (``lakehouse serve``): :func:`session_settings` but those, and so with
    Hadoop's own local file system (the tests' is on that class path)."""
    own = {"spark.driver.extraClassPath", "spark.driver.extraJavaOptions", *LOCAL_FS}
    return _as_submit_args({k: v for k, v in session_settings().items() if k not in own})


def _as_submit_args(conf: dict[str, str]) -> str:
    args = [f"--conf {shlex.quote(f'{key}={value}')}" for key, value in conf.items()]
    return " ".join([*args, "pyspark-shell"])
