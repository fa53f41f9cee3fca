"""The embedded file source: a directory of JSON-lines Kafka records as a streaming DataFrame.

Spark's file stream source tracks which files were read in the query checkpoint, so each file
is read exactly once across restarts. Files must appear atomically (write, then rename), as
:func:`cdc.generator.write_files` does. Lines are turned into rows with the columns of Spark's
Kafka source plus ``_source`` (the file); a line that is not a valid record is kept, not
dropped, under the topic :data:`UNREADABLE_TOPIC` with the raw line as its value.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from cdc.records import CREATE_TIME, KAFKA_SCHEMA, arrow_schema, json_bytes
from core.errors import ConfigError

#: Topic under which lines that are not valid records land in bronze.
UNREADABLE_TOPIC = "_unreadable_lines"

SOURCE_COLUMN = "_source"
SOURCED_KAFKA_SCHEMA = StructType([*KAFKA_SCHEMA.fields, StructField(SOURCE_COLUMN, StringType())])

_ARROW_SCHEMA = arrow_schema(include_headers=True).append(pa.field(SOURCE_COLUMN, pa.string()))


def read_file_stream(
    spark: SparkSession, directory: str, max_files_per_trigger: int = 4
) -> DataFrame:
    """Stream the ``*.jsonl`` files of ``directory`` as Kafka-shaped rows.

    Raises:
        ConfigError: the directory does not exist.
    """
    if "://" not in directory and not Path(directory).is_dir():
        raise ConfigError(
            f"Source directory {directory} does not exist. Create it, or generate a workload "
            "into it with 'lakehouse generate --out DIR'."
        )
    lines = (
        spark.readStream.format("text")
        .option("maxFilesPerTrigger", max_files_per_trigger)
        .option("pathGlobFilter", "*.jsonl")
        .load(directory)
        .select("value", F.col("_metadata.file_path").alias(SOURCE_COLUMN))
    )
    return lines_to_records(lines)


def lines_to_records(lines: DataFrame) -> DataFrame:
    """Parse a DataFrame of ``value`` (one line) and ``_source`` into Kafka-shaped rows."""
    return lines.mapInArrow(_parse_batches, SOURCED_KAFKA_SCHEMA)


def _parse_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        sources = batch.column(SOURCE_COLUMN).to_pylist()
        rows = [
            parse_line(line, source)
            for line, source in zip(batch.column("value").to_pylist(), sources, strict=True)
        ]
        columns: list[Any] = list(zip(*rows, strict=True)) if rows else [[]] * len(_ARROW_SCHEMA)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(values, type=f.type)
                for values, f in zip(columns, _ARROW_SCHEMA, strict=True)
            ],
            schema=_ARROW_SCHEMA,
        )


def parse_line(line: str, source: str) -> tuple[Any, ...]:
    """One line of the file format as a row tuple in :data:`SOURCED_KAFKA_SCHEMA` order."""
    try:
        record = json.loads(line)
        topic = record["topic"]
        partition = record["partition"]
        offset = record["offset"]
        timestamp_ms = record["timestamp"]
        headers = record.get("headers") or {}
        if not (
            isinstance(topic, str)
            and topic
            and _is_int(partition, _INT32_MAX)
            and _is_int(offset, _INT64_MAX)
            and _is_int(timestamp_ms, _INT64_MAX // 1000)
            and isinstance(headers, dict)
        ):
            raise ValueError("bad field types")
    except (ValueError, KeyError, TypeError):
        return (None, line.encode("utf-8"), UNREADABLE_TOPIC, None, None, None, None, None, source)
    return (
        json_bytes(record.get("key")),
        json_bytes(record.get("value")),
        topic,
        partition,
        offset,
        timestamp_ms * 1000,
        CREATE_TIME,
        # Like Spark's Kafka source: null, not an empty list, for a record without headers.
        [{"key": str(k), "value": json_bytes(v)} for k, v in headers.items()] or None,
        source,
    )


_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


def _is_int(value: object, maximum: int) -> bool:
    """A JSON integer (not a boolean) in ``[0, maximum]``."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= maximum
