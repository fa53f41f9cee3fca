"""A pipeline declared in Python (no TOML anywhere) runs through every layer: its silver tables
take the declared settings, gold has exactly the declared tables, and each equals its
declaration evaluated in batch over silver (an independent Spark SQL query here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession

from lakehouse import (
    Lakehouse,
    cdc_table,
    config_from_toml,
    events_table,
    gold_table,
    join,
    measure,
    session,
    tumbling,
)
from lakehouse_demo.generator import WorkloadConfig, generate, write_files

pytestmark = pytest.mark.integration


def test_a_pipeline_declared_in_python_runs(spark: SparkSession, tmp_path: Path) -> None:
    write_files(generate(WorkloadConfig(events=600, seed=11)), tmp_path / "source")
    lh = Lakehouse(
        tmp_path / "wh",
        spark=spark,
        tables=[
            cdc_table("customers", topic="shop.public.customers", stored_as_scd_type=2),
            events_table(
                "clicks",
                topic="shop.clickstream",
                keys="event_id",
                sequence_by="ts",
                schema="event_id string, user_id bigint, page string, action string, ts timestamp",
            ),
        ],
        gold=[
            gold_table(
                "revenue",
                source="orders",
                event_time="created_at",
                window=tumbling("1 minute"),
                measures=[measure.sum("total", name="revenue"), measure.count(name="orders")],
            ),
            gold_table(
                "orders_by_tier",
                source="orders",
                event_time="created_at",
                group_by=["tier"],
                window=tumbling("5 minutes"),
                join=join("customers", on={"customer_id": "id"}, columns=["tier"], as_of="current"),
                measures=[measure.count(name="orders")],
            ),
            gold_table(
                "visits",
                source="clicks",
                event_time="ts",
                group_by="user_id",
                window=session("30 minutes"),
                measures=[measure.count(name="views", filter="action = 'view'")],
            ),
        ],
    )
    assert config_from_toml(lh.config.to_toml()) == lh.config

    lh.run(f"files:{tmp_path / 'source'}")

    # The warehouse's own gold tables (the session's catalog may name other tests' tables).
    gold_tables = set(lh.warehouse.table_names("gold", spark))
    assert {"revenue", "orders_by_tier", "visits"} <= gold_tables
    assert "revenue_per_minute" not in gold_tables  # no demo declaration sneaked in
    assert "customers_history" in {r.tableName for r in lh.sql("SHOW TABLES IN silver").collect()}

    revenue = lh.sql("SELECT window_start, revenue, orders FROM gold.revenue")
    assert revenue.count() > 0
    expected = lh.sql(
        "SELECT window(created_at, '1 minute').start AS window_start, sum(total) AS revenue, "
        "count(*) AS orders FROM silver.orders WHERE created_at IS NOT NULL GROUP BY 1"
    )
    assert_df_equality(
        revenue, expected, ignore_row_order=True, ignore_nullable=True, ignore_column_order=True
    )
    views = lh.sql("SELECT sum(views) AS views FROM gold.visits").first()
    clicked = lh.sql("SELECT count(*) AS views FROM silver.clicks WHERE action = 'view'").first()
    assert views is not None and clicked is not None and views.views == clicked.views > 0
    by_tier = lh.sql("SELECT sum(orders) AS orders FROM gold.orders_by_tier").first()
    all_orders = lh.sql("SELECT count(*) AS orders FROM silver.orders").first()
    assert by_tier is not None and all_orders is not None and by_tier.orders == all_orders.orders
    assert lh.verify().ok
