"""``lakehouse verify`` for gold: a gold table against its declaration evaluated in batch over
the current silver table (the contract the streaming engine keeps after every batch), with
``_final`` as the table's persisted watermark decides it; a pattern's table against its
matches over its silver table."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType

from gold.aggregates import evaluate
from gold.batch import JoinInputs, joined_entity
from gold.enrichment import enrich
from gold.finality import FINAL, at_micros
from gold.pattern_jobs import evaluate_matches, final_from
from gold.stream_join import evaluate_joined
from gold.watermarks import seen_micros, watermark_of
from lakehouse_core.frames import kept_with_totals
from lakehouse_core.gold_tables import GoldTable
from lakehouse_core.patterns import Pattern
from silver.verify import MAX_REPORTED, TableCheck

#: Doubles (``avg``) summed in another order differ in their last bits: compared rounded.
DOUBLE_DIGITS = 9


log = logging.getLogger(__name__)


def check_gold(
    spark: SparkSession,
    silver: str,
    gold: str,
    table: GoldTable,
    watermark: str,
    joined: JoinInputs | None = None,
    other: str | None = None,
) -> TableCheck:
    """The rows of the gold table at ``gold`` that differ from ``table`` evaluated over the
    silver table at ``silver`` (left-joined with the entity at ``joined`` when the
    declaration has a join: its current rows, or as of event time its history's versions;
    with a stream join, the other silver table at ``other``), a
    row being final when its window ends at or before the watermark state at ``watermark``
    (each missing or unexpected row is one difference line). Logs one progress line
    (``verify: gold.<name> ...``) as it starts."""
    log.info(f"verify: gold.{table.name} against its declaration over silver.{table.source}")
    mark = watermark_of(seen_micros(spark, watermark), table)
    end = F.col(table.window.end_as)
    final = F.lit(False) if mark is None else end <= at_micros(mark)
    rows = spark.read.format("delta").load(silver)
    if table.join is not None and joined is not None:
        at = table.event_time if table.join.at_event_time else None
        rows = enrich(rows, joined_entity(spark, table.join, joined), table.join, at)
    if table.stream_join is not None and other is not None:
        evaluated = evaluate_joined(rows, spark.read.format("delta").load(other), table)
    else:
        evaluated = evaluate(rows, table)
    expected = _comparable(evaluated.withColumn(FINAL, final), table.columns)
    return _compared(expected, spark.read.format("delta").load(gold), table.columns, table.name)


def check_pattern_table(
    spark: SparkSession,
    silver: str,
    gold: str,
    pattern: Pattern,
    watermark: str,
    identity: Sequence[str],
) -> TableCheck:
    """The rows of the pattern table at ``gold`` that differ from ``pattern``'s matches over
    the silver table at ``silver`` (``identity``: the columns that tell its events apart),
    a match being final as the watermark state at ``watermark`` decides. Logs one progress
    line as it starts."""
    log.info(
        f"verify: gold.{pattern.name} against the matches of its pattern over "
        f"silver.{pattern.source}"
    )
    mark = watermark_of(seen_micros(spark, watermark), pattern)
    final = F.lit(False) if mark is None else final_from(pattern) <= at_micros(mark)
    matches = evaluate_matches(spark.read.format("delta").load(silver), pattern, identity)
    expected = _comparable(matches.withColumn(FINAL, final), pattern.columns)
    return _compared(expected, spark.read.format("delta").load(gold), pattern.columns, pattern.name)


def _compared(
    expected: DataFrame, stored: DataFrame, columns: Sequence[str], name: str
) -> TableCheck:
    """The check of gold table ``name``: each row of ``stored`` missing from or surplus to
    ``expected`` (both over ``columns`` and :data:`FINAL`) is one difference line."""
    if FINAL not in stored.columns:
        stored = stored.withColumn(FINAL, F.lit(None).cast("boolean"))
    actual = _comparable(stored, columns)
    counted, totals = _counted(expected, actual)
    check = TableCheck(table=name, layer="gold")
    check.expected_rows, check.actual_rows = int(totals.expected), int(totals.actual)
    for kind, more in (("missing", _EXPECTED), ("unexpected", _ACTUAL)):
        fewer = _ACTUAL if more == _EXPECTED else _EXPECTED
        surplus = counted.where(F.col(more) > F.col(fewer)).limit(MAX_REPORTED).collect()
        lines = [
            f"{kind} row { {c: row[c] for c in expected.columns} }"
            for row in surplus
            for _ in range(row[more] - row[fewer])
        ]
        check.differences += lines[:MAX_REPORTED]
    return check


#: How often a distinct row occurs in the evaluated declaration and in the gold table.
_EXPECTED, _ACTUAL = "__times_expected", "__times_stored"


def _counted(expected: DataFrame, actual: DataFrame) -> tuple[DataFrame, Row]:
    """Each distinct row of ``expected`` and ``actual`` with how often each holds it, kept, and
    the two tables' row counts: one Spark job evaluates the declaration once (a multiset
    difference each way would evaluate it again)."""
    tagged = expected.withColumns({_EXPECTED: F.lit(1), _ACTUAL: F.lit(0)}).unionByName(
        actual.withColumns({_EXPECTED: F.lit(0), _ACTUAL: F.lit(1)})
    )
    counted = tagged.groupBy(*expected.columns).agg(
        F.sum(_EXPECTED).alias(_EXPECTED), F.sum(_ACTUAL).alias(_ACTUAL)
    )
    return kept_with_totals(
        counted,
        F.coalesce(F.sum(_EXPECTED), F.lit(0)).alias("expected"),
        F.coalesce(F.sum(_ACTUAL), F.lit(0)).alias("actual"),
    )


def _comparable(frame: DataFrame, columns: Sequence[str]) -> DataFrame:
    types = {f.name: f.dataType for f in frame.schema.fields}

    def column(name: str) -> Column:
        if isinstance(types.get(name), DoubleType | FloatType):
            return F.round(F.col(name), DOUBLE_DIGITS).alias(name)
        return F.col(name)

    return frame.select(*(column(c) for c in (*columns, FINAL)))
