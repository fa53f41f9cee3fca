"""The per-table change settings of a ``TableSpec``, applied to parsed change events (pure).

* ``apply_as_truncates`` / ``apply_as_deletes``: an upsert whose row meets the condition becomes
  a truncate (``_op = 't'``) / a delete (``_op = 'd'``); the truncate condition is checked first.
* ``ignore_null_updates`` (or its column lists): the null columns of an upsert are listed in
  ``_unavailable``, the mechanism that also carries TOAST placeholders, so they take the
  previous version's value.
* a keyless record that meets ``apply_as_truncates`` is a truncate, not ``missing key``.
* ``column_list`` / ``except_column_list``: the row columns silver keeps.

The conditions are built as Spark columns by :mod:`lakehouse_core.conditions.spark`, node by node
from the checked tree (never from the config text), once the batch's column types are known.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from lakehouse_core.columns import METADATA_COLUMNS, OP, REASON, RESCUED
from lakehouse_core.conditions.spark import condition_column
from lakehouse_core.config import ConditionSetting, TableSpec
from silver.parse import DELETE_OP, MISSING_KEY, TRUNCATE_OP, UPSERT_OPS, RowLayout


def with_settings(events: DataFrame, spec: TableSpec, layout: RowLayout) -> DataFrame:
    """Apply the condition and partial-update settings to the output of ``parse_changes``.

    Only usable upserts (no ``_reason``) are affected; conditions read the event's own row
    (TOAST placeholders and nulls as received). A batch without row columns (only tombstones,
    truncates or unreadable records) has no upsert and is returned unchanged.

    Raises:
        ConfigError: a condition reads a column the batch does not have, or gives an operator
            operands of types it does not take (a string column compared with a number).
    """
    if not layout.columns:
        return events
    columns = (*layout.key_names, *(c.name for c in layout.columns))
    types = {name: events.schema[name].dataType for name in dict.fromkeys(columns)}
    upsert = F.col(REASON).isNull() & F.col(OP).isin(*UPSERT_OPS)
    # A truncate is about every key: a record without one (Databricks' examples send it
    # keyless) that meets apply_as_truncates is a truncate, not ``missing key``.
    keyless = (
        (F.col(REASON) == MISSING_KEY)
        & F.col(OP).isin(*UPSERT_OPS)
        & F.col("_sequence").isNotNull()
    )
    op, reason = F.col(OP), F.col(REASON)
    deletes = _condition(spec, "apply_as_deletes", types)
    if deletes is not None:
        op = F.when(upsert & deletes, F.lit(DELETE_OP)).otherwise(op)
    truncates = _condition(spec, "apply_as_truncates", types)
    if truncates is not None:  # applied last, so checked first
        truncate = F.coalesce((upsert | keyless) & truncates, F.lit(False))
        op = F.when(truncate, F.lit(TRUNCATE_OP)).otherwise(op)
        reason = F.when(~truncate, reason)
    events = events.withColumns({OP: op, REASON: reason})
    ignoring = [
        c.name for c in layout.value_columns if c.name != RESCUED and spec.ignores_nulls_of(c.name)
    ]
    if not ignoring:
        return events
    nulls = F.filter(
        F.array(*[F.when(F.col(name).isNull(), F.lit(name)) for name in ignoring]),
        lambda name: name.isNotNull(),
    )
    partial = F.when(F.col(OP).isin(*UPSERT_OPS), F.array_union("_unavailable", nulls))
    return events.withColumn("_unavailable", partial.otherwise(F.col("_unavailable")))


def kept_layout(layout: RowLayout, spec: TableSpec) -> RowLayout:
    """The layout of the silver table: keys plus the row columns the spec keeps.

    Raises:
        ConfigError: ``except_column_list`` names a key (from the record key) or metadata column.
    """
    spec.check_always_kept((*layout.key_names, *METADATA_COLUMNS))
    keys = set(layout.key_names)
    kept = tuple(
        c
        for c in layout.columns
        if c.name in keys or c.name == RESCUED or spec.keeps_column(c.name)
    )
    names = {c.name for c in kept}
    defaults = tuple((n, d) for n, d in layout.defaults if n in names)
    return RowLayout(keys=layout.keys, columns=kept, defaults=defaults)


def _condition(
    spec: TableSpec, setting: ConditionSetting, types: Mapping[str, DataType]
) -> Column | None:
    parsed = spec.condition(setting)
    if parsed is None:
        return None
    return condition_column(parsed, types, f"Table {spec.name!r}: {setting}", spec.format)
