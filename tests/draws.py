"""Drawing a fixed list of examples from a hypothesis strategy, for property tests that run
many examples through one Spark job instead of one job per example."""

from __future__ import annotations

import os
import random
from typing import TypeVar

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

T = TypeVar("T")

#: ``make test-deep`` sets this to 10: ten times the examples, each run from a new seed.
DEPTH = int(os.environ.get("LAKEHOUSE_TEST_DEPTH", "1"))
#: The seed of the default run, so that CI draws the same examples every time.
FIXED_SEED = 20_261_123


def example_count(base: int) -> int:
    """How many examples a property test draws: ``base`` times the run's depth."""
    return base * DEPTH


def property_seed(variable: str) -> int:
    """The seed in environment ``variable`` if set (to reproduce a failure), else a random one
    for a deep run, else :data:`FIXED_SEED`."""
    configured = os.environ.get(variable)
    if configured:
        return int(configured)
    return random.randrange(2**32) if DEPTH > 1 else FIXED_SEED


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


def delivery(draw: st.DrawFn, batches: int) -> tuple[int, ...]:
    """The micro-batches (of ``batches``) a drawn record is delivered in: one, sometimes again
    in the first or the last (an at-least-once duplicate, possibly before the first)."""
    first = draw(st.integers(0, batches - 1))
    return (first, *draw(st.sampled_from([(), (), (), (), (0,), (batches - 1,)])))
