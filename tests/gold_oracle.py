"""An independent plain-Python evaluation of a gold declaration over a silver snapshot.

Written from the declaration's documented meaning (docs/gold.md), not from the Spark code:
rows are dicts, times are naive UTC datetimes, and every window kind and measure is computed
by hand. The property tests compare each gold table with :func:`evaluate` over the current
silver rows, its ``_final`` flags with :func:`is_final`, and ``gold.late_events`` with
:func:`late_events` over the row images each micro-batch changed.
"""

from __future__ import annotations

import calendar
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from functools import cmp_to_key
from typing import Any

from lakehouse_core.conditions import Condition
from lakehouse_core.conditions.python import holds as reference_holds
from lakehouse_core.conditions.python import value_of
from lakehouse_core.durations import duration_micros
from lakehouse_core.gold_tables import GoldTable, Measure

Row = dict[str, Any]


def joined(rows: Iterable[Row], table: GoldTable, entity: Iterable[Row]) -> list[Row]:
    """Each source row with the joined columns of the ``entity`` row (the joined silver
    table's rows) whose key columns equal its ``on`` columns, or None in each where there is no
    such row (a null never equals anything).

    For a join as of event time, ``entity`` holds the entity's versions instead, each with
    ``valid_from`` (when it came into force), ``valid_to`` (when it stopped; None: still in
    force) and ``order`` (its place in the key's history): a row takes the version whose
    ``valid_from <= event time < valid_to``, of several the one with the greatest ``order``,
    and None in each joined column where none holds it (or its event time is None)."""
    join = table.join
    assert join is not None
    by_key: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for e in entity:
        by_key[tuple(e[column] for _, column in join.on)].append(e)
    out = []
    for row in rows:
        key = tuple(row[column] for column, _ in join.on)
        candidates = [] if None in key else by_key.get(key, [])
        if join.at_event_time:
            moment = row[table.event_time]
            candidates = [
                v
                for v in candidates
                if moment is not None
                and v["valid_from"] <= moment
                and (v["valid_to"] is None or moment < v["valid_to"])
            ]
        match = max(candidates, key=lambda v: v.get("order", 0), default=None)
        extra = {join.prefix + c: None if match is None else match[c] for c in join.columns}
        out.append({**row, **extra})
    return out


def evaluate(rows: Iterable[Row], table: GoldTable, entity: Iterable[Row] = ()) -> list[Row]:
    """The gold rows of ``table`` over the silver ``rows`` (and, with a join, the rows of the
    joined silver table, ``entity``, or its versions for a join as of event time: see
    :func:`joined`)."""
    if table.join is not None:
        rows = joined(rows, table, entity)
    rows = [computed(row, table) for row in rows]
    counted = [
        row
        for row in rows
        if row[table.event_time] is not None
        and (table.condition is None or holds(table.condition, row) is True)
    ]
    groups: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for row in counted:
        groups[tuple(row[g] for g in table.group_by)].append(row)
    window = table.window
    out: list[Row] = []
    for group, members in groups.items():
        for bounds, extra, chosen in _windows(members, table):
            result: Row = dict(zip(table.group_by, group, strict=True))
            result.update(extra)
            result[window.start_as], result[window.end_as] = bounds
            for measure in table.measures:
                result[measure.name] = measure_value(measure, chosen, table.event_time)
            out.append(result)
    return out if table.top_n is None else first_rows(out, table)


def computed(row: Row, table: GoldTable) -> Row:
    """``row`` with the declaration's computed columns, each from the columns before it."""
    row = dict(row)
    for name, expression in table.expressions:
        row[name] = value_of(expression, row)
    return row


def first_rows(rows: list[Row], table: GoldTable) -> list[Row]:
    """The gold ``rows`` that ``top_n`` keeps: per window start and partition values, the
    first n in its order (None last in either direction), ties by the group-by values
    ascending (None first)."""
    top = table.top_n
    assert top is not None

    def compare(a: Row, b: Row) -> int:
        for column, descending in top.order_by:
            x, y = a[column], b[column]
            if x != y:
                if x is None or y is None:
                    return 1 if x is None else -1
                return (-1 if x > y else 1) if descending else (-1 if x < y else 1)
        for column in table.group_by:
            x, y = a[column], b[column]
            if x != y:
                if x is None or y is None:
                    return -1 if x is None else 1
                return -1 if x < y else 1
        return 0

    partitions: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for row in rows:
        key = (row[table.window.start_as], *(row[c] for c in top.partition_by))
        partitions[key].append(row)
    return [
        row
        for members in partitions.values()
        for row in sorted(members, key=cmp_to_key(compare))[: top.n]
    ]


