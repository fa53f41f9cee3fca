"""``lakehouse sql`` on a real warehouse: read-only by default, bronze never changes (its Delta
version stays put), reads of files by path are refused, and rows come out in full as a table,
CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_core.layout import Warehouse
from tests.cli import run_cli

pytestmark = pytest.mark.integration

BRONZE = "bronze.sql_probe"
GOLD = "gold.sql_probe"
LONG = "v" * 400 + " [bold]kept[/bold] :smile:"


def version(spark: SparkSession, path: str) -> int:
    last = DeltaTable.forPath(spark, path).history(1).first()
    assert last is not None
    return int(last.version)


def test_sql_reads_by_default_and_never_changes_bronze(spark: SparkSession, tmp_path: Path) -> None:
    warehouse = Warehouse(str(tmp_path))
    bronze, gold = warehouse.table("bronze", "sql_probe"), warehouse.table("gold", "sql_probe")
    spark.sql(
        f"CREATE TABLE delta.`{bronze}` (offset bigint) USING delta "
        "TBLPROPERTIES ('delta.appendOnly' = 'true')"
    )
    spark.createDataFrame([(7,)], "offset bigint").write.format("delta").mode("append").save(bronze)
    spark.createDataFrame(
        [(1, LONG, None), (2, "b", "x"), (3, "c", "y")], "id int, text string, note string"
    ).write.format("delta").save(gold)
    versions = version(spark, bronze), version(spark, gold)
    alter = f"ALTER TABLE {BRONZE} SET TBLPROPERTIES ('delta.appendOnly' = 'false')"
    refused = {
        (): [
            (f"DROP TABLE {BRONZE}", "is read-only: DROP TABLE changes tables"),
            (f"DELETE FROM {BRONZE} WHERE offset = 7", "is read-only: DELETE changes data"),
            (alter, "is read-only: ALTER TABLE changes tables"),
            (f"UPDATE {GOLD} SET note = 'z'", "is read-only: UPDATE changes data"),
            ("SELECT * FROM text.`/etc/hostname`", "does not read files by path"),
        ],
        ("--allow-writes",): [
            (f"DROP TABLE {BRONZE}", "never changes bronze (DROP TABLE on bronze.sql_probe)"),
            ("DELETE FROM `bronze`.`sql_probe`", "never changes bronze (DELETE on"),
            (alter, "never changes bronze (ALTER TABLE on bronze.sql_probe)"),
            (f"DELETE FROM delta.`{bronze}`", "does not write to a path"),
            ("ADD JAR /tmp/none.jar", "does not run ADD JAR"),
        ],
    }
    try:
        for options, cases in refused.items():
            for statement, message in cases:
                result = run_cli("sql", "--warehouse", tmp_path, *options, statement)
                assert result.returncode == 2, (statement, result.stdout, result.stderr)
                lines = result.stderr.strip().splitlines()
                assert len(lines) == 1 and lines[0].startswith("error: lakehouse sql "), lines
                assert message in lines[0], (statement, lines)
                assert result.stdout == "", result.stdout
        assert (version(spark, bronze), version(spark, gold)) == versions
        assert [r.offset for r in spark.read.format("delta").load(bronze).collect()] == [7]

        query = f"SELECT id, text, note FROM {GOLD} ORDER BY id"
        outputs = {
            fmt: run_cli("sql", "--warehouse", tmp_path, "--format", fmt, query)
            for fmt in ("table", "csv", "json")
        }
        for result in outputs.values():
            assert result.returncode == 0 and result.stderr == "", result.stderr
        want = [["1", LONG, ""], ["2", "b", "x"], ["3", "c", "y"]]
        assert list(csv.reader(io.StringIO(outputs["csv"].stdout))) == [
            ["id", "text", "note"],
            *want,
        ]
        assert json.loads(outputs["json"].stdout) == [
            {"id": 1, "text": LONG, "note": None},
            {"id": 2, "text": "b", "note": "x"},
            {"id": 3, "text": "c", "note": "y"},
        ]
        # Row 1 is wider than the terminal: the widest text column goes whole on lines of
        # its own, each row's other cells on the line below.
        table = [line.strip() for line in outputs["table"].stdout.splitlines()]
        rule = next(i for i, line in enumerate(table) if line and set(line) == {"-"})
        body = table[rule + 1 : table.index("")]
        assert body == [LONG, "1  NULL", "b", "2  x", "c", "3  y"], table

        literal = run_cli("sql", "--warehouse", tmp_path, "SELECT '${spark.app.name}' AS v")
        assert literal.stdout == "v\n${spark.app.name}\n", literal  # as checked: no ${...}

        piped = run_cli("sql", "--warehouse", tmp_path, "--limit", "2", query)  # not a tty
        assert piped.stdout == "\n".join(outputs["csv"].stdout.split("\n")[:3]) + "\n"
        assert piped.stderr.startswith("note: printed the first 2 rows; there are more")

        update = f"UPDATE {GOLD} SET note = 'changed' WHERE id = 2"
        updated = run_cli("sql", "--warehouse", tmp_path, "--allow-writes", update)
        assert updated.returncode == 0, updated.stderr
        assert version(spark, gold) == versions[1] + 1
        notes = spark.read.format("delta").load(gold).orderBy("id").collect()
        assert [r.note for r in notes] == [None, "changed", "y"]
        assert version(spark, bronze) == versions[0]
        assert spark.catalog.tableExists(BRONZE)

        # With --config, tables have the names its [catalog] gives; its bronze stays protected.
        config = tmp_path / "names.toml"
        config.write_text('[catalog]\nschema_prefix = "probe_"\n', encoding="utf-8")
        named = run_cli(
            "sql", "--warehouse", tmp_path, "--config", config, f"SELECT id FROM probe_{GOLD}"
        )
        assert named.returncode == 0 and named.stdout == "id\n1\n2\n3\n", named
        kept = run_cli(
            "sql",
            "--warehouse",
            tmp_path,
            "--config",
            config,
            "--allow-writes",
            f"DELETE FROM probe_{BRONZE}",
        )
        assert kept.returncode == 2 and "never changes bronze" in kept.stderr, kept
        assert version(spark, bronze) == versions[0]
    finally:
        for name in (BRONZE, GOLD, f"probe_{BRONZE}", f"probe_{GOLD}"):
            spark.sql(f"DROP TABLE IF EXISTS {name}")
