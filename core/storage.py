"""Small files at any Hadoop URI (or local path), read and written through Spark's own Hadoop
file system: the pipeline's heartbeat, streaming checkpoints' offset logs."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession


def _file_system(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def write_text(spark: SparkSession, uri: str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``uri``, replacing the file if it exists."""
    fs, path = _file_system(spark, uri)
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def read_text(spark: SparkSession, uri: str) -> str | None:
    """The UTF-8 text of the file at ``uri``, or None if there is none."""
    fs, path = _file_system(spark, uri)
    if not fs.exists(path):
        return None
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    stream = fs.open(path)
    try:
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
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
