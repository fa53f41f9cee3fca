"""The Debezium capture child (lakehouse_local.debezium_capture) with Debezium's signalling
table on, so a test can ask for blocking and incremental snapshots: run as a script with the
same JSON argument as that module."""

from __future__ import annotations

import sys
from typing import Any

from lakehouse_local import debezium_capture

#: The signalling table (``id``, ``type``, ``data``), as Debezium documents it.
SIGNAL_TABLE = "debezium_signal"

_plain = debezium_capture.connector_properties


def _with_signals(*args: Any, **kwargs: Any) -> dict[str, str]:
    properties = _plain(*args, **kwargs)
    properties["signal.data.collection"] = f"public.{SIGNAL_TABLE}"
    properties["incremental.snapshot.chunk.size"] = "2"  # several chunks, several positions
    return properties


if __name__ == "__main__":
    debezium_capture.connector_properties = _with_signals
    debezium_capture.main(sys.argv[1:])
