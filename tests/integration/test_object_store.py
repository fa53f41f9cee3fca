"""A warehouse at a URI rather than a local path: every table, checkpoint and idempotency id is
found, read and written through Hadoop's FileSystem of the session.

``objstore://`` (:mod:`tests.objstore`) is a file system like S3: no directory rename, no
local paths. The whole life of a warehouse there (runs, replay, more runs, forget, maintain,
verify, all through the command line) gives the same tables as on a local path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StructField, StructType

from bronze.job import BRONZE_QUERY, start_bronze
from cdc.sources import SourceSpec, read_source
from lakehouse.run import commit_swap
from lakehouse_core import storage
from lakehouse_core.delta_io import change_feed_readable, readable_version
from lakehouse_core.identifiers import table_name_for_topic
from lakehouse_core.layout import Warehouse
from lakehouse_core.streaming import Trigger
from lakehouse_demo.generator import WorkloadConfig, generate, write_files
from tests.cli import SHOP_TOML, run_cli
from tests.helpers import customer_change
from tests.objstore import objstore_uri
from tests.warehouses import assert_same_tables, load

pytestmark = pytest.mark.integration

TOPIC = "shop.public.customers"


def test_a_replayed_bronze_batch_is_skipped_on_a_uri_warehouse(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The idempotency id beside a checkpoint at a URI survives a restart: a micro-batch
    replayed after a crash between its append and its checkpoint commit adds nothing."""
    monkeypatch.chdir(tmp_path)  # anything written relative to the working directory stays here
    write_files([customer_change(TOPIC, n, "c", n, (1, n)) for n in range(3)], tmp_path / "in")
    warehouse = Warehouse.from_path(objstore_uri(tmp_path / "warehouse"))
    bronze = warehouse.table("bronze", table_name_for_topic(TOPIC))

    def run() -> int:
        source = read_source(spark, SourceSpec("files", str(tmp_path / "in")))
        query = start_bronze(source, warehouse, Trigger())
        query.awaitTermination()
        assert query.exception() is None
        return spark.read.format("delta").load(bronze).count()

    assert run() == 3
    # A crash after the append, before the checkpoint's commit: the restart replays batch 0.
    commits = tmp_path / "warehouse" / "_system" / "checkpoints" / BRONZE_QUERY / "commits"
    for name in ("0", ".0.crc"):
        (commits / name).unlink(missing_ok=True)  # no checksum files on objstore://
    assert run() == 3


def test_the_test_object_store_has_no_directory_rename(spark: SparkSession, tmp_path: Path) -> None:
    """``objstore://`` holds Delta tables and small files, renames files, not directories."""
    root = objstore_uri(tmp_path)
    spark.range(3).write.format("delta").save(f"{root}/table")
    assert spark.read.format("delta").load(f"{root}/table").count() == 3
    storage.write_text(spark, f"{root}/note", "hello")
    assert storage.read_text(spark, f"{root}/note") == "hello"
    assert (tmp_path / "note").read_text(encoding="utf-8") == "hello"
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(f"{root}/table")
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    with pytest.raises(Py4JJavaError, match="a directory cannot be renamed"):
        fs.rename(path, jvm.org.apache.hadoop.fs.Path(f"{root}/moved"))
    assert fs.rename(
        jvm.org.apache.hadoop.fs.Path(f"{root}/note"),
        jvm.org.apache.hadoop.fs.Path(f"{root}/moved"),
    )


