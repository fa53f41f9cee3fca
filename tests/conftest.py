"""Shared fixtures: one small local Spark session with Delta, and a Kafka broker when asked for."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse.local.broker import LocalBroker, free_port
from lakehouse_core.spark import get_spark
from tests import sessions
from tests.browser import Browser, install_chromium


def pytest_configure(config: pytest.Config) -> None:
    """Commands, kernels and servers run as processes start their sessions as the tests' own
    (:mod:`tests.sessions`)."""
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", sessions.submit_args())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules in the order their cost suggests, heaviest first: those that run subprocesses
    (a ``slow`` test), then the other integration modules, then the unit modules.

    ``make test`` hands whole modules to its two workers in collection order
    (``--no-loadscope-reorder``), so the long modules start early and the many short ones
    fill in at the end, instead of one worker running the last long module alone."""
    rank: dict[Path, int] = {}
    for item in items:
        rank[item.path] = min(rank.get(item.path, 2), _cost_rank(item))
    items.sort(key=lambda item: rank[item.path])  # stable: a module's tests stay in order


def _cost_rank(item: pytest.Item) -> int:
    if item.get_closest_marker("slow") is not None:
        return 0
    return 2 if item.get_closest_marker("unit") is not None else 1


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The worker's session, started before its first test that is not a unit test (so that
    no command run in process starts it as a process's: :mod:`tests.sessions`), or a unit test
    that asks for it."""
    with pytest.MonkeyPatch.context() as patch:  # its settings win over a process's
        patch.setenv("PYSPARK_SUBMIT_ARGS", sessions.submit_args(quick_compiler=False))
        session = get_spark(
            mode="local-jars",
            master="local[2]",
            app_name="cdc-lakehouse-tests",
            extra_conf=sessions.session_settings(quick_compiler=False),
        )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _session_before_spark_tests(request: pytest.FixtureRequest) -> None:
    """Start the worker's session before every test but a unit test: a unit test that needs
    Spark asks for ``spark``, and the others start no JVM."""
    if request.node.get_closest_marker("unit") is None:
        request.getfixturevalue("spark")


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap servers of a Kafka-protocol broker: ``KAFKA_BOOTSTRAP_SERVERS`` if set, else a
    local broker (``lakehouse.local.broker``) started on a free port for this test session."""
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


@pytest.fixture(scope="session")
def chromium() -> Browser:
    """Headless Chromium, installed from Debian's package where missing (``tests.browser``);
    ``executable`` None with the reason where it cannot be (no apt-get, not root)."""
    return Browser(*install_chromium())
