"""What the layers log, for tests: the messages of our packages' loggers (INFO and above) while a
block runs, as a list, each also handed to a function if given (which may raise, to stop the
code that logs where it logs)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from lakehouse import LOGGERS


class _Told(logging.Handler):
    """Hands each record's message to ``tell`` (an error it raises reaches the caller of the
    logging call: :meth:`logging.Handler.handle` does not catch it)."""

    def __init__(self, tell: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self._tell = tell

    def emit(self, record: logging.LogRecord) -> None:
        self._tell(record.getMessage())


@contextmanager
def logged(told: Callable[[str], None] | None = None) -> Iterator[list[str]]:
    """The messages the loggers of :data:`lakehouse.LOGGERS` log at INFO and above
    while the block runs (from any thread), in order; each is handed to ``told`` first, if
    given. The loggers' levels are as before afterwards."""
    lines: list[str] = []

    def tell(message: str) -> None:
        if told is not None:
            told(message)
        lines.append(message)

    handler = _Told(tell)
    loggers = [logging.getLogger(name) for name in LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.INFO)
        logger.addHandler(handler)
    try:
        yield lines
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)
