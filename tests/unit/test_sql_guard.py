"""The statement guard of ``lakehouse sql``: read-only by default, never bronze, no files by path,
decided by parsing (sqlglot, Spark dialect) and failing closed."""

from __future__ import annotations

import pytest

from lakehouse_core.errors import StatementRefusedError
from lakehouse_core.sql_guard import Kind, check, classify, refusal

pytestmark = pytest.mark.unit

READS = [
    "SELECT * FROM gold.revenue_per_minute",
    "select count(*) from silver.orders where status = 'paid'",
    "WITH recent AS (SELECT * FROM gold.revenue_per_minute) SELECT * FROM recent",
    "SELECT 1 UNION ALL SELECT 2 EXCEPT SELECT 3",
    "(SELECT 1) INTERSECT (SELECT 1)",
    "VALUES (1, 'a'), (2, 'b')",
    "SELECT * FROM VALUES (1, 2) AS t(a, b)",
    "SELECT * FROM bronze.shop_public_orders",  # reading bronze is fine
    "SELECT * FROM `bronze`.`shop_public_orders` VERSION AS OF 0",
    "SELECT o.*, c.name FROM silver.orders o JOIN silver.customers c ON o.customer_id = c.id",
    "SELECT * FROM gold.x WHERE id IN (SELECT id FROM silver.y)",
    "SELECT * FROM range(10)",
    "SELECT * FROM explode(array(1, 2))",
    "SELECT * FROM gold.x LATERAL VIEW explode(items) t AS item",
    "SHOW TABLES IN gold",
    "SHOW TBLPROPERTIES bronze.shop_public_orders",
    "DESCRIBE gold.revenue_per_minute",
    "DESCRIBE TABLE EXTENDED silver.orders",
    "DESCRIBE HISTORY bronze.shop_public_orders",
    "DESCRIBE DETAIL bronze.shop_public_orders",
    "EXPLAIN SELECT * FROM gold.x",
    "EXPLAIN EXTENDED SELECT * FROM gold.x",
    "EXPLAIN FORMATTED WITH a AS (SELECT 1) SELECT * FROM a",
    "-- a comment\nSELECT 1 /* another */",
    "/* nested /* comment */ still comment */ SELECT 1",
    "SELECT 1;",
    "SELECT 'a; DELETE FROM bronze.x' AS text",
    "SELECT '\\'; DELETE FROM bronze.x; --' AS text",  # Spark: \' does not end the string
]

SESSION = [
    "SET",
    "SET spark.sql.shuffle.partitions",
    "SET spark.sql.shuffle.partitions = 4",
    "USE gold",
    "CACHE TABLE gold.revenue_per_minute",
    "UNCACHE TABLE gold.revenue_per_minute",
    "REFRESH TABLE silver.orders",
]

