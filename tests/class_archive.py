"""A class-data archive of the tests' Spark driver (Java's AppCDS): the classes a session loads
(Spark, Delta, Hadoop), already parsed and verified, mapped into each new driver JVM instead of
read from the jars again. A session's start and first Delta commit took 13 s of CPU without it
and 9 s with it; the suite starts a driver for every command, kernel and server it runs as a
process.

``make test`` builds it first (``python -m tests.class_archive``, about a minute, once per JDK
and set of jars: the archive is named by them). Without it the sessions start as usual.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyspark

from lakehouse_core.spark import local_delta_jars
from tests.hadoop_fs import fs_jar

ARCHIVE_DIR = Path(__file__).resolve().parent.parent / "build" / "jvm"
#: Java's option that writes the classes a JVM loaded into an archive when it exits.
DUMP_OPTION = "-XX:ArchiveClassesAtExit="
BUILD_TIMEOUT = 600

#: What the building driver does: a Delta table written, merged into, streamed with
#: ``foreachBatch`` and its change feed read, so that the classes of every layer's work load.
WORKLOAD = """
import tempfile
from delta.tables import DeltaTable
from lakehouse_core.spark import get_spark
spark = get_spark(mode="local-jars", master="local[2]", app_name="class-archive")
root = tempfile.mkdtemp()
table = root + "/table"
(spark.range(20).selectExpr("id", "id % 3 AS n").write.format("delta")
    .option("delta.enableChangeDataFeed", "true").save(table))
updates = spark.range(10, 30).selectExpr("id", "id % 5 AS n")
(DeltaTable.forPath(spark, table).alias("t").merge(updates.alias("u"), "t.id = u.id")
    .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
def apply(batch, batch_id):
    batch.groupBy("n").count().write.format("delta").mode("append").save(root + "/sink")
query = (spark.readStream.format("delta").option("readChangeFeed", "true")
    .option("startingVersion", 0).load(table).writeStream.foreachBatch(apply)
    .option("checkpointLocation", root + "/checkpoint").trigger(availableNow=True).start())
query.awaitTermination()
spark.sql(f"SELECT count(*) FROM delta.`{root}/sink`").collect()
spark.stop()
"""


def archive_path() -> Path:
    """Where the archive of this JDK, garbage collector and these jars lives (it fits no other
    classpath; Java did not map one built with the serial collector into a JVM using G1)."""
    from tests.sessions import SERIAL_GC

    java = shutil.which("java") or ""
    jars = Path(pyspark.__file__).parent / "jars"
    named = [os.path.realpath(java), SERIAL_GC, pyspark.__version__, str(fs_jar())]
    named += sorted(path.name for path in jars.glob("*.jar"))
    named += [f"{path}:{path.stat().st_size}" for path in local_delta_jars()]
    digest = hashlib.sha256("\n".join(named).encode()).hexdigest()
    return ARCHIVE_DIR / f"driver-{digest[:16]}.jsa"


def build() -> Path:
    """The archive, built by a driver that does :data:`WORKLOAD` (unless it exists)."""
    from tests import sessions  # sessions use this module's archive_path

    target = archive_path()
    if target.exists():
        return target
    ARCHIVE_DIR.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".partial-{os.getpid()}")
    options = sessions.driver_java_options(quick_compiler=False, share_classes=False)
    dump = {"spark.driver.extraJavaOptions": f"{options} {DUMP_OPTION}{partial}"}
    env = {**os.environ, "PYSPARK_SUBMIT_ARGS": sessions.submit_args(dump)}
    done = subprocess.run(
        [sys.executable, "-c", WORKLOAD],
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    if done.returncode != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"the class archive was not written:\n{done.stderr[-3000:]}")
    partial.replace(target)  # whole, as two builds may race
    return target


if __name__ == "__main__":
    print(f"class archive: {build()}")
