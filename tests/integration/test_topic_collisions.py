"""Two topics whose names map to one bronze table (``shop.public.customers`` and
``Shop.Public_Customers``): the run refuses with one line naming both, and writes nothing of the
batch, so no record is lost by being taken for a replay of the other topic's append."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from bronze.job import append_batch_by_topic
from lakehouse_core.errors import ConfigError
from lakehouse_core.identifiers import bronze_tables_for_topics
from lakehouse_core.layout import Warehouse
from lakehouse_demo.generator import write_files
from tests.cli import run_cli
from tests.helpers import bronze_frame, customer_change

pytestmark = pytest.mark.integration

FIRST, SECOND = "shop.public.customers", "Shop.Public_Customers"
TABLE = "shop_public_customers"
NAMES = "'Shop.Public_Customers' and 'shop.public.customers'"


def test_distinct_names_map_and_colliding_names_are_refused() -> None:
    assert bronze_tables_for_topics(["shop.public.orders", "shop.public.customers"]) == {
        "shop.public.customers": "shop_public_customers",
        "shop.public.orders": "shop_public_orders",
    }
    with pytest.raises(ConfigError, match=re.escape(NAMES)):
        bronze_tables_for_topics([FIRST, SECOND])


def test_the_run_refuses_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    source, warehouse = tmp_path / "source", tmp_path / "warehouse"
    both = [customer_change(FIRST, 0, "c", 1, (1, 1)), customer_change(SECOND, 0, "c", 2, (1, 2))]
    write_files(both, source)
    result = run_cli("run", "--source", f"files:{source}", "--warehouse", warehouse, "--once")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and NAMES in errors[0], errors
    assert not (warehouse / "bronze" / TABLE).exists()


def test_a_later_batch_of_the_other_topic_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    warehouse = Warehouse(str(tmp_path))
    append = append_batch_by_topic(warehouse, "collisions")
    append(bronze_frame(spark, [customer_change(FIRST, 0, "c", 1, (1, 1))]), 0)
    with pytest.raises(ConfigError, match="both map to bronze table 'shop_public_customers'"):
        append(bronze_frame(spark, [customer_change(SECOND, 0, "c", 2, (1, 2))]), 1)
    # A new query (a later run) checks the table again.
    with pytest.raises(ConfigError, match="both map to bronze table"):
        append_batch_by_topic(warehouse, "collisions")(
            bronze_frame(spark, [customer_change(SECOND, 1, "c", 3, (1, 3))]), 2
        )
    bronze = spark.read.format("delta").load(warehouse.table("bronze", TABLE))
    assert [(r.topic, r.offset) for r in bronze.collect()] == [(FIRST, 0)]
