"""The silver entities of a warehouse and the tables and state derived from each."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from pyspark.sql import SparkSession

from bronze.table import bronze_topic
from gold.alerts import alert_jobs
from gold.progress import applied_location
from gold.registry import GoldJob, gold_jobs
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.delta_io import table_exists
from lakehouse_core.errors import TableNotFoundError
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import APP_ID_FILE
from silver.topic_kind import holds_plain_events


@dataclass(frozen=True)
class BronzeTopics:
    """The topics of a warehouse's bronze: the silver spec of each one silver applies, and
    the event topics without a declaration, which stay in bronze only."""

    specs: list[TableSpec]
    undeclared: list[str]


def bronze_topics(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig
) -> BronzeTopics:
    """Every bronze topic (internal topics excluded) with its silver spec: the declared one,
    else the Debezium defaults, unless its records are plain events
    (:func:`silver.topic_kind.holds_plain_events`; a topic whose silver table exists was
    decided before and is not read again)."""
    specs, undeclared = [], []
    declared = {table.topic for table in config.tables}
    for name in warehouse.table_names("bronze", spark):
        path = warehouse.table("bronze", name)
        topic = bronze_topic(spark, path)
        if not topic or topic.startswith("_"):
            continue
        spec = config.spec_for_topic(topic)
        if (
            topic not in declared
            and not table_exists(spark, warehouse.table("silver", spec.name))
            and _holds_plain_events(spark, path)
        ):
            undeclared.append(topic)
        else:
            specs.append(spec)
    return BronzeTopics(specs, undeclared)


#: Bronze tables found to hold plain events: a verdict that does not change (a topic of events
#: stays one), so a continuous run that lists its topics at every poll reads each sample once.
_PLAIN_EVENT_TABLES: set[str] = set()


def _holds_plain_events(spark: SparkSession, path: str) -> bool:
    """:func:`silver.topic_kind.holds_plain_events` of the bronze table at ``path``, read once
    per process when it says yes."""
    if path not in _PLAIN_EVENT_TABLES:
        if not holds_plain_events(spark.read.format("delta").load(path)):
            return False
        _PLAIN_EVENT_TABLES.add(path)
    return True


def undeclared_line(topic: str) -> str:
    """What a run says about an event topic without a declaration: where its records are and
    how to declare it."""
    return (
        f"{topic}: plain events without a declaration, kept in bronze only; declare it (a "
        '[[tables]] entry with format = "events", keys and sequence_by, or events_table(...) '
        "in Python) and run again to apply them"
    )


def entity_specs(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig
) -> list[TableSpec]:
    """The silver spec of every bronze topic silver applies (:func:`bronze_topics`)."""
    return bronze_topics(spark, warehouse, config).specs


def resolve_entities(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig, table: str | None
) -> list[TableSpec]:
    """Every entity fed by the warehouse's bronze, or only ``table``.

    Raises:
        TableNotFoundError: the warehouse has no bronze tables, or none feeds ``table``.
    """
    return chosen_entities(entity_specs(spark, warehouse, config), warehouse, table)


def chosen_entities(
    specs: list[TableSpec], warehouse: Warehouse, table: str | None
) -> list[TableSpec]:
    """``specs`` (the warehouse's entities), or only ``table``'s.

    Raises:
        TableNotFoundError: ``specs`` is empty, or none is ``table``.
    """
    if not specs:
        raise TableNotFoundError(
            f"No bronze tables in {warehouse.root}: point --warehouse at a warehouse that "
            "'lakehouse run' has written."
        )
    if table is None:
        return specs
    chosen = [spec for spec in specs if spec.name == table]
    if not chosen:
        names = ", ".join(spec.name for spec in specs)
        raise TableNotFoundError(
            f"Unknown table {table!r}: the silver tables of this warehouse are {names}. "
            "Pass one of them."
        )
    return chosen


def dependent_gold(config: PipelineConfig, entities: Collection[str]) -> list[GoldJob]:
    """The gold jobs that read one of ``entities`` (as their input or through a join)."""
    return [job for job in gold_jobs(config) if job.reads_any(entities)]


def rebuilt_together(
    config: PipelineConfig, entities: Collection[str], present: Collection[str]
) -> list[str]:
    """``entities`` and the ``present`` entities a rebuild must take with them: a gold table
    that joins a rebuilt entity is rebuilt, and so are the other silver tables it reads (its
    checkpoint holds versions of each)."""
    jobs = gold_jobs(config)
    chosen = set(entities)
    while True:
        wanted = set().union(chosen, *(job.entities for job in jobs if job.reads_any(chosen)))
        wanted &= {*present, *chosen}
        if wanted == chosen:
            return [name for name in present if name in chosen]
        chosen = wanted


def derived_paths(
    warehouse: Warehouse, config: PipelineConfig, entities: Collection[str]
) -> list[str]:
    """Paths (relative to the warehouse root) of what the pipeline computes from the entities'
    bronze: silver tables, tombstones, truncation marks, the gold tables that read them, and the
    checkpoints and idempotency ids of those jobs. (Other tables a rebuild produces, such as
    history tables, are found in its staging tree.)"""
    paths = []
    for entity in entities:
        checkpoint = warehouse.checkpoint(f"silver_{entity}")
        paths += [
            warehouse.table("silver", entity),
            warehouse.tombstones(entity),
            warehouse.truncations(entity),
            checkpoint,
            f"{checkpoint}.{APP_ID_FILE}",
        ]
    for job in dependent_gold(config, entities):
        checkpoint = warehouse.checkpoint(job.query)
        paths += [warehouse.table("gold", job.table), checkpoint, f"{checkpoint}.{APP_ID_FILE}"]
        paths.append(applied_location(warehouse, job.table))  # its place in a shared feed
    for alert in alert_jobs(config):
        if alert.input in entities:
            # gold.alerts and the baselines stay; the job scores the rebuilt change feed again
            # (its MERGE is keyed by alert and row, so nothing is duplicated).
            checkpoint = warehouse.checkpoint(alert.query)
            paths += [checkpoint, f"{checkpoint}.{APP_ID_FILE}"]
    prefix = f"{warehouse.root.rstrip('/')}/"
    return [path.removeprefix(prefix) for path in paths]
