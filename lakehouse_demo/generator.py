"""Deterministic workload of a small shop: Debezium 3.x change events of the Postgres tables
``customers`` and ``orders`` plus a plain clickstream, as Kafka records in delivery order.

The simulation keeps the database state and a WAL position. Transactions get increasing LSNs and
are emitted in commit order, so ``source.sequence`` (``[last commit LSN, LSN]``) grows per key in
log order, while overlapping transactions make ``source.lsn`` alone go backwards. The records are
then laid out as Kafka holds them (keyed partitions, contiguous offsets, at-least-once
redeliveries) and read back in a seeded interleaving of the partitions. Only ``random.Random(seed)``
is used, and the clock is simulated, so one configuration always gives the same list.
"""

from __future__ import annotations

import gc
import json
import math
import os
import random
import re
import statistics
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from cdc.records import Record, json_bytes
from lakehouse_core.errors import ConfigError
from lakehouse_demo.shop import (
    CATEGORIES,
    CUSTOMER_COLUMNS,
    DEBEZIUM_VERSION,
    FIRST_NAMES,
    LAST_NAMES,
    NOTE_WORDS,
    ORDER_COLUMNS,
    SEARCHES,
    TIERS,
    Customer,
    Item,
    JsonDict,
    Order,
    char_n,
    envelope_schema,
    iso_millis,
    key_only_row,
    key_schema,
)

__all__ = [
    "CLICKSTREAM_TOPIC",
    "CUSTOMERS_TOPIC",
    "ORDERS_TOPIC",
    "Topics",
    "WorkloadConfig",
    "generate",
    "partition_for",
    "topic_names",
    "write_files",
]

CUSTOMERS_TOPIC = "shop.public.customers"
ORDERS_TOPIC = "shop.public.orders"
CLICKSTREAM_TOPIC = "shop.clickstream"

_TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]+")

# Shares of the valid records per topic.
_CLICK_SHARE, _ORDER_SHARE = 0.40, 0.45
_MEAN_GAP_US = 80_000  # mean simulated time per valid record
# Order ids are bigserial values beyond the int32 range.
_ORDER_ID_BASE = 3_000_000_000
_TOASTED_SHARE = 0.3  # customers whose notes are stored out of line
#: An injected anomalous order is worth about this many times its customer's median order.
ANOMALY_FACTOR = 20
#: Earlier orders a customer needs before one of theirs can be made anomalous.
_NORM_ORDERS = 3
#: With anomalies on, each customer buys among this many neighbouring products by price.
_PRICE_BAND = 12
#: Mixed into the seed of the anomaly injection's own random stream.
_ANOMALY_SEED = 0x5EED_A110
#: Mixed into the seed of the late clicks' own random stream.
_LATE_SEED = 0x1A7E_C11C
#: A late click is stamped this many ms (uniformly drawn) before it is sent.
LATE_CLICK_MS = (50 * 60_000, 120 * 60_000)
_SESSION_EVENTS = 25  # mean clickstream events per session
_MAX_FETCH = 64  # most records a consumer takes from one partition in a row


class Topics(NamedTuple):
    """Kafka topics of one workload."""

    customers: str
    orders: str
    clickstream: str


def topic_names(server: str) -> Topics:
    """Topics for a Debezium ``topic.prefix`` (``server``): ``<server>.public.<table>`` for the
    captured tables, ``<server>.clickstream`` for the plain events."""
    return Topics(f"{server}.public.customers", f"{server}.public.orders", f"{server}.clickstream")


def partition_for(key: Any, partitions: int) -> int:
    """Partition of a record key: CRC-32 of its bytes modulo ``partitions``; null keys go to 0."""
    data = json_bytes(key)
    return 0 if data is None else zlib.crc32(data) % partitions


def _check_rate(name: str, value: object, upper: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0.0 <= value <= upper
    ):
        raise ConfigError(f"{name} must be a number between 0 and {upper:g}, got {value!r}")


