"""The per-table change settings of a ``TableSpec``, applied to parsed change events (pure).

* ``apply_as_truncates`` / ``apply_as_deletes``: an upsert whose row meets the condition becomes
  a truncate (``_op = 't'``) / a delete (``_op = 'd'``); the truncate condition is checked first.
* ``ignore_null_updates``: the null columns of an upsert are listed in ``_unavailable``, the
  mechanism that also carries TOAST placeholders, so they take the previous version's value.
* ``column_list`` / ``except_column_list``: the row columns silver keeps.

The conditions are built as Spark columns from the parsed tree of ``core.conditions``
(never from the config text), after checking each column against the batch's columns.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DataType, IntegralType, StringType

from core.conditions import And, Compare, Condition, IsNull, Not
from core.config import ConditionSetting, TableSpec
from core.errors import ConfigError
from silver.parse import CHANGE_OPS, METADATA_COLUMNS, TRUNCATE_OP, RowLayout

UPSERT_OPS = tuple(op for op in CHANGE_OPS if op != "d")


def with_settings(events: DataFrame, spec: TableSpec, layout: RowLayout) -> DataFrame:
    """Apply the condition and partial-update settings to the output of ``parse_changes``.

    Only usable upserts (no ``_reason``) are affected; conditions read the event's own row
    (TOAST placeholders and nulls as received). A batch without row columns (only tombstones,
    truncates or unreadable records) has no upsert and is returned unchanged.

    Raises:
        ConfigError: a condition reads a column the batch does not have, or compares a column
            with a literal of another type.
    """
    if not layout.columns:
        return events
    columns = (*layout.key_names, *(c.name for c in layout.columns))
    types = {name: events.schema[name].dataType for name in dict.fromkeys(columns)}
    upsert = F.col("_reason").isNull() & F.col("_op").isin(*UPSERT_OPS)
    op = F.col("_op")
    rewrites: tuple[tuple[ConditionSetting, str], ...] = (
        ("apply_as_deletes", "d"),
        ("apply_as_truncates", TRUNCATE_OP),  # applied last, so checked first
    )
    for setting, new_op in rewrites:
        condition = _condition(spec, setting, types)
        if condition is not None:
            op = F.when(upsert & condition, F.lit(new_op)).otherwise(op)
    events = events.withColumn("_op", op)
    if not spec.ignore_null_updates or not layout.value_columns:
        return events
    nulls = F.filter(
        F.array(*[F.when(F.col(c.name).isNull(), F.lit(c.name)) for c in layout.value_columns]),
        lambda name: name.isNotNull(),
    )
    partial = F.when(F.col("_op").isin(*UPSERT_OPS), F.array_union("_unavailable", nulls))
    return events.withColumn("_unavailable", partial.otherwise(F.col("_unavailable")))


def kept_layout(layout: RowLayout, spec: TableSpec) -> RowLayout:
    """The layout of the silver table: keys plus the row columns the spec keeps.

    Raises:
        ConfigError: ``except_column_list`` names a key (from the record key) or metadata column.
    """
    spec.check_always_kept((*layout.key_names, *METADATA_COLUMNS))
    keys = set(layout.key_names)
    kept = tuple(c for c in layout.columns if c.name in keys or spec.keeps_column(c.name))
    return RowLayout(keys=layout.keys, columns=kept)


def _condition(
    spec: TableSpec, setting: ConditionSetting, types: Mapping[str, DataType]
) -> Column | None:
    parsed = spec.condition(setting)
    if parsed is None:
        return None
    return condition_column(parsed, types, f"Table {spec.name!r}: {setting}", spec.format)


def condition_column(
    condition: Condition, types: Mapping[str, DataType], where: str, table_format: str = "debezium"
) -> Column:
    """The Spark column for ``condition`` over columns with the given types.

    Raises:
        ConfigError: naming ``where`` and the unknown or mistyped column.
    """
    if isinstance(condition, Compare):
        column = _column(condition.column, types, where, table_format)
        _require_comparable(condition, types[condition.column], where)
        equal = column == F.lit(condition.value)
        return ~equal if condition.negated else equal
    if isinstance(condition, IsNull):
        column = _column(condition.column, types, where, table_format)
        return column.isNotNull() if condition.negated else column.isNull()
    if isinstance(condition, Not):
        return ~condition_column(condition.operand, types, where, table_format)
    left = condition_column(condition.left, types, where, table_format)
    right = condition_column(condition.right, types, where, table_format)
    return left & right if isinstance(condition, And) else left | right


def _column(name: str, types: Mapping[str, DataType], where: str, table_format: str) -> Column:
    if name not in types:
        hint = (
            " (declare it in 'schema' if the source omits it)" if table_format == "events" else ""
        )
        raise ConfigError(
            f"{where} reads column {name!r}, which is not a column of the table{hint}. "
            f"Columns: {', '.join(types) or 'none'}."
        )
    return F.col(name)


def _require_comparable(condition: Compare, data_type: DataType, where: str) -> None:
    value = condition.value
    if isinstance(value, bool):
        ok, kind = isinstance(data_type, BooleanType), "TRUE or FALSE"
    elif isinstance(value, int):
        ok, kind = isinstance(data_type, IntegralType), "an integer"
    else:
        ok, kind = isinstance(data_type, StringType), "a 'text' literal"
    if not ok:
        raise ConfigError(
            f"{where} compares column {condition.column!r} of type {data_type.simpleString()} "
            f"with {kind}; compare strings with 'text', integer columns with integers, booleans "
            "with TRUE or FALSE, and other types only with IS [NOT] NULL."
        )
