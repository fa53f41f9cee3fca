"""The source seam: a ``--source`` argument to a streaming DataFrame of Kafka-shaped rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pyspark.sql import DataFrame, SparkSession

from cdc.files import read_file_stream
from lakehouse.errors import ConfigError

SourceKind = Literal["files", "kafka"]


@dataclass(frozen=True)
class SourceSpec:
    """Where records come from: ``files:DIR`` or ``kafka:HOST:PORT[,HOST:PORT...]``."""

    kind: SourceKind
    location: str
    max_files_per_trigger: int = 4

    @staticmethod
    def parse(text: str) -> SourceSpec:
        kind, _, location = text.partition(":")
        if kind not in ("files", "kafka") or not location:
            raise ConfigError(
                f"Invalid source {text!r}: use 'files:DIR' (a directory of JSON-lines records) "
                "or 'kafka:HOST:PORT'."
            )
        return SourceSpec(kind="files" if kind == "files" else "kafka", location=location)

    def describe(self) -> str:
        return f"{self.kind}:{self.location}"


def read_source(spark: SparkSession, source: SourceSpec) -> DataFrame:
    """Open ``source`` as a stream with the columns of Spark's Kafka source plus ``_source``."""
    if source.kind == "files":
        return read_file_stream(spark, source.location, source.max_files_per_trigger)
    raise ConfigError(
        "The Kafka source is not available in this version yet; use --source files:DIR."
    )