def stream_joined(rows: Iterable[Row], table: GoldTable, other: Iterable[Row]) -> list[Row]:
    """The gold rows of a stream-join declaration: one per distinct group-by values and event
    time t of the counted source ``rows``, with window ``[t - within, t]`` and the measures
    over the ``other`` table's rows whose ``on`` columns equal the row's (None equals
    nothing) and whose event time lies in the window (count 0 where there is none)."""
    joined = table.stream_join
    assert joined is not None
    within = timedelta(microseconds=duration_micros(joined.within))
    window = table.window
    points = {
        (tuple(row[g] for g in table.group_by), row[table.event_time])
        for row in rows
        if row[table.event_time] is not None
        and (table.condition is None or holds(table.condition, row) is True)
    }
    candidates = [o for o in other if o[joined.event_time] is not None]
    out: list[Row] = []
    for group, moment in points:
        values = dict(zip(table.group_by, group, strict=True))
        matched = [
            o
            for o in candidates
            if all(values[s] is not None and values[s] == o[c] for s, c in joined.on)
            and moment - within <= o[joined.event_time] <= moment
        ]
        result: Row = {**values, window.start_as: moment - within, window.end_as: moment}
        for measure in table.measures:
            result[measure.name] = measure_value(measure, matched, joined.event_time)
        out.append(result)
    return out


def stream_late_events(
    images: Iterable[tuple[str, Row]],
    before: Iterable[Row],
    table: GoldTable,
    mark: datetime | None,
) -> list[Row]:
    """The late-event rows of one micro-batch's other-side row images (change type, row of
    the stream-joined table): one per image and gold row it lands in, of the gold rows
    ``before`` the batch, whose window ended at or before the watermark ``mark`` in force
    before it."""
    joined = table.stream_join
    assert joined is not None
    window = table.window
    out: list[Row] = []
    if mark is None:
        return out
    final = [g for g in before if g[window.end_as] <= mark]
    for change_type, row in images:
        moment = row[joined.event_time]
        if moment is None:
            continue
        for gold in final:
            same = all(gold[s] is not None and gold[s] == row[c] for s, c in joined.on)
            if not same or not gold[window.start_as] <= moment <= gold[window.end_as]:
                continue
            bounds = (gold[window.start_as], gold[window.end_as])
            out.append(_late_row(table, bounds, gold, change_type, row, moment, mark))
    return out


