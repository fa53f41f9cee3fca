"""Files and directories at any Hadoop URI (or local path), through Spark's own Hadoop file
system: the pipeline's heartbeat, idempotency ids, checkpoint pointers, listing the tables of a
warehouse, deleting a table or checkpoint directory. Object stores have no atomic directory
rename, so nothing here renames a directory."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HADOOP_PATH = "org.apache.hadoop.fs.Path"


def _java_class(spark: SparkSession, name: str) -> Any:
    """The JVM class of the full ``name``, found in one call to the JVM (``jvm.org.apache…``
    asks once per part of the name, and each part that is no class searches the class path)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return getattr(jvm, name)


def _file_system(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    path = _java_class(spark, HADOOP_PATH)(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def write_text(spark: SparkSession, uri: str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``uri``, replacing the file if it exists: written whole to a
    hidden file beside it, then renamed over it, so a reader or a crash never finds it half
    written (a file system whose rename does not replace deletes the old file first)."""
    fs, path = _file_system(spark, uri)
    hidden = f".{path.getName()}.{uuid.uuid4().hex}.tmp"
    temporary = _java_class(spark, HADOOP_PATH)(path.getParent(), hidden)
    stream = fs.create(temporary, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()
    if not fs.rename(temporary, path):
        fs.delete(path, False)
        if not fs.rename(temporary, path):
            fs.delete(temporary, False)
            raise OSError(f"could not write {uri}")


def read_text(spark: SparkSession, uri: str) -> str | None:
    """The UTF-8 text of the file at ``uri``, or None if there is none."""
    fs, path = _file_system(spark, uri)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        return str(_java_class(spark, "org.apache.commons.io.IOUtils").toString(stream, "UTF-8"))
    finally:
        stream.close()


def exists(spark: SparkSession, uri: str) -> bool:
    """Whether a file or directory is at ``uri``."""
    fs, path = _file_system(spark, uri)
    return bool(fs.exists(path))


def delete(spark: SparkSession, uri: str) -> None:
    """Delete the file at ``uri`` if it exists."""
    fs, path = _file_system(spark, uri)
    fs.delete(path, False)


def names(spark: SparkSession, uri: str) -> list[str]:
    """Names of the entries of the directory ``uri`` (none if it does not exist)."""
    fs, path = _file_system(spark, uri)
    if not fs.exists(path):
        return []
    return [str(status.getPath().getName()) for status in fs.listStatus(path)]


def is_dir(spark: SparkSession, uri: str) -> bool:
    """Whether a directory is at ``uri``."""
    fs, path = _file_system(spark, uri)
    return bool(fs.exists(path)) and bool(fs.getFileStatus(path).isDirectory())


def subdirectories(spark: SparkSession, uri: str) -> list[str]:
    """Names of the directories in the directory ``uri`` (none if it does not exist)."""
    fs, path = _file_system(spark, uri)
    if not fs.exists(path):
        return []
    return sorted(
        str(status.getPath().getName()) for status in fs.listStatus(path) if status.isDirectory()
    )


def delete_tree(spark: SparkSession, uri: str) -> None:
    """Delete the file or directory (with everything in it) at ``uri``, if there is one."""
    fs, path = _file_system(spark, uri)
    fs.delete(path, True)


def files_under(spark: SparkSession, uri: str, suffix: str) -> list[str]:
    """URIs of the files under the directory ``uri`` (recursively) whose names end in
    ``suffix`` (none if it does not exist)."""
    fs, path = _file_system(spark, uri)
    if not fs.exists(path):
        return []
    found: list[str] = []
    pending = [path]
    while pending:
        for status in fs.listStatus(pending.pop()):
            if status.isDirectory():
                pending.append(status.getPath())
            elif str(status.getPath().getName()).endswith(suffix):
                found.append(str(status.getPath().toString()))
    return found


def copy_tree(spark: SparkSession, source: str, target: str) -> None:
    """Copy the file or directory ``source`` (with everything in it) to ``target``."""
    source_fs, source_path = _file_system(spark, source)
    target_fs, target_path = _file_system(spark, target)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    _java_class(spark, "org.apache.hadoop.fs.FileUtil").copy(
        source_fs, source_path, target_fs, target_path, False, conf
    )
