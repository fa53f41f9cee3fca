"""Finality at scale: the rows a new watermark makes final are found without reading the gold
files whose rows are all final already, or whose windows all end after the watermark. And on
its edges: a window ending exactly at the watermark is final, 1 µs later it is not, and a
change is late exactly when the earliest window its time can fall in ends at or before the
watermark, for every window kind, with times drawn on the windows' boundaries."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from gold.finality import FINAL, FINALIZED_AT, late_events, newly_final, with_finality
from lakehouse_core.gold_tables import GoldTable, Measure, StreamJoin, Window
from tests import gold_oracle
from tests.draws import MINUTE, boundary_time, draw_examples, property_seed

pytestmark = pytest.mark.integration

TABLE = GoldTable(
    name="orders_per_minute",
    source="orders",
    event_time="created_at",
    window=Window("tumbling", size="1 minute"),
    measures=(Measure("orders", "count"),),
    group_by=("customer_id",),
)
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def micros(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1) + 1_767_225_600_000_000


def test_newly_final_rows_are_found_in_the_files_that_can_hold_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Three files: windows already final, windows due under the watermark, windows after it.
    The scan names only the second, and its rows come back final as of the batch."""
    path = str(tmp_path / "gold")
    schema = (
        "customer_id long, window_start timestamp, window_end timestamp, orders long, "
        f"{FINAL} boolean, {FINALIZED_AT} timestamp"
    )

    def rows(minutes: range, final: bool | None) -> list[tuple[object, ...]]:
        return [
            (
                n,
                EPOCH + timedelta(minutes=n),
                EPOCH + timedelta(minutes=n + 1),
                1,
                final,
                EPOCH if final else None,
            )
            for n in minutes
        ]

    for part in (rows(range(0, 3), True), rows(range(3, 6), False), rows(range(100, 103), None)):
        frame = spark.createDataFrame(part, schema).coalesce(1)
        frame.write.format("delta").mode("append").save(path)
    gold = spark.read.format("delta").load(path)
    watermark = micros(EPOCH + timedelta(minutes=10))
    now = EPOCH + timedelta(hours=1)

    due = newly_final(gold, TABLE, watermark, micros(now))

    assert len(gold.inputFiles()) == 3
    assert len(due.inputFiles()) == 1
    got = due.select("customer_id", FINAL, F.unix_micros(FINALIZED_AT).alias("at")).collect()
    assert sorted(tuple(r) for r in got) == [(n, True, micros(now)) for n in range(3, 6)]


#: One table of each window kind over ``ts`` per ``user_id``; their boundaries are all whole
#: minutes from midnight, so a watermark at MARK is one of them.
KINDS = (
    Window("tumbling", size="10 minutes"),
    Window("hopping", size="20 minutes", slide="10 minutes"),
    Window("session", gap="15 minutes"),
    Window("sliding", lookback="30 minutes"),
    Window("count", count=3),
    Window("row"),
)
MARK = 60 * MINUTE  # the watermark, µs after BASE
BASE = datetime(2026, 1, 1)
BASE_MICROS = micros(EPOCH)  # BASE is EPOCH without its time zone
STEPS = tuple(n * MINUTE for n in (5, 10, 15, 20, 30))
CHANGE_TYPES = ("insert", "update_preimage", "update_postimage", "delete")


def kind_table(window: Window) -> GoldTable:
    joined = StreamJoin("clicks", (("user_id", "user_id"),), "ts", "30 minutes")
    return GoldTable(
        f"t_{window.kind}",
        "events",
        "ts",
        window,
        (Measure("n", "count"),),
        group_by=("user_id",),
        stream_join=joined if window.kind == "row" else None,
    )


def late_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (
        row["window_start"],
        row["window_end"],
        tuple(sorted((row["group_values"] or {}).items())),
        row["change_type"],
        row["event_time"],
        row["bronze_offset"],
        round(row["late_by_seconds"], 6),
    )


def test_a_change_is_late_exactly_when_its_earliest_window_ends_by_the_watermark(
    spark: SparkSession,
) -> None:
    """Change-feed row images at times drawn on the windows' boundaries (many exactly at or
    1 µs / 1 ms around the watermark's): ``gold.late_events`` rows equal the oracle's, for
    every window kind; an earliest window that ends exactly at the watermark is late."""

    @st.composite
    def moment(draw: st.DrawFn) -> int:
        return boundary_time(draw, STEPS, 2 * MARK)

    drawn = draw_examples(moment(), property_seed("GOLD_FINALITY_SEED"), 200)
    rows = [
        {
            "_change_type": CHANGE_TYPES[n % 4],
            "user_id": n % 3,
            "ts": BASE + timedelta(microseconds=micros),
            "_bronze_partition": 0,
            "_bronze_offset": n,
            "_commit_version": 1,
            "_commit_timestamp": BASE,
        }
        for n, micros in enumerate(drawn)
    ]
    schema = (
        "_change_type string, user_id bigint, ts timestamp, _bronze_partition int, "
        "_bronze_offset bigint, _commit_version bigint, _commit_timestamp timestamp"
    )
    changes = spark.createDataFrame(rows, schema)
    mark = BASE + timedelta(microseconds=MARK)
    on_mark = 0
    for window in KINDS:
        table = kind_table(window)
        found = late_events(changes, table, MARK + BASE_MICROS).collect()
        got = Counter(late_key(r.asDict()) for r in found)
        expected = gold_oracle.late_events([(r["_change_type"], r) for r in rows], table, mark)
        want = Counter(late_key(r) for r in expected)
        assert got == want, (window.kind, got - want, want - got)
        on_mark += sum(r["window_end"] == mark for r in expected)
        assert 0 < len(expected) < len(rows), window.kind
    assert on_mark >= 10


def test_a_window_ending_exactly_at_the_watermark_is_final(spark: SparkSession) -> None:
    """Gold rows whose window ends 1 µs before, exactly at and 1 µs after the watermark:
    the first two are final (:func:`with_finality` and :func:`newly_final` agree), the third
    is not."""
    mark = EPOCH + timedelta(minutes=10)
    ends = (mark - timedelta(microseconds=1), mark, mark + timedelta(microseconds=1))
    schema = "customer_id long, window_start timestamp, window_end timestamp, orders long"
    recomputed = spark.createDataFrame(
        [(n, end - timedelta(minutes=1), end, 1) for n, end in enumerate(ends)], schema
    )
    empty = recomputed.limit(0).withColumn(FINAL, F.lit(None).cast("boolean"))
    empty = empty.withColumn(FINALIZED_AT, F.lit(None).cast("timestamp"))
    at = micros(EPOCH + timedelta(hours=1))
    finality = with_finality(recomputed, empty, TABLE, micros(mark), at)
    assert sorted((r["customer_id"], r[FINAL]) for r in finality.collect()) == [
        (0, True),
        (1, True),
        (2, False),
    ]
    pending = recomputed.withColumn(FINAL, F.lit(False))
    pending = pending.withColumn(FINALIZED_AT, F.lit(None).cast("timestamp"))
    due = newly_final(pending, TABLE, micros(mark), at)
    assert sorted(r["customer_id"] for r in due.collect()) == [0, 1]
