"""The test object store: ``objstore://BUCKET/PATH`` is the local ``/PATH`` without directory
rename (``tests/objstore/ObjStoreFileSystem.java``), compiled once with the installed JDK
against pyspark's own Hadoop API jar and put on the test session's classpath."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pyspark

from tests import sessions

SOURCE = Path(__file__).with_name("objstore") / "ObjStoreFileSystem.java"
CLASS = "lakehouse.tests.ObjStoreFileSystem"
SCHEME = "objstore"
BUILD = Path(__file__).resolve().parent.parent / "build" / "objstore"

#: Spark settings that register the scheme. Delta keeps its log on an object store with the
#: log store it uses for S3 (one writing driver; ``put-if-absent`` by listing).
SETTINGS = {
    f"spark.hadoop.fs.{SCHEME}.impl": CLASS,
    f"spark.delta.logStore.{SCHEME}.impl": "io.delta.storage.S3SingleDriverLogStore",
}


def objstore_jar() -> Path:
    """The compiled file system (built on first use; named by the hash of its source)."""
    source = SOURCE.read_bytes()
    jar = BUILD / f"objstore-{hashlib.sha256(source).hexdigest()[:16]}.jar"
    if jar.exists():
        return jar
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac not found: the object-store tests need a JDK 17")
    hadoop_api = next((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    BUILD.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD) as classes:
        subprocess.run(
            [
                javac,
                "--release",
                "17",
                "-nowarn",
                "-cp",
                str(hadoop_api),
                "-d",
                classes,
                str(SOURCE),
            ],
            check=True,
            capture_output=True,
        )
        partial = jar.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w") as archive:
            for path in sorted(Path(classes).rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        partial.replace(jar)
    return jar


def session_settings() -> dict[str, str]:
    """``extra_conf`` for :func:`core.spark.get_spark`: the jar and the scheme's settings."""
    return {"spark.jars": str(objstore_jar()), **SETTINGS}


def submit_args() -> str:
    """``PYSPARK_SUBMIT_ARGS`` that give a command's own local session the scheme: the jar on
    the driver's classpath (local mode runs its executors there) and the scheme's settings."""
    return sessions.submit_args(SETTINGS, driver_class_path=str(objstore_jar()))


def objstore_uri(local: Path, bucket: str = "bucket") -> str:
    """The ``objstore://`` URI of a local absolute path."""
    return f"{SCHEME}://{bucket}{local.resolve()}"
