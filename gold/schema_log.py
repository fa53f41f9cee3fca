"""Keeping a change-feed query's Delta schema log valid when its checkpoint moves.

Delta's schema log (``schemaTrackingLocation``) records in every entry the absolute path of the
query's source metadata (``<checkpoint>/sources/0``) and refuses to start when the checkpoint
is found elsewhere. Checkpoints do move: ``lakehouse replay`` builds them in a staging
directory and renames them into place, and users copy or move whole warehouses. Before a
query starts, :func:`rebase_schema_log` points the entries at the checkpoint's current place.

Each entry is a small text file, ``v1`` then one JSON line. Only ``sourceMetadataPath`` is
changed; the rewrite is atomic (write aside, rename), and Hadoop's ``.<entry>.crc`` checksum
of the old content is removed with it (Hadoop reads a file without one unverified). Local file
systems only: on other schemes nothing is touched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlparse

SCHEMA_LOG = "_schema_log"
_SOURCE_PATH = "sourceMetadataPath"


def schema_log_location(checkpoint: str, source: int = 0) -> str:
    """Where, under a query's checkpoint, Delta keeps the schema log of its change-feed input
    number ``source`` (a gold table with a join reads two)."""
    return f"{checkpoint}/{SCHEMA_LOG}" + (f"_{source}" if source else "")


def rebase_schema_log(checkpoint: str, source: int = 0) -> int:
    """Point every entry of the checkpoint's schema log (of input ``source``) at the
    checkpoint's current place.

    Returns the number of entries rewritten (0 when none had moved, or the checkpoint is not on
    the local file system).
    """
    local = _local_path(checkpoint)
    if local is None:
        return 0
    expected = f"file:{local / 'sources' / str(source)}"
    rewritten = 0
    log = Path(schema_log_location(str(local), source))
    for entry in sorted(log.glob("_schema_log_*/[0-9]*")):
        if _rebase_entry(entry, expected):
            rewritten += 1
    return rewritten


def _local_path(location: str) -> Path | None:
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file"):
        return None
    return Path(parsed.path if parsed.scheme else location).absolute()


def _rebase_entry(entry: Path, expected: str) -> bool:
    version, _, body = entry.read_text(encoding="utf-8").partition("\n")
    metadata = json.loads(body)
    if metadata.get(_SOURCE_PATH) in (None, expected):
        return False
    metadata[_SOURCE_PATH] = expected
    aside = entry.with_name(f".{entry.name}.rebase")
    aside.write_text(f"{version}\n{json.dumps(metadata, separators=(',', ':'))}", "utf-8")
    entry.with_name(f".{entry.name}.crc").unlink(missing_ok=True)
    os.replace(aside, entry)
    return True
