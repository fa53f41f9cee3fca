"""What a pipeline run did, per silver table: collected from the reports of its micro-batches,
and judged (a table whose every record was quarantined is named in a warning); and which
tables failed."""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from cdc.files import UNREADABLE_TOPIC
from lakehouse.run.type_changes import type_change_lines
from lakehouse_core.failures import TableFailure
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import QUARANTINE_TABLE
from silver.job import BatchReport

#: The bronze table that keeps the lines no reader could parse.
UNREADABLE_TABLE = table_name_for_topic(UNREADABLE_TOPIC)


@dataclass
class TableCounts:
    """One silver table's records in a run: read from bronze, applied, tombstones, and
    quarantined per reason."""

    read: int = 0
    applied: int = 0
    tombstones: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    #: Records applied with values of the wrong type kept in ``_rescued_data``.
    rescued: int = 0

    @property
    def quarantined(self) -> int:
        return sum(self.reasons.values())

    def reasons_text(self) -> str:
        """``"12 missing key, 1 unparseable"``: most frequent first."""
        return ", ".join(f"{count} {reason}" for reason, count in self._by_count())

    def top_reason(self) -> tuple[str, int] | None:
        by_count = self._by_count()
        return by_count[0] if by_count else None

    def _by_count(self) -> list[tuple[str, int]]:
        return sorted(self.reasons.items(), key=lambda item: (-item[1], item[0]))


@dataclass
class RunSummary:
    """Per silver table what a run did, the unreadable lines it kept in bronze, and the tables
    that failed (and, in a continuous run, have not recovered yet).

    Filled by the queries' micro-batches (``silver_batch``, ``hop_batch``, ``bronze_batch``),
    which Spark calls on its own threads, and by the run (``failing``, ``recovered``).
    """

    tables: dict[str, TableCounts] = field(default_factory=dict)
    ingested: Counter[str] = field(default_factory=Counter)
    #: The failures of the tables failing now, by query name.
    failures: dict[str, TableFailure] = field(default_factory=dict)
    #: Failures no query's end reports to the event log (a hop's, a query's that did not
    #: start), until the event log takes them.
    _unlogged: deque[TableFailure] = field(default_factory=deque, repr=False)
    #: Each silver query's batch reports in order, until the event log takes them.
    _reports: dict[str, deque[BatchReport]] = field(default_factory=dict, repr=False)
    #: (bronze batch id, entity, report) of what one hop applied, until the event log takes it.
    _hop_reports: deque[tuple[int, str, BatchReport]] = field(default_factory=deque, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add_table(self, entity: str) -> None:
        """List ``entity`` even if the run reads nothing for it."""
        with self._lock:
            self.tables.setdefault(entity, TableCounts())

    def silver_batch(self, entity: str, report: BatchReport) -> None:
        """Add what one micro-batch of ``entity``'s silver query did."""
        with self._lock:
            self._count(entity, report)
            self._reports.setdefault(entity, deque()).append(report)

    def hop_batch(self, entity: str, batch_id: int, report: BatchReport) -> None:
        """Add what bronze micro-batch ``batch_id`` applied to ``entity`` in one hop."""
        with self._lock:
            self._count(entity, report)
            self._hop_reports.append((batch_id, entity, report))

    def take_hop_reports(self, batch_id: int) -> list[tuple[str, BatchReport]]:
        """(entity, report) of what the bronze micro-batches up to ``batch_id`` applied in
        one hop and the event log has not taken yet."""
        with self._lock:
            taken = [(e, r) for b, e, r in self._hop_reports if b <= batch_id]
            self._hop_reports = deque(t for t in self._hop_reports if t[0] > batch_id)
            return taken

    def _count(self, entity: str, report: BatchReport) -> None:
        counts = self.tables.setdefault(entity, TableCounts())
        counts.read += report.records
        counts.applied += report.applied
        counts.tombstones += report.tombstones
        counts.reasons.update(dict(report.reasons))
        counts.rescued += report.rescued

    def take_report(self, entity: str) -> BatchReport | None:
        """The oldest report of ``entity``'s micro-batches not taken yet (the event log takes
        one per micro-batch it records, in order), or None."""
        with self._lock:
            reports = self._reports.get(entity)
            return reports.popleft() if reports else None

    def bronze_batch(self, records_per_topic: Mapping[str, int]) -> None:
        """Add the records one bronze micro-batch appended, per topic."""
        with self._lock:
            self.ingested.update(records_per_topic)

    def failing(self, failure: TableFailure, logged: bool = True) -> None:
        """Note that a table failed (again); unless ``logged`` (by the end of its query), the
        event log takes it from here (:meth:`take_unlogged`)."""
        with self._lock:
            self.failures[failure.query] = failure
            if not logged:
                self._unlogged.append(failure)

    def recovered(self, query: str) -> None:
        """The query of a failed table has done a micro-batch again."""
        with self._lock:
            self.failures.pop(query, None)

    def failing_now(self) -> list[TableFailure]:
        """The failures of the tables failing now, by table."""
        with self._lock:
            return sorted(self.failures.values(), key=lambda f: f.table)

    def take_unlogged(self) -> list[TableFailure]:
        """The failures the event log has to record itself, which this no longer holds."""
        with self._lock:
            taken, self._unlogged = list(self._unlogged), deque()
            return taken

    @property
    def unreadable(self) -> int:
        """Lines of the run that no reader could parse (kept in :data:`UNREADABLE_TABLE`)."""
        return self.ingested[UNREADABLE_TOPIC]

    def warnings(self) -> list[str]:
        """One line per table whose every record (tombstones aside) of this run was
        quarantined: the table, the share, the top reason and what to check; one per table
        that kept values of the wrong type in ``_rescued_data``; and one per column whose
        type change quarantined records (the column and what to do)."""
        lines = []
        for entity, counts in sorted(self.tables.items()):
            if counts.rescued:
                lines.append(
                    f"silver.{entity}: {counts.rescued} records of this run had values their "
                    f"columns' types do not hold: applied with those columns null, the values "
                    f"kept in _rescued_data (find them: SELECT * FROM silver.{entity} WHERE "
                    "_rescued_data IS NOT NULL)."
                )
            lines.extend(_type_changes(entity, counts))
            changes = counts.read - counts.tombstones
            top = counts.top_reason()
            if changes <= 0 or counts.quarantined < changes or top is None:
                continue
            reason, records = top
            hint = _HINTS.get(reason, "Check its settings in the config")
            lines.append(
                f"silver.{entity}: all {changes} records of this run were quarantined (100 %), "
                f"{records} as {reason!r}. {hint} (the records are in "
                f"silver.{QUARANTINE_TABLE})."
            )
        return lines


def _type_changes(entity: str, counts: TableCounts) -> list[str]:
    """One line per column whose type change quarantined records of this run."""
    return type_change_lines(entity, counts.reasons)


#: What to check when every record of a table is quarantined for a reason (silver.parse).
_HINTS = {
    "missing key": "Check its 'keys' in the config: no record has those columns",
    "missing sequence": "Check its 'sequence_by' in the config: no record has those columns",
    "missing op": 'A stream of plain events needs a [[tables]] entry with format = "events"',
    "unparseable": "Its records are not JSON: check what the topic carries",
}
