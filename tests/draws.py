"""Drawing a fixed list of examples from a hypothesis strategy, for property tests that run
many examples through one Spark job instead of one job per example."""

from __future__ import annotations

from typing import TypeVar

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

T = TypeVar("T")


def draw_examples(strategy: st.SearchStrategy[T], seed_value: int, count: int) -> list[T]:
    """``count`` examples of ``strategy``, the same for the same ``seed_value``."""
    drawn: list[T] = []

    @seed(seed_value)
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )
    @given(strategy)
    def collect(example: T) -> None:
        drawn.append(example)

    collect()
    return drawn
