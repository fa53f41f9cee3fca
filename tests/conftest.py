"""Shared fixtures: one small local Spark session with Delta for the whole test run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from lakehouse.spark import get_spark


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_spark(mode="local-jars", master="local[2]", app_name="cdc-lakehouse-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
