"""A table's row-level expectations applied to a micro-batch, in the batch's own pass.

:meth:`TableChecks.mark` adds nothing but a reason to the rows a ``drop`` expectation catches
(they go to quarantine with the other unusable records) and a scope column; its
:meth:`TableChecks.totals` are aggregate columns that the caller computes in the same Spark job
as its own totals; :meth:`TableChecks.judge` turns that one row of counts into the verdict: per
expectation rows counted, failed and dropped, warnings logged, and for a broken ``fail`` expectation
an :class:`~lakehouse_core.errors.ExpectationFailedError` raised before anything is written.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from expectations.compile import EVERY_ROW_TYPES, Check, compile_rule, holds
from expectations.suites import Rule, TableSuite
from lakehouse_core.errors import ExpectationFailedError

_log = logging.getLogger(__name__)

#: The column that marks the rows the expectations apply to (dropped by :meth:`unmark`).
SCOPE = "_quality_scope"
#: Quarantine reason of a row a ``drop`` expectation caught: ``expectation <suite>.<name>``.
DROPPED_PREFIX = "expectation "
DROP_REASON = DROPPED_PREFIX + "{}"
#: The columns that say where a row's record is in bronze: topic, partition, offset.
Coordinates = tuple[str, str, str]


@dataclass(frozen=True)
class Outcome:
    """What one expectation found in one micro-batch."""

    rule: Rule
    counted: int
    failed: int
    dropped: int
    held: bool


@dataclass(frozen=True)
class Seen:
    """The rows of a micro-batch a layer's checks see, for their warnings: ``read`` rows
    (None: not counted) of which the checks count ``scope`` (a plural noun phrase, e.g.
    ``"inserts and updates not quarantined before the check"``)."""

    read: int | None
    scope: str


def broke_warning(rule: Rule, batch_id: int, counted: int, failed: int, seen: Seen) -> str:
    """The warning of a broken ``warn`` or ``drop`` expectation: ``failed`` of the ``counted``
    rows, and, unless they are every row read, which rows it counts (``seen``)."""
    dropped = " dropped to quarantine" if rule.action == "drop" else ""
    head = f"expectation {rule.qualified} ({rule.action}) broke in micro-batch {batch_id}: "
    if counted == seen.read:
        return f"{head}{failed} of {counted} rows read{dropped}"
    which = f"the {seen.scope}"
    if rule.type not in EVERY_ROW_TYPES:
        which += f" whose {rule.column} is not null"
    read = "" if seen.read is None else f"{seen.read} read; "
    return f"{head}{failed} of {counted} rows it checked{dropped} ({read}it checks {which})"


@dataclass(frozen=True)
class TableChecks:
    """The row-level expectations of one table's suite, and where their metrics go."""

    suite: TableSuite
    metrics: str  # path of the quality metrics table

    def compile(self, schema: StructType, scope: Column | None = None) -> list[Check]:
        """The suite's checks over rows of ``schema``, each counting only the rows in ``scope``
        (None: every row).

        Raises:
            ConfigError: a rule reads a column the rows do not have (see ``compile_rule``).
        """
        checks = [compile_rule(rule, schema) for rule in self.suite.rules]
        if scope is None:
            return checks
        return [Check(c.rule, scope & c.failed, scope & c.counted) for c in checks]

    @staticmethod
    def drop_reason(checks: Sequence[Check]) -> Column | None:
        """:data:`DROP_REASON` of the first ``drop`` check a row breaks (null if none); None
        if no check drops."""
        drops = [
            F.when(c.failed, F.lit(DROP_REASON.format(c.rule.qualified)))
            for c in checks
            if c.rule.action == "drop"
        ]
        return F.coalesce(*drops) if drops else None

    def mark(self, rows: DataFrame, scope: Column, reason: str) -> tuple[DataFrame, list[Check]]:
        """``rows`` with :data:`SCOPE` (``scope``: the rows the expectations apply to, kept as
        a column, as ``reason`` changes) and, on rows in scope that a ``drop`` expectation
        catches, ``reason`` set to :data:`DROP_REASON` of the first such expectation; and the
        compiled checks, limited to the rows in scope.

        Raises:
            ConfigError: a rule reads a column the rows do not have (see ``compile_rule``).
        """
        checks = self.compile(rows.schema, F.col(SCOPE))
        marked = rows.withColumn(SCOPE, F.coalesce(scope, F.lit(False)))
        dropped = self.drop_reason(checks)
        if dropped is not None:
            marked = marked.withColumn(reason, F.coalesce(F.col(reason), dropped))
        return marked, checks

    @staticmethod
    def unmark(rows: DataFrame) -> DataFrame:
        return rows.drop(SCOPE)

    @staticmethod
    def totals(checks: Sequence[Check]) -> list[Column]:
        """Aggregates of rows counted and failed per check, named ``_q<i>_counted``/``_failed``."""
        columns = []
        for i, check in enumerate(checks):
            columns.append(F.count_if(check.counted).alias(f"_q{i}_counted"))
            columns.append(F.count_if(check.failed).alias(f"_q{i}_failed"))
        return columns

    def judge(
        self,
        checks: Sequence[Check],
        counts: Row,
        rows: DataFrame,
        shown: Sequence[str],
        batch_id: int,
        seen: Seen,
        coordinates: Coordinates | None = None,
    ) -> list[Outcome]:
        """The outcome of each check from the ``counts`` row of :meth:`totals`; warnings are
        logged for each broken ``warn`` or ``drop`` expectation (:func:`broke_warning`, with
        the rows ``seen``).

        Raises:
            ExpectationFailedError: a ``fail`` expectation does not hold; the message names it,
                the table and one failing row of ``rows`` (its ``shown`` columns and, if
                given, the columns of its bronze ``coordinates``: topic, partition, offset;
                read by one small Spark job).
        """
        outcomes = []
        for i, check in enumerate(checks):
            rule = check.rule
            counted, failed = int(counts[f"_q{i}_counted"]), int(counts[f"_q{i}_failed"])
            held = holds(rule, counted, failed)
            dropped = failed if rule.action == "drop" else 0
            outcomes.append(Outcome(rule, counted, failed, dropped, held))
            if held:
                continue
            if rule.action == "fail":
                example = _example(rows, check, shown, coordinates)
                raise ExpectationFailedError(
                    f"Expectation {rule.name} ({rule.type}, action fail) of {rule.suite} broke "
                    f"in micro-batch {batch_id}: {failed} of {counted} rows, e.g. {example}. "
                    "Nothing of the batch was written; fix the data or relax the suite "
                    f"({self.suite.path}), then run again."
                )
            _log.warning("%s", broke_warning(rule, batch_id, counted, failed, seen))
        return outcomes


def _example(
    rows: DataFrame, check: Check, shown: Sequence[str], coordinates: Coordinates | None
) -> str:
    columns = list(dict.fromkeys([*shown, check.rule.column]))
    row = rows.where(check.failed).select(*columns, *(coordinates or ())).first()
    if row is None:  # cannot happen: the counts said some row failed
        return "no row"
    values = ", ".join(
        f"{c}={row[c]!r}" if isinstance(row[c], str) else f"{c}={row[c]}" for c in columns
    )
    if coordinates is None:
        return values
    topic, partition, offset = (row[c] for c in coordinates)
    return f"{values} (bronze {topic} partition {partition} offset {offset})"
