"""``lakehouse verify`` for gold: a gold table against its declaration evaluated in batch over
the current silver table (the contract the streaming engine keeps after every batch)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType

from core.gold_tables import GoldTable
from gold.aggregates import evaluate
from silver.verify import MAX_REPORTED, TableCheck

#: Doubles (``avg``) summed in another order differ in their last bits: compared rounded.
DOUBLE_DIGITS = 9


def check_gold(spark: SparkSession, silver: str, gold: str, table: GoldTable) -> TableCheck:
    """The rows of the gold table at ``gold`` that differ from ``table`` evaluated over the
    silver table at ``silver`` (each missing or unexpected row is one difference line)."""
    expected = _comparable(evaluate(spark.read.format("delta").load(silver), table), table)
    actual = _comparable(spark.read.format("delta").load(gold), table)
    missing, unexpected = expected.exceptAll(actual), actual.exceptAll(expected)
    check = TableCheck(table=table.name, layer="gold")
    check.expected_rows, check.actual_rows = expected.count(), actual.count()
    for kind, frame in (("missing", missing), ("unexpected", unexpected)):
        for row in frame.limit(MAX_REPORTED).collect():
            check.differences.append(f"{kind} row {row.asDict()}")
    return check


def _comparable(frame: DataFrame, table: GoldTable) -> DataFrame:
    types = {f.name: f.dataType for f in frame.schema.fields}

    def column(name: str) -> Column:
        if isinstance(types.get(name), DoubleType | FloatType):
            return F.round(F.col(name), DOUBLE_DIGITS).alias(name)
        return F.col(name)

    return frame.select(*(column(c) for c in table.columns))
