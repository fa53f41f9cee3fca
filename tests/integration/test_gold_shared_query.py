"""Declarations over one silver table share one streaming query (:func:`gold.jobs.start_shared`):
each equals its declaration evaluated by the plain-Python oracle (tests/gold_oracle.py) after
every run, whatever the updates, deletes, event-time disorder and split into commits; one that
fails leaves its siblings going and catches up exactly when it recovers; a crash between two
declarations' writes of one batch changes nothing once the batch runs again; and a warehouse of
one query per declaration goes on under the shared query with no change lost or applied twice.

The silver table is written here with plain Delta commits (MERGE and DELETE), several per
micro-batch, from a seeded random history; its rows are also kept in a dict, the oracle's input.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import gold.batch
import gold.jobs
from gold.jobs import GoldIsolation, query_name, shared_query_name, start_shared
from gold.progress import applied_location, read_applied
from lakehouse_core import storage
from lakehouse_core.delta_io import ensure_table
from lakehouse_core.gold_tables import GoldTable, Measure, Window
from lakehouse_core.layout import LATE_EVENTS, Warehouse
from lakehouse_core.streaming import Trigger, run_to_end
from tests import gold_oracle
from tests.faults import GUARDED_REPLACEMENT, CommitFaults, InjectedCrash

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]  # many runs each

SCHEMA = (
    "event_id bigint, user_id bigint, amount bigint, page string, ts timestamp, "
    "_bronze_partition int, _bronze_offset bigint"
)
BASE = datetime(2026, 1, 1)
SOME = (Measure("n", "count"), Measure("total", "sum", "amount"), Measure("high", "max", "amount"))
DECLARED = (
    GoldTable(
        "s_tumbling",
        "sales",
        "ts",
        Window("tumbling", size="10 minutes"),
        SOME,
        group_by=("user_id",),
        watermark_delay="5 minutes",
    ),
    GoldTable(
        "s_hopping",
        "sales",
        "ts",
        Window("hopping", size="20 minutes", slide="10 minutes"),
        (Measure("n", "count"), Measure("mean", "avg", "amount")),
        watermark_delay="5 minutes",
    ),
    GoldTable(
        "s_sliding",
        "sales",
        "ts",
        Window("sliding", lookback="30 minutes"),
        SOME,
        group_by=("user_id",),
        watermark_delay="10 minutes",
    ),
    GoldTable(
        "s_pages",
        "sales",
        "ts",
        Window("tumbling", size="30 minutes"),
        (Measure("n", "count"), Measure("low", "min", "amount")),
        group_by=("page",),
        filter="page <> 'skip' OR page IS NULL",
        watermark_delay="1 minute",
    ),
    GoldTable(
        "s_count",
        "sales",
        "ts",
        Window("count", count=3),
        SOME,
        group_by=("user_id",),
        watermark_delay="5 minutes",
    ),
)
Row = dict[str, Any]
#: The declarations of the crash and upgrade tests (each runs the pipeline many times).
FEW = (DECLARED[0], DECLARED[2], DECLARED[4])


class Silver:
    """The silver table ``sales`` of a warehouse, written with Delta commits, and its rows."""

    def __init__(self, spark: SparkSession, warehouse: Warehouse, seed: int) -> None:
        self.spark = spark
        self.path = warehouse.table("silver", "sales")
        self.rows: dict[int, Row] = {}
        self.random = random.Random(seed)
        self.latest = 0  # minutes after BASE of the newest event so far
        self.offset = 0  # bronze offset of the next change (the count window's tie-break)
        schema = spark.createDataFrame([], SCHEMA).schema
        ensure_table(spark, self.path, schema, change_feed=True)

    def batch(self, changes: int = 24, commits: int = 3) -> None:
        """Random upserts (new keys, updates of old ones; event times mostly ahead, some far
        behind) and deletes, in ``commits`` Delta commits."""
        for _ in range(commits):
            upserts: dict[int, Row] = {}
            deletes: set[int] = set()
            for _ in range(changes // commits):
                draw = self.random.random()
                known = sorted(set(self.rows) | set(upserts))
                if draw < 0.15 and known:
                    key = self.random.choice(known)
                    deletes.add(key)
                    upserts.pop(key, None)
                    continue
                key = (
                    self.random.choice(known)
                    if draw < 0.45 and known
                    else self.random.randrange(1000)
                )
                self.latest += self.random.choice((0, 1, 2, 3))
                behind = self.random.choice((0, 0, 0, 5, 25, 60))  # disorder: some far back
                minute = max(0, self.latest - behind)
                upserts[key] = {
                    "event_id": key,
                    "user_id": self.random.choice((1, 2, 3, None)),
                    "amount": self.random.choice((None, *range(0, 40, 3))),
                    "page": self.random.choice(("home", "cart", "skip", None)),
                    "ts": BASE + timedelta(minutes=minute, seconds=self.random.randrange(60)),
                    "_bronze_partition": 0,
                    "_bronze_offset": self.offset,
                }
                self.offset += 1
                deletes.discard(key)
            if upserts:
                frame = self.spark.createDataFrame(list(upserts.values()), SCHEMA)
                (
                    DeltaTable.forPath(self.spark, self.path)
                    .alias("t")
                    .merge(frame.alias("s"), "t.event_id = s.event_id")
                    .whenMatchedUpdateAll()
                    .whenNotMatchedInsertAll()
                    .execute()
                )
                self.rows.update(upserts)
            if deletes:
                DeltaTable.forPath(self.spark, self.path).delete(F.col("event_id").isin(*deletes))
                for key in deletes:
                    self.rows.pop(key, None)


def run(
    spark: SparkSession,
    warehouse: Warehouse,
    tables: tuple[GoldTable, ...] = DECLARED,
    isolation: GoldIsolation | None = None,
) -> None:
    """One ``availableNow`` run of the shared query of ``tables``."""
    run_to_end(lambda: start_shared(spark, warehouse, Trigger(), tables, isolation=isolation))


def normalized(value: Any) -> Any:
    return round(float(value), 6) if isinstance(value, float | Decimal) else value


def gold_counter(spark: SparkSession, warehouse: Warehouse, table: GoldTable) -> Counter[Any]:
    rows = spark.read.format("delta").load(warehouse.table("gold", table.name)).collect()
    return Counter(tuple(normalized(r[c]) for c in table.columns) for r in rows)


def assert_equals_oracle(
    spark: SparkSession, warehouse: Warehouse, silver: Silver, tables: tuple[GoldTable, ...]
) -> None:
    for table in tables:
        got = gold_counter(spark, warehouse, table)
        want = Counter(
            tuple(normalized(r[c]) for c in table.columns)
            for r in gold_oracle.evaluate(silver.rows.values(), table)
        )
        missing, extra = want - got, got - want
        assert not missing and not extra, (
            f"gold.{table.name} differs from the oracle: missing {list(missing)[:3]}, "
            f"unexpected {list(extra)[:3]}"
        )


def late_rows(spark: SparkSession, warehouse: Warehouse) -> Counter[Any]:
    path = warehouse.table("gold", LATE_EVENTS)
    if not storage.exists(spark, path):
        return Counter()
    rows = spark.read.format("delta").load(path).drop("recorded_at").collect()
    return Counter(tuple(sorted((k, str(v)) for k, v in r.asDict().items())) for r in rows)


def late_keys(spark: SparkSession, warehouse: Warehouse) -> Counter[Any]:
    """The late events without the times the run took them (silver version and commit time
    stay: the same change recorded twice is the same key twice)."""
    keep = ("gold_table", "window_start", "window_end", "change_type", "event_time")
    path = warehouse.table("gold", LATE_EVENTS)
    if not storage.exists(spark, path):
        return Counter()
    frame = spark.read.format("delta").load(path)
    frame = frame.select(*keep, "silver_version", F.to_json("group_values").alias("groups"))
    return Counter(tuple(r) for r in frame.collect())


def test_declarations_sharing_one_query_each_equal_the_oracle(
    spark: SparkSession, tmp_path: Path
) -> None:
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    silver = Silver(spark, warehouse, seed=11)
    for _ in range(4):
        silver.batch()
        run(spark, warehouse)
        assert_equals_oracle(spark, warehouse, silver, DECLARED)
    checkpoints = {p.name for p in (Path(warehouse.root) / "_system" / "checkpoints").iterdir()}
    assert shared_query_name("sales") in checkpoints
    assert not {query_name(t) for t in DECLARED} & checkpoints  # one query, not five
    version = DeltaTable.forPath(spark, silver.path).history(1).first()["version"]  # type: ignore[index]
    for table in DECLARED:
        place = read_applied(spark, applied_location(warehouse, table.name))
        assert place is not None and place.through == version and place.pending is None
    late = late_rows(spark, warehouse)
    assert late and max(late.values()) == 1  # late changes were recorded, each once


class FailFor:
    """Makes the gold MERGE of the named declarations raise (after their late events were
    appended: a failure with some of the batch's writes landed)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: set[str] = set()
        original = gold.batch.replace_windows

        def replace(spark: SparkSession, path: str, changes: Any, table: GoldTable) -> None:
            if table.name in self.names:
                raise RuntimeError(f"injected failure of {table.name}")
            original(spark, path, changes, table)

        monkeypatch.setattr(gold.batch, "replace_windows", replace)


def test_a_failing_declaration_leaves_the_others_going_and_catches_up_exactly(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    silver = Silver(spark, warehouse, seed=23)
    failing = FailFor(monkeypatch)
    broken, others = DECLARED[0], DECLARED[1:]
    silver.batch()
    run(spark, warehouse)
    before = gold_counter(spark, warehouse, broken)
    failing.names.add(broken.name)
    for _ in range(3):  # it fails in each run; the others keep advancing
        silver.batch()
        isolation = GoldIsolation()
        run(spark, warehouse, isolation=isolation)
        assert set(isolation.failing()) == {broken.name}
        new, _ = isolation.take()
        assert [(name, attempts) for name, _, attempts, _ in new] == [(broken.name, 1)]
        assert "injected failure" in new[0][1].trace
        assert_equals_oracle(spark, warehouse, silver, others)
        assert gold_counter(spark, warehouse, broken) == before
        place = read_applied(spark, applied_location(warehouse, broken.name))
        assert place is not None and place.pending is not None
    failing.names.clear()
    isolation = GoldIsolation()
    silver.batch()
    run(spark, warehouse, isolation=isolation)
    assert not isolation.failing()
    assert_equals_oracle(spark, warehouse, silver, DECLARED)
    # Its late events of the failed attempt landed once, not again when it caught up.
    assert max(late_rows(spark, warehouse).values()) == 1
    assert max(late_keys(spark, warehouse).values()) == 1
    # Without an isolation, its failure fails the batch, after the others applied it.
    failing.names.add(broken.name)
    silver.batch()
    with pytest.raises(Exception, match="injected failure"):
        run(spark, warehouse)
    assert_equals_oracle(spark, warehouse, silver, others)
    failing.names.clear()
    run(spark, warehouse)
    assert_equals_oracle(spark, warehouse, silver, DECLARED)
    assert max(late_keys(spark, warehouse).values()) == 1


def crash_sites(monkeypatch: pytest.MonkeyPatch) -> CommitFaults:
    """Commit faults on the gold engine's writes; a crashed declaration does nothing more
    (its failure handling does not run: the process is gone)."""
    monkeypatch.setattr(gold.jobs, "SIDE_BY_SIDE", False)  # one order of the writes
    monkeypatch.setattr(gold.jobs._Member, "failed", lambda *_: None)
    part = gold.jobs._SharedBatch._part

    def dies(self: gold.jobs._SharedBatch, *args: Any) -> Exception | None:
        error = part(self, *args)
        if isinstance(error, InjectedCrash):
            raise error  # the declarations after it do not run either
        return error

    monkeypatch.setattr(gold.jobs._SharedBatch, "_part", dies)
    sites = [
        (gold.batch, GUARDED_REPLACEMENT),
        (gold.batch, "append_few"),
        (gold.jobs, "write_applied"),
    ]
    return CommitFaults(monkeypatch, sites)


def scenario(
    spark: SparkSession,
    root: Path,
    faults: CommitFaults,
    crash_after: int | None,
    between: Callable[[Warehouse], None] = lambda _: None,
    alone: tuple[GoldTable, ...] = (),
    tables: tuple[GoldTable, ...] = (),
) -> tuple[Warehouse, Silver, list[str]]:
    """Three batches; the second run crashes after ``crash_after`` commits (None: never) and
    the pipeline runs again (after ``between``). The first two runs keep ``alone`` (if any)
    each in a query of its own (the warehouse of one query per declaration), in order.
    Returns the warehouse, its silver table, and the commits of the second run. The shared
    runs keep ``tables`` (default :data:`FEW`)."""
    tables = tables or FEW
    warehouse = Warehouse(str(root))
    silver = Silver(spark, warehouse, seed=5)

    def first_runs() -> None:
        if not alone:
            run(spark, warehouse, tables)
        for table in alone:
            run(spark, warehouse, (table,))

    silver.batch(changes=30)
    first_runs()
    silver.batch(changes=30)
    faults.arm(crash_after)
    if crash_after is None:
        first_runs()
    else:
        with pytest.raises(Exception, match="after commit"):
            first_runs()
        assert faults.crashed
    second = list(faults.calls)
    faults.crash_after = None
    between(warehouse)
    run(spark, warehouse, tables)
    silver.batch(changes=30)
    run(spark, warehouse, tables)
    return warehouse, silver, second


@pytest.fixture(scope="module")
def uncrashed(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Warehouse, Silver, list[str]]:
    """The :func:`scenario` that never crashes, the reference of the crash and upgrade tests
    (run once for both: the same seed, the same declarations)."""
    with pytest.MonkeyPatch.context() as patch:
        return scenario(spark, tmp_path_factory.mktemp("reference"), crash_sites(patch), None)


def test_a_crash_between_two_declarations_writes_then_a_restart_is_exact(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    uncrashed: tuple[Warehouse, Silver, list[str]],
) -> None:
    faults = crash_sites(monkeypatch)
    reference, silver, calls = uncrashed
    assert_equals_oracle(spark, reference, silver, FEW)
    want = late_keys(spark, reference)
    assert want and max(want.values()) == 1
    merges = [i for i, site in enumerate(calls, 1) if site == "replace_windows"]
    places = [i for i, site in enumerate(calls, 1) if site == "write_applied"]
    appends = [i for i, site in enumerate(calls, 1) if site == "append_few"]
    assert len(merges) == len(places) == len(FEW) and appends
    # After the first declaration's MERGE (before its place: between two declarations'
    # writes), and after the last declaration's late events (before its MERGE).
    for crash_after in sorted({merges[0], appends[-1]}):
        warehouse, _, _ = scenario(spark, tmp_path / f"crash{crash_after}", faults, crash_after)
        for table in FEW:
            assert gold_counter(spark, warehouse, table) == gold_counter(spark, reference, table), (
                crash_after,
                table.name,
            )
        assert late_keys(spark, warehouse) == want, crash_after


def test_a_warehouse_of_one_query_per_declaration_goes_on_under_the_shared_query(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    uncrashed: tuple[Warehouse, Silver, list[str]],
) -> None:
    """Per-declaration checkpoints (``gold_<name>``: the query of a group of one, as before
    queries were shared, without the places) of two declarations are taken up by the shared
    query of three: the first crashed after its late events and before its MERGE (the other
    did not run that batch), so its unfinished batch is done under its own ids; the new
    declaration starts from silver's first version."""
    faults = crash_sites(monkeypatch)
    reference = uncrashed[0]
    old = FEW[:2]

    def forget_places(warehouse: Warehouse) -> None:
        for table in DECLARED:
            storage.delete(spark, applied_location(warehouse, table.name))

    _, _, calls = scenario(spark, tmp_path / "count", faults, None, forget_places, old)
    merge = calls.index("replace_windows") + 1
    before = merge >= 2 and calls[merge - 2] == "append_few"
    crash = merge - 1 if before else merge  # after its late events, before its MERGE if any
    warehouse, upgraded, _ = scenario(
        spark, tmp_path / "upgraded", faults, crash, forget_places, old
    )
    assert_equals_oracle(spark, warehouse, upgraded, FEW)
    for table in FEW:
        assert gold_counter(spark, warehouse, table) == gold_counter(spark, reference, table)
    got = late_keys(spark, warehouse)
    assert max(got.values()) == 1, [k for k, n in got.items() if n > 1]
    names = {t.name for t in old}
    assert Counter({k: n for k, n in got.items() if k[0] in names}) == Counter(
        {k: n for k, n in late_keys(spark, reference).items() if k[0] in names}
    )
    checkpoints = {p.name for p in (Path(warehouse.root) / "_system" / "checkpoints").iterdir()}
    assert {query_name(t) for t in old} | {shared_query_name("sales")} <= checkpoints