WRITES = {
    "DELETE FROM bronze.t WHERE offset = 7": "DELETE",
    "delete from bronze.t": "DELETE",
    "UPDATE bronze.t SET offset = 8": "UPDATE",
    "INSERT INTO bronze.t SELECT * FROM bronze.t": "INSERT",
    "INSERT OVERWRITE TABLE bronze.t SELECT * FROM bronze.t": "INSERT OVERWRITE",
    "MERGE INTO bronze.t USING silver.s ON t.id = s.id WHEN MATCHED THEN DELETE": "MERGE",
    "ALTER TABLE bronze.t SET TBLPROPERTIES ('delta.appendOnly' = 'false')": "ALTER TABLE",
    "DROP TABLE bronze.t": "DROP TABLE",
    "DROP TABLE IF EXISTS bronze.t": "DROP TABLE",
    "TRUNCATE TABLE bronze.t": "TRUNCATE TABLE",
    "CREATE OR REPLACE TABLE bronze.t AS SELECT 1 AS a": "CREATE OR REPLACE TABLE",
    "CREATE TABLE bronze.extra (a INT) USING delta": "CREATE TABLE",
    "CREATE SCHEMA bronze": "CREATE SCHEMA",
    "DROP SCHEMA bronze CASCADE": "DROP SCHEMA",
    "DROP DATABASE IF EXISTS `BRONZE`": "DROP DATABASE",
    "COMMENT ON TABLE bronze.t IS 'x'": "COMMENT ON",
    "ANALYZE TABLE bronze.t COMPUTE STATISTICS": "ANALYZE",
    "LOAD DATA INPATH '/tmp/x' INTO TABLE bronze.t": "LOAD DATA",
    "ALTER TABLE silver.s RENAME TO bronze.t": "ALTER TABLE",
    "ALTER TABLE bronze.t RENAME TO silver.s": "ALTER TABLE",
    "WITH x AS (SELECT 1 AS a) INSERT INTO bronze.t SELECT * FROM x": "INSERT",
    "WITH x AS (SELECT 1 AS a) DELETE FROM bronze.t": "DELETE",
    "/* SELECT */ DELETE FROM bronze.t": "DELETE",
    "/* /* nested */ SELECT 1 */ DELETE FROM bronze.t": "DELETE",
    "-- SELECT 1\nDELETE FROM bronze.t": "DELETE",
    "EXPLAIN DELETE FROM bronze.t": "EXPLAIN DELETE",
}

#: The ways to name bronze.t a write can use (quoting, case, catalog).
BRONZE_NAMES = [
    "bronze.t",
    "`bronze`.`t`",
    "`BRONZE`.T",
    "Bronze.t",
    "spark_catalog.bronze.t",
    "`spark_catalog`.`bronze`.`t`",
]

FILE_READS = [
    "SELECT * FROM text.`/etc/hostname`",
    "SELECT * FROM parquet.`/data/x.parquet`",
    "SELECT * FROM delta.`/warehouse/bronze/shop_public_orders`",
    "SELECT * FROM spark_catalog.delta.`/warehouse/bronze/shop_public_orders`",
    "SELECT * FROM csv.`/etc/passwd`",
    "SELECT * FROM json.`relative/dir`",
    "SELECT * FROM orc.`/x`",
    "SELECT * FROM binaryFile.`/etc`",
    "SELECT * FROM `text`.`/etc/hostname`",
    "SELECT * FROM `org.apache.spark.sql.parquet`.`/x`",
    "SELECT * FROM whatever.`file:///etc/hostname`",
    "SELECT * FROM read_files('/etc/hostname')",
    "SELECT * FROM gold.x WHERE id IN (SELECT value FROM text.`/etc/hostname`)",
    "WITH f AS (SELECT * FROM text.`/etc/hostname`) SELECT * FROM f",
    "SELECT 1 UNION SELECT value FROM text.`/etc/hostname`",
    "EXPLAIN SELECT * FROM text.`/etc/hostname`",
    "DESCRIBE delta.`/warehouse/bronze/x`",
    "SHOW COLUMNS IN csv.`/etc/passwd`",
    "CACHE TABLE c AS SELECT * FROM text.`/etc/hostname`",
]


@pytest.mark.parametrize("statement", READS)
def test_reads_run_read_only(statement: str) -> None:
    assert check(statement).kind is Kind.READ


@pytest.mark.parametrize("statement", SESSION)
def test_session_statements_run_read_only(statement: str) -> None:
    """They change only the state of the session running them (one statement per
    ``lakehouse sql``), never a table."""
    assert check(statement).kind is Kind.SESSION


@pytest.mark.parametrize(("statement", "verb"), WRITES.items())
def test_writes_are_refused_read_only_and_on_bronze(statement: str, verb: str) -> None:
    found = classify(statement)
    assert (found.kind, found.verb) == (Kind.WRITE, verb)
    with pytest.raises(StatementRefusedError) as read_only:
        check(statement)
    message = str(read_only.value)
    assert message.startswith(f"lakehouse sql is read-only: {verb} "), message
    assert "--allow-writes" in message and "lakehouse forget" in message, message
    with pytest.raises(StatementRefusedError, match=r"never changes bronze") as bronze:
        check(statement, allow_writes=True)
    assert "\n" not in message + str(bronze.value)


