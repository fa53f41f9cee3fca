"""The reference fold's rule for full re-snapshots (``resnapshot = "full"``), in plain Python.

A full Debezium snapshot reads every row of a table at one source position P. The read that
ends a table's snapshot (``op`` ``r`` with ``source.snapshot`` ``last_in_data_collection``, or
``last`` for the snapshot's last table) therefore also stands for a truncate placed just
before every read at P: the fold adds that truncate, ordered (P, -1, -1), and sorts it with
the other events, so keys whose last change is older than P and that the snapshot did not
read are gone, whatever order the records came in (docs/silver-semantics.md, "Re-snapshots").
Independent of :mod:`silver.snapshots` (the Spark side): only the marker values are shared
knowledge, Debezium's.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from collections.abc import Iterable

    from silver.reference import BronzeRecord

#: ``source.snapshot`` of the read that ends a table's full snapshot (Debezium's values).
ENDS = frozenset({"last", "last_in_data_collection"})
#: Partition and offset of the truncate a snapshot's end adds: below any bronze record's.
BEFORE_READS = -1


class _Event(Protocol):
    @property
    def record(self) -> BronzeRecord: ...

    @property
    def op(self) -> str: ...


E = TypeVar("E", bound=_Event)


def snapshot_end_truncates(events: Iterable[E]) -> list[E]:
    """A truncate for each valid event that ends a full snapshot: the event with ``kind``
    ``truncate``, no key, and a record whose partition and offset are :data:`BEFORE_READS`
    (its sequence unchanged), so it sorts before every read of the snapshot."""
    ends = []
    for event in events:
        marker = _marker(event.record.value)
        if event.op == "r" and isinstance(marker, str) and marker in ENDS:
            record = replace(event.record, partition=BEFORE_READS, offset=BEFORE_READS)
            ends.append(replace(cast(Any, event), kind="truncate", key=None, record=record))
    return ends


def _marker(value: bytes | None) -> Any:
    """The ``source.snapshot`` of a Debezium record's value (with or without the converter's
    ``schema``/``payload`` wrapper), or None. Only called for valid events: the value is a
    JSON object."""
    document = json.loads(value or b"null")
    if isinstance(document, dict) and set(document) == {"schema", "payload"}:
        document = document["payload"]
    source = document.get("source") if isinstance(document, dict) else None
    return source.get("snapshot") if isinstance(source, dict) else None
