"""Idempotent appends (:func:`lakehouse_core.delta_io.append`): each micro-batch of a query lands
once, whether it is new, run again after a crash, or was written before batch marks existed."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime
from functools import partial, reduce
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from gold.enrichment import check_unique
from gold.pattern_jobs import raise_alerts
from lakehouse_core.delta_io import (
    BATCH_MARK,
    EnsuredTables,
    HeldRows,
    Replacement,
    append,
    append_few,
    append_held,
    ensure_table,
    merge_held,
    read_held,
    read_table,
    replace_once,
)
from lakehouse_core.errors import ConfigError
from lakehouse_core.gold_tables import GoldTable, Join, Measure, Window
from lakehouse_core.identifiers import quote_identifier
from lakehouse_core.streaming import query_app_id

pytestmark = pytest.mark.integration


def plan(checkpoint: Path, *batches: int) -> None:
    """Write the offsets files of ``batches`` as a streaming query's checkpoint holds them."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    for batch in batches:
        (checkpoint / "offsets" / str(batch)).write_text("v1\n", encoding="utf-8")


def marks(spark: SparkSession, path: str) -> list[str]:
    """The ``userMetadata`` of the table's commits, oldest first."""
    history = DeltaTable.forPath(spark, path).history().orderBy("version")
    return [row.userMetadata for row in history.select("userMetadata").collect()]


def test_each_batch_lands_once_across_restarts(spark: SparkSession, tmp_path: Path) -> None:
    """New batches are appended and marked; after a restart, a batch the checkpoint had planned
    is looked up and skipped if it landed, appended if it did not."""
    checkpoint, table = tmp_path / "checkpoint", str(tmp_path / "table")
    plan(checkpoint, 0)
    app_id = query_app_id(spark, str(checkpoint))

    def batch(n: int) -> None:
        append(spark.range(n * 10, n * 10 + 2), table, app_id, n)

    batch(0)  # planned before the start: may have run, looked up, not found
    batch(1)
    batch(2)
    other = query_app_id(spark, str(tmp_path / "other"))  # another query's commit comes last
    append(spark.range(100, 101), table, other, 0)
    plan(checkpoint, 1, 2, 3)
    assert query_app_id(spark, str(checkpoint)) == app_id  # the restart: batches up to 3 ran?
    batch(2)  # landed before the "crash": skipped
    batch(3)  # planned, never landed: appended
    batch(3)  # a retry within the run: skipped
    batch(4)
    ids = sorted(row.id for row in spark.read.format("delta").load(table).collect())
    assert ids == [0, 1, 10, 11, 20, 21, 30, 31, 40, 41, 100]
    expected = [BATCH_MARK.format(app_id, n) for n in range(3)]
    expected += [BATCH_MARK.format(other, 0), *(BATCH_MARK.format(app_id, n) for n in (3, 4))]
    assert marks(spark, table) == expected