@pytest.mark.parametrize("name", BRONZE_NAMES)
def test_every_spelling_of_bronze_is_protected(name: str) -> None:
    for statement in (
        f"DELETE FROM {name}",
        f"ALTER TABLE {name} SET TBLPROPERTIES ('delta.appendOnly' = 'false')",
        f"DROP TABLE {name}",
        f"INSERT INTO {name} SELECT * FROM silver.s",
    ):
        with pytest.raises(StatementRefusedError, match="never changes bronze"):
            check(statement, allow_writes=True)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE gold.revenue_per_minute SET revenue = 0",
        "UPDATE `silver`.`orders` AS o SET status = 'x' WHERE o.id = 1",
        "DELETE FROM silver.orders WHERE id IN (SELECT id FROM bronze.t)",
        "INSERT INTO silver.orders SELECT * FROM bronze.t",
        "MERGE INTO silver.o t USING bronze.t s ON t.id = s.id WHEN MATCHED THEN DELETE",
        "CREATE TABLE gold.mine AS SELECT * FROM gold.revenue_per_minute",
        "CREATE TABLE silver.copy SHALLOW CLONE bronze.t",
        "DROP TABLE gold.mine",
        "ALTER TABLE gold.mine SET TBLPROPERTIES ('x' = 'y')",
        "INSERT INTO silver.imported SELECT * FROM parquet.`/import/x`",
        "EXPLAIN UPDATE gold.x SET a = 1",
    ],
)
def test_allow_writes_runs_writes_outside_bronze(statement: str) -> None:
    with pytest.raises(StatementRefusedError, match="read-only"):
        check(statement)
    assert check(statement, allow_writes=True).kind is Kind.WRITE


@pytest.mark.parametrize(
    ("statement", "refused"),
    [
        ("DELETE FROM delta.`/warehouse/bronze/t`", "does not write to a path"),
        ("UPDATE delta.`/warehouse/silver/o` SET a = 1", "does not write to a path"),
        ("INSERT OVERWRITE LOCAL DIRECTORY '/warehouse/bronze/t' SELECT 1", "to a path"),
        ("DELETE FROM t", "needs the schema of the table DELETE changes: write t as silver.t"),
        ("CREATE TABLE silver.alias USING delta LOCATION '/warehouse/bronze/t'", "LOCATION"),
        ("ALTER TABLE silver.o SET LOCATION '/warehouse/bronze/t'", "LOCATION"),
        ("CREATE TABLE silver.v USING parquet OPTIONS (path '/warehouse/bronze')", "OPTIONS"),
    ],
)
def test_allow_writes_refuses_what_could_be_bronze(statement: str, refused: str) -> None:
    with pytest.raises(StatementRefusedError, match=refused):
        check(statement, allow_writes=True)


@pytest.mark.parametrize("statement", FILE_READS)
def test_reads_of_files_by_path_are_refused_read_only(statement: str) -> None:
    with pytest.raises(StatementRefusedError, match="does not read files by path") as refused:
        check(statement)
    assert "bronze.<table>, silver.<table>, gold.<table>" in str(refused.value)


