"""Where each table and checkpoint of a warehouse lives on storage."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from lakehouse_core import storage
from lakehouse_core.identifiers import require_identifier, table_name_for_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def is_uri(location: str) -> bool:
    """Whether ``location`` is a URI (``scheme://...`` or ``scheme:/...``) rather than a local
    path."""
    return _URI.match(location) is not None


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:/")

Layer = Literal["bronze", "silver", "gold"]
LAYERS: tuple[Layer, ...] = ("bronze", "silver", "gold")

#: The silver table that holds records no entity could read.
QUARANTINE_TABLE = "quarantine"
#: The table (``gold.late_events``) that records each change landing in an already final window
#: of a gold table; no declaration may take its name.
LATE_EVENTS = "late_events"
#: Suffix of an entity's SCD type 2 history table (``silver/<entity>_history``).
HISTORY_SUFFIX = "_history"

#: How the rows of one key are found in a table: by the entity's key columns (``key``); in
#: tables of raw records, by the records' ``topic``, ``partition`` and ``offset``
#: (``records``); in tables about records (``gold.late_events``), by the ``bronze_topic``,
#: ``bronze_partition`` and ``bronze_offset`` of the record each row is about
#: (``record_refs``).
KeyRows = Literal["key", "records", "record_refs"]


@dataclass(frozen=True)
class EntityTable:
    """A table that can hold rows of an entity's keys, and how those rows are found in it."""

    name: str  # ``bronze.<table>``, ``silver.<table>`` or ``_system.<kind>.<entity>``
    path: str
    rows: KeyRows


@dataclass(frozen=True)
class Warehouse:
    """A warehouse root: tables at ``<root>/<layer>/<name>``, internal state under ``_system``.

    ``bronze_root``, when set, is where the bronze layer is read from instead of ``root``: a
    staging warehouse that rebuilds silver and gold from another warehouse's bronze.
    """

    root: str
    bronze_root: str | None = None

    def table(self, layer: Layer, name: str) -> str:
        return f"{self._layer_root(layer)}/{layer}/{require_identifier(name, 'table name')}"

    def _layer_root(self, layer: Layer) -> str:
        return self.bronze_root if layer == "bronze" and self.bronze_root else self.root

    def staging(self, root: str) -> Warehouse:
        """A warehouse at ``root`` that reads this warehouse's bronze (and writes the rest)."""
        return Warehouse(root=root, bronze_root=self.bronze_root or self.root)

    def tombstones(self, entity: str) -> str:
        return f"{self.root}/_system/tombstones/{require_identifier(entity, 'entity name')}"

    def truncations(self, entity: str) -> str:
        return f"{self.root}/_system/truncations/{require_identifier(entity, 'entity name')}"

    def history_log(self, entity: str) -> str:
        """Every change event of an SCD type 2 entity, from which its history is rebuilt."""
        return f"{self.root}/_system/history_log/{require_identifier(entity, 'entity name')}"

    def entity_tables(self, entity: str, topic: str) -> list[EntityTable]:
        """Every table that can hold rows of one of ``entity``'s keys, whether it exists yet or
        not: the bronze table of ``topic`` and the quarantine (raw records), the silver table,
        the tombstones, and the SCD type 2 history table and log (listed for every entity: they
        stay when a type 2 entity is configured back to type 1).

        ``gold.late_events`` is listed last: its rows name the bronze records of the changes
        that landed late in a gold table, and recomputing gold after a delete can add one.
        Not listed: the truncation marks (a truncate belongs to no key) and the other gold
        tables (aggregates recomputed from silver). A new table that can hold an entity's rows
        belongs here: ``lakehouse forget`` removes a key from exactly these tables.
        """
        bronze = table_name_for_topic(topic)
        history = f"{entity}{HISTORY_SUFFIX}"
        return [
            EntityTable(f"bronze.{bronze}", self.table("bronze", bronze), "records"),
            EntityTable(f"silver.{entity}", self.table("silver", entity), "key"),
            EntityTable(f"_system.tombstones.{entity}", self.tombstones(entity), "key"),
            EntityTable(
                f"silver.{QUARANTINE_TABLE}", self.table("silver", QUARANTINE_TABLE), "records"
            ),
            EntityTable(f"silver.{history}", self.table("silver", history), "key"),
            EntityTable(f"_system.history_log.{entity}", self.history_log(entity), "key"),
            EntityTable(f"gold.{LATE_EVENTS}", self.table("gold", LATE_EVENTS), "record_refs"),
        ]

    def watermark(self, gold_table: str) -> str:
        """The watermark state of a gold table: the latest event time its job has seen."""
        name = require_identifier(gold_table, "gold table name")
        return f"{self.root}/_system/watermarks/{name}.json"

    def quality(self) -> str:
        """The data-quality metrics: per micro-batch, table and expectation, rows checked,
        failed and dropped (SQL name ``system.quality``)."""
        return f"{self.root}/_system/quality"

    @property
    def event_log(self) -> str:
        """The event log: one row per micro-batch of each streaming query of the pipeline."""
        return f"{self.root}/_system/event_log"

    @property
    def declarations(self) -> str:
        """The declarations the pipeline's runs ran with: a TOML file per version, with a JSON
        file beside it (when, which command); see :mod:`lakehouse.run.declarations`."""
        return f"{self.root}/_system/declarations"

    @property
    def heartbeat(self) -> str:
        """The file a running pipeline keeps fresh (and removes when it stops)."""
        return f"{self.root}/_system/pipeline_heartbeat.json"

    def checkpoint(self, job: str) -> str:
        return f"{self.root}/_system/checkpoints/{job}"

    def table_names(self, layer: Layer, spark: SparkSession | None = None) -> list[str]:
        """Names of the Delta tables present in a layer, listed through Hadoop's FileSystem of
        ``spark`` (default: the active session), so at any URI."""
        if spark is None:
            from pyspark.sql import SparkSession

            from lakehouse_core.parallel import active_session

            spark = active_session() or SparkSession.builder.getOrCreate()
        layer_dir = f"{self._layer_root(layer)}/{layer}"
        return [
            name
            for name in storage.subdirectories(spark, layer_dir)
            if not name.startswith(".") and storage.is_dir(spark, f"{layer_dir}/{name}/_delta_log")
        ]

    @staticmethod
    def from_path(path: str | Path) -> Warehouse:
        """The warehouse at a local path (made absolute) or a Hadoop URI (``s3a://bucket/wh``);
        a URI without authority is written as Hadoop qualifies it (``file:///x`` is
        ``file:/x``), since Delta compares table locations as text."""
        text = str(path)
        if not is_uri(text):
            return Warehouse(str(Path(text).resolve()))
        scheme, _, rest = text.partition("://")
        return Warehouse(
            f"{scheme}:/{rest.lstrip('/')}" if rest.startswith("/") else text.rstrip("/")
        )
