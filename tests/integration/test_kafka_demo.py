"""The demo with ``--kafka``: starts its own local broker, runs every layer from Kafka, verifies,
and stops the broker it started."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse_local.broker import LocalBroker
from tests.cli import run_demo_cli

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(1200)]

#: The smallest workload the demo takes (as in test_local_cluster): every layer still gets rows.
EVENTS = "100"


def test_demo_from_kafka_starts_and_stops_its_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker_home = tmp_path / "broker"
    monkeypatch.setenv("LAKEHOUSE_BROKER_HOME", str(broker_home))
    result = run_demo_cli("demo", "--kafka", "--events", EVENTS, "--warehouse", tmp_path / "demo")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "local Kafka broker at 127.0.0.1:" in result.stdout
    assert f"producing {EVENTS} records to Kafka" in result.stdout
    assert "silver equals the reference fold" in result.stdout
    assert "bronze.shop_public_orders" in result.stdout
    assert not (broker_home / "broker.pid").exists()
    assert LocalBroker(home=broker_home).running_pid() is None


def test_demo_bootstrap_needs_kafka(tmp_path: Path) -> None:
    result = run_demo_cli("demo", "--bootstrap", "127.0.0.1:1", "--warehouse", tmp_path)
    assert result.returncode == 2 and "--bootstrap needs --kafka" in result.stderr
