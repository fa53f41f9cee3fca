"""Drawing a fixed list of examples from a hypothesis strategy, for property tests that run
many examples through one Spark job instead of one job per example, and the parts such
examples share: deliveries into micro-batches, and event times that fall on window
boundaries (:func:`boundary_time`)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar
from unittest import mock

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import providers

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
    """``count`` examples of ``strategy``, the same for the same ``seed_value`` in any process
    (see :func:`_seed_alone`)."""
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

    with _seed_alone():
        collect()
    return drawn


@contextmanager
def _seed_alone() -> Iterator[None]:
    """Hypothesis draws without the constants of the local modules loaded so far.

    Hypothesis (6.131 on) now and then draws a number or string from the literals of the
    project's modules in ``sys.modules``; which of them a process has imported depends on the
    tests it ran before (under xdist, on its worker), so the same seed drew other examples in
    CI than alone (the history property test's failure of issue 64, item 2). Here the pool of
    local constants is empty, and the cache of the values drawn from it is cleared before
    and after, so the examples depend on the seed only."""
    cache = providers.CONSTANTS_CACHE.cache
    cache.clear()
    try:
        with mock.patch.object(providers, "_get_local_constants", providers.Constants):
            yield
    finally:
        cache.clear()


def delivery(draw: st.DrawFn, batches: int) -> tuple[int, ...]:
    """The micro-batches (of ``batches``) a drawn record is delivered in: one, sometimes again
    in the first or the last (an at-least-once duplicate, possibly before the first)."""
    first = draw(st.integers(0, batches - 1))
    return (first, *draw(st.sampled_from([(), (), (), (), (0,), (batches - 1,)])))


#: Microseconds of a minute, the unit the property tests declare their windows in.
MINUTE = 60_000_000
#: Offsets (µs) of a time drawn near a boundary: on it (most often), 1 µs or 1 ms either side.
JITTERS = (0, 0, 0, 0, 1, -1, 1_000, -1_000)


def boundary_time(
    draw: st.DrawFn,
    steps: Sequence[int],
    span: int,
    earlier: Sequence[int] = (),
    apart: Sequence[int] = (),
) -> int:
    """An event time, in µs after a base that every step divides (a UTC midnight), in
    ``[0, span]``, drawn mostly where windows begin and end so that comparisons of equal
    times get exercised: a multiple of one of ``steps`` (a window's size, slide, gap,
    lookback, a join's bound, a watermark delay), one of the ``earlier`` times again (equal
    times in one group), or one of ``apart`` (default: ``steps``) before or after one of them
    (events exactly a session gap apart), each exactly or :data:`JITTERS` off; else any µs.
    Out of range: clamped, so ``span`` itself is a frequent time."""
    kind = draw(st.sampled_from(("multiple", "multiple", "again", "step", "step", "any")))
    if kind == "any":
        return draw(st.integers(0, span))
    if kind == "again" and earlier:
        return draw(st.sampled_from(earlier))
    if kind == "step" and earlier:
        step = draw(st.sampled_from(apart or steps))
        moment = draw(st.sampled_from(earlier)) + draw(st.sampled_from((step, -step)))
    else:
        step = draw(st.sampled_from(steps))
        moment = step * draw(st.integers(0, span // step))
    return min(max(moment + draw(st.sampled_from(JITTERS)), 0), span)
