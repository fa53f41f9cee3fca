"""Tests of the workload generator (plain Python, no Spark)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import zlib
from collections import Counter, defaultdict
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from cdc.records import Record
from lakehouse_core.errors import ConfigError
from lakehouse_demo import generator
from lakehouse_demo.generator import (
    CLICKSTREAM_TOPIC,
    CUSTOMERS_TOPIC,
    ORDERS_TOPIC,
    WorkloadConfig,
    generate,
    topic_names,
    write_files,
)
from lakehouse_demo.shop import TOAST_PLACEHOLDER, decimal_b64

pytestmark = pytest.mark.unit

CDC_TOPICS = (CUSTOMERS_TOPIC, ORDERS_TOPIC)
ISO_MILLIS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
ZONED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z")


@pytest.fixture(scope="module")
def small() -> list[Record]:
    return generate(WorkloadConfig(events=500, malformed_rate=0.05))


@pytest.fixture(scope="module")
def medium() -> list[Record]:
    return generate(WorkloadConfig(events=20_000, seed=7, malformed_rate=0.01))


@pytest.fixture(scope="module")
def medium_copies(medium: list[Record]) -> set[tuple[str, int, int]]:
    return redeliveries(medium)


# --- helpers: an independent reading of the records -------------------------------------------


def decode_decimal(text: str, scale: int) -> Decimal:
    """Connect Decimal (precise mode) back to a Decimal, independently of the encoder."""
    return Decimal(int.from_bytes(base64.b64decode(text), "big", signed=True)).scaleb(-scale)


def payload(record: Record) -> dict[str, Any] | None:
    """The Debezium payload of a well-formed CDC record, else None."""
    value = record.value
    if ".public." not in record.topic or not isinstance(value, dict):
        return None
    body = value.get("payload")
    if not isinstance(body, dict) or body.get("op") not in {"c", "u", "d", "r", "t"}:
        return None
    if "sequence" not in body["source"] or (record.key is None and body["op"] != "t"):
        return None
    return body


def sequence(body: dict[str, Any]) -> tuple[int, int]:
    first, second = json.loads(body["source"]["sequence"])
    return (-1 if first is None else int(first), int(second))


def is_malformed(record: Record) -> bool:
    if record.value is None:
        return False  # tombstone
    if record.topic == CLICKSTREAM_TOPIC:
        return not isinstance(record.value, dict) or "event_id" not in record.value
    return payload(record) is None


def log_order(records: list[Record]) -> list[Record]:
    """The records as the partitions hold them."""
    return sorted(records, key=lambda r: (r.topic, r.partition, r.offset))


def redeliveries(records: list[Record]) -> set[tuple[str, int, int]]:
    """Coordinates of records whose key and value already appeared earlier in their partition."""
    seen: set[tuple[str, int, bytes | None, bytes | None]] = set()
    copies = set()
    for record in log_order(records):
        ident = (record.topic, record.partition, record.key_bytes, record.value_bytes)
        if ident in seen and record.value is not None:
            copies.add((record.topic, record.partition, record.offset))
        seen.add(ident)
    return copies


# --- configuration and topics -----------------------------------------------------------------


def test_topic_names_follow_the_server_prefix() -> None:
    assert topic_names("shop") == (CUSTOMERS_TOPIC, ORDERS_TOPIC, CLICKSTREAM_TOPIC)
    assert topic_names("prod-eu").orders == "prod-eu.public.orders"
    records = generate(WorkloadConfig(events=300, server="prod-eu"))
    assert {r.topic for r in records} == set(topic_names("prod-eu"))
    sources = [p["source"]["name"] for r in records if (p := payload(r)) is not None]
    assert set(sources) == {"prod-eu"}


@pytest.mark.parametrize(
    "changes",
    [
        {"events": -1},
        {"events": 1.5},
        {"malformed_rate": 1.2},
        {"malformed_rate": -0.1},
        {"malformed_rate": float("nan")},
        {"duplicate_rate": 0.9},
        {"partitions": 0},
        {"server": "bad topic"},
        {"start_ms": -5},
    ],
)
def test_invalid_config_is_refused(changes: dict[str, Any]) -> None:
    settings: dict[str, Any] = {"events": 10, **changes}
    with pytest.raises(ConfigError, match=next(iter(changes))):
        WorkloadConfig(**settings)


# --- counts, determinism, Kafka layout --------------------------------------------------------


def test_same_config_gives_the_same_records(small: list[Record]) -> None:
    assert generate(WorkloadConfig(events=500, malformed_rate=0.05)) == small
    other = generate(WorkloadConfig(events=500, malformed_rate=0.05, seed=43))
    assert [r.to_line() for r in other] != [r.to_line() for r in small]


def test_same_records_in_another_process(small: list[Record]) -> None:
    """No dependence on string hashing (set order) or anything else process-specific."""
    script = (
        "import hashlib, sys\n"
        "from lakehouse_demo.generator import WorkloadConfig, generate\n"
        "lines = (r.to_line() for r in generate(WorkloadConfig(events=500, malformed_rate=0.05)))\n"
        "sys.stdout.write(hashlib.sha256('\\n'.join(lines).encode()).hexdigest())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    expected = hashlib.sha256("\n".join(r.to_line() for r in small).encode()).hexdigest()
    assert done.stdout == expected


@pytest.mark.parametrize("events", [0, 1, 2, 7, 31, 200, 500, 1234])
@pytest.mark.parametrize("malformed_rate", [0.0, 0.05, 0.5, 1.0])
def test_exact_number_of_records(events: int, malformed_rate: float) -> None:
    for seed in (42, 8, 15):
        config = WorkloadConfig(events=events, malformed_rate=malformed_rate, seed=seed)
        records = generate(config)
        assert len(records) == events
        assert sum(map(is_malformed, records)) == round(events * malformed_rate)


def test_offsets_are_contiguous_per_partition(medium: list[Record]) -> None:
    offsets: dict[tuple[str, int], list[int]] = defaultdict(list)
    for record in medium:
        offsets[record.topic, record.partition].append(record.offset)
    assert {topic for topic, _ in offsets} == {CUSTOMERS_TOPIC, ORDERS_TOPIC, CLICKSTREAM_TOPIC}
    for found in offsets.values():
        assert found == list(range(len(found)))  # in delivery order, each partition in log order


def test_partitions_are_interleaved_in_delivery(medium: list[Record]) -> None:
    switches = sum((a.topic, a.partition) != (b.topic, b.partition) for a, b in pairwise(medium))
    assert switches > len(medium) / 100


@pytest.mark.parametrize("partitions", [1, 3, 7])
def test_partition_is_a_hash_of_the_key(partitions: int) -> None:
    records = generate(WorkloadConfig(events=2000, partitions=partitions, malformed_rate=0.05))
    assert {r.partition for r in records} == set(range(partitions))
    for record in records:
        data = record.key_bytes
        expected = 0 if data is None else zlib.crc32(data) % partitions
        assert record.partition == expected


def test_redeliveries_follow_the_duplicate_rate() -> None:
    records = generate(WorkloadConfig(events=5000, duplicate_rate=0.02))
    copies = redeliveries(records)
    assert 90 <= len(copies) <= 100  # tombstones and truncates are not counted here
    assert not redeliveries(generate(WorkloadConfig(events=2000, duplicate_rate=0.0)))


def test_mix_of_topics_and_key_counts(medium: list[Record]) -> None:
    shares = Counter(r.topic for r in medium)
    assert shares[CLICKSTREAM_TOPIC] == pytest.approx(0.40 * len(medium), rel=0.05)
    assert shares[ORDERS_TOPIC] == pytest.approx(0.45 * len(medium), rel=0.05)
    assert shares[CUSTOMERS_TOPIC] == pytest.approx(0.15 * len(medium), rel=0.1)
    keys = {(r.topic, r.key_bytes) for r in medium if not is_malformed(r)}
    assert 1500 <= len(keys) <= 3000  # about one key per ten records


# --- Debezium content -------------------------------------------------------------------------


def test_small_workload_has_every_kind_of_event(small: list[Record]) -> None:
    bodies = [(r, p) for r in small if (p := payload(r)) is not None]
    ops = Counter((r.topic, p["op"]) for r, p in bodies)
    for topic in CDC_TOPICS:
        for op in "rcud":
            assert ops[topic, op] > 0, (topic, op)
    assert ops[ORDERS_TOPIC, "t"] >= 1 and ops[CUSTOMERS_TOPIC, "t"] == 0
    deletes = {(r.topic, r.key_bytes) for r, p in bodies if p["op"] == "d"}
    tombstones = {(r.topic, r.key_bytes) for r in small if r.value is None}
    assert deletes == tombstones
    assert any(p["after"] and p["after"].get("notes") == TOAST_PLACEHOLDER for _, p in bodies)
    assert any(r.headers.get("__debezium.oldkey") for r, _ in bodies)
    assert redeliveries(small)
    assert any(r.topic == CLICKSTREAM_TOPIC and not is_malformed(r) for r in small)


def test_small_workload_has_reinserts_noops_and_overlapping_transactions(
    small: list[Record],
) -> None:
    assert sum(map(is_malformed, small)) == 25
    history: dict[tuple[str, bytes | None], list[dict[str, Any]]] = defaultdict(list)
    for record in log_order(small):
        body = payload(record)
        if body is not None and body["op"] != "t":
            history[record.topic, record.key_bytes].append(body)
    ops = ["".join(b["op"] for b in bodies) for bodies in history.values()]
    assert any("dc" in found for found in ops)  # deleted, then inserted again

    def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
        return all(a[k] == b[k] or TOAST_PLACEHOLDER in (a[k], b[k]) for k in a)

    assert any(
        b["op"] == "u" and a["after"] and same(a["after"], b["after"])
        for bodies in history.values()
        for a, b in pairwise(bodies)
    )  # an update without a real change
    streamed = sorted(
        (sequence(p), p["source"]["lsn"]) for r in small if (p := payload(r)) and p["op"] != "r"
    )
    assert any(b[1] < a[1] for a, b in pairwise(streamed))


def test_tiny_workload_still_covers_the_essentials() -> None:
    records = generate(WorkloadConfig(events=200))
    ops = {p["op"] for r in records if (p := payload(r)) is not None}
    assert ops == {"r", "c", "u", "d", "t"}
    assert any(r.value is None for r in records)
    assert any(r.topic == CLICKSTREAM_TOPIC for r in records)


def test_envelope_and_schema_shape(small: list[Record]) -> None:
    for record in small:
        body = payload(record)
        if body is None:
            continue
        schema = record.value["schema"]
        assert schema["name"] == f"{record.topic}.Envelope"
        assert [f["field"] for f in schema["fields"]] == [
            "before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns",
        ]  # fmt: skip
        assert list(body) == [f["field"] for f in schema["fields"]]
        source = body["source"]
        assert source["connector"] == "postgresql" and source["db"] == "shop"
        assert source["table"] == record.topic.rsplit(".", 1)[1]
        assert body["ts_ms"] >= source["ts_ms"] and body["transaction"] is None
        if body["op"] == "t":
            assert record.key is None and record.partition == 0
            assert body["before"] is None and body["after"] is None
            continue
        assert record.key["schema"]["name"] == f"{record.topic}.Key"
        key = record.key["payload"]["id"]
        row = body["before"] if body["op"] == "d" else body["after"]
        assert row["id"] == key
        if body["op"] == "d":
            assert body["after"] is None
            assert all(v is None for k, v in body["before"].items() if k != "id")
        else:
            assert body["before"] is None  # REPLICA IDENTITY DEFAULT
            assert ZONED.fullmatch(row["updated_at"])


def test_customer_columns(medium: list[Record]) -> None:
    rows = [p["after"] for r in medium if (p := payload(r)) and r.topic == CUSTOMERS_TOPIC]
    rows = [row for row in rows if row is not None]
    assert {len(row["tier"]) for row in rows} == {8}
    assert any(row["tier"] == "gold    " for row in rows)
    assert any(row["birth_date"] < 0 for row in rows)  # before 1970
    balances = [decode_decimal(row["balance"], 2) for row in rows]
    assert min(balances) < 0 < max(balances)
    assert any(b.as_tuple().exponent == -2 for b in balances)
    placeholders = sum(row["notes"] == TOAST_PLACEHOLDER for row in rows)
    assert 0.05 < placeholders / len(rows) < 0.5


def test_decimals_round_trip(medium: list[Record]) -> None:
    totals = []
    for record in medium:
        body = payload(record)
        if record.topic != ORDERS_TOPIC or body is None or not body["after"]:
            continue
        after = body["after"]
        total = decode_decimal(after["total"], 2)
        items = json.loads(after["items"])
        assert total == sum(Decimal(i["price"]) * i["qty"] for i in items)
        totals.append(total)
    assert min(totals) < 0  # refunds
    assert max(totals) > Decimal("100000")  # an unscaled value of several bytes


@pytest.mark.parametrize(
    ("unscaled", "encoded"),
    [(0, "AA=="), (1, "AQ=="), (127, "fw=="), (128, "AIA="), (-1, "/w=="), (-128, "gA=="),
     (-129, "/38="), (12345, "MDk="), (-12345, "z8c="), (10**11, "F0h26AA=")],
)  # fmt: skip
def test_decimal_encoding_matches_java_big_integer(unscaled: int, encoded: str) -> None:
    assert decimal_b64(unscaled) == encoded
    assert decode_decimal(encoded, 0) == unscaled


def test_sequences_increase_per_key_in_log_order(
    medium: list[Record], medium_copies: set[tuple[str, int, int]]
) -> None:
    copies = medium_copies
    last: dict[tuple[str, bytes | None], tuple[int, int]] = {}
    for record in log_order(medium):
        body = payload(record)
        if (
            body is None
            or body["op"] == "t"
            or (record.topic, record.partition, record.offset) in copies
        ):
            continue
        ident, position = (record.topic, record.key_bytes), sequence(body)
        assert position > last.get(ident, (-2, 0)), ident
        last[ident] = position


def test_sequence_orders_transactions_while_lsn_goes_backwards(medium: list[Record]) -> None:
    bodies = sorted(
        {
            (sequence(p), p["source"]["lsn"], p["source"]["txId"])
            for r in medium
            if (p := payload(r))
        }
    )
    assert all(second == lsn for (_, second), lsn, _ in bodies)
    lsns = [lsn for _, lsn, _ in bodies]
    assert any(b < a for a, b in pairwise(lsns))
    streamed = [s for s, _, _ in bodies if s[0] != -1]
    assert streamed and all(second > 0 for _, second in streamed)


def test_snapshot_comes_first_and_ends_with_last(
    medium: list[Record], medium_copies: set[tuple[str, int, int]]
) -> None:
    copies = medium_copies
    snapshot = [
        p
        for r in medium
        if (p := payload(r)) and p["op"] == "r" and (r.topic, r.partition, r.offset) not in copies
    ]
    markers = Counter(p["source"]["snapshot"] for p in snapshot)
    assert markers["last"] == 1 and markers["true"] == len(snapshot) - 1
    assert {p["source"]["sequence"] for p in snapshot} == {snapshot[0]["source"]["sequence"]}
    assert json.loads(snapshot[0]["source"]["sequence"])[0] is None
    first_stream = min(sequence(p) for r in medium if (p := payload(r)) and p["op"] != "r")
    assert first_stream[0] == -1 and first_stream > sequence(snapshot[0])


def test_primary_key_change_shares_one_position(medium: list[Record]) -> None:
    by_position: dict[str, list[tuple[Record, dict[str, Any]]]] = defaultdict(list)
    for record in medium:
        body = payload(record)
        if body is not None and record.headers:
            by_position[body["source"]["sequence"]].append((record, body))
    assert by_position
    for pair in by_position.values():
        ops = sorted(body["op"] for _, body in pair)
        assert ops[0] == "c" and set(ops[1:]) == {"d"}  # d may be redelivered
        (create,) = [r for r, b in pair if b["op"] == "c"]
        old = json.loads(create.headers["__debezium.oldkey"])["id"]
        assert any(b["before"]["id"] == old for _, b in pair if b["op"] == "d")


def test_malformed_records_are_varied_and_use_unused_keys() -> None:
    records = generate(WorkloadConfig(events=4000, malformed_rate=0.05))
    bad = [r for r in records if is_malformed(r)]
    assert len(bad) == 200
    assert {r.topic for r in bad} == {CUSTOMERS_TOPIC, ORDERS_TOPIC, CLICKSTREAM_TOPIC}
    kinds = set()
    for record in bad:
        value = record.value
        if isinstance(value, str):
            kinds.add("text")
            with pytest.raises(ValueError):
                json.loads(value)
        elif not isinstance(value, dict):
            kinds.add("not an object")
        elif record.topic == CLICKSTREAM_TOPIC:
            kinds.add("no event_id")
        elif "op" not in value["payload"]:
            kinds.add("no op")
        elif value["payload"]["op"] not in "cudrt":
            kinds.add("unknown op")
        elif record.key is None:
            kinds.add("no key")
        else:
            assert "sequence" not in value["payload"]["source"]
            kinds.add("no sequence")
    assert len(kinds) == 7
    valid_keys = {(r.topic, r.key_bytes) for r in records if not is_malformed(r)}
    assert not {(r.topic, r.key_bytes) for r in bad if r.key is not None} & valid_keys


# --- clickstream ------------------------------------------------------------------------------


def test_clickstream_events(medium: list[Record], medium_copies: set[tuple[str, int, int]]) -> None:
    copies = medium_copies
    events = [
        r
        for r in log_order(medium)
        if r.topic == CLICKSTREAM_TOPIC
        and not is_malformed(r)
        and (r.topic, r.partition, r.offset) not in copies
    ]
    values = [r.value for r in events]
    assert len({v["event_id"] for v in values}) == len(values)
    assert all(r.key == {"user_id": v["user_id"]} for r, v in zip(events, values, strict=True))
    assert {v["action"] for v in values} == {"view", "click", "add_to_cart", "checkout"}
    assert all(ISO_MILLIS.fullmatch(v["ts"]) for v in values)
    # Late events: event time well before the produce time.
    lateness = [r.timestamp_ms - iso_ms(v["ts"]) for r, v in zip(events, values, strict=True)]
    assert min(lateness) >= 0 and any(late > 5_000 for late in lateness)
    # Sessions: most gaps between a user's events are short, some exceed 30 minutes.
    times: dict[int, list[int]] = defaultdict(list)
    for value in values:
        times[value["user_id"]].append(iso_ms(value["ts"]))
    gaps = [
        b - a for ts in times.values() for a, b in zip(sorted(ts), sorted(ts)[1:], strict=False)
    ]
    assert sum(g < 300_000 for g in gaps) > 0.8 * len(gaps)
    assert any(g > 1_800_000 for g in gaps)


def iso_ms(text: str) -> int:
    from datetime import datetime

    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


# --- the records fold to the simulated database -----------------------------------------------


def fold(records: list[Record], topic: str) -> dict[int, dict[str, Any]]:
    """Apply the table's change events in sequence order (docs/silver-semantics.md)."""
    events = []
    for record in records:
        body = payload(record)
        if body is not None and record.topic == topic:
            events.append((sequence(body), record.partition, record.offset, body))
    rows: dict[int, dict[str, Any]] = {}
    for *_, body in sorted(events, key=lambda e: e[:3]):
        if body["op"] == "t":
            rows.clear()
        elif body["op"] == "d":
            rows.pop(body["before"]["id"], None)
        else:
            after, previous = dict(body["after"]), rows.get(body["after"]["id"])
            for column, value in after.items():
                if value == TOAST_PLACEHOLDER and previous is not None:
                    after[column] = previous[column]
            rows[after["id"]] = after
    return rows


