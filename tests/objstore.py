"""The test object store: ``objstore://BUCKET/PATH`` is the local ``/PATH`` without directory
rename (``tests/hadoop_fs/ObjStoreFileSystem.java``, on every test session's classpath: see
:mod:`tests.hadoop_fs`), registered in every test session (:mod:`tests.sessions`)."""

from __future__ import annotations

from pathlib import Path

CLASS = "lakehouse.tests.ObjStoreFileSystem"
SCHEME = "objstore"

#: Spark settings that register the scheme. Delta keeps its log on an object store with the
#: log store it uses for S3 (one writing driver; ``put-if-absent`` by listing).
SETTINGS = {
    f"spark.hadoop.fs.{SCHEME}.impl": CLASS,
    f"spark.delta.logStore.{SCHEME}.impl": "io.delta.storage.S3SingleDriverLogStore",
}


def objstore_uri(local: Path, bucket: str = "bucket") -> str:
    """The ``objstore://`` URI of a local absolute path."""
    return f"{SCHEME}://{bucket}{local.resolve()}"
