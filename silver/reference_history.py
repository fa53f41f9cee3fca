"""Reference history: the expected SCD type 2 table of one topic, computed in plain Python.

The independent oracle for the "SCD type 2 history" section of ``docs/silver-semantics.md``,
as :mod:`silver.reference` is for the silver table. It reads the records with that module's
record readers (what an event *is* is defined once), sorts all events by their order and
replays them one by one, keeping the open version of each key. No Spark, no batches, no
incremental state: the history of the whole log at once.

Rows use the canonical values of :mod:`silver.reference`; an order (``__start_at``,
``__end_at``) is the tuple ``(_sequence, _bronze_partition, _bronze_offset)``. A validity
(``__valid_from``, ``__valid_to``) is the first ``sequence_by`` value of an event (canonical),
which the order sorts by, or without ``sequence_by`` its source commit time (epoch
microseconds) raised to the latest one of the key's events so far and of the truncates that
ended one of the key's versions (a truncate that finds no version of the key open leaves the
key's times alone). Under ``resnapshot = "full"`` the end of a full snapshot is a truncate
placed just before the snapshot's reads (:mod:`silver.reference_snapshots`, as the fold adds
it) that ends the open versions of the keys the snapshot did not read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from silver.reference import (
    METADATA_COLUMNS,
    BronzeRecord,
    FoldSpec,
    _check_spec,
    _condition,
    _Event,
    _keeps,
    _Quarantine,
    _read_debezium_record,
    _read_events_record,
    _record_key_columns,
    _upserted_row,
    _with_conditions,
    with_column_defaults,
)
from silver.reference_snapshots import BEFORE_READS, snapshot_end_truncates

__all__ = [
    "END_AT",
    "IS_CURRENT",
    "START_AT",
    "VALID_FROM",
    "VALID_TO",
    "HistoryKey",
    "fold_history",
]

START_AT = "__start_at"
END_AT = "__end_at"
IS_CURRENT = "__is_current"
VALID_FROM = "__valid_from"
VALID_TO = "__valid_to"

#: A history row's identity: the key tuple and the version's ``__start_at``.
HistoryKey = tuple[tuple[Any, ...], tuple[Any, ...]]


def fold_history(
    records: Iterable[BronzeRecord],
    spec: FoldSpec,
    track: Sequence[str] | None = None,
    track_except: Sequence[str] | None = None,
) -> dict[HistoryKey, dict[str, Any]]:
    """The expected history table of the records of one topic.

    ``track``: the tracked columns (``track_history_column_list``); None tracks every column
    but those in ``track_except``. Records that the silver fold quarantines or skips are
    ignored. Each row has every table column (missing ones ``None``), the metadata columns of
    the version's latest event, ``__start_at``, ``__end_at`` (None while current) and
    ``__is_current``, then ``__valid_from`` and ``__valid_to`` (see the module docstring).
    """
    _check_spec(spec)
    events = _valid_events(list(records), spec)
    columns = _table_columns(events, spec)
    tracked = (
        list(track) if track is not None else [c for c in columns if c not in (track_except or ())]
    )
    if spec.resnapshot == "full":
        events += snapshot_end_truncates(events)
    # (key, sequence) of every snapshot read: a full snapshot's end does not end the version of
    # a key that its snapshot read (at the end's own sequence).
    reads = {(e.key, e.sequence_order) for e in events if e.kind == "upsert" and e.op == "r"}

    rows: dict[HistoryKey, dict[str, Any]] = {}
    open_version: dict[tuple[Any, ...], dict[str, Any]] = {}
    seen: dict[tuple[Any, ...], Any] = {}  # per key, the latest validity time so far
    for event in sorted(events, key=lambda e: e.sort_key):
        order = (event.sequence, event.record.partition, event.record.offset)
        # sequence_by's first value never falls in this order; a commit time may.
        when = event.sequence[0] if spec.sequence_by else event.source_ts
        if event.kind == "truncate":
            ends_snapshot = event.record.partition == BEFORE_READS
            for key in list(open_version):
                if ends_snapshot and (key, event.sequence_order) in reads:
                    continue
                seen[key] = when if spec.sequence_by else _latest(seen[key], when)
                _close(open_version.pop(key), order, seen[key])
            continue
        assert event.key is not None
        time = when if spec.sequence_by else _latest(seen.get(event.key), when)
        seen[event.key] = time
        current = open_version.get(event.key)
        if event.kind == "delete":
            if current is not None:
                _close(current, order, time)
                del open_version[event.key]
            continue
        upserted = _upserted_row(event, current, columns, spec)
        row = {name: upserted.get(name) for name in columns}
        row.update(
            _sequence=event.sequence,
            _op=event.op,
            _source_ts=event.source_ts,
            _bronze_topic=event.record.topic,
            _bronze_partition=event.record.partition,
            _bronze_offset=event.record.offset,
        )
        if current is not None and all(row.get(c) == current.get(c) for c in tracked):
            current.update(row)  # same tracked values: the version is updated in place
            continue
        if current is not None:
            _close(current, order, time)
        version = {
            **row,
            START_AT: order,
            END_AT: None,
            IS_CURRENT: True,
            VALID_FROM: time,
            VALID_TO: None,
        }
        rows[(event.key, order)] = version
        open_version[event.key] = version
    return rows


def _valid_events(records: list[BronzeRecord], spec: FoldSpec) -> list[_Event]:
    """The events of the ``records`` that the silver fold neither quarantines nor skips, with
    column defaults filled and the ``apply_as_*`` conditions applied."""
    truncates, deletes = _condition(spec.apply_as_truncates), _condition(spec.apply_as_deletes)
    events: list[_Event] = []
    record_keys = _record_key_columns(records) if spec.keys is None else ()
    for record in records:
        if record.value is None:
            continue
        try:
            if spec.format == "events":
                event = _read_events_record(record, spec, truncates)
            else:
                event = _read_debezium_record(record, spec, truncates, record_keys)
            events.append(event)
        except _Quarantine:
            continue
    return [_with_conditions(e, truncates, deletes, spec) for e in with_column_defaults(events)]


def _close(version: dict[str, Any], order: tuple[Any, ...], time: Any) -> None:
    version[END_AT] = order
    version[IS_CURRENT] = False
    version[VALID_TO] = time


def _latest(first: Any, second: Any) -> Any:
    """The later of two validity times (None: none)."""
    if first is None or second is None:
        return second if first is None else first
    return max(first, second)


def _table_columns(events: list[_Event], spec: FoldSpec) -> list[str]:
    """The table's columns: the declared ones, else every column any event shows; as silver,
    only the keys and the columns ``column_list`` / ``except_column_list`` keep."""
    if spec.format == "events" and spec.column_types is not None:
        names = [*(spec.keys or ()), *spec.column_types, *(spec.sequence_by or ())]
    else:
        names = [name for event in events for name in event.columns]
    keys = {name for event in events for name in event.key_columns} | set(spec.keys or ())
    return [
        name
        for name in dict.fromkeys(names)
        if name not in METADATA_COLUMNS and (name in keys or _keeps(spec, name))
    ]
