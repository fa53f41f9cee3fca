"""An example of a user's scoring function for ``[[alerts]]`` (``method =
"lakehouse_demo.custom_scores:times_median"``); a function of your own has the same shape.

The function gets a pandas DataFrame with one row per scored row, columns ``key``, ``value``
and the key's baseline (``count``, ``mean``, ``stddev``, ``median``, ``mad``,
``mean_abs_dev``), and returns one score per row, in the same order (a sequence or a Series
of numbers). A row is an alert when its score is above the declaration's ``threshold``. It
runs on the executors (``mapInPandas``): its module must be importable there.
"""

from __future__ import annotations

from typing import Any


def times_median(batch: Any) -> Any:
    """How many times its key's median a value is (0 where the median is not above 0)."""
    median = batch["median"].where(batch["median"] > 0)
    return (batch["value"] / median).fillna(0.0)
