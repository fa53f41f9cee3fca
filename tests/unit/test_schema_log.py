"""A moved checkpoint's schema log is pointed at its new place; nothing else changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gold.schema_log import rebase_schema_log

pytestmark = pytest.mark.unit

TABLE_ID = "888122dd-316e-47cb-8612-3336e3d80560"


def write_entry(checkpoint: Path, number: int, source_path: str) -> Path:
    """An entry as Delta 4.0 writes it: ``v1``, then one JSON line, no final newline."""
    folder = checkpoint / "_schema_log" / f"_schema_log_{TABLE_ID}"
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / str(number)
    metadata = {
        "tableId": TABLE_ID,
        "deltaCommitVersion": number + 3,
        "dataSchemaJson": '{"type":"struct","fields":[]}',
        "sourceMetadataPath": source_path,
    }
    entry.write_text("v1\n" + json.dumps(metadata, separators=(",", ":")))
    (folder / f".{number}.crc").write_bytes(b"crc of old text")
    return entry


def test_entries_of_a_moved_checkpoint_follow_it(tmp_path: Path) -> None:
    old = tmp_path / "staging" / "gold_revenue"
    new = tmp_path / "live" / "gold_revenue"
    entries = [write_entry(new, n, f"file:{old}/sources/0") for n in range(2)]
    before = [json.loads(e.read_text().split("\n")[1]) for e in entries]

    assert rebase_schema_log(str(new)) == 2

    for entry, original in zip(entries, before, strict=True):
        version, body = entry.read_text().split("\n")
        assert version == "v1"
        assert json.loads(body) == {**original, "sourceMetadataPath": f"file:{new}/sources/0"}
        assert not entry.with_name(f".{entry.name}.crc").exists()
    assert sorted(p.name for p in entries[0].parent.iterdir()) == ["0", "1"]
    assert rebase_schema_log(str(new)) == 0  # idempotent


def test_a_checkpoint_in_place_is_left_alone(tmp_path: Path) -> None:
    checkpoint = tmp_path / "gold_revenue"
    entry = write_entry(checkpoint, 0, f"file:{checkpoint}/sources/0")
    text = entry.read_text()

    assert rebase_schema_log(f"file:{checkpoint}") == 0
    assert entry.read_text() == text
    assert entry.with_name(".0.crc").exists()


def test_no_log_and_remote_checkpoints_are_not_touched(tmp_path: Path) -> None:
    assert rebase_schema_log(str(tmp_path / "never_ran")) == 0
    assert rebase_schema_log("s3a://bucket/warehouse/_system/checkpoints/gold_revenue") == 0