@pytest.mark.parametrize("events", [500, 10_000])
def test_records_fold_to_the_simulated_state(events: int) -> None:
    config = WorkloadConfig(events=events, seed=11, malformed_rate=0.02)
    shop = generator._Shop(config, events, 10)
    shop.run()
    records = generator._deliver(shop.out, shop.malformed_at, 10, shop.rng)
    customers = fold(records, CUSTOMERS_TOPIC)
    moved = {
        json.loads(r.key_bytes or b"{}")["payload"]["id"]
        for r in records
        if r.headers.get("__debezium.oldkey")
    }
    expected = {c.id: c.row() for c in shop.customers.items}
    assert customers.keys() == expected.keys()
    for key, row in customers.items():
        if row["notes"] == TOAST_PLACEHOLDER:  # a moved row's unchanged notes stay unknown
            assert key in moved
            row["notes"] = expected[key]["notes"]
        assert row == expected[key]
    assert fold(records, ORDERS_TOPIC) == {o.id: o.row() for o in shop.orders.items}


# --- files ------------------------------------------------------------------------------------


def test_write_files_names_and_content(tmp_path: Path, small: list[Record]) -> None:
    out = tmp_path / "new" / "landing"
    paths = write_files(small, out, lines_per_file=200)
    assert [p.name for p in paths] == ["part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl"]
    assert sorted(p.name for p in out.iterdir()) == [p.name for p in paths]  # no temp files left
    lines = [line for p in paths for line in p.read_text(encoding="utf-8").splitlines()]
    assert lines == [r.to_line() for r in small]
    assert all(p.read_text(encoding="utf-8").endswith("\n") for p in paths)


