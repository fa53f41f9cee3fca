"""The check stage of a silver micro-batch: the table's expectations judged on the decoded
batch, before anything of it is written."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from expectations.enforce import Outcome, Seen, TableChecks
from lakehouse_core.columns import REASON
from silver.context import BatchContext
from silver.decode import Decoded
from silver.parse import BRONZE_COORDINATES

#: The rows of a batch that silver's checks count (see ``silver.decode``: the upserts not
#: quarantined before the check).
SCOPE = "inserts and updates not quarantined before the check"


@dataclass(frozen=True)
class Checked:
    """A decoded batch after its checks: the events without the checks' marks, the checks'
    outcomes (to record; None: the checks did not judge the batch) and, when it has
    quarantined records, how many for each reason, most first."""

    decoded: Decoded
    events: DataFrame
    outcomes: tuple[Outcome, ...] | None = None
    reasons: tuple[tuple[str, int], ...] = ()


def check(ctx: BatchContext, decoded: Decoded) -> Checked:
    """Judge the batch's expectations from its totals and count its quarantine reasons.

    Raises:
        ExpectationFailedError: a ``fail`` expectation broke (nothing of the batch is written).
    """
    events, outcomes = decoded.events, None
    if ctx.checks is not None and decoded.checks_apply:
        outcomes = tuple(
            ctx.checks.judge(
                decoded.compiled,
                decoded.counts,
                events,
                decoded.layout.key_names,
                ctx.batch_id,
                Seen(decoded.counts.records, SCOPE),
                BRONZE_COORDINATES,
            )
        )
        events = TableChecks.unmark(events)
    reasons = _reasons(events) if decoded.counts.quarantined else ()
    return Checked(decoded, events, outcomes, reasons)


def _reasons(events: DataFrame) -> tuple[tuple[str, int], ...]:
    """(reason, records) of the quarantined events, most first (a few distinct reasons)."""
    rows = events.where(F.col(REASON).isNotNull()).groupBy(REASON).count().collect()
    pairs = ((r[REASON], int(r["count"])) for r in rows)
    return tuple(sorted(pairs, key=lambda p: (-p[1], p[0])))