def _windows(
    rows: list[Row], table: GoldTable
) -> Iterable[tuple[tuple[datetime, datetime], Row, list[Row]]]:
    window, time = table.window, table.event_time
    if window.kind in ("tumbling", "hopping"):
        assert window.size is not None
        size = duration_micros(window.size)
        slide = duration_micros(window.slide or window.size)
        buckets: dict[int, list[Row]] = defaultdict(list)
        for row in rows:
            t = _micros(row[time])
            start = t - t % slide
            while start > t - size:
                buckets[start].append(row)
                start -= slide
        for start, members in buckets.items():
            yield (_time(start), _time(start + size)), {}, members
    elif window.kind == "session":
        assert window.gap is not None
        gap = duration_micros(window.gap)
        ordered = sorted(rows, key=lambda r: _micros(r[time]))
        session: list[Row] = []
        for row in ordered:
            # A new session when the row is gap or more after the previous one (Spark's
            # session_window would still merge a row exactly gap later); equal times stay.
            if session and _micros(row[time]) >= _micros(session[-1][time]) + gap:
                yield _session_bounds(session, time, gap), {}, session
                session = []
            session.append(row)
        if session:
            yield _session_bounds(session, time, gap), {}, session
    elif window.kind == "sliding":
        assert window.lookback is not None
        lookback = duration_micros(window.lookback)
        for anchor in sorted({_micros(r[time]) for r in rows}):
            members = [r for r in rows if anchor - lookback < _micros(r[time]) <= anchor]
            yield (_time(anchor - lookback), _time(anchor)), {}, members
    else:
        assert window.count is not None
        ordered = sorted(
            rows,
            key=lambda r: (_micros(r[time]), r["_bronze_partition"], r["_bronze_offset"]),
        )
        for index in range(len(ordered) // window.count):
            members = ordered[index * window.count : (index + 1) * window.count]
            bounds = (members[0][time], members[-1][time])
            yield bounds, {"window_index": index}, members


def row_images(before: dict[Any, Row], now: dict[Any, Row]) -> list[tuple[str, Row]]:
    """The change-feed row images (change type, row) that take a table's rows, by key, from
    ``before`` to ``now``: an insert, a delete, or an update's old and new value."""
    found: list[tuple[str, Row]] = []
    for key in sorted(set(before) | set(now)):
        old, new = before.get(key), now.get(key)
        if old != new:
            if old is not None:
                found.append(("delete" if new is None else "update_preimage", old))
            if new is not None:
                found.append(("insert" if old is None else "update_postimage", new))
    return found


def watermark(seen: datetime | None, table: GoldTable) -> datetime | None:
    """The watermark after the latest event time ``seen``: that time minus the delay."""
    if seen is None:
        return None
    return seen - timedelta(microseconds=duration_micros(table.watermark_delay))


def is_final(row: Row, table: GoldTable, mark: datetime | None) -> bool:
    """A gold row is final when its window ends at or before the watermark."""
    return mark is not None and row[table.window.end_as] <= mark


def earliest_window(moment: datetime, table: GoldTable) -> tuple[datetime, datetime]:
    """The earliest-ending window an event at ``moment`` can fall in (docs/gold.md)."""
    window, t = table.window, _micros(moment)
    if window.kind in ("tumbling", "hopping"):
        assert window.size is not None
        size = duration_micros(window.size)
        slide = duration_micros(window.slide or window.size)
        starts = [s for s in range(t - t % slide, t - size, -slide)]  # every window holding t
        return _time(min(starts)), _time(min(starts) + size)
    if window.kind == "session":
        assert window.gap is not None
        return moment, _time(t + duration_micros(window.gap))
    if window.kind == "sliding":
        assert window.lookback is not None
        return _time(t - duration_micros(window.lookback)), moment
    if window.kind == "row":
        assert table.stream_join is not None
        return _time(t - duration_micros(table.stream_join.within)), moment
    return moment, moment


def late_events(
    images: Iterable[tuple[str, Row]], table: GoldTable, mark: datetime | None
) -> list[Row]:
    """The late-event rows of one micro-batch: each counted row image (change type, row)
    whose earliest window ended at or before the watermark ``mark`` in force before it."""
    out: list[Row] = []
    if mark is None:
        return out
    for change_type, image in images:
        row = computed(image, table)
        moment = row[table.event_time]
        if moment is None or (
            table.condition is not None and holds(table.condition, row) is not True
        ):
            continue
        start, end = earliest_window(moment, table)
        if end > mark:
            continue
        out.append(_late_row(table, (start, end), row, change_type, row, moment, mark))
    return out


def _late_row(
    table: GoldTable,
    bounds: tuple[datetime, datetime],
    group: Row,
    change_type: str,
    image: Row,
    moment: datetime,
    mark: datetime,
) -> Row:
    """One late-event row: the gold row's window ``bounds`` and ``group`` values, the row
    ``image``'s change type, event time ``moment`` and bronze offset, and the watermark."""
    return {
        "gold_table": table.name,
        "window_start": bounds[0],
        "window_end": bounds[1],
        "group_values": {g: None if group[g] is None else str(group[g]) for g in table.group_by},
        "change_type": change_type,
        "event_time": moment,
        "bronze_offset": image["_bronze_offset"],
        "late_by_seconds": (_micros(mark) - _micros(moment)) / 1_000_000,
    }


def _session_bounds(session: list[Row], time: str, gap: int) -> tuple[datetime, datetime]:
    """A session's window, half-open: ``[first event, last event + gap)``."""
    return session[0][time], _time(_micros(session[-1][time]) + gap)


def measure_value(measure: Measure, rows: Sequence[Row], time: str) -> Any:
    """One measure over the rows of a window (``time``: their event-time column, which
    orders them for ``last``), of those its filter holds on; an ``expr`` measure is its
    expression over the values of its aggregates."""
    if measure.expression is not None:
        values = {part.name: measure_value(part, rows, time) for part in measure.parts}
        return value_of(measure.expression, values)
    if measure.condition is not None:
        rows = [r for r in rows if holds(measure.condition, r) is True]
    if measure.column is None:
        return len(rows)
    fn = measure.fn
    column = measure.column
    if fn in ("last", "max_by", "min_by"):
        # The value of the row with the greatest (least) time or by; of several the greatest
        # (least) value, a None lowest.
        by = time if fn == "last" else measure.by
        assert by is not None
        pick = min if fn == "min_by" else max
        ranked = [r for r in rows if r[by] is not None]
        if not ranked:
            return None
        best = pick(r[by] for r in ranked)
        tied = [r[column] for r in ranked if r[by] == best]
        present = [v for v in tied if v is not None]
        if fn == "min_by" and None in tied:
            return None
        return pick(present, default=None)
    values = [r[column] for r in rows if r[column] is not None]
    if fn == "count":
        return len(values)
    if fn == "count_distinct":
        return len(set(values))
    if not values:
        return None
    if fn == "sum":
        return sum(values)
    if fn == "avg":
        return sum(Decimal(v) for v in values) / len(values)
    if fn == "min":
        return min(values)
    if fn == "max":
        return max(values)
    if fn == "approx_percentile":
        # Exact for small inputs: the smallest value with at least that share of the values
        # at or below it.
        ordered = sorted(values)
        assert measure.percentile is not None
        rank = max(1, math.ceil(measure.percentile * len(ordered)))
        return ordered[rank - 1]
    assert fn == "span_seconds"
    return (_micros(max(values)) - _micros(min(values))) / 1_000_000


def holds(condition: Condition, row: Row) -> bool | None:
    """SQL three-valued truth of ``condition`` on ``row`` (None: unknown), by the reference
    models' plain-Python evaluator, the columns typed from their values (a Decimal as a decimal
    of its digits, a datetime as a timestamp)."""
    return reference_holds(condition, row)


def _micros(moment: datetime) -> int:
    return calendar.timegm(moment.timetuple()) * 1_000_000 + moment.microsecond


def _time(micros: int) -> datetime:
    return datetime(1970, 1, 1) + timedelta(microseconds=micros)
