"""The generator's injected anomalies: ground truth returned, orders far above their
customer's median, and no change to workloads without them."""

from __future__ import annotations

import statistics
from base64 import b64decode
from collections import defaultdict

import pytest

from lakehouse_core.errors import ConfigError
from lakehouse_demo.generator import ANOMALY_FACTOR, WorkloadConfig, generate, generate_workload

pytestmark = pytest.mark.unit


def created_orders(records: list) -> dict[int, tuple[int, int]]:  # type: ignore[type-arg]
    """Order id -> (customer id, total in cents) of each order's create event."""
    orders = {}
    for record in records:
        payload = (record.value or {}).get("payload") if record.topic.endswith(".orders") else None
        if isinstance(payload, dict) and payload.get("op") == "c":
            after = payload["after"]
            total = int.from_bytes(b64decode(after["total"]), "big", signed=True)
            orders[after["id"]] = (after["customer_id"], total)
    return orders


def test_anomalies_are_far_above_their_customers_median() -> None:
    workload = generate_workload(WorkloadConfig(events=3000, seed=7, anomaly_rate=0.05))
    orders = created_orders(workload.records)
    assert len(workload.anomalous_orders) >= 5
    assert workload.anomalous_orders <= set(orders)
    usual: dict[int, list[int]] = defaultdict(list)
    for order_id, (customer, total) in orders.items():
        if order_id not in workload.anomalous_orders:
            usual[customer].append(total)
    for order_id in workload.anomalous_orders:
        customer, total = orders[order_id]
        assert total > ANOMALY_FACTOR / 2 * statistics.median(usual[customer]), order_id
    # The calm shop: no order outside 4x its customer's median, no refunds.
    for customer, totals in usual.items():
        assert all(0 < t < 4 * statistics.median(totals) for t in totals), customer


def test_no_anomalies_leave_the_workload_as_it_was() -> None:
    plain = WorkloadConfig(events=500, malformed_rate=0.05)
    workload = generate_workload(plain)
    assert workload.anomalous_orders == frozenset()
    assert workload.records == generate(plain)
    with pytest.raises(ConfigError, match=r"anomaly_rate must be a number between 0 and 0\.5"):
        WorkloadConfig(events=10, anomaly_rate=0.9)
