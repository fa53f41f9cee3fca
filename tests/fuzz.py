"""Seeded mutations of valid records: what the fuzz suite feeds the pipeline.

Each mutation starts from a valid Debezium record of the generator and breaks one thing, as a
faulty producer, a disk or an attacker would: a value of the wrong type in the key, the row or
the Connect schema, a missing field, an ``after`` that is not an object, a garbage ``op`` or
sequence, deep nesting, a multi-megabyte value, text that is not JSON; and, for file lines,
flipped bytes, a cut, invalid UTF-8 and NUL bytes. A mutated record gets an offset of its own
(as a broker would give it), so it never shares its Kafka coordinates with a good record.

Byte-level damage stays inside the record's value, before the topic could be reached: a flipped
topic name would be a new (valid) topic, a table of its own, which is not what is tested here.
No mutation produces a line break, which would make two lines of one.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from typing import Any

from cdc.records import Record, json_bytes

#: Offsets of mutated records start here, far above the generator's.
OFFSET_BASE = 10**9
HUGE_VALUE_BYTES = 3 * 2**20
DEEP = 20_000
INVALID_UTF8 = (b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80")
WRONG_VALUES: tuple[Any, ...] = ("abc", 1.5, True, {}, [], None, 2**70, -1, "", {"a": [1]})
CONNECT_TYPES = ("string", "int64", "boolean", "bytes", "struct", "array", "map", "wat", 5)

Mutation = Callable[[random.Random, dict[str, Any]], bytes]


def _line(line: dict[str, Any]) -> bytes:
    return json.dumps(line, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _payload(document: Any) -> dict[str, Any] | None:
    """The payload of a Connect ``{schema, payload}`` document, or the document itself."""
    if isinstance(document, dict):
        inner = document.get("payload", document)
        return inner if isinstance(inner, dict) else None
    return None


def _pick(rng: random.Random, mapping: dict[str, Any] | None) -> str | None:
    return rng.choice(sorted(mapping)) if mapping else None


def key_type_swap(rng: random.Random, line: dict[str, Any]) -> bytes:
    key = _payload(line["key"])
    if (name := _pick(rng, key)) is not None and key is not None:
        key[name] = rng.choice(WRONG_VALUES)
    else:
        line["key"] = rng.choice(WRONG_VALUES)
    return _line(line)


def row_type_swap(rng: random.Random, line: dict[str, Any]) -> bytes:
    payload = _payload(line["value"]) or {}
    row = payload.get("after") or payload
    if isinstance(row, dict) and (name := _pick(rng, row)) is not None:
        row[name] = rng.choice(WRONG_VALUES)
    return _line(line)


def schema_type_swap(rng: random.Random, line: dict[str, Any]) -> bytes:
    value = line["value"]
    schema = value.get("schema") if isinstance(value, dict) else None
    fields = [f for side in (schema or {}).get("fields", []) for f in side.get("fields", [])]
    if fields:
        field = rng.choice(fields)
        field["type"] = rng.choice(CONNECT_TYPES)
        if rng.random() < 0.3:
            field["name"] = rng.choice(["io.debezium.time.Nope", "", 7])
    return _line(line)


def missing_field(rng: random.Random, line: dict[str, Any]) -> bytes:
    where = rng.choice(["line", "payload", "source", "schema"])
    payload = _payload(line["value"]) or {}
    target = {
        "line": line,
        "payload": payload,
        "source": payload.get("source") if isinstance(payload.get("source"), dict) else {},
        "schema": line["value"] if isinstance(line["value"], dict) else {},
    }[where]
    if (name := _pick(rng, target)) is not None:
        del target[name]
    return _line(line)


def garbage_envelope(rng: random.Random, line: dict[str, Any]) -> bytes:
    payload = _payload(line["value"])
    if payload is None:
        return _line(line)
    what = rng.choice(["op", "after", "before", "ts_ms", "source"])
    payload[what] = {
        "op": rng.choice(["x", 5, None, "", "cc"]),
        "after": rng.choice(["str", 5, [], [{"id": 1}], True]),
        "before": rng.choice(["str", 5, []]),
        "ts_ms": rng.choice(["x", {}, -1, 10**30]),
        "source": rng.choice([None, "x", {"lsn": "abc"}, {"lsn": -5, "txId": "t"}, []]),
    }[what]
    return _line(line)


def record_field_swap(rng: random.Random, line: dict[str, Any]) -> bytes:
    name = rng.choice(["partition", "offset", "timestamp", "topic", "headers"])
    line[name] = {
        "partition": rng.choice(["1", -5, 2**40, 1.5, None]),
        "offset": rng.choice([-1, "x", 2**64, None]),
        "timestamp": rng.choice(["x", 10**30, -7, None]),
        "topic": rng.choice([5, "", None, ["t"]]),
        "headers": rng.choice(["x", [1], {"h": {"deep": [1]}}]),
    }[name]
    return _line(line)


def deep_nesting(rng: random.Random, line: dict[str, Any]) -> bytes:
    nested = "[" * DEEP + "]" * DEEP
    if rng.random() < 0.5:  # as JSON in the line itself
        return _line(line).replace(b'"value":', b'"value":' + nested.encode() + b',"v":', 1)
    line["value"] = nested  # as the record's value text
    return _line(line)


def huge_value(rng: random.Random, line: dict[str, Any]) -> bytes:
    payload = _payload(line["value"]) or {}
    row = payload.get("after")
    filler = "x" * HUGE_VALUE_BYTES
    if isinstance(row, dict) and (name := _pick(rng, row)) is not None:
        row[name] = filler
    else:
        line["value"] = filler
    return _line(line)


def not_json_value(rng: random.Random, line: dict[str, Any]) -> bytes:
    line[rng.choice(["key", "value"])] = rng.choice(["{", "}{", "garbage", "nul\u0000l", "\ufffd"])
    return _line(line)


def _damage_value(
    rng: random.Random, line: dict[str, Any], damage: Callable[[bytes], bytes]
) -> bytes:
    """``damage`` applied to the bytes of the line's value, which is written last."""
    value = line.pop("value")
    head = _line(line)[:-1] + b',"value":'
    body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return head + damage(body) + b"}"