@pytest.mark.parametrize(
    ("statement", "verb"),
    [
        ("ADD JAR /tmp/evil.jar", "ADD JAR"),
        ("add jar '/tmp/evil.jar'", "ADD JAR"),
        ("ADD FILE /etc/passwd", "ADD FILE"),
        ("ADD ARCHIVE /tmp/a.zip", "ADD ARCHIVE"),
        ("CREATE TEMPORARY FUNCTION f AS 'com.x.F' USING JAR '/tmp/f.jar'", "CREATE FUNCTION"),
        ("SELECT reflect('java.lang.System', 'exit', 0)", "reflect()"),
        ("SELECT JAVA_METHOD('java.lang.Thread', 'sleep', 1000L) FROM gold.x", "java_method()"),
    ],
)
def test_code_is_never_run(statement: str, verb: str) -> None:
    for allow_writes in (False, True):
        with pytest.raises(StatementRefusedError, match=f"does not run {verb}"):
            check(statement, allow_writes=allow_writes)


@pytest.mark.parametrize(
    ("statement", "refused"),
    [
        ("", "got no statement"),
        ("-- only a comment", "got no statement"),
        ("SELECT 1; SELECT 2", "one statement at a time; this text holds 2"),
        ("SELECT * FROM gold.x; DELETE FROM bronze.t", "holds 2"),
        ("SELECT 'a\\\\'; DROP TABLE bronze.t", "holds 2"),  # \\ ends in a backslash
        ("SELEC 1", "could not parse the statement"),
        ("SELECT 'unterminated", "could not parse the statement"),
        ("/* unterminated comment DELETE FROM bronze.t", "could not parse"),
        ("RESTORE TABLE bronze.t TO VERSION AS OF 0", "could not parse"),
        ("INSERT OVERWRITE DIRECTORY '/tmp/x' USING parquet SELECT 1", "could not parse"),
        ("OPTIMIZE bronze.t", "cannot tell what OPTIMIZE changes.*lakehouse maintain"),
        ("VACUUM bronze.t RETAIN 0 HOURS", "cannot tell what VACUUM changes"),
        ("MSCK REPAIR TABLE silver.t", "cannot tell what MSCK REPAIR changes"),
        ("EXECUTE IMMEDIATE 'DELETE FROM bronze.t'", "cannot tell what EXECUTE changes"),
        ("EXPLAIN OPTIMIZE bronze.t", "cannot tell what OPTIMIZE changes"),
        ("RESET", "does not know the statement RESET"),
        ("CLEAR CACHE", "does not know the statement CLEAR"),
        ("DELETE FROM IDENTIFIER('bronze.t')", r"IDENTIFIER\(...\)"),
        ("SELECT * FROM IDENTIFIER('text.`/etc/hostname`')", r"IDENTIFIER\(...\)"),
        ("SELECT * INTO bronze.t FROM silver.s", "cannot check SELECT"),
    ],
)
def test_what_cannot_be_checked_is_refused(statement: str, refused: str) -> None:
    """Fail closed: unparseable, unknown and several statements never run, in either mode."""
    for allow_writes in (False, True):
        with pytest.raises(StatementRefusedError, match=refused) as error:
            check(statement, allow_writes=allow_writes)
        assert "\n" not in str(error.value) and "\x1b" not in str(error.value)


def test_protected_schemas_can_be_named() -> None:
    """A shared metastore may hold bronze under another schema name."""
    statement = classify("DELETE FROM main_shop_bronze.t")
    assert refusal(statement, allow_writes=True) is None
    assert "never changes bronze" in str(
        refusal(statement, allow_writes=True, protected={"Main_Shop_Bronze"})
    )


def test_messages_name_the_statement_and_the_way_out() -> None:
    assert str(refusal(classify("DELETE FROM gold.x"), allow_writes=False)) == (
        "lakehouse sql is read-only: DELETE changes data. Use --allow-writes to change silver "
        "or gold tables; bronze changes only through `lakehouse forget` and `lakehouse "
        "maintain`."
    )
    assert str(refusal(classify("DROP TABLE bronze.t"), allow_writes=True)) == (
        "lakehouse sql never changes bronze (DROP TABLE on bronze.t): it is the record silver "
        "and gold are rebuilt from. A key's data is removed with `lakehouse forget`, old "
        "records with `lakehouse maintain`."
    )
