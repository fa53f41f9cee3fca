"""``lakehouse validate``: every suite run by Great Expectations on the current tables, with
table-level expectations (uniqueness, row counts) included, and Data Docs written on request
(self-contained: they load nothing from the web).

Each table is validated by a GX checkpoint (one validation definition: the table's suite on
the table read as a Spark DataFrame) whose action updates the Data Docs. GX's costs on Spark
are kept bounded: its Spark datasource does not persist the DataFrame (``persist=False``), and
results are ``SUMMARY`` (a few example values per expectation, not all of them).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from expectations.offline_docs import assets_root, make_offline
from expectations.suites import default_name, suite_names, table_suite
from lakehouse_core.config import QualityAction, QualitySpec, require_action
from lakehouse_core.delta_io import table_exists
from lakehouse_core.errors import ExpectationFailedError
from lakehouse_core.layout import LAYERS, Warehouse

log = logging.getLogger(__name__)

#: Where GX's file context keeps the HTML Data Docs, under the ``--docs`` directory.
DOCS_INDEX = Path("gx", "uncommitted", "data_docs", "local_site", "index.html")


@dataclass(frozen=True)
class Verdict:
    """One expectation of one table, as GX judged it."""

    table: str
    expectation: str
    type: str
    action: QualityAction
    success: bool
    unexpected: int | None


@dataclass
class Validation:
    """The verdicts of a validation run, the tables with a suite but no table, and where the
    Data Docs index is (None: no docs were asked for)."""

    verdicts: list[Verdict] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    docs: Path | None = None

    @property
    def ok(self) -> bool:
        """Whether every ``fail`` expectation holds."""
        return all(v.success or v.action != "fail" for v in self.verdicts)


def validate_warehouse(
    spark: SparkSession, warehouse: Warehouse, quality: QualitySpec, docs: Path | None = None
) -> Validation:
    """Run each suite of ``quality`` on its table of ``warehouse`` through a GX checkpoint;
    with ``docs``, keep GX's project (file context) there and build the Data Docs, made to
    work offline (their browser assets copied next to them, see
    :mod:`expectations.offline_docs`).

    Raises:
        ConfigError: a suite is malformed (see :func:`expectations.suites.read_suite`), or
            ``docs`` is given and the Data Docs assets are not installed.
    """
    import great_expectations as gx
    from great_expectations.checkpoint.actions import UpdateDataDocsAction, ValidationAction
    from great_expectations.checkpoint.checkpoint import Checkpoint
    from great_expectations.core.validation_definition import ValidationDefinition
    from great_expectations.data_context.types.base import ProgressBarsConfig

    assets = None if docs is None else assets_root()  # before any work: the fix is an install
    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    if docs is None:
        context: Any = gx.get_context(mode="ephemeral")
    else:
        context = gx.get_context(mode="file", project_root_dir=str(docs))
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    source = context.data_sources.add_or_update_spark("lakehouse", persist=False)
    validation = Validation(docs=None if docs is None else docs / DOCS_INDEX)
    for layer in LAYERS:
        for table in suite_names(quality, layer):
            name, path = f"{layer}.{table}", warehouse.table(layer, table)
            if not table_exists(spark, path):
                validation.missing.append(name)
                continue
            declared_and_filed = table_suite(quality, layer, table)
            assert declared_and_filed is not None
            suite = context.suites.add_or_update(declared_and_filed)
            asset = next((a for a in source.assets if a.name == name), None)
            if asset is None:
                asset = source.add_dataframe_asset(name)
            batches = next((b for b in asset.batch_definitions if b.name == "whole"), None)
            if batches is None:
                batches = asset.add_batch_definition_whole_dataframe("whole")
            definition = context.validation_definitions.add_or_update(
                ValidationDefinition(name=name, data=batches, suite=suite)
            )
            actions: list[ValidationAction] = []
            if docs is not None:
                actions.append(UpdateDataDocsAction(name="data_docs"))
            checkpoint = context.checkpoints.add_or_update(
                Checkpoint(
                    name=name,
                    validation_definitions=[definition],
                    actions=actions,
                    result_format={"result_format": "SUMMARY"},
                )
            )
            frame = spark.read.format("delta").load(path)
            result = checkpoint.run(batch_parameters={"dataframe": frame})
            for run in result.run_results.values():
                validation.verdicts += [_verdict(name, quality, r) for r in run.results]
    if docs is not None and (docs / DOCS_INDEX).exists():
        make_offline((docs / DOCS_INDEX).parent, assets)
    return validation


def _verdict(table: str, quality: QualitySpec, result: Any) -> Verdict:
    configuration = result.expectation_config
    meta = dict(configuration.meta or {})
    column = configuration.kwargs.get("column", "table")
    name = str(meta.get("name") or default_name(configuration.type, str(column)))
    action = quality.action_for(f"{table}.{name}") or require_action(
        meta.get("action", "warn"), f"expectation {table}.{name} (meta.action)"
    )
    unexpected = (result.result or {}).get("unexpected_count")
    return Verdict(table, name, configuration.type, action, bool(result.success), unexpected)


class PeriodicValidation:
    """The whole-table validations of a continuous run, one every
    ``quality.validate_every`` (none if it is not set), the first one interval after start."""

    def __init__(self, quality: QualitySpec) -> None:
        self.quality = quality
        self.every = quality.validate_seconds
        self.due = None if self.every is None else time.monotonic() + self.every

    def run_if_due(self, spark: SparkSession, warehouse: Warehouse) -> Validation | None:
        """Validate the tables if the interval has passed, saying in one INFO log line how
        many expectations held; the validation (None if it was not due).

        Raises:
            ExpectationFailedError: a ``fail`` expectation does not hold (the run stops; the
                micro-batches it committed stay).
        """
        if self.due is None or self.every is None or time.monotonic() < self.due:
            return None
        validation = validate_warehouse(spark, warehouse, self.quality)
        self.due = time.monotonic() + self.every
        broke = [v for v in validation.verdicts if not v.success]
        listed = ", ".join(f"{v.table}.{v.expectation} ({v.action})" for v in broke)
        log.info(
            f"validate: {len(validation.verdicts) - len(broke)} of {len(validation.verdicts)} "
            f"expectations hold{'; broke: ' + listed if broke else ''}"
        )
        failed = next((v for v in broke if v.action == "fail"), None)
        if failed is not None:
            rows = "" if failed.unexpected is None else f" ({failed.unexpected} unexpected rows)"
            raise ExpectationFailedError(
                f"Expectation {failed.expectation} ({failed.type}, action fail) of "
                f"{failed.table} broke in the validation run every "
                f"{self.quality.validate_every}{rows}. The run stopped; what it committed stays. "
                "Fix the data or relax the suite, then run again."
            )
        return validation
