"""Shared fixtures: one small local Spark session with Delta, and a Kafka broker when asked for;
the test tiers.

Tiers, assigned here (:func:`pytest_collection_modifyitems`) rather than in each module: a test
under ``tests/unit`` is ``unit``, one under ``tests/integration`` is ``integration``; a test
that starts a JVM is also ``spark``: every test that is not ``unit`` (each gets the worker's
session first), and a unit test that asks for the ``spark`` fixture or is marked ``spark`` (a
command it runs in this process starts Spark). ``pytest`` with no paths and no ``-m`` runs
:data:`DEFAULT_TIER`, the tests that start no JVM (``make unit``); ``make test`` runs every tier
(``--all-tiers``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark import SparkContext
from pyspark.sql import SparkSession

from lakehouse_core.spark import get_spark
from lakehouse_local.broker import LocalBroker, free_port
from tests import sessions
from tests.browser import Browser, install_chromium

TESTS = Path(__file__).resolve().parent
#: The tier ``pytest`` runs with no paths and no ``-m`` (and ``make unit``): no JVM.
DEFAULT_TIER = "unit and not spark"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all-tiers",
        action="store_true",
        help=f"with no paths, run every tier, not only '{DEFAULT_TIER}' (make test)",
    )


def _default_tier_only(config: pytest.Config) -> bool:
    """``pytest`` run with no paths (its ``testpaths``), no ``-m`` and no ``--all-tiers``."""
    return (
        config.args_source is pytest.Config.ArgsSource.TESTPATHS
        and not config.option.markexpr
        and not config.option.all_tiers
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    if _default_tier_only(config):
        return (
            f"tests: the default tier ('{DEFAULT_TIER}': no JVM); "
            "make test, pytest --all-tiers or pytest tests runs every tier"
        )
    return None


def pytest_configure(config: pytest.Config) -> None:
    """Commands, kernels and servers run as processes start their sessions as the tests' own
    (:mod:`tests.sessions`)."""
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", sessions.submit_args())


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by the tiers' markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test's tier (see the module's docstring); with no paths and no ``-m``, only
    :data:`DEFAULT_TIER`'s tests. Then the modules in the order their cost suggests, heaviest
    first: those that run subprocesses (a ``slow`` test), then the other integration modules,
    then the unit modules.

    ``make test`` hands whole modules to its two workers in collection order
    (``--no-loadscope-reorder``), so the long modules start early and the many short ones
    fill in at the end, instead of one worker running the last long module alone."""
    for item in items:
        _assign_tier(item)
    if _default_tier_only(config):
        others = [item for item in items if not _in_default_tier(item)]
        if others:
            config.hook.pytest_deselected(items=others)
            items[:] = [item for item in items if _in_default_tier(item)]
    rank: dict[Path, int] = {}
    for item in items:
        rank[item.path] = min(rank.get(item.path, 2), _cost_rank(item))
    items.sort(key=lambda item: rank[item.path])  # stable: a module's tests stay in order


def _assign_tier(item: pytest.Item) -> None:
    """``unit`` or ``integration`` by the test's directory (where its module has no tier), and
    ``spark`` where it starts a JVM."""
    if item.get_closest_marker("unit") is None and TESTS / "unit" in item.path.parents:
        item.add_marker(pytest.mark.unit)
    if (
        item.get_closest_marker("integration") is None
        and TESTS / "integration" in item.path.parents
    ):
        item.add_marker(pytest.mark.integration)
    asks_for_spark = "spark" in getattr(item, "fixturenames", ())
    if item.get_closest_marker("unit") is None or asks_for_spark:
        item.add_marker(pytest.mark.spark)


def _in_default_tier(item: pytest.Item) -> bool:
    return item.get_closest_marker("unit") is not None and item.get_closest_marker("spark") is None


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
def _session_before_spark_tests(request: pytest.FixtureRequest) -> Iterator[None]:
    """Start the worker's session before every test marked ``spark`` (every test but a unit
    test, and a unit test that asks for ``spark`` or is marked so); a test of the no-JVM tier
    that starts Spark all the same fails, naming the marker it needs."""
    if request.node.get_closest_marker("spark") is not None:
        request.getfixturevalue("spark")
        yield
        return
    running = SparkContext._active_spark_context is not None
    yield
    if not running and SparkContext._active_spark_context is not None:
        pytest.fail(
            "This test started Spark, outside the tier that starts a JVM: ask for the spark "
            "fixture or mark it @pytest.mark.spark",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap servers of a Kafka-protocol broker: ``KAFKA_BOOTSTRAP_SERVERS`` if set, else a
    local broker (``lakehouse_local.broker``) started on a free port for this test session."""
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
