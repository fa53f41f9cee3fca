"""What ``lakehouse serve`` lets a client run (the statement check behind its parser hook); the
server itself, over the wire: ``tests/integration/test_serve.py``."""

from __future__ import annotations

import pytest
from sqlglot import exp
from sqlglot.dialects.spark import Spark

from lakehouse.sql.serve import refusal, refused_plan_text
from lakehouse_core.config import CatalogSpec

pytestmark = pytest.mark.unit

PLAIN, PREFIXED = CatalogSpec(), CatalogSpec(name="main", schema_prefix="shop_")


def test_serve_runs_reads_and_refuses_the_rest_with_its_own_name() -> None:
    for statement in (
        "SELECT * FROM gold.revenue_per_minute",
        "SHOW TABLES IN gold",
        "DESCRIBE TABLE silver.orders",
        "USE gold",
        "SET",
        "SET -v",
        "SET spark.sql.shuffle.partitions",
    ):
        assert refusal(statement, allow_writes=False, catalog=PLAIN) is None, statement
    cases = {
        "DELETE FROM gold.revenue_per_minute": "lakehouse serve is read-only: DELETE changes data",
        "SELECT * FROM text.`/etc/hostname`": "lakehouse serve is read-only and does not read "
        "files by path (text.`/etc/hostname`)",
        "SET spark.sql.runSQLOnFiles=true": "lakehouse serve does not change settings",
        "SET `spark.sql.variable.substitute` = true": "lakehouse serve does not change settings",
        "ADD JAR /tmp/x.jar": "lakehouse serve does not run ADD JAR",
    }
    for statement, message in cases.items():
        why = refusal(statement, allow_writes=False, catalog=PLAIN)
        assert why is not None and why.startswith(message), (statement, why)
        assert "lakehouse sql" not in why


def test_with_writes_serve_still_refuses_bronze_and_file_reads() -> None:
    assert refusal("DELETE FROM gold.x WHERE n > 1", allow_writes=True, catalog=PLAIN) is None
    bronze = refusal("DELETE FROM main.shop_bronze.orders", allow_writes=True, catalog=PREFIXED)
    assert bronze is not None and "never changes bronze" in bronze
    path = refusal("SELECT * FROM csv.`/etc/passwd`", allow_writes=True, catalog=PLAIN)
    assert path is not None and path.startswith("lakehouse serve does not read files by path")


def test_the_refusal_reaches_the_client_verbatim() -> None:
    why = "no 'quotes' or \\backslashes\\ lost"
    tree = Spark().parse(refused_plan_text(why))[0]
    assert tree is not None
    call = tree.find(exp.Anonymous) or tree.find(exp.Func)
    assert call is not None and call.find(exp.Literal).this == why  # type: ignore[union-attr]
