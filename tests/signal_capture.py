"""The Debezium capture child (lakehouse_local.debezium_capture) with Debezium's signalling
table on, so a test can ask for blocking and incremental snapshots: run as a script with the
same JSON argument as that module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
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


def start(conninfo: dict[str, Any], root: Path, timeout_s: int) -> debezium_capture.Capture:
    """Start this capture child against the database ``conninfo`` names, its output in
    ``root / "out"`` and its work files (log included) in ``root / "work"``."""
    out, work = root / "out", root / "work"
    out.mkdir()
    work.mkdir()
    arguments = {**conninfo, "out_dir": str(out), "work_dir": str(work), "timeout_s": timeout_s}
    log = (work / "capture.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, __file__, json.dumps(arguments)],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        cwd=work,
        env=debezium_capture._child_environment(),
        start_new_session=True,
    )
    return debezium_capture.Capture(process, out, work / "capture.log")


if __name__ == "__main__":
    debezium_capture.connector_properties = _with_signals
    debezium_capture.main(sys.argv[1:])
