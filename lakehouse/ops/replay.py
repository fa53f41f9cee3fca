"""Replay: rebuild silver and gold from bronze from scratch, then swap the result in.

The rebuild runs the pipeline's own silver and gold jobs
(:func:`lakehouse.run.pipeline.run_from_bronze`) on a staging warehouse that reads the live
bronze tables, with fresh checkpoints and new idempotency ids. The live tables are not touched
until the rebuild is complete; then the staged tables and their state replace the live ones
(:mod:`lakehouse.run.swap` on a local file system; :mod:`lakehouse.run.commit_swap`, by Delta
commits and checkpoint pointers, at a URI such as an object store). A failed rebuild leaves the
warehouse as it was.

The quarantine table is shared by all entities: the staged copy starts with the live rows of the
entities that are not rebuilt, and the rebuilt entities add theirs.

SQL models (:mod:`gold.models`) are rebuilt by the same run, after the gold tables, and swapped
in with their state; a model whose inputs the rebuild did not produce is refreshed on the live
warehouse after the swap.

``gold.alerts`` records the alerts raised, not a result a rebuild may recompute: the live table
stays in place with every row, and the alerts the rebuild raised that it lacks are added to it.
The rebuild's micro-batches go into the live event log once its tables are in (so ``lakehouse
status`` shows them as each table's last batch).

Do not run a replay while a pipeline writes to the same warehouse.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from gold.alerts import ALERTS_TABLE
from gold.feed import GOLD_WIDENING
from gold.models import refresh_models
from gold.pattern_jobs import final_from
from gold.watermarks import carry_over
from lakehouse.run import commit_swap, recovery, swap
from lakehouse.run.declarations import record_declarations, refuse_unrebuilt
from lakehouse.run.entities import (
    chosen_entities,
    declared_entities,
    dependent_gold,
    derived_paths,
    rebuilt_together,
)
from lakehouse.run.event_log import append_rows, collecting
from lakehouse.run.pipeline import run_from_bronze
from lakehouse.run.summary import RunSummary
from lakehouse_core.config import PipelineConfig
from lakehouse_core.delta_io import ensure_table, forget_cached_logs, table_exists
from lakehouse_core.errors import ConfigError
from lakehouse_core.layout import LATE_EVENTS, QUARANTINE_TABLE, Warehouse, is_uri
from lakehouse_core.storage import delete_tree

log = logging.getLogger(__name__)


@dataclass
class ReplayReport:
    """What a replay rebuilt: ``(table, rows)`` per silver and gold table, and its duration."""

    entities: list[str]
    tables: list[tuple[str, int]] = field(default_factory=list)
    seconds: float = 0.0


def replay(
    spark: SparkSession,
    warehouse: Warehouse,
    config: PipelineConfig,
    table: str | None = None,
) -> ReplayReport:
    """Rebuild every silver entity (or only ``table``, with the entities a gold table reads
    together with it) and the gold tables that read them.

    Raises:
        ConfigError: a silver or gold table the warehouse holds lacks its declaration in
            ``config`` (:func:`lakehouse.run.entities.declared_entities`), or the rebuild did
            not make a live table it would replace (nothing is swapped in either case), or
            ``config`` changes the keys, sequence or SCD type of a silver table it does not
            rebuild (:func:`lakehouse.run.declarations.refuse_unrebuilt`; nothing is staged).
        TableNotFoundError: no bronze tables, or ``table`` is not an entity of the warehouse.
        PipelineError: a silver or gold job failed (the live tables are unchanged).
    """
    started = time.monotonic()
    on_object_store = is_uri(warehouse.root)
    recovery.recover_and_say(spark, warehouse.root)
    specs = declared_entities(spark, warehouse, config, "replay")
    present = [spec.name for spec in specs]
    chosen = [spec.name for spec in chosen_entities(specs, warehouse, table)]
    entities = rebuilt_together(config, chosen, present)
    if entities != chosen:
        joined = ", ".join(name for name in entities if name not in chosen)
        log.info(f"replay: rebuilding {joined} too: a gold table reads it with {table}")
    refuse_unrebuilt(spark, warehouse, config, entities)  # a silver contract it leaves
    report = ReplayReport(entities=entities)
    if on_object_store:
        staging = commit_swap.prepare(spark, warehouse.root)
    else:
        staging = str(swap.prepare(warehouse.root))
    staged = warehouse.staging(staging)
    log.info(f"replay: rebuilding {', '.join(entities)} from bronze into {staging}")
    _seed_quarantine(spark, warehouse, staged, entities)
    with collecting(spark, RunSummary()) as batches:
        run_from_bronze(spark, staged, config, entities, batches.summary)
    _keep_event_time_history(spark, warehouse, staged, config, entities)
    _keep_alerts(spark, warehouse, staged)
    retire = derived_paths(warehouse, config, entities)
    if on_object_store:
        install = commit_swap.staged_paths(spark, staging)
    else:
        install = swap.staged_paths(Path(staging))
    _refuse_unmade(spark, warehouse, staging, swap.unreplaced_tables(install, retire))
    log.info("replay: swapping the rebuilt tables in")
    if on_object_store:
        commit_swap.seal(spark, staging, retire, gold_inputs(warehouse, config, entities))
        installed = commit_swap.swap(spark, warehouse.root)
    else:
        swap.seal(Path(staging), retire)
        installed = swap.swap(warehouse.root)
    forget_cached_logs(spark)
    append_rows(spark, warehouse, batches.take())
    rebuilt = [job.table for job in dependent_gold(config, entities)]
    record_declarations(spark, warehouse, config, "replay", rebuilt=rebuilt)  # the live tables'
    _refresh_models(spark, warehouse, config)
    for relative in installed:
        layer, _, name = relative.partition("/")
        if layer in ("silver", "gold"):
            rows = spark.read.format("delta").load(f"{warehouse.root}/{relative}").count()
            report.tables.append((f"{layer}.{name}", rows))
    report.seconds = time.monotonic() - started
    return report


def _refuse_unmade(
    spark: SparkSession, warehouse: Warehouse, staging: str, unmade: Collection[str]
) -> None:
    """Refuse to swap when the rebuild did not make a table the warehouse holds that it was
    to replace (``unmade``: relative paths): the swap would leave it stale beside the rebuilt
    state of its entity.

    Raises:
        ConfigError: naming those tables (the unsealed staging tree is discarded).
    """
    held = [path for path in unmade if table_exists(spark, f"{warehouse.root}/{path}")]
    if held:
        delete_tree(spark, staging)
        names = ", ".join(path.replace("/", ".", 1) for path in held)
        raise ConfigError(
            f"replay refused: the rebuild did not make {names}, which the warehouse holds "
            "(the declarations given do not make it from bronze). Nothing was changed; pass "
            "the --config the pipeline ran with."
        )


def _keep_event_time_history(
    spark: SparkSession,
    live: Warehouse,
    staged: Warehouse,
    config: PipelineConfig,
    rebuilt: Collection[str],
) -> None:
    """A rebuild keeps what the live jobs saw of event time: each rebuilt gold table keeps the
    live watermark (and so the same ``_final`` rows), and ``gold.late_events`` stays as it is
    (a rebuild reads every change at once; nothing arrives late)."""
    declared = {table.name: table for table in config.gold_declarations}
    patterns = {pattern.name: pattern for pattern in config.patterns}
    for job in dependent_gold(config, rebuilt):
        if job.table in patterns:
            pattern = patterns[job.table]
            carry_over(spark, live, staged, pattern, final_from(pattern))
        else:
            table = declared[job.table]
            carry_over(spark, live, staged, table, F.col(table.window.end_as))
    delete_tree(spark, staged.table("gold", LATE_EVENTS))


def _keep_alerts(spark: SparkSession, live: Warehouse, staged: Warehouse) -> None:
    """A rebuild never takes back an alert: the alerts the rebuild raised (a pattern's matches)
    that ``gold.alerts`` lacks are added to the live table (one alert and row once, as a run
    raises them), and the staged table is not swapped in, so every alert raised before stays
    as it was, in the same table."""
    made = staged.table("gold", ALERTS_TABLE)
    if not table_exists(spark, made):
        return
    raised = spark.read.format("delta").load(made)
    path = live.table("gold", ALERTS_TABLE)
    ensure_table(spark, path, raised.schema, change_feed=False, widening=GOLD_WIDENING)
    same = (F.col("t.alert") == F.col("s.alert")) & (F.col("t.row_key") == F.col("s.row_key"))
    DeltaTable.forPath(spark, path).alias("t").merge(
        raised.alias("s"), same
    ).whenNotMatchedInsertAll().execute()
    delete_tree(spark, made)


def _refresh_models(spark: SparkSession, warehouse: Warehouse, config: PipelineConfig) -> None:
    """After the swap: refresh the SQL models the staging run could not (an input was not
    rebuilt) or whose inputs the swap replaced; those the rebuild installed are current. A
    model that fails is said, not raised: the rebuilt tables are in, and the next run retries
    it."""
    for failed in refresh_models(spark, warehouse, config):
        log.info(f"replay: {failed.table} failed to refresh ({failed.failure.line})")


def recover(spark: SparkSession, root: str) -> bool:
    """Finish or discard an interrupted replay of the warehouse at ``root`` (by renames on a
    local file system, by Delta commits and pointers at a URI); True if one was finished."""
    return recovery.recover(spark, root) == "finished"


def gold_inputs(
    warehouse: Warehouse, config: PipelineConfig, entities: Collection[str]
) -> dict[str, str]:
    """For the checkpoint of each gold job that reads a rebuilt entity (relative paths), the
    silver table it reads."""
    prefix = f"{warehouse.root.rstrip('/')}/"
    return {
        warehouse.checkpoint(job.query).removeprefix(prefix): warehouse.table(
            "silver", job.input
        ).removeprefix(prefix)
        for job in dependent_gold(config, entities)
    }


def _seed_quarantine(
    spark: SparkSession, live: Warehouse, staged: Warehouse, rebuilt: Collection[str]
) -> None:
    """Copy the live quarantine rows of the entities that are not rebuilt into staging."""
    path = live.table("silver", QUARANTINE_TABLE)
    if not table_exists(spark, path):
        return
    kept = spark.read.format("delta").load(path).where(~F.col("entity").isin(*rebuilt))
    kept.write.format("delta").mode("errorifexists").save(staged.table("silver", QUARANTINE_TABLE))