def byte_flip(rng: random.Random, line: dict[str, Any]) -> bytes:
    def flip(body: bytes) -> bytes:
        data = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(data))
            data[at] = rng.choice([b for b in range(256) if b not in (0x0A, 0x0D)])
        return bytes(data)

    return _damage_value(rng, line, flip)


def invalid_utf8(rng: random.Random, line: dict[str, Any]) -> bytes:
    def insert(body: bytes) -> bytes:
        at = rng.randrange(len(body))
        return body[:at] + rng.choice(INVALID_UTF8) + body[at:]

    return _damage_value(rng, line, insert)


def nul_bytes(rng: random.Random, line: dict[str, Any]) -> bytes:
    def insert(body: bytes) -> bytes:
        at = rng.randrange(len(body))
        return body[:at] + b"\x00" * rng.randint(1, 4) + body[at:]

    return _damage_value(rng, line, insert)


def cut(rng: random.Random, line: dict[str, Any]) -> bytes:
    data = _line(line)
    return data[: rng.randrange(1, len(data))]


#: Mutations that keep a Kafka record a Kafka record (its key and value bytes are damaged).
RECORD_MUTATIONS: tuple[Mutation, ...] = (
    key_type_swap,
    row_type_swap,
    schema_type_swap,
    missing_field,
    garbage_envelope,
    not_json_value,
    deep_nesting,
)
#: Damage only a file line can have.
LINE_MUTATIONS: tuple[Mutation, ...] = (
    record_field_swap,
    byte_flip,
    invalid_utf8,
    nul_bytes,
    cut,
)


def line_dict(record: Record) -> dict[str, Any]:
    """The record as the JSON object of its file line (a deep copy, safe to damage)."""
    return copy.deepcopy(json.loads(record.to_line()))


def mutated_lines(records: list[Record], count: int, seed: int, huge: int = 3) -> list[bytes]:
    """``count`` damaged file lines from ``records``; ``huge`` of them multi-megabyte."""
    rng = random.Random(seed)
    mutations = RECORD_MUTATIONS + LINE_MUTATIONS
    lines = []
    for n in range(count):
        line = line_dict(rng.choice(records))
        line["offset"] = OFFSET_BASE + n
        mutation = huge_value if n < huge else rng.choice(mutations)
        lines.append(mutation(rng, line))
    return lines


def mutated_records(
    records: list[Record], count: int, seed: int
) -> list[tuple[bytes | None, bytes | None]]:
    """``count`` (key bytes, value bytes) of Kafka records whose key or value is damaged:
    half by a mutation of the JSON, half by raw damage to the value's bytes."""
    rng = random.Random(seed)
    damaged: list[tuple[bytes | None, bytes | None]] = []
    for _ in range(count):
        record = rng.choice(records)
        if rng.random() < 0.5:
            mutation = rng.choice([m for m in RECORD_MUTATIONS if m is not deep_nesting])
            line = json.loads(mutation(rng, line_dict(record)))
            damaged.append((json_bytes(line.get("key")), json_bytes(line.get("value"))))
        else:
            damaged.append((record.key_bytes, _raw_damage(rng, record.value_bytes or b"{}")))
    return damaged


def _raw_damage(rng: random.Random, body: bytes) -> bytes:
    at = rng.randrange(len(body))
    return rng.choice(
        [
            body[:at],
            body[:at] + rng.choice(INVALID_UTF8) + body[at:],
            body[:at] + b"\x00" + body[at:],
            bytes(b ^ 0x20 if i == at else b for i, b in enumerate(body)),
            ("[" * DEEP + "]" * DEEP).encode(),
        ]
    )
