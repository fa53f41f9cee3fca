"""Builders for test inputs: Debezium envelopes and bronze DataFrames from records."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from bronze.table import with_ingestion_metadata
from cdc.files import lines_to_records
from cdc.records import Record
from silver.reference import BronzeRecord


def bronze_frame(spark: SparkSession, records: Iterable[Record], batch_id: int = 0) -> DataFrame:
    """Bronze rows for ``records``, built through the real file-source parser."""
    lines = [(record.to_line(), "test") for record in records]
    frame = spark.createDataFrame(lines, "value string, _source string")
    return with_ingestion_metadata(lines_to_records(frame), batch_id)


CUSTOMER_FIELDS: list[dict[str, Any]] = [
    {"field": "id", "type": "int32", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "notes", "type": "string", "optional": True},
]


def pg_envelope(
    op: str,
    seq: tuple[int | None, int],
    after: dict[str, Any] | None = None,
    before: dict[str, Any] | None = None,
    fields: Sequence[dict[str, Any]] = tuple(CUSTOMER_FIELDS),
    wrapped: bool = True,
    ts_ms: int = 1_767_225_600_000,
) -> dict[str, Any]:
    """A Debezium Postgres change event value, with or without the schema wrapper."""
    commit, lsn = seq
    payload = {
        "before": before,
        "after": after,
        "op": op,
        "ts_ms": ts_ms + 5,
        "source": {
            "connector": "postgresql",
            "name": "shop",
            "db": "shop",
            "schema": "public",
            "table": "customers",
            "ts_ms": ts_ms,
            "sequence": json.dumps([None if commit is None else str(commit), str(lsn)]),
            "lsn": lsn,
        },
        "transaction": None,
    }
    if not wrapped:
        return payload
    row = {"type": "struct", "optional": True, "fields": list(fields)}
    schema = {
        "type": "struct",
        "name": "shop.public.customers.Envelope",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {"field": "op", "type": "string"},
            {"field": "ts_ms", "type": "int64", "optional": True},
        ],
    }
    return {"schema": schema, "payload": payload}


def pg_key(key: int, wrapped: bool = True) -> dict[str, Any]:
    if not wrapped:
        return {"id": key}
    return {
        "schema": {"type": "struct", "fields": [{"field": "id", "type": "int32"}]},
        "payload": {"id": key},
    }


def bronze_record(record: Record) -> BronzeRecord:
    """The reference fold's view of ``record``: its coordinates and its key and value bytes."""
    return BronzeRecord(
        record.topic, record.partition, record.offset, record.key_bytes, record.value_bytes
    )


def customer_change(
    topic: str,
    offset: int,
    op: str,
    id_: int | None,
    sequence: tuple[int | None, int],
    name: str | None = "n",
    notes: str | None = None,
    partition: int = 0,
) -> Record:
    """A bronze record with a wrapped Debezium Postgres change of the customers table
    (``op`` ``t``: a truncate, ``id_`` None); ``source.ts_ms`` grows with the LSN."""
    after = None if op in ("d", "t") else {"id": id_, "name": name, "notes": notes}
    before = {"id": id_, "name": None, "notes": None} if op == "d" else None
    key = None if id_ is None else pg_key(id_)
    ts_ms = 1_767_225_600_000 + sequence[1]
    value = pg_envelope(op, sequence, after=after, before=before, ts_ms=ts_ms)
    return Record(topic, partition, offset, ts_ms, key, value)


def merge_counts(metrics: dict[str, str]) -> tuple[int, int, int]:
    """(inserted, updated, deleted) target rows of a MERGE commit."""
    return tuple(  # type: ignore[return-value]
        int(metrics.get(f"numTargetRows{what}", "0")) for what in ("Inserted", "Updated", "Deleted")
    )