def test_batches_written_with_transaction_ids_alone_are_skipped(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A batch appended with Delta's transaction id and no mark (as earlier versions wrote)
    is not appended again."""
    checkpoint, table = tmp_path / "checkpoint", str(tmp_path / "table")
    app_id = query_app_id(spark, str(checkpoint))
    writer = spark.range(2).write.format("delta").mode("append")
    writer.option("txnAppId", app_id).option("txnVersion", 5).save(table)
    plan(checkpoint, 5)
    query_app_id(spark, str(checkpoint))
    append(spark.range(2), table, app_id, 5)
    assert spark.read.format("delta").load(table).count() == 2
    append(spark.range(2, 3), table, app_id, 6)
    assert spark.read.format("delta").load(table).count() == 3


HELD = StructType([StructField("n", LongType()), StructField("at", TimestampType())])


def _jobs_started(spark: SparkSession) -> int:
    """The number of Spark jobs the session's context has started so far."""
    return int(spark.sparkContext._jsc.sc().dagScheduler().nextJobId())


def test_held_rows_land_once_from_the_driver_beside_spark_writers(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Rows the driver holds are appended without a Spark job on a local disk, marked as
    Spark's appends are, each batch once; Spark's appends to the same table go on beside them,
    and a column the table lacks is added."""
    checkpoint, table = tmp_path / "checkpoint", str(tmp_path / "table")
    app_id = query_app_id(spark, str(checkpoint))  # a new query: its batches are new
    at = datetime(2026, 1, 1, tzinfo=UTC)
    append(spark.range(100, 101), table, "spark-writer", 0)  # created by Spark, without "at"
    before = _jobs_started(spark)
    append_held(spark, [{"n": 0, "at": at}, {"n": 1}], HELD, table, (app_id, 0))
    append_held(spark, [{"n": 2, "at": at}], HELD, table, (app_id, 1))
    assert _jobs_started(spark) == before  # written from the driver
    append_held(spark, [], HELD, table, (app_id, 2))  # nothing to write: no commit
    append(spark.range(101, 102), table, "spark-writer", 1)
    plan(checkpoint, 0, 1)
    query_app_id(spark, str(checkpoint))  # a restart: batches 0 and 1 may have run
    append_held(spark, [{"n": 1}], HELD, table, (app_id, 1))  # landed: skipped
    rows = spark.read.format("delta").load(table).orderBy("id", "n").collect()
    assert [(r.id, r.n, r.at) for r in rows] == [
        (None, 0, at.replace(tzinfo=None)),
        (None, 1, None),
        (None, 2, at.replace(tzinfo=None)),
        (100, None, None),
        (101, None, None),
    ]
    expected = [BATCH_MARK.format("spark-writer", 0), BATCH_MARK.format(app_id, 0)]
    expected += [BATCH_MARK.format(app_id, 1), BATCH_MARK.format("spark-writer", 1)]
    assert marks(spark, table) == expected


def test_held_rows_at_a_uri_or_without_a_batch_go_through_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A table at a URI is appended through the session (its file systems); without a batch
    id each call appends."""
    table = (tmp_path / "table").as_uri()
    append_held(spark, [{"n": 0}], HELD, table)
    append_held(spark, [{"n": 0}], HELD, str(tmp_path / "table"))
    assert sorted(r.n for r in spark.read.format("delta").load(table).collect()) == [0, 0]


#: Column names from the space a declaration takes (letters, digits, underscores): case,
#: SQL keywords, a leading underscore, digits.
ODD_NAMES = ("MixedCase", "select", "_lead", "order", "x1", "FROM", "lower")


def spark_replacement(
    spark: SparkSession, path: str, changes: DataFrame, replacement: Replacement
) -> None:
    """The replacement as Spark's MERGE does it (the reference of the driver's)."""
    same = reduce(
        lambda a, b: a & b,
        [
            F.col(f"t.{quote_identifier(k)}").eqNullSafe(F.col(f"s.{quote_identifier(k)}"))
            for k in replacement.key
        ],
    )
    present = F.col(f"s.{quote_identifier(replacement.present)}")
    values: dict[str, str | Column] = {
        quote_identifier(c): F.col(f"s.{quote_identifier(c)}") for c in replacement.columns
    }
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(changes.alias("s"), same)
        .whenMatchedDelete(condition=~present)
        .whenMatchedUpdate(set=values)
        .whenNotMatchedInsert(condition=present, values=values)
        .execute()
    )


def test_replacements_from_the_driver_equal_sparks_merge(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Random keyed replacements (null keys, deletes, updates, inserts; column names from the
    whole space) applied by :func:`replace_once` from the driver leave the table Spark's MERGE
    leaves, each batch marked once, and a planned batch that landed is not applied again."""
    rng = random.Random(20261207)
    key, value = ODD_NAMES[:2], ODD_NAMES[2:]
    schema = StructType(
        [StructField(k, LongType()) for k in key]
        + [StructField(v, TimestampType() if i % 2 else LongType()) for i, v in enumerate(value)]
        + [StructField("_present", BooleanType())]
    )
    replacement = Replacement(key, (*key, *value), "_present")

    def row(present: bool) -> tuple[object, ...]:
        keys = [rng.choice([None, 0, 1, 2]) for _ in key]
        values = [
            datetime(2026, 1, 1, rng.randrange(24), tzinfo=UTC) if i % 2 else rng.randrange(99)
            for i in range(len(value))
        ]
        return (*keys, *values, present)

    driver, reference = str(tmp_path / "driver"), str(tmp_path / "reference")
    first = spark.createDataFrame([row(True) for _ in range(30)], schema).dropDuplicates(list(key))
    for path in (driver, reference):
        first.drop("_present").write.format("delta").save(path)
    checkpoint = tmp_path / "checkpoint"
    plan(checkpoint, 0)
    app_id = query_app_id(spark, str(checkpoint))
    replace = partial(spark_replacement_or_held, spark, driver, replacement=replacement)
    for batch in range(1, 6):
        rows = [row(rng.random() < 0.7) for _ in range(rng.randrange(1, 12))]
        changes = spark.createDataFrame(rows, schema).dropDuplicates(list(key))
        replace_once(spark, driver, changes, (app_id, batch), replace)
        spark_replacement(spark, reference, changes, replacement)
        got = Counter(spark.read.format("delta").load(driver).collect())
        assert got == Counter(spark.read.format("delta").load(reference).collect()), batch
    assert marks(spark, driver)[1:] == [BATCH_MARK.format(app_id, n) for n in range(1, 6)]
    engines = DeltaTable.forPath(spark, driver).history().select("engineInfo").collect()
    assert all(row.engineInfo.startswith("delta-rs") for row in engines[:5]), engines
    plan(checkpoint, 1, 2, 3, 4, 5)  # a restart: every batch may have run
    again = spark.createDataFrame([row(False)], schema)
    replace_once(spark, driver, again, (query_app_id(spark, str(checkpoint)), 5), replace)
    assert len(marks(spark, driver)) == 6  # landed: not applied again


def spark_replacement_or_held(
    spark: SparkSession, path: str, changes: DataFrame | HeldRows, replacement: Replacement
) -> None:
    """What a job hands :func:`replace_once`: held rows merged from the driver, else Spark's."""
    if isinstance(changes, HeldRows):
        merge_held(path, changes, replacement)
    else:
        spark_replacement(spark, path, changes, replacement)


def test_few_rows_land_once_from_the_driver_and_none_make_no_commit(
    spark: SparkSession, tmp_path: Path
) -> None:
    """:func:`append_few`: a new batch's rows are appended from the driver (no Spark write),
    a batch without rows commits nothing, and after a restart a landed batch is skipped while
    one that did not land is appended through Spark."""
    checkpoint, table = tmp_path / "checkpoint", str(tmp_path / "table")
    plan(checkpoint, 0)
    app_id = query_app_id(spark, str(checkpoint))
    append_few(spark.range(0, 2), table, app_id, 0)  # planned: may have run, through Spark
    append_few(spark.range(10, 12), table, app_id, 1)
    append_few(spark.range(0), table, app_id, 2)
    plan(checkpoint, 1, 2, 3)
    again = query_app_id(spark, str(checkpoint))
    append_few(spark.range(10, 12), table, again, 1)  # landed: skipped
    append_few(spark.range(30, 31), table, again, 3)
    ids = sorted(row.id for row in spark.read.format("delta").load(table).collect())
    assert ids == [0, 1, 10, 11, 30]
    assert marks(spark, table) == [BATCH_MARK.format(app_id, n) for n in (0, 1, 3)]
    engines = [
        row.engineInfo.split("/")[0].split(":")[0]
        for row in DeltaTable.forPath(spark, table).history().orderBy("version").collect()
    ]
    assert engines[1].startswith("delta-rs") and not engines[0].startswith("delta-rs"), engines


def test_small_tables_are_read_from_the_driver_as_spark_reads_them(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:func:`read_table` of a small local table takes no Spark job and equals Spark's read:
    the same schema (column names from the whole space, timestamps, decimals, structs, arrays,
    nulls) and rows, after updates and deletes; an empty table; a table with deletion vectors,
    over the row limit or at a URI is read by Spark."""
    names = [quote_identifier(n, "column") for n in ODD_NAMES[:3]]
    frame = spark.sql(
        "SELECT id AS "
        + names[0]
        + ", CAST(id AS DECIMAL(12, 3)) / 7 AS "
        + names[1]
        + ", IF(id % 3 = 0, NULL, TIMESTAMP '2026-01-01 00:00:00' + make_interval(0, 0, 0, 0,"
        " CAST(id AS INT))) AS " + names[2] + ", named_struct('a', id, 'b', array(id, NULL))"
        " AS nested, IF(id % 2 = 0, NULL, CAST(id AS STRING)) AS text FROM range(40)"
    )
    for deletion_vectors in (False, True):
        path = str(tmp_path / f"table-{deletion_vectors}")
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(frame.schema)
        if deletion_vectors:
            builder = builder.property("delta.enableDeletionVectors", "true")
        builder.execute()
        empty = _read_without_jobs(spark, path)
        assert empty.schema == frame.schema and empty.count() == 0
        frame.repartition(4).write.format("delta").mode("append").save(path)
        table = DeltaTable.forPath(spark, path)
        table.delete(f"{names[0]} % 5 = 0")
        table.update(f"{names[0]} % 4 = 1", {"text": F.lit("changed")})
        driver = _read_without_jobs(spark, path)
        spark_read = spark.read.format("delta").load(path)
        assert driver.schema == spark_read.schema == frame.schema
        assert sorted(driver.collect()) == sorted(spark_read.collect())
        assert driver.count() == 40 - 8
        # The rows themselves, not files for Spark to read; deltalake 1.6 reads no deletion
        # vectors, so Spark reads such a table.
        assert bool(driver.inputFiles()) == deletion_vectors
    monkeypatch.setattr("lakehouse_core.delta_io.HELD_ROWS", 31)
    assert read_table(spark, path).inputFiles()  # 32 rows: Spark reads it
    at_uri = read_table(spark, (tmp_path / "table-False").as_uri())
    assert at_uri.inputFiles() and at_uri.count() == 32


def _read_without_jobs(spark: SparkSession, path: str) -> DataFrame:
    """:func:`read_table` of ``path``, which must start no Spark job (Spark's read of a table
    whose snapshot it holds starts none either)."""
    before = _jobs_started(spark)
    frame = read_table(spark, path)
    assert _jobs_started(spark) == before
    return frame


ALERTS = StructType(
    [
        StructField("alert", StringType()),
        StructField("row_key", StringType()),
        StructField("value", DoubleType()),
    ]
)


def test_alerts_are_raised_once_from_the_driver_and_none_make_no_commit(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A pattern's alerts (:func:`gold.pattern_jobs.raise_alerts`): a new batch's alerts are
    inserted from the driver unless the table has their (alert, row key) already, a batch
    without alerts commits nothing, and after a restart a landed batch is skipped while one
    that did not land goes through Spark's MERGE with the same rule."""
    checkpoint, path = tmp_path / "checkpoint", str(tmp_path / "alerts")
    ensure_table(spark, path, ALERTS, change_feed=False)
    app_id = query_app_id(spark, str(checkpoint))

    def raise_(rows: list[tuple[str, str, float]], batch: int, app: str = app_id) -> None:
        raise_alerts(spark, path, spark.createDataFrame(rows, ALERTS), app, batch)

    raise_([("p", "k1", 1.0), ("p", "k2", 2.0)], 0)
    raise_([("p", "k1", 9.0), ("p", "k3", 3.0)], 1)  # k1 was raised: only k3 is new
    raise_([], 2)
    plan(checkpoint, 0, 1, 2, 3)
    again = query_app_id(spark, str(checkpoint))  # a restart: every batch may have run
    raise_([("p", "k4", 4.0)], 1, again)  # landed: skipped
    raise_([("q", "k1", 5.0), ("p", "k2", 8.0)], 3, again)
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert rows == [("p", "k1", 1.0), ("p", "k2", 2.0), ("p", "k3", 3.0), ("q", "k1", 5.0)]
    assert marks(spark, path)[1:] == [BATCH_MARK.format(app_id, n) for n in (0, 1, 3)]
    engines = [
        row.engineInfo.split("/")[0]
        for row in DeltaTable.forPath(spark, path).history().orderBy("version").collect()
    ]
    assert [e.startswith("delta-rs") for e in engines[1:]] == [True, True, False], engines


def test_a_table_that_takes_the_schema_already_is_checked_without_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    """:class:`EnsuredTables` in a new query: a table that already takes the rows' schema is
    left as it is without a Spark job or a commit; one that lacks a column gets it, and one
    asked for deletion vectors gets them, through :func:`ensure_table`."""
    path = str(tmp_path / "table")
    ensure_table(spark, path, ALERTS, change_feed=False)
    versions = len(marks(spark, path))
    before = _jobs_started(spark)
    assert EnsuredTables().ensure(spark, path, ALERTS, change_feed=False)
    assert _jobs_started(spark) == before and len(marks(spark, path)) == versions
    wider = StructType([*ALERTS.fields, StructField("score", DoubleType())])
    EnsuredTables().ensure(spark, path, wider, change_feed=False)
    assert spark.read.format("delta").load(path).schema == wider
    EnsuredTables().ensure(spark, path, wider, change_feed=False, deletion_vectors=True)
    properties = DeltaTable.forPath(spark, path).detail().first().properties
    assert properties.get("delta.enableDeletionVectors") == "true"


def test_a_joined_entitys_key_is_checked_from_the_driver_as_in_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A gold join's check that the entity's ``on`` columns are a key reads a small local
    entity's columns from the driver (:func:`read_held`, no Spark job) and finds what Spark's
    grouping finds: a repeated pair (null equal to null) is named, unique rows pass."""
    names = [quote_identifier(n, "column") for n in ODD_NAMES[:2]]
    path = str(tmp_path / "entity")
    spark.sql(
        f"SELECT IF(id = 3, NULL, id % 4) AS {names[0]}, IF(id % 2 = 0, NULL, 'a') AS "
        f"{names[1]}, id AS other FROM range(8)"
    ).write.format("delta").save(path)
    join = GoldTable(
        "g",
        "facts",
        "ts",
        Window("tumbling", "1 hour"),
        (Measure("n", "count"),),
        join=Join("entity", (("x", ODD_NAMES[0]),), ("other",), "e_"),
    )
    for key, repeated in (([ODD_NAMES[0], ODD_NAMES[1]], True), (["other"], False)):
        before = _jobs_started(spark)
        held = read_held(path, key)
        assert _jobs_started(spark) == before and held is not None
        assert held.column_names == key and held.num_rows == 8
        messages = []
        for rows in (held, spark.read.format("delta").load(path)):
            try:
                check_unique(rows, join, key)
                messages.append("")
            except ConfigError as error:
                messages.append(str(error))
        assert messages[0] == messages[1] and bool(messages[0]) == repeated
    assert read_held((tmp_path / "entity").as_uri(), ["other"]) is None