def test_a_warehouse_on_an_object_store_gives_the_tables_of_a_local_one(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Run, replay, run (nothing new), run, forget, maintain, verify: on ``objstore://`` as
    on a local path.

    A replay installs by Delta commits and checkpoint pointers there (no directory rename
    exists), and the runs after it continue from the installed checkpoints."""
    records = generate(WorkloadConfig(events=120, seed=5, malformed_rate=0.02))
    parts = write_files(records, tmp_path / "parts", lines_per_file=60)
    local, remote = tmp_path / "local", tmp_path / "remote"
    roots = {"local": str(local), "objstore": objstore_uri(remote)}
    local.mkdir()
    source = tmp_path / "source"
    source.mkdir()

    def every(*args: str) -> dict[str, str]:
        """Run one command on both warehouses; their outputs."""
        outputs = {}
        for kind, root in roots.items():
            result = run_cli(*args, "--warehouse", root, "--config", SHOP_TOML)
            assert result.returncode == 0, (kind, args, result.stdout, result.stderr)
            outputs[kind] = result.stdout
        return outputs

    def arrive(part: Path) -> None:
        part.rename(source / part.name)
        every("run", "--once", "--source", f"files:{source}")

    arrive(parts[0])
    every("replay")
    # Nothing new yet: each gold job starts after the version the replay installed.
    every("run", "--once", "--source", f"files:{source}")
    arrive(parts[1])
    warehouses = {kind: Warehouse.from_path(root) for kind, root in roots.items()}
    assert not (remote / "_system" / "replay" / "staging").exists()  # installed, cleaned up
    key = load(spark, warehouses["local"], "silver", "customers").first()
    assert key is not None
    forgotten = every("forget", "--table", "customers", "--key", f'{{"id": {key.id}}}')
    for output in forgotten.values():
        assert "still readable): none holds the key" in output and "(0 still" not in output
    every("maintain")
    every("verify")
    assert_same_tables(spark, warehouses["local"], warehouses["objstore"])
    bronze = {kind: set(w.table_names("bronze")) for kind, w in warehouses.items()}
    assert bronze["objstore"] == bronze["local"] != set()
    for name in bronze["local"]:
        counts = {k: load(spark, w, "bronze", name).count() for k, w in warehouses.items()}
        assert counts["objstore"] == counts["local"], (name, counts)
    assert (
        load(spark, warehouses["objstore"], "silver", "customers").where(f"id = {key.id}").isEmpty()
    )


def test_the_tables_of_a_warehouse_at_a_uri_are_found(spark: SparkSession, tmp_path: Path) -> None:
    """Tables are listed through Hadoop's FileSystem: at a URI, every layer's tables are found
    (not only under a local path), and a directory without a Delta log is not a table."""
    warehouse = Warehouse.from_path(objstore_uri(tmp_path))
    spark.range(1).write.format("delta").save(warehouse.table("bronze", "shop_orders"))
    storage.write_text(spark, f"{warehouse.root}/bronze/not_a_table/file", "x")
    assert warehouse.table_names("bronze") == ["shop_orders"]
    assert warehouse.table_names("silver") == []


def test_readable_versions_are_checked_at_a_uri(spark: SparkSession, tmp_path: Path) -> None:
    """``forget`` asks which versions of a table (and of its change feed) can still be read:
    at a URI the data files are looked for through Hadoop's FileSystem, so a readable version
    is found readable and one whose file was removed (as VACUUM does) is not."""
    path = f"{objstore_uri(tmp_path)}/table"
    writer = spark.range(2).write.format("delta").option("delta.enableChangeDataFeed", "true")
    writer.save(path)
    spark.range(2, 4).write.format("delta").mode("append").save(path)  # version 1
    assert readable_version(spark, path, 1) is not None
    assert change_feed_readable(spark, path, 1)
    commit = tmp_path / "table" / "_delta_log" / f"{1:020d}.json"
    actions = [json.loads(line) for line in commit.read_text(encoding="utf-8").splitlines()]
    for added in (a["add"]["path"] for a in actions if "add" in a):
        (tmp_path / "table" / added).unlink()
    assert readable_version(spark, path, 1) is None
    assert not change_feed_readable(spark, path, 1)
    assert readable_version(spark, path, 0) is not None


def test_a_swap_on_an_object_store_installs_the_rebuilt_table_exactly_once(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sealed rebuild installs each table by one overwrite commit that keeps the table's
    schema as rebuilt (NOT NULL columns too) and its identity; a crash after that commit is
    finished by the next recovery without writing the table again."""
    root = objstore_uri(tmp_path)
    schema = StructType(
        [StructField("key", LongType(), False), StructField("total", LongType(), False)]
    )
    live = f"{root}/gold/totals"
    DeltaTable.create(spark).location(live).addColumns(schema).execute()
    spark.createDataFrame([(1, 10), (2, 20)], schema).write.format("delta").mode("append").save(
        live
    )
    identity = DeltaTable.forPath(spark, live).detail().first()
    staging = commit_swap.prepare(spark, root)
    staged = f"{staging}/gold/totals"
    DeltaTable.create(spark).location(staged).addColumns(schema).execute()
    rebuilt = spark.createDataFrame([(1, 11), (3, 30)], schema)
    rebuilt.write.format("delta").mode("append").save(staged)
    # Derived state the rebuild has none of goes (a silver or gold table never does).
    spark.range(1).write.format("delta").save(f"{root}/_system/tombstones/dropped")
    commit_swap.seal(spark, staging, retire=["_system/tombstones/dropped"], inputs={})

    def crash(*args: object) -> None:
        raise RuntimeError("crash after the table commits")  # before the retired table goes

    monkeypatch.setattr(commit_swap, "_retire", crash)
    with pytest.raises(RuntimeError, match="crash after"):
        commit_swap.recover(spark, root)  # installs the table, then "crashes"
    monkeypatch.undo()
    assert commit_swap.recover(spark, root)  # finishes the install
    assert not commit_swap.recover(spark, root)  # nothing left to do
    assert not storage.exists(spark, f"{root}/_system/tombstones/dropped")
    table = spark.read.format("delta").load(live)
    assert table.schema == schema
    assert sorted(table.collect()) == sorted(rebuilt.collect())
    detail = DeltaTable.forPath(spark, live).detail().first()
    assert identity is not None and detail is not None and detail.id == identity.id
    history = DeltaTable.forPath(spark, live).history().select("userMetadata").collect()
    assert sum(1 for row in history if (row.userMetadata or "").startswith("lakehouse replay")) == 1