def test_write_files_refuses_a_used_directory(tmp_path: Path, small: list[Record]) -> None:
    write_files(small[:10], tmp_path)
    with pytest.raises(ConfigError, match="already holds"):
        write_files(small, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-00000.jsonl"]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / ".part-00000.jsonl.tmp").write_text("stale")
    assert write_files(small[:3], tmp_path / "other")[0].name == "part-00000.jsonl"
    with pytest.raises(ConfigError, match="lines_per_file"):
        write_files(small, tmp_path / "third", lines_per_file=0)


def test_write_files_cleans_up_after_a_failure(tmp_path: Path, small: list[Record]) -> None:
    def broken() -> Any:
        yield from small[:5]
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError):
        write_files(broken(), tmp_path, lines_per_file=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-00000.jsonl", "part-00001.jsonl"]


def test_write_files_writes_exactly_to_line(tmp_path: Path, small: list[Record]) -> None:
    odd = [
        Record("t", 0, 0, 1, {"schema": {"a": 1}}, {"payload": 1, "schema": 2}, {"h": "é"}),
        Record("t", 1, 5, 2, {"schema": {"a": 1}, "payload": None}, 'x"\n\u2028', {}),
        Record("ü", 0, 9, 3, None, None),
        Record("t", 0, 1, 4, [1, {"schema": 2}], {"schema": None, "payload": [True, 1.5]}),
    ]
    records = small + odd
    (path,) = write_files(records, tmp_path, lines_per_file=len(records))
    assert path.read_text(encoding="utf-8") == "".join(r.to_line() + "\n" for r in records)
