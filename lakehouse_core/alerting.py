"""The ``[[alerts]]`` declaration: a per-key baseline fit from a silver table, applied to each
new or changed row (:mod:`gold.baseline`, :mod:`gold.alerts`)."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lakehouse_core.errors import ConfigError
from lakehouse_core.identifiers import require_identifier

#: The built-in scoring methods; any other method is a ``"module:function"`` path.
BUILTIN_METHODS = ("zscore", "mad")
#: A user's scoring function: a pandas batch in, one score per row out.
ScoreFunction = Callable[[Any], Any]


@dataclass(frozen=True)
class AlertSpec:
    """One alert: rows of silver table ``source`` whose ``value`` is far from the baseline of
    their ``key`` (fit by ``lakehouse fit``) land in ``gold.alerts``.

    ``method``: ``zscore`` (distance from the mean in standard deviations), ``mad`` (distance
    from the median in scaled median absolute deviations) or ``"module:function"``, a function
    of the user's over a pandas batch (see :func:`load_score_function`). A row is an alert when
    its score is above ``threshold``. Keys with fewer than ``min_history`` rows in the baseline
    are not scored. ``row_key``: the column that identifies a row of ``source``.
    Invalid settings raise :class:`ConfigError`.
    """

    name: str
    source: str
    key: str
    value: str
    event_time: str
    method: str = "mad"
    threshold: float = 3.5
    min_history: int = 5
    row_key: str = "id"

    def __post_init__(self) -> None:
        require_identifier(self.name, "alert name")
        require_identifier(self.baseline_table, f"baseline table name of alert {self.name!r}")
        where = f"alert {self.name!r}"
        require_identifier(self.source, f"{where} source table")
        for setting in ("key", "value", "event_time", "row_key"):
            require_identifier(getattr(self, setting), f"{where} {setting} column")
        threshold = self.threshold
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, int | float)
            or not math.isfinite(threshold)
            or threshold <= 0
        ):
            raise ConfigError(
                f"Invalid threshold {threshold!r} for {where}: use a number above 0 "
                "(e.g. 3.5: an alert when the score is above it)."
            )
        history = self.min_history
        if isinstance(history, bool) or not isinstance(history, int) or history < 2:
            raise ConfigError(
                f"Invalid min_history {history!r} for {where}: use a whole number, 2 or more "
                "(a key's baseline needs that many rows before its rows are scored)."
            )
        if self.method not in BUILTIN_METHODS:
            load_score_function(self.method, where)

    @property
    def baseline_table(self) -> str:
        """The gold table holding every fit of this alert's baseline."""
        return f"{self.name}_baseline"

    @property
    def custom(self) -> bool:
        """Whether ``method`` is a user's function."""
        return self.method not in BUILTIN_METHODS


def load_score_function(path: str, where: str = "alert") -> ScoreFunction:
    """The function at ``"module:function"``.

    Raises:
        ConfigError: ``path`` is not of that form, the module cannot be imported, or it has no
            callable of that name.
    """
    module_name, sep, function_name = path.partition(":")
    if not sep or not module_name or not function_name.isidentifier():
        raise ConfigError(
            f"Invalid method {path!r} for {where}: use one of {', '.join(BUILTIN_METHODS)}, "
            "or 'module:function' for a scoring function of your own."
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(
            f"Method {path!r} of {where}: module {module_name!r} cannot be imported ({error}). "
            "Put it on the Python path of the driver and the executors."
        ) from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ConfigError(
            f"Method {path!r} of {where}: module {module_name!r} has no function {function_name!r}."
        )
    return function  # type: ignore[no-any-return]
