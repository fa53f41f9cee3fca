"""The embedded file source: a directory of JSON-lines Kafka records as a streaming DataFrame.

Spark's file stream source tracks which files were read in the query checkpoint, so each file
is read exactly once across restarts. Files must appear atomically (write, then rename), as
:func:`lakehouse_demo.generator.write_files` does. Lines end at ``\n`` (a ``\r`` before it is JSON
whitespace) and are turned into rows with the columns of Spark's Kafka source plus ``_source``
(the file). A line that is not a valid record (not UTF-8, not JSON, fields the Kafka columns
cannot hold) is kept, not dropped, under the topic :data:`UNREADABLE_TOPIC` with the line's
exact bytes as its value.
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
from lakehouse_core.errors import ConfigError

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
            f"Source directory {directory} does not exist. Create it, or generate the demo's "
            "workload into it with 'python -m lakehouse_demo generate --out DIR'."
        )
    lines = (
        spark.readStream.format("text")
        .option("maxFilesPerTrigger", max_files_per_trigger)
        .option("pathGlobFilter", "*.jsonl")
        .option("lineSep", "\n")
        .load(directory)
        .select("value", F.col("_metadata.file_path").alias(SOURCE_COLUMN))
    )
    return lines_to_records(lines)


def lines_to_records(lines: DataFrame) -> DataFrame:
    """Parse a DataFrame of ``value`` (one line, string or binary) and ``_source`` into
    Kafka-shaped rows.

    The line goes to Python as bytes (Spark's text source keeps a file's bytes as they are,
    valid UTF-8 or not), so an undecodable line reaches :func:`parse_line` instead of failing
    the Arrow conversion.
    """
    binary = lines.select(F.col("value").cast("binary").alias("value"), SOURCE_COLUMN)
    return binary.mapInArrow(_parse_batches, SOURCED_KAFKA_SCHEMA)


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


#: The byte order mark some editors write at the start of a UTF-8 file.
UTF8_BOM = b"\xef\xbb\xbf"


def parse_line(line: bytes, source: str) -> tuple[Any, ...]:
    """One line of the file format as a row tuple in :data:`SOURCED_KAFKA_SCHEMA` order.

    A line that is not a record of the format gives an :data:`UNREADABLE_TOPIC` row whose value
    is ``line`` unchanged: bytes that are not UTF-8 (strict: no encoded surrogates), text that
    is not a JSON object, JSON nested deeper than Python's recursion limit, fields missing or
    of a type the Kafka columns cannot hold, and strings with an escaped lone surrogate
    (``"\\ud800"``), which have no UTF-8 bytes. A leading byte order mark is ignored.
    """
    try:
        record = json.loads(line.removeprefix(UTF8_BOM).decode("utf-8"))
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
        return (
            json_bytes(record.get("key")),
            json_bytes(record.get("value")),
            _utf8_checked(topic),
            partition,
            offset,
            timestamp_ms * 1000,
            CREATE_TIME,
            # Like Spark's Kafka source: null, not an empty list, for a record without headers.
            [{"key": _utf8_checked(k), "value": json_bytes(v)} for k, v in headers.items()] or None,
            source,
        )
    # UnicodeError is a ValueError; RecursionError: JSON nested too deep to load or dump.
    except (ValueError, KeyError, TypeError, RecursionError):
        return (None, line, UNREADABLE_TOPIC, None, None, None, None, None, source)


def _utf8_checked(text: str) -> str:
    """``text``, if it has a UTF-8 form (Arrow writes string columns as UTF-8).

    Raises:
        UnicodeEncodeError: ``text`` holds a lone surrogate.
    """
    text.encode("utf-8")
    return text


_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


def _is_int(value: object, maximum: int) -> bool:
    """A JSON integer (not a boolean) in ``[0, maximum]``."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= maximum
