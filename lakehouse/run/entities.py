"""The silver entities of a warehouse and the tables and state derived from each."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from bronze.table import bronze_topic
from gold.alerts import alert_jobs
from gold.progress import applied_location
from gold.registry import GoldJob, gold_jobs
from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.delta_io import table_exists
from lakehouse_core.errors import ConfigError, TableNotFoundError
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import HISTORY_SUFFIX, QUARANTINE_TABLE, Layer, Warehouse
from lakehouse_core.streaming import APP_ID_FILE
from silver.topic_kind import holds_plain_events

#: The layers the pipeline computes from bronze, whose tables its declarations make.
DERIVED_LAYERS: tuple[Layer, ...] = ("silver", "gold")


@dataclass(frozen=True)
class BronzeTopics:
    """The topics of a warehouse's bronze: the silver spec of each one silver applies, the
    event topics without a declaration, which stay in bronze only, and Debezium's own topics
    without one (``connector``: heartbeats, transaction metadata, the signalling table,
    named by ``[debezium]``), which stay in bronze only too."""

    specs: list[TableSpec]
    undeclared: list[str]
    connector: list[str] = field(default_factory=list)


def bronze_topics(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig
) -> BronzeTopics:
    """Every bronze topic (internal topics excluded) with its silver spec: the declared one,
    else the Debezium defaults, unless it is one of Debezium's own topics by its name
    (:meth:`lakehouse_core.config.DebeziumSpec.kind_of`) or its records are plain events
    (:func:`silver.topic_kind.holds_plain_events`); a topic whose silver table exists was
    decided before and is not read again."""
    specs, undeclared, connector = [], [], []
    declared = {table.topic for table in config.tables}
    for name in warehouse.table_names("bronze", spark):
        path = warehouse.table("bronze", name)
        topic = bronze_topic(spark, path)
        if not topic or topic.startswith("_"):
            continue
        spec = config.spec_for_topic(topic)
        undecided = topic not in declared and not table_exists(
            spark, warehouse.table("silver", spec.name)
        )
        if undecided and config.debezium.kind_of(topic) is not None:
            connector.append(topic)
        elif undecided and _holds_plain_events(spark, path):
            undeclared.append(topic)
        else:
            specs.append(spec)
    return BronzeTopics(specs, undeclared, connector)


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


def held_event_topics(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig, specs: Sequence[TableSpec]
) -> list[str]:
    """The topics of ``specs`` that ``config`` does not declare, whose silver table the
    warehouse holds and whose bronze records are plain events: an ``events`` declaration made
    that table, and it is missing now (:func:`bronze_topics` takes such a topic for Debezium
    changes, as its table exists). One sample of bronze per such topic."""
    declared = {table.topic for table in config.tables}
    return [
        spec.topic
        for spec in specs
        if spec.topic not in declared
        and table_exists(spark, warehouse.table("silver", spec.name))
        and _holds_plain_events(spark, warehouse.table("bronze", table_name_for_topic(spec.topic)))
    ]


def missing_declarations(
    config: PipelineConfig,
    specs: Collection[TableSpec],
    held: Collection[str],
    event_topics: Collection[str],
) -> list[str]:
    """Each table of ``held`` (``silver.<name>`` or ``gold.<name>``, those a warehouse holds)
    that the declarations of ``config`` do not make as it is held, with the declaration it
    needs; empty when every held table is declared.

    ``specs``: the silver spec of each bronze topic (:func:`entity_specs`); ``event_topics``:
    those of their topics that hold plain events without a declaration
    (:func:`held_event_topics`). A silver table is declared when it is the quarantine, a topic's
    entity (an event topic's only through its ``events`` declaration) or the history table of
    an SCD type 2 entity; a gold table when a declaration, pattern, SQL model or alert makes
    it (``gold.late_events`` and ``gold.alerts`` always are).
    """
    entities = {spec.name: spec for spec in specs}
    histories = {spec.history_name for spec in specs if spec.history_name is not None}
    gold = {*config.taken_gold_names, *(model.name for model in config.models)}
    lacking = []
    for table in sorted(held):
        layer, _, name = table.partition(".")
        if layer == "gold":
            if name not in gold:
                lacking.append(
                    f"{table} (needs its [[gold]], [[patterns]], [[models]] or [[alerts]] entry)"
                )
        elif name == QUARANTINE_TABLE or name in histories:
            continue
        elif name in entities:
            topic = entities[name].topic
            if topic in event_topics:
                lacking.append(f'{table} (needs topic {topic} declared with format = "events")')
        elif name.removesuffix(HISTORY_SUFFIX) in entities and name.endswith(HISTORY_SUFFIX):
            entity = name.removesuffix(HISTORY_SUFFIX)
            lacking.append(f"{table} (needs stored_as_scd_type = 2 on table {entity})")
        else:
            lacking.append(f"{table} (needs a [[tables]] entry named {name} for its topic)")
    return lacking


def refusal(command: str, lacking: Sequence[str]) -> str:
    """The one line a command refuses with when the declarations given lack tables the
    warehouse holds (``lacking``: each with the declaration it needs), and the fix."""
    return (
        f"{command} refused: the declarations given lack tables the warehouse holds: "
        f"{', '.join(lacking)}. Nothing was changed; pass the --config the pipeline ran with."
    )


def declared_entities(
    spark: SparkSession, warehouse: Warehouse, config: PipelineConfig, command: str
) -> list[TableSpec]:
    """The warehouse's entities (:func:`entity_specs`), once every silver and gold table it
    holds is declared as held (:func:`missing_declarations`).

    Raises:
        ConfigError: a held table lacks its declaration (:func:`refusal` of ``command``).
    """
    specs = entity_specs(spark, warehouse, config)
    held = [
        f"{layer}.{name}"
        for layer in DERIVED_LAYERS
        for name in warehouse.table_names(layer, spark)
    ]
    events = held_event_topics(spark, warehouse, config, specs)
    lacking = missing_declarations(config, specs, held, events)
    if lacking:
        raise ConfigError(refusal(command, lacking))
    return specs


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
