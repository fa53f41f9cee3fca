"""Shared fixtures: one small local Spark session with Delta, and a Kafka broker when asked for."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from core.spark import get_spark
from lakehouse.broker import LocalBroker, free_port


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_spark(mode="local-jars", master="local[2]", app_name="cdc-lakehouse-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap servers of a Kafka-protocol broker: ``KAFKA_BOOTSTRAP_SERVERS`` if set, else a
    local broker (``lakehouse.broker``) started on a free port for this test session."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        yield configured
        return
    broker = LocalBroker(home=tmp_path_factory.mktemp("kafka-broker"), port=free_port())
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


#: Under ``pytest -n`` (xdist, ``--dist loadgroup``): tests that start processes or a broker, or
#: kill them, run on one worker, one after the other, and so do the tests that share the
#: incremental shop warehouse (built once per worker, see tests/warehouses.py).
SERIAL_GROUPS = {
    "processes": ("kafka", "slow"),
    "shop-warehouse": ("test_forget.py", "test_replay.py", "test_maintain.py"),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        markers = {mark.name for mark in item.iter_markers()}
        for group, members in SERIAL_GROUPS.items():
            if markers & set(members) or item.path.name in members:
                item.add_marker(pytest.mark.xdist_group(group))
                break