@dataclass(frozen=True)
class WorkloadConfig:
    """What to generate; the same configuration always gives the same records."""

    events: int  # total number of records, exactly
    seed: int = 42
    malformed_rate: float = 0.0  # share of malformed records (0..1)
    partitions: int = 3  # per topic
    duplicate_rate: float = 0.02  # share of at-least-once redeliveries (0..0.5)
    start_ms: int = 1767225600000  # simulated clock start: 2026-01-01T00:00:00Z
    server: str = "shop"  # Debezium topic prefix
    #: Share of new orders made anomalous on purpose (about ANOMALY_FACTOR x the customer's
    #: median order), 0..0.5;
    #: see :func:`generate_workload` for what else changes when it is above 0.
    anomaly_rate: float = 0.0
    #: Share of clickstream events sent late on purpose, 0..0.5: stamped 50 to 120 minutes
    #: before they are sent (a device that uploads clicks it buffered offline), so they land
    #: in gold windows the watermark has already closed (``gold.late_events``).
    late_rate: float = 0.0

    def __post_init__(self) -> None:
        for name in ("events", "seed", "partitions", "start_ms"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{name} must be an integer, got {value!r}")
        if self.events < 0:
            raise ConfigError(f"events must be zero or more, got {self.events}")
        if self.partitions < 1:
            raise ConfigError(f"partitions must be at least 1, got {self.partitions}")
        if self.start_ms < 0:
            raise ConfigError(f"start_ms must be an epoch time in ms (>= 0), got {self.start_ms}")
        _check_rate("malformed_rate", self.malformed_rate, 1.0)
        _check_rate("duplicate_rate", self.duplicate_rate, 0.5)
        _check_rate("anomaly_rate", self.anomaly_rate, 0.5)
        _check_rate("late_rate", self.late_rate, 0.5)
        if not isinstance(self.server, str) or not _TOPIC_CHARS.fullmatch(self.server):
            raise ConfigError(
                f"server must be a Kafka topic prefix (letters, digits, '.', '_', '-'), "
                f"got {self.server!r}"
            )


class Workload(NamedTuple):
    """Generated records and the ground truth of the anomalies injected into them."""

    records: list[Record]
    #: Ids of the orders created with anomalous amounts (empty when ``anomaly_rate`` is 0).
    anomalous_orders: frozenset[int]


def generate(config: WorkloadConfig) -> list[Record]:
    """The records of :func:`generate_workload`."""
    return generate_workload(config).records


def generate_workload(config: WorkloadConfig) -> Workload:
    """Return exactly ``config.events`` records in delivery order, partition and offset set.

    Of them, ``round(events * malformed_rate)`` are malformed and ``round(events *
    duplicate_rate)`` are redelivered copies (at most half of the other records); the rest is
    the valid workload: about 40% clickstream, 45% orders and 15% customers records. Records
    share JSON documents (schemas, keys, redelivered copies): treat them as read-only.

    With ``anomaly_rate`` above 0, that share of new orders of customers with at least three
    earlier orders becomes one line worth about :data:`ANOMALY_FACTOR` times the customer's
    median order (their ids are returned as ground truth), and the shop is a calm one where
    amounts have a per-customer norm: each order is one item of a product from the customer's
    own band of similarly priced products, edits leave items alone, and there are no bulk
    orders or refunds, so the injected orders are the only ones far outside their customer's
    usual amounts. (Such a workload is deterministic too, but not the same as without
    anomalies.)
    """
    malformed = round(config.events * config.malformed_rate)
    rest = config.events - malformed
    duplicates = min(round(config.events * config.duplicate_rate), rest // 2)
    with _gc_paused():
        shop = _Shop(config, rest - duplicates, malformed)
        shop.run()
        records = _deliver(shop.out, shop.malformed_at, duplicates, shop.rng)
        anomalies = frozenset(shop.anomalies)
        del shop  # free the simulation before the collector looks at what is left
    return Workload(records, anomalies)


def write_files(
    records: Iterable[Record], out_dir: Path, lines_per_file: int = 20000
) -> list[Path]:
    """Write the records as JSON lines to ``out_dir/part-00000.jsonl``, ... and return the paths.

    Each file is written under a hidden temporary name in the same directory, which Spark's file
    source ignores, and then renamed into place, so a streaming reader never sees half a file.
    Refuses a directory that already holds ``part-*.jsonl`` files, so workloads never mix.
    """
    if (
        isinstance(lines_per_file, bool)
        or not isinstance(lines_per_file, int)
        or lines_per_file < 1
    ):
        raise ConfigError(f"lines_per_file must be a positive integer, got {lines_per_file!r}")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"{out_dir} exists and is not a directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    existing = sorted(out_dir.glob("part-*.jsonl"))
    if existing:
        raise ConfigError(
            f"{out_dir} already holds {len(existing)} part-*.jsonl file(s) such as "
            f"{existing[0].name}; write each workload to a new or empty directory"
        )
    paths: list[Path] = []
    lines: list[str] = []
    to_line = _LineWriter().line
    for record in records:
        lines.append(to_line(record))
        if len(lines) == lines_per_file:
            paths.append(_write_part(out_dir, len(paths), lines))
            lines = []
    if lines:
        paths.append(_write_part(out_dir, len(paths), lines))
    return paths


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


class _LineWriter:
    """``Record.to_line`` with the same output, faster: a Connect schema shared by many records
    (the same dict object) is serialised once."""

    def __init__(self) -> None:
        self._schemas: dict[int, tuple[Any, str]] = {}

    def _text(self, document: Any) -> str:
        if type(document) is dict and len(document) == 2 and next(iter(document)) == "schema":
            schema = document["schema"]
            hit = self._schemas.get(id(schema))
            if hit is None or hit[0] is not schema:
                hit = self._schemas[id(schema)] = (schema, _dumps(schema))
            if "payload" in document:
                return f'{{"schema":{hit[1]},"payload":{_dumps(document["payload"])}}}'
        return _dumps(document)

    def line(self, record: Record) -> str:
        """The record as ``record.to_line()`` writes it."""
        text = (
            f'{{"topic":{_dumps(record.topic)},"partition":{record.partition:d},'
            f'"offset":{record.offset:d},"timestamp":{record.timestamp_ms:d},'
            f'"key":{self._text(record.key)},"value":{self._text(record.value)}'
        )
        if record.headers:
            return f'{text},"headers":{_dumps(record.headers)}}}'
        return text + "}"


def _write_part(out_dir: Path, index: int, lines: list[str]) -> Path:
    final = out_dir / f"part-{index:05d}.jsonl"
    temporary = out_dir / f".{final.name}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
            handle.write("\n".join(lines))
            handle.write("\n")
        os.replace(temporary, final)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return final


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: building a million small objects, it only costs time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# --- the simulated shop -----------------------------------------------------------------------

# A record in log order: topic, partition, key, value, timestamp (ms), headers.
_Out = tuple[str, int, Any, Any, int, dict[str, str] | None]


class _Table:
    """A captured table: names, schemas (built once) and the record keys with their partitions."""

    def __init__(self, topic: str, name: str, columns: tuple[JsonDict, ...], partitions: int):
        self.topic = topic
        self.name = name
        self.columns = columns
        self.key_schema = key_schema(topic, columns)
        self.value_schema = envelope_schema(topic, columns)
        self._partitions = partitions
        self._keys: dict[int, tuple[JsonDict, int]] = {}
        # The key bytes end in the id: hash the constant prefix once (same as partition_for).
        sample = json_bytes({"schema": self.key_schema, "payload": {"id": 0}}) or b""
        assert sample.endswith(b"0}}")
        self._prefix_crc = zlib.crc32(sample[:-3])

    def key(self, key: int | None) -> tuple[JsonDict | None, int]:
        """The record key for a primary-key value and its partition."""
        if key is None:
            return None, 0
        hit = self._keys.get(key)
        if hit is None:
            document = {"schema": self.key_schema, "payload": {"id": key}}
            partition = zlib.crc32(b"%d}}" % key, self._prefix_crc) % self._partitions
            hit = self._keys[key] = (document, partition)
        return hit


class _Change(NamedTuple):
    """One row change inside a transaction."""

    table: _Table
    op: str
    key: int | None
    before: JsonDict | None
    after: JsonDict | None
    same_position: bool = False  # shares the WAL record of the previous change (PK update)
    tombstone: bool = False  # followed by a tombstone (deletes)
    headers: dict[str, str] | None = None


_T = TypeVar("_T")


class _Rng(random.Random):
    """``random.Random`` with cheaper integer draws (``randint`` costs several times more)."""

    def below(self, n: int) -> int:
        """An integer in ``[0, n)``."""
        return int(self.random() * n)

    def between(self, low: int, high: int) -> int:
        """An integer in ``[low, high]``."""
        return low + int(self.random() * (high - low + 1))

    def pick(self, options: Sequence[_T]) -> _T:
        """One of the options."""
        return options[int(self.random() * len(options))]


class _HasId(Protocol):
    id: int


_E = TypeVar("_E", bound=_HasId)


class _Pool(Generic[_E]):
    """Entities by id, with constant-time add, remove and seeded random choice."""

    def __init__(self) -> None:
        self.items: list[_E] = []
        self._at: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.items)

    def add(self, item: _E) -> None:
        self._at[item.id] = len(self.items)
        self.items.append(item)

    def remove(self, item: _E) -> None:
        index = self._at.pop(item.id)
        last = self.items.pop()
        if last is not item:
            self.items[index] = last
            self._at[last.id] = index

    def get(self, key: int) -> _E | None:
        index = self._at.get(key)
        return None if index is None else self.items[index]

    def choice(self, rng: _Rng) -> _E:
        items = self.items
        return items[int(rng.random() * len(items))]

    def clear(self) -> None:
        self.items.clear()
        self._at.clear()


class _Shop:
    """Simulates the shop and its change streams, appending records in log order to ``out``."""

    def __init__(self, config: WorkloadConfig, valid: int, malformed: int) -> None:
        self.rng = rng = _Rng(config.seed)
        self.server = config.server
        self.partitions = config.partitions
        topics = topic_names(config.server)
        self.customers_t = _Table(
            topics.customers, "customers", CUSTOMER_COLUMNS, config.partitions
        )
        self.orders_t = _Table(topics.orders, "orders", ORDER_COLUMNS, config.partitions)
        self.click_topic = topics.clickstream
        self.target = valid
        self.out: list[_Out] = []
        self.malformed_at: list[int] = []
        self.valid = 0
        self.counts = dict.fromkeys(topics, 0)
        self._malformed_slots = sorted(rng.between(0, valid) for _ in range(malformed))
        self._next_slot = 0
        self._next_bad = self._malformed_slots[0] if malformed else 1 << 62
        self._bad_id = 0
        # Clocks (epoch µs): the database's, and the connector's processing time.
        self.now_us = config.start_ms * 1000
        self.proc_us = self.now_us
        # Write-ahead log.
        self.lsn = 24_000_000_000 + rng.below(1_000_000_000)
        self.last_commit: int | None = None
        self.txid = 750_000 + rng.below(100_000)
        # Database state.
        self.customers: _Pool[Customer] = _Pool()
        self.deleted_customers: list[int] = []
        self.next_customer = 1
        self.orders: _Pool[Order] = _Pool()
        self.open_orders: _Pool[Order] = _Pool()
        self.deleted_orders: list[int] = []
        self.next_order = _ORDER_ID_BASE + 1
        self.open_target = max(2, min(400, valid // 2500))
        # Clickstream.
        self.users: list[int] = []
        self.active: list[int] = []
        self.active_set: set[int] = set()
        self.active_target = 1
        self.user_keys: dict[int, tuple[JsonDict, int]] = {}
        self.checkouts: deque[int] = deque(maxlen=1000)
        self.products = [
            (f"SKU-{n:05d}", round(math.exp(rng.uniform(0.7, 6.2))) * 100 + 99)
            for n in range(1, 401)
        ]
        self.text = " ".join(rng.pick(NOTE_WORDS) for _ in range(12_000))
        self.product_pages = [f"/product/{sku}" for sku, _ in self.products]
        self.click_pages = [f"/category/{name}" for name in CATEGORIES] + self.product_pages
        # Anomaly injection (its own random stream, so the shop's draws stay the same).
        self.anomaly_rate = config.anomaly_rate
        self.anomaly_rng = random.Random(config.seed ^ _ANOMALY_SEED)
        self.anomalies: list[int] = []
        # Late clicks (their own random stream too).
        self.late_rate = config.late_rate
        self.late_rng = random.Random(config.seed ^ _LATE_SEED)
        self.order_totals: dict[int, list[int]] = {}
        self.by_price = sorted(self.products, key=lambda product: product[1])
        self.view_pages = [
            "/",
            "/cart",
            *(f"/search?q={term}" for term in SEARCHES),
            *self.click_pages,
        ]

    @property
    def remaining(self) -> int:
        return self.target - self.valid

    # --- driver ---------------------------------------------------------------------------

    def run(self) -> None:
        """Snapshot, then stream until exactly ``target`` valid records exist."""
        rng = self.rng
        self._snapshot()
        start, span = self.valid, self.remaining
        truncate_at = rng.uniform(0.45, 0.55)
        forced: list[tuple[float, Callable[[], bool]]] = [
            (0.05, lambda: self._customer_signup(same_txn_update=False)),
            (0.10, self._customer_delete),
            (0.15, self._customer_pk_change),
            (0.20, lambda: self._customer_update(toasted_only=True)),
            (0.25, self._order_delete),
            (0.30, self._interleaved),
            (0.35, lambda: self._customer_signup(same_txn_update=True, toasted=True)),
            (truncate_at, self._truncate),
            (0.60, self._customer_reinsert),
            (0.65, self._order_delete),
            (0.70, self._order_reinsert),
            (0.75, self._customer_noop),
            (0.80, self._order_noop),
        ]
        forced.sort(key=lambda entry: entry[0])
        schedule = deque((start + int(at * span), action) for at, action in forced)
        lulls = deque(
            sorted(start + int(rng.uniform(0.1, 0.9) * span) for _ in range(1 + span // 250_000))
        )
        click_target, order_target = _CLICK_SHARE * self.target, _ORDER_SHARE * self.target
        customer_target = self.target - click_target - order_target
        counts, topics = (
            self.counts,
            (self.click_topic, self.orders_t.topic, self.customers_t.topic),
        )
        while self.valid < self.target:
            if lulls and lulls[0] <= self.valid:
                lulls.popleft()
                self._lull()
            if schedule and schedule[0][0] <= self.valid:
                schedule.popleft()[1]()
                continue
            w_click = max(click_target - counts[topics[0]], 0.0)
            w_order = max(order_target - counts[topics[1]], 0.0)
            w_customer = max(customer_target - counts[topics[2]], 0.0)
            pick = rng.random() * (w_click + w_order + w_customer)
            done = False
            if pick >= w_click + w_order:
                done = self._customer_step()
            elif pick >= w_click:
                done = self._order_step()
            if not done:
                self._click()
        self._put_malformed(self.target)  # slots at the very end

    def _customer_step(self) -> bool:
        r = self.rng.random()
        if r < 0.002:
            return self._customer_reinsert()
        if r < 0.004:
            return self._customer_pk_change()
        if r < 0.009:
            return self._customer_delete()
        if r < 0.04:
            return self._customer_signup(same_txn_update=self.rng.random() < 0.05)
        if r < 0.045:
            return self._customer_noop()
        if r < 0.05:
            return self._interleaved()
        return self._customer_update()

    def _order_step(self) -> bool:
        rng, open_orders = self.rng, self.open_orders
        r = rng.random()
        if r < 0.002:
            return self._order_reinsert()
        if r < 0.004:
            return self._order_noop()
        if r < 0.01:
            return self._interleaved()
        size = len(open_orders)
        if size < self.open_target or (size < 4 * self.open_target and r < 0.23):
            return self._order_create()
        return self._order_advance()

    # --- output -----------------------------------------------------------------------------

    def _put(
        self,
        topic: str,
        partition: int,
        key: Any,
        value: Any,
        ts_ms: int,
        headers: dict[str, str] | None = None,
    ) -> None:
        if self._next_bad <= self.valid:
            self._put_malformed(self.valid)
        self.out.append((topic, partition, key, value, ts_ms, headers))
        self.valid += 1
        self.counts[topic] += 1

    def _put_malformed(self, up_to: int) -> None:
        slots = self._malformed_slots
        while self._next_slot < len(slots) and slots[self._next_slot] <= up_to:
            self._next_slot += 1
            self.malformed_at.append(len(self.out))
            self.out.append(self._malformed())
        self._next_bad = slots[self._next_slot] if self._next_slot < len(slots) else 1 << 62

    def _source(
        self, table: _Table, snapshot: str, sequence: str, lsn: int, txid: int, commit_us: int
    ) -> JsonDict:
        return {
            "version": DEBEZIUM_VERSION,
            "connector": "postgresql",
            "name": self.server,
            "ts_ms": commit_us // 1000,
            "snapshot": snapshot,
            "db": "shop",
            "sequence": sequence,
            "ts_us": commit_us,
            "ts_ns": commit_us * 1000,
            "schema": "public",
            "table": table.name,
            "txId": txid,
            "lsn": lsn,
            "xmin": None,
        }

    def _event(self, change: _Change, source: JsonDict, floor_us: int) -> None:
        """Emit one change event (and its tombstone) as the connector processes it: the
        processing time (top-level ``ts_ms``) grows by a few µs per event, from ``floor_us``."""
        lsn = source["lsn"]
        proc = max(self.proc_us + 20 + lsn % 281, floor_us)
        self.proc_us = proc
        table = change.table
        value = {
            "schema": table.value_schema,
            "payload": {
                "before": change.before,
                "after": change.after,
                "source": source,
                "transaction": None,
                "op": change.op,
                "ts_ms": proc // 1000,
                "ts_us": proc,
                "ts_ns": proc * 1000 + lsn % 1000,
            },
        }
        key, partition = table.key(change.key)
        produced = proc // 1000 + 1
        self._put(table.topic, partition, key, value, produced, change.headers)
        if change.tombstone:
            self._put(table.topic, partition, key, None, produced)

    # --- write-ahead log ----------------------------------------------------------------------

    def _tick(self, records: int) -> int:
        """Advance the clock by a random gap for this many records; return the new time."""
        gap = -math.log(1.0 - self.rng.random()) * _MEAN_GAP_US * records  # exponential
        self.now_us += int(gap)
        return self.now_us

    def _positions(self, changes: list[_Change]) -> list[int]:
        """Write the changes to the WAL and return their LSNs."""
        random, lsns = self.rng.random, []
        for change in changes:
            if not change.same_position:
                self.lsn += 48 + int(random() * 353)
            lsns.append(self.lsn)
        return lsns

    def _commit_record(self) -> int:
        random = self.rng.random
        commit = self.lsn = self.lsn + 24 + int(random() * 73)
        self.lsn += int(random() * 4000)  # unrelated WAL before the next change
        return commit

    def _emit_transaction(
        self, changes: list[_Change], lsns: list[int], txid: int, commit_us: int, commit_lsn: int
    ) -> None:
        """Emit a committed transaction: its events carry the previous commit's LSN first."""
        first = self.last_commit
        head = '[null,"' if first is None else f'["{first}","'
        floor = commit_us + 20_000 + int(self.rng.random() * 380_000)
        ts_ms, ts_ns, server = commit_us // 1000, commit_us * 1000, self.server
        for change, lsn in zip(changes, lsns, strict=True):
            source = {
                "version": DEBEZIUM_VERSION,
                "connector": "postgresql",
                "name": server,
                "ts_ms": ts_ms,
                "snapshot": "false",
                "db": "shop",
                "sequence": f'{head}{lsn}"]',
                "ts_us": commit_us,
                "ts_ns": ts_ns,
                "schema": "public",
                "table": change.table.name,
                "txId": txid,
                "lsn": lsn,
                "xmin": None,
            }
            self._event(change, source, floor)
        self.last_commit = commit_lsn
        self.now_us = max(self.now_us, commit_us)

    def _commit(self, changes: list[_Change], start_us: int) -> None:
        """Run the changes as one transaction that started at ``start_us``."""
        random = self.rng.random
        self.txid += 1 + int(random() * 3)
        lsns = self._positions(changes)
        commit_lsn = self._commit_record()
        commit_us = start_us + 100 + int(random() * 20_000)
        self._emit_transaction(changes, lsns, self.txid, commit_us, commit_lsn)

    def _snapshot(self) -> None:
        """Initial snapshot: ``r`` events of all rows, all at the snapshot's LSN."""
        rng, n = self.rng, self.target
        n_customers, n_orders = max(3, n // 170), max(3, n // 60)
        if n_customers + n_orders > n // 3:
            n_customers = n_orders = n // 6
        start = self.now_us
        year_us = 365 * 86_400_000_000
        for i in range(n_customers):
            self.next_customer += rng.pick((0, 0, 0, 1, 2))  # rows deleted long ago
            created = start - rng.between(1, 3 * year_us)
            updated = rng.between(created, start - 1)
            customer = self._new_customer(created, updated, toasted=True if i == 0 else None)
            self.customers.add(customer)
        ids = [c.id for c in self.customers.items]
        self.users = ids[: max(3, n // 300)] or [1]
        self.active_target = max(1, min(60, len(self.users) // 4))
        for _ in range(n_orders):
            self.next_order += rng.pick((0, 0, 0, 1))
            created = start - rng.between(1, 30 * 86_400_000_000)
            order = self._new_order(created, rng.pick(ids))
            order.updated_us = rng.between(created, start - 1)
            status = rng.choices(("shipped", "paid", "new", "cancelled"), (55, 15, 20, 10))[0]
            order.status = status
            if status == "paid":
                order.plan = ["shipped"]
            elif status == "cancelled":
                order.plan = ["delete"] if rng.random() < 0.3 else []
            elif status == "shipped":
                order.plan = []
            self.orders.add(order)
            if order.plan:
                self.open_orders.add(order)
        rows = [(self.customers_t, c.id, c.row()) for c in self.customers.items]
        rows += [(self.orders_t, o.id, o.row()) for o in self.orders.items]
        self.txid += 1
        snapshot_lsn, txid = self.lsn, self.txid
        sequence = f'[null,"{snapshot_lsn}"]'
        read_us = start
        for i, (table, key, row) in enumerate(rows):
            read_us += rng.between(5, 80)
            marker = "last" if i == len(rows) - 1 else "true"
            source = self._source(table, marker, sequence, snapshot_lsn, txid, read_us)
            self._event(_Change(table, "r", key, None, row), source, read_us + 30_000)
        self.now_us = read_us + 1_000_000
        self.lsn += rng.between(100, 10_000)

    # --- customers ----------------------------------------------------------------------------

    def _new_customer(
        self,
        created_us: int,
        updated_us: int,
        toasted: bool | None = None,
        customer_id: int | None = None,
    ) -> Customer:
        rng = self.rng
        if customer_id is None:
            customer_id = self.next_customer
            self.next_customer += 1
        first, last = rng.pick(FIRST_NAMES), rng.pick(LAST_NAMES)
        if toasted is None:
            toasted = rng.random() < _TOASTED_SHARE
        local = f"{first}.{last}".lower().replace("'", "")
        r = rng.random()
        if r < 0.6:
            balance = 0
        elif r < 0.9:
            balance = rng.between(1, 50_000)
        elif r < 0.95:
            balance = -rng.between(1, 500_000)
        else:
            balance = rng.between(10**8, 10**11)
        return Customer(
            id=customer_id,
            email=f"{local}.{customer_id}@example.com",
            name=f"{first} {last}",
            tier=char_n(rng.choices(TIERS, (60, 25, 12, 3))[0], 8),
            notes=self._notes(toasted),
            toasted=toasted,
            balance=balance,
            birth_date=rng.between(-7305, 13514),  # 1950-01-01 .. 2007-01-01
            created_us=created_us,
            updated_us=updated_us,
        )

    def _notes(self, toasted: bool) -> str | None:
        rng = self.rng
        if toasted:
            size = rng.between(2100, 3000)  # long enough to be stored out of line
        elif rng.random() < 0.3:
            return None
        else:
            size = rng.between(20, 200)
        start = self.text.index(" ", rng.below(len(self.text) - size - 20)) + 1
        return self.text[start : start + size].strip()

    def _customer_change(self, customer: Customer, now_us: int, notes: bool = True) -> _Change:
        """Apply a random real update to the customer (``notes``: possibly of its notes) and
        return its ``u`` event; unchanged out-of-line notes come as the TOAST placeholder."""
        rng = self.rng
        r = rng.random()
        notes_changed = False
        if r < 0.30:
            balance = customer.balance + rng.between(-20_000, 20_000)
            customer.balance = max(-(10**9), min(10**11, balance))
        elif r < 0.40:
            customer.tier = char_n(rng.pick(TIERS), 8)
        elif r < 0.50:
            local, domain = customer.email.split("@")
            customer.email = (
                f"{local}@{'mail.example.org' if domain == 'example.com' else 'example.com'}"
            )
        elif r < 0.55:
            customer.name = f"{customer.name.split(' ')[0]} {rng.pick(LAST_NAMES)}"
        elif r < 0.70 and notes:
            customer.notes = self._notes(customer.toasted)
            notes_changed = True
        customer.updated_us = now_us
        after = customer.row(toast=customer.toasted and not notes_changed)
        return _Change(self.customers_t, "u", customer.id, None, after)

    def _customer_update(self, toasted_only: bool = False) -> bool:
        customers = self.customers
        if not customers or self.remaining < 1:
            return False
        customer = customers.choice(self.rng)
        if toasted_only and not customer.toasted:
            toasted = [c for c in customers.items if c.toasted]
            if not toasted:
                return False
            customer = toasted[0]
        now = self._tick(1)
        self._commit([self._customer_change(customer, now, notes=not toasted_only)], now)
        return True

    def _customer_noop(self) -> bool:
        """``UPDATE ... SET tier = tier``: an update event without a real change."""
        if not self.customers or self.remaining < 1:
            return False
        customer = self.customers.choice(self.rng)
        after = customer.row(toast=customer.toasted)
        self._commit([_Change(self.customers_t, "u", customer.id, None, after)], self._tick(1))
        return True

    def _customer_signup(self, same_txn_update: bool, toasted: bool | None = None) -> bool:
        """A new customer; optionally updated again in the same transaction (the update then
        carries the TOAST placeholder for out-of-line notes)."""
        if self.remaining < 1 + same_txn_update:
            return False
        now = self._tick(1 + same_txn_update)
        customer = self._new_customer(now, now, toasted)
        self.customers.add(customer)
        if self.rng.random() < 0.3:
            self.users.append(customer.id)
        changes = [_Change(self.customers_t, "c", customer.id, None, customer.row())]
        if same_txn_update:
            customer.tier = char_n("silver", 8)  # welcome upgrade
            after = customer.row(toast=customer.toasted)
            changes.append(_Change(self.customers_t, "u", customer.id, None, after))
        self._commit(changes, now)
        return True

    def _customer_delete(self) -> bool:
        if len(self.customers) < 3 or self.remaining < 2:
            return False
        customer = self.customers.choice(self.rng)
        self.customers.remove(customer)
        self.deleted_customers.append(customer.id)
        before = key_only_row(CUSTOMER_COLUMNS, customer.id)
        change = _Change(self.customers_t, "d", customer.id, before, None, tombstone=True)
        self._commit([change], self._tick(2))
        return True

    def _customer_reinsert(self) -> bool:
        """Insert a row again under a previously deleted key (e.g. an account restore)."""
        if not self.deleted_customers or self.remaining < 1:
            return False
        deleted = self.deleted_customers
        index = self.rng.below(len(deleted))
        deleted[index], deleted[-1] = deleted[-1], deleted[index]
        now = self._tick(1)
        customer = self._new_customer(now, now, customer_id=deleted.pop())
        self.customers.add(customer)
        self._commit([_Change(self.customers_t, "c", customer.id, None, customer.row())], now)
        return True

    def _customer_pk_change(self) -> bool:
        """``UPDATE customers SET id = <new>``: ``d`` + tombstone + ``c`` at one WAL position.
        Unchanged out-of-line notes come as the placeholder in the ``c`` event too."""
        if not self.customers or self.remaining < 3:
            return False
        customer = self.customers.choice(self.rng)
        old, new = customer.id, self.next_customer
        self.next_customer += 1
        self.customers.remove(customer)
        customer.id = new
        customer.updated_us = now = self._tick(3)
        self.customers.add(customer)
        self.deleted_customers.append(old)
        table = self.customers_t
        delete = _Change(
            table,
            "d",
            old,
            key_only_row(CUSTOMER_COLUMNS, old),
            None,
            tombstone=True,
            headers={"__debezium.newkey": f'{{"id":{new}}}'},
        )
        create = _Change(
            table,
            "c",
            new,
            None,
            customer.row(toast=customer.toasted),
            same_position=True,
            headers={"__debezium.oldkey": f'{{"id":{old}}}'},
        )
        self._commit([delete, create], now)
        return True

    # --- orders -------------------------------------------------------------------------------

    def _new_order(self, now_us: int, customer_id: int, refund: bool = False) -> Order:
        rng, products = self.rng, self.products
        refund = refund and not self.anomaly_rate
        big = not refund and rng.random() < 0.05
        items = []
        for _ in range(rng.pick((1, 1, 1, 2, 2, 3, 4))):
            sku, price = self._product(customer_id, rng.below(len(products)))
            qty = rng.between(50, 500) if big else rng.pick((1, 1, 1, 1, 2, 2, 3))
            items.append(Item(sku, -qty if refund else qty, price))
        if self.anomaly_rate:  # the calm shop of an anomaly workload: one line of one item
            items = [items[0]._replace(qty=1)]
        order = Order(self.next_order, customer_id, "new", items, now_us, now_us)
        self.next_order += rng.pick((1, 1, 1, 1, 2))  # sequence values lost to rollbacks
        if refund:
            order.plan = ["paid"]
            return order
        edits = ["items"] * rng.between(0, 6)
        r = rng.random()
        if r < 0.72:
            plan = [*edits, "paid", "shipped"] + (["cancelled"] if rng.random() < 0.05 else [])
        elif r < 0.88:
            plan = [*edits[:1], "cancelled"] + (["delete"] if rng.random() < 0.4 else [])
        else:
            plan = [*edits, "delete"]  # abandoned cart, purged
        plan.reverse()
        order.plan = plan
        return order

    def _product(self, customer_id: int, drawn: int) -> tuple[str, int]:
        """The product of draw ``drawn`` (an index into the catalogue); with anomalies on, the
        draw picks within the customer's own band of similarly priced products."""
        if not self.anomaly_rate:
            return self.products[drawn]
        start = zlib.crc32(customer_id.to_bytes(8, "big")) % (len(self.by_price) - _PRICE_BAND)
        return self.by_price[start + drawn % _PRICE_BAND]

    def _order_create(self) -> bool:
        if self.remaining < 1:
            return False
        customer_id = None
        while self.checkouts and customer_id is None:
            candidate = self.checkouts.popleft()
            if self.customers.get(candidate) is not None:
                customer_id = candidate
        if customer_id is None:
            if not self.customers:
                return False
            customer_id = self.customers.choice(self.rng).id
        now = self._tick(1)
        order = self._new_order(now, customer_id, refund=self.rng.random() < 0.04)
        if order.total > 0 and self.anomaly_rate:
            self._maybe_anomalous(order)
        self.orders.add(order)
        self.open_orders.add(order)
        self._commit([_Change(self.orders_t, "c", order.id, None, order.row())], now)
        return True

    def _maybe_anomalous(self, order: Order) -> None:
        """Make ``order`` anomalous with probability ``anomaly_rate`` when its customer has an
        order norm (:data:`_NORM_ORDERS` earlier orders): one line worth about
        :data:`ANOMALY_FACTOR` times the customer's median order. Else it joins the norm."""
        history = self.order_totals.setdefault(order.customer_id, [])
        if len(history) >= _NORM_ORDERS and self.anomaly_rng.random() < self.anomaly_rate:
            sku, price = order.items[0].sku, order.items[0].price
            qty = max(1, round(ANOMALY_FACTOR * statistics.median(history) / price))
            order.items = [Item(sku, qty, price)]
            order.reprice()
            self.anomalies.append(order.id)
        else:
            history.append(order.total)

    def _order_edit(self, order: Order, step: str, now_us: int) -> _Change:
        """Apply one non-delete lifecycle step and return its ``u`` event."""
        rng = self.rng
        if step == "items" and self.anomaly_rate:
            pass  # the calm shop of an anomaly workload: edits leave the items as they are
        elif step == "items":
            items = order.items
            r = rng.random()
            if r < 0.4 or (len(items) == 1 and r < 0.7):
                sku, price = self._product(order.customer_id, rng.below(len(self.products)))
                items.append(Item(sku, rng.between(1, 3), price))
            elif len(items) > 1 and r >= 0.8:
                items.pop(rng.below(len(items)))
            else:
                index = rng.below(len(items))
                items[index] = items[index]._replace(qty=items[index].qty + 1)
            order.reprice()
        else:
            order.status = step
        order.updated_us = now_us
        return _Change(self.orders_t, "u", order.id, None, order.row())

    def _order_advance(self) -> bool:
        """Take the next lifecycle step of a random open order."""
        if not self.open_orders:
            return False
        rng = self.rng
        order = self.open_orders.choice(rng)
        step = order.plan[-1]
        if step == "delete":
            return self._order_delete(order)
        customer = self.customers.get(order.customer_id) if step == "paid" else None
        with_balance = (
            customer is not None
            and self.remaining >= 2
            and (order.total < 0 or (customer.balance > 0 and rng.random() < 0.15))
        )
        if self.remaining < 1 + with_balance:
            return False
        order.plan.pop()
        if not order.plan:
            self.open_orders.remove(order)
        now = self._tick(1 + with_balance)
        changes = [self._order_edit(order, step, now)]
        if with_balance and customer is not None:  # refund credit, or paid with store credit
            customer.balance -= (
                order.total if order.total < 0 else min(customer.balance, order.total)
            )
            customer.updated_us = now
            after = customer.row(toast=customer.toasted)
            changes.append(_Change(self.customers_t, "u", customer.id, None, after))
        self._commit(changes, now)
        return True

    def _order_delete(self, order: Order | None = None) -> bool:
        if self.remaining < 2:
            return False
        if order is None:
            if not self.orders:
                return False
            order = self.orders.choice(self.rng)
        self.orders.remove(order)
        if self.open_orders.get(order.id) is not None:
            self.open_orders.remove(order)
        self.deleted_orders.append(order.id)
        before = key_only_row(ORDER_COLUMNS, order.id)
        change = _Change(self.orders_t, "d", order.id, before, None, tombstone=True)
        self._commit([change], self._tick(2))
        return True

    def _order_reinsert(self) -> bool:
        """Insert an order again under a deleted id (restored from the archive)."""
        if not self.deleted_orders or not self.customers or self.remaining < 1:
            return False
        rng, deleted = self.rng, self.deleted_orders
        index = rng.below(len(deleted))
        deleted[index], deleted[-1] = deleted[-1], deleted[index]
        now = self._tick(1)
        next_order = self.next_order
        order = self._new_order(now, self.customers.choice(rng).id)
        self.next_order = next_order
        order.id = deleted.pop()
        order.plan = []
        order.status = "shipped"
        self.orders.add(order)
        self._commit([_Change(self.orders_t, "c", order.id, None, order.row())], now)
        return True

    def _order_noop(self) -> bool:
        """``UPDATE orders SET status = status``: an update event without a real change."""
        if not self.orders or self.remaining < 1:
            return False
        order = self.orders.choice(self.rng)
        change = _Change(self.orders_t, "u", order.id, None, order.row())
        self._commit([change], self._tick(1))
        return True

    def _truncate(self) -> bool:
        """``TRUNCATE orders``: one ``t`` event with a null key; ids continue afterwards."""
        if self.remaining < 1:
            return False
        self.orders.clear()
        self.open_orders.clear()
        self._commit([_Change(self.orders_t, "t", None, None, None)], self._tick(1))
        return True

    def _interleaved(self) -> bool:
        """Two overlapping transactions: A updates orders, B (begun later) updates a customer
        and commits first. A is emitted after B, with LSNs partly below B's."""
        rng = self.rng
        if len(self.orders) < 2 or not self.customers or self.remaining < 3:
            return False
        first, second = self.orders.choice(rng), self.orders.choice(rng)
        picked = [first] if first is second else [first, second]
        a_start = self._tick(1 + len(picked))
        a_changes = []
        for order in picked:
            step = "items"
            if order.plan and order.plan[-1] != "delete":
                step = order.plan.pop()
                if not order.plan:
                    self.open_orders.remove(order)
            elif order.status != "new":
                step = order.status  # touched without a change of status
            a_changes.append(self._order_edit(order, step, a_start))
        b_start = a_start + rng.between(100, 5_000)
        b_changes = [self._customer_change(self.customers.choice(rng), b_start)]
        self.txid += 2
        a_txid, b_txid = self.txid - 1, self.txid
        a_lsns = self._positions(a_changes[:1])
        b_lsns = self._positions(b_changes)
        b_commit = self._commit_record()
        a_lsns += self._positions(a_changes[1:])
        a_commit = self._commit_record()
        b_commit_us = b_start + rng.between(200, 3_000)
        self._emit_transaction(b_changes, b_lsns, b_txid, b_commit_us, b_commit)
        a_commit_us = b_commit_us + rng.between(200, 5_000)
        self._emit_transaction(a_changes, a_lsns, a_txid, a_commit_us, a_commit)
        return True

    # --- clickstream --------------------------------------------------------------------------

    def _lull(self) -> None:
        """A quiet half hour or more: every browsing session ends."""
        self.now_us += self.rng.between(31, 120) * 60_000_000
        self.active.clear()
        self.active_set.clear()

    def _start_session(self) -> None:
        rng, users = self.rng, self.users
        for _ in range(8):
            user = users[rng.below(len(users))]
            if user not in self.active_set:
                self.active.append(user)
                self.active_set.add(user)
                return

    def _user_key(self, user: int) -> tuple[JsonDict, int]:
        hit = self.user_keys.get(user)
        if hit is None:
            key = {"user_id": user}
            hit = self.user_keys[user] = (key, partition_for(key, self.partitions))
        return hit

    def _click(self) -> None:
        """One clickstream event of a browsing user."""
        rng, active = self.rng, self.active
        now_ms = self._tick(1) // 1000
        if not active or (len(active) < self.active_target and rng.random() < 0.5):
            self._start_session()
        if not active:  # every user is browsing already
            active.append(self.users[0])
            self.active_set.add(self.users[0])
        index = rng.below(len(active))
        user = active[index]
        r = rng.random()
        if r < 0.55:
            action, page = "view", rng.pick(self.view_pages)
        elif r < 0.85:
            action, page = "click", rng.pick(self.click_pages)
        elif r < 0.96:
            action, page = "add_to_cart", rng.pick(self.product_pages)
        else:
            action, page = "checkout", "/checkout"
            self.checkouts.append(user)
        late = rng.random()
        if late < 0.9:
            lateness = rng.between(0, 800)
        elif late < 0.98:
            lateness = rng.between(2_000, 30_000)
        else:
            lateness = rng.between(30_000, 300_000)
        if self.late_rate and self.late_rng.random() < self.late_rate:
            lateness = self.late_rng.randint(*LATE_CLICK_MS)
        bits = rng.getrandbits(128)
        hex_ = f"{bits:032x}"
        variant = "89ab"[bits & 3]
        event_id = f"{hex_[:8]}-{hex_[8:12]}-4{hex_[13:16]}-{variant}{hex_[17:20]}-{hex_[20:]}"
        key, partition = self._user_key(user)
        value = {
            "event_id": event_id,
            "user_id": user,
            "page": page,
            "action": action,
            "ts": iso_millis(now_ms - lateness),
        }
        self._put(self.click_topic, partition, key, value, now_ms)
        if rng.random() < 1 / _SESSION_EVENTS:
            active[index] = active[-1]
            active.pop()
            self.active_set.discard(user)

    # --- malformed records --------------------------------------------------------------------

    def _malformed(self) -> _Out:
        """A record consumers must quarantine; its key (if any) is never used by valid records."""
        rng = self.rng
        self._bad_id -= 1
        bad, ts_ms = self._bad_id, self.now_us // 1000
        kind = rng.below(8)
        if kind >= 6:
            key = {"user_id": bad}
            partition = partition_for(key, self.partitions)
            if kind == 6:  # no event_id
                value: Any = {
                    "user_id": bad,
                    "page": "/",
                    "action": "view",
                    "ts": iso_millis(ts_ms),
                }
            else:  # not JSON
                value = f'{{"event_id": "e{-bad}", "user_id": {bad}, "page": "/car'
            return (self.click_topic, partition, key, value, ts_ms, None)
        table = self.customers_t if rng.random() < 0.4 else self.orders_t
        record_key, partition = table.key(bad)
        if kind == 0:
            value = f'{{"payload": {{"op": "u", "after": {{"id": {bad}, truncated'
        elif kind == 1:
            value = ["u", bad]  # JSON, but not an object
        else:
            first = "null" if self.last_commit is None else f'"{self.last_commit}"'
            sequence = f'[{first},"{self.lsn}"]'
            source = self._source(table, "false", sequence, self.lsn, self.txid, self.now_us)
            payload: JsonDict = {
                "before": None,
                "after": key_only_row(table.columns, bad),
                "source": source,
                "transaction": None,
                "op": "u",
                "ts_ms": ts_ms,
            }
            if kind == 2:
                del payload["op"]
            elif kind == 3:
                payload["op"] = "x"
            elif kind == 4:
                record_key, partition = None, 0
            else:
                del source["sequence"]
            value = {"schema": table.value_schema, "payload": payload}
        return (table.topic, partition, record_key, value, ts_ms, None)


# --- delivery ---------------------------------------------------------------------------------


def _deliver(out: list[_Out], malformed_at: list[int], duplicates: int, rng: _Rng) -> list[Record]:
    """Lay the log out per partition with redelivered copies, then interleave the partitions."""
    logs: dict[tuple[str, int], list[_Out]] = {}
    where: list[tuple[list[_Out], int]] = []  # per record: its partition's log and position
    for record in out:
        log = logs.setdefault((record[0], record[1]), [])
        where.append((log, len(log)))
        log.append(record)
    bad = set(malformed_at)
    candidates = [i for i in range(len(out)) if i not in bad]
    copies: dict[int, list[tuple[int, int]]] = {}  # id(log) -> (insert after, position)
    for index in rng.sample(candidates, duplicates):
        log, position = where[index]
        after = min(position + rng.between(1, 50), len(log) - 1)
        copies.setdefault(id(log), []).append((after, position))
    queues = [_redeliver(logs[name], copies.get(id(logs[name]), [])) for name in sorted(logs)]
    positions = [0] * len(queues)
    active = list(range(len(queues)))
    records: list[Record] = []
    append = records.append
    while active:
        pick = rng.below(len(active))
        queue_no = active[pick]
        queue, start = queues[queue_no], positions[queue_no]
        end = min(start + rng.between(1, _MAX_FETCH), len(queue))
        for offset in range(start, end):
            topic, partition, key, value, ts_ms, headers = queue[offset]
            if headers:
                append(Record(topic, partition, offset, ts_ms, key, value, headers))
            else:
                append(Record(topic, partition, offset, ts_ms, key, value))
        positions[queue_no] = end
        if end == len(queue):
            active[pick] = active[-1]
            active.pop()
    return records


def _redeliver(log: list[_Out], copies: list[tuple[int, int]]) -> list[_Out]:
    """One partition's log with a copy of the record at ``position`` placed right after the
    record at ``after``, for each ``(after, position)``; a copy is produced no earlier than the
    record it follows."""
    result: list[_Out] = []
    done = 0
    for after, position in sorted(copies):
        result += log[done : after + 1]
        done = after + 1
        topic, partition, key, value, ts_ms, headers = log[position]
        result.append((topic, partition, key, value, max(ts_ms, result[-1][4]), headers))
    result += log[done:]
    return result
