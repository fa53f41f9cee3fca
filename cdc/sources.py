"""The source seam: a ``--source`` argument to a streaming DataFrame of Kafka-shaped rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.files import SOURCE_COLUMN, read_file_stream
from cdc.kafka_options import redacted
from lakehouse_core.errors import ConfigError

SourceKind = Literal["files", "kafka"]

#: Every topic except internal ones (``__consumer_offsets``, ``_schemas``, ...).
ALL_USER_TOPICS = "[^_].*"
#: Spark's built-in Kafka source (Databricks, or clusters with the connector jar).
SPARK_KAFKA_FORMAT = "kafka"


@dataclass(frozen=True)
class SourceSpec:
    """Where records come from: ``files:DIR`` or ``kafka:HOST:PORT[,HOST:PORT...]``.

    ``kafka_options`` are options of the Kafka stream source (``subscribe``,
    ``maxOffsetsPerTrigger``, ``kafka.<librdkafka setting>``, ...); they override the defaults
    of :func:`kafka_stream_options`. ``kafka_format`` selects this project's confluent-kafka
    source (None) or Spark's own ``kafka`` format.
    """

    kind: SourceKind
    location: str
    max_files_per_trigger: int = 4
    kafka_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    kafka_format: str | None = None

    def __repr__(self) -> str:
        """The spec with the value of every secret Kafka option redacted (specs get logged)."""
        return (
            f"SourceSpec(kind={self.kind!r}, location={self.location!r}, "
            f"max_files_per_trigger={self.max_files_per_trigger!r}, "
            f"kafka_options={redacted(self.kafka_options)!r}, "
            f"kafka_format={self.kafka_format!r})"
        )

    @staticmethod
    def parse(text: str) -> SourceSpec:
        kind, _, location = text.partition(":")
        if kind not in ("files", "kafka") or not location:
            raise ConfigError(
                f"Invalid source {text!r}: use 'files:DIR' (a directory of JSON-lines records) "
                "or 'kafka:HOST:PORT' (bootstrap servers, comma-separated)."
            )
        return SourceSpec(kind="files" if kind == "files" else "kafka", location=location)

    def describe(self) -> str:
        return f"{self.kind}:{self.location}"


def kafka_stream_options(source: SourceSpec, continuous: bool = False) -> dict[str, str]:
    """Options for the Kafka stream: all user topics from the earliest offset, with headers.

    ``continuous`` (a processing-time trigger): ``maxOffsetsPerTrigger`` also caps the first
    batch after a start, which this project's source leaves uncapped for ``availableNow``.
    """
    options = {
        "kafka.bootstrap.servers": source.location,
        "startingOffsets": "earliest",
        "includeHeaders": "true",
        "failOnDataLoss": "true",
    }
    if not {"subscribe", "subscribePattern"} & set(source.kafka_options):
        options["subscribePattern"] = ALL_USER_TOPICS
    if continuous and source.kafka_format is None:
        options["capFirstBatch"] = "true"
    return {**options, **source.kafka_options}


def read_source(spark: SparkSession, source: SourceSpec, continuous: bool = False) -> DataFrame:
    """Open ``source`` as a stream with the columns of Spark's Kafka source plus ``_source``;
    ``continuous``: for a processing-time trigger (see :func:`kafka_stream_options`)."""
    if source.kind == "files":
        return read_file_stream(spark, source.location, source.max_files_per_trigger)
    options = kafka_stream_options(source, continuous)
    if source.kafka_format is None:
        from cdc.kafka_source import read_kafka_stream

        frame = read_kafka_stream(spark, options)
    else:
        frame = spark.readStream.format(source.kafka_format).options(**options).load()
    return frame.withColumn(SOURCE_COLUMN, F.lit(f"kafka:{source.location}"))


def read_kafka_settings(path: Path) -> dict[str, str]:
    """librdkafka settings from a properties file (``key=value`` lines, ``#`` comments), as
    ``kafka.<key>`` source options. Keeps secrets such as ``sasl.password`` off command lines.

    Raises:
        ConfigError: the file is missing or a line is not ``key=value``.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise ConfigError(f"Kafka settings file {path}: {error.strerror}.") from None
    settings: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{path} line {number}: expected 'key=value' (a librdkafka setting).")
        settings[f"kafka.{key.strip()}"] = value.strip()
    return settings
