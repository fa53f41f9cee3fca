"""One Kafka record, and its JSON-lines form on disk (the embedded file source).

A line is ``{"topic": str, "partition": int, "offset": int, "timestamp": epoch_ms,
"key": <JSON or null>, "value": <JSON or null>, "headers": {name: str} (optional)}``.

The record's bytes are derived from the JSON values the same way for every line:
``null`` is a null record key/value, a JSON string is taken as its UTF-8 text (so a line can
carry bytes that are not JSON, such as a corrupt payload), and any other JSON value is its
compact serialisation (:func:`json_bytes`). The Kafka producer uses the same function, so the
file and Kafka paths give byte-identical bronze tables.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

#: Columns and types of Spark's built-in Kafka source; every source of this project yields them.
KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow form of the source's schema (Spark's Kafka source columns)."""
    fields = [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
        )
    return pa.schema(fields)


#: Kafka's timestamp type for producer-set (create) time.
CREATE_TIME = 0


def json_bytes(document: Any) -> bytes | None:
    """Return the record bytes for a JSON document as the file format defines them."""
    if document is None:
        return None
    if isinstance(document, str):
        return document.encode("utf-8")
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@dataclass(frozen=True)
class Record:
    """A Kafka record with JSON documents as key and value (``None`` for null)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: Any
    value: Any
    headers: dict[str, str] = field(default_factory=dict)

    def to_line(self) -> str:
        """Serialise as one line of the file format (no trailing newline)."""
        line: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "timestamp": self.timestamp_ms,
            "key": self.key,
            "value": self.value,
        }
        if self.headers:
            line["headers"] = self.headers
        return json.dumps(line, separators=(",", ":"), ensure_ascii=False)

    @property
    def key_bytes(self) -> bytes | None:
        return json_bytes(self.key)

    @property
    def value_bytes(self) -> bytes | None:
        return json_bytes(self.value)
