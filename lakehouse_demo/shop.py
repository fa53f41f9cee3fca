"""Domain model of the simulated shop: its two Postgres tables, their Kafka Connect schemas and
the value encodings of Debezium 3.x (JSON converter, ``schemas.enable=true``, precise decimals).

No randomness, clock or I/O here: the generator drives the entities.
"""

from __future__ import annotations

from binascii import b2a_base64
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import lru_cache
from typing import Any, NamedTuple

#: Connector version written to ``source.version``.
DEBEZIUM_VERSION = "3.1.2.Final"
#: What Debezium writes for an unchanged out-of-line (TOASTed) column.
TOAST_PLACEHOLDER = "__debezium_unavailable_value"
#: Values of ``customers.tier`` (a ``char(8)``, so stored right-padded to 8 characters).
TIERS = ("bronze", "silver", "gold", "platinum")
#: Values of ``orders.status``.
ORDER_STATUSES = ("new", "paid", "shipped", "cancelled")

JsonDict = dict[str, Any]


# --- value encodings --------------------------------------------------------------------------


def char_n(text: str, width: int) -> str:
    """Return ``text`` as Postgres stores it in a ``char(width)`` column (blank padded)."""
    return text[:width].ljust(width)


def decimal_b64(unscaled: int) -> str:
    """Encode a Connect ``Decimal`` (precise mode): base64 of the minimal big-endian
    two's-complement bytes of the unscaled value, as Java's ``BigInteger.toByteArray``."""
    size = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
    return b2a_base64(unscaled.to_bytes(size, "big", signed=True), newline=False).decode("ascii")


@lru_cache(maxsize=4096)
def _second(epoch_second: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` of an epoch second (UTC)."""
    day, sec = divmod(epoch_second, 86_400)
    hours, sec = divmod(sec, 3600)
    minutes, sec = divmod(sec, 60)
    return f"{date(1970, 1, 1) + timedelta(days=day)}T{hours:02d}:{minutes:02d}:{sec:02d}"


def zoned_timestamp(micros: int) -> str:
    """Format epoch microseconds as Debezium's ``ZonedTimestamp`` for a ``timestamptz`` column
    (ISO-8601 in UTC; the fraction has no trailing zeros and is left out when zero)."""
    sec, frac = divmod(micros, 1_000_000)
    if frac:
        return f"{_second(sec)}{f'.{frac:06d}'.rstrip('0')}Z"
    return f"{_second(sec)}Z"


def iso_millis(millis: int) -> str:
    """Format epoch milliseconds as ISO-8601 UTC with exactly three fraction digits."""
    sec, frac = divmod(millis, 1000)
    return f"{_second(sec)}.{frac:03d}Z"


# --- Kafka Connect schemas --------------------------------------------------------------------


def column(
    name: str,
    type_: str,
    *,
    optional: bool = True,
    logical: str | None = None,
    parameters: dict[str, str] | None = None,
) -> JsonDict:
    """One field of a Connect struct schema, keys in the order the JSON converter writes them."""
    spec: JsonDict = {"type": type_, "optional": optional}
    if logical is not None:
        spec["name"] = logical
        spec["version"] = 1
    if parameters is not None:
        spec["parameters"] = parameters
    spec["field"] = name
    return spec


def decimal_column(name: str, precision: int, scale: int) -> JsonDict:
    """A ``numeric(precision, scale)`` column in precise decimal mode."""
    params = {"scale": str(scale), "connect.decimal.precision": str(precision)}
    return column(name, "bytes", logical="org.apache.kafka.connect.data.Decimal", parameters=params)


# Non-key columns are nullable: with REPLICA IDENTITY DEFAULT a delete's ``before`` has only the
# key, so every other column is null there.
CUSTOMER_COLUMNS: tuple[JsonDict, ...] = (
    column("id", "int32", optional=False),
    column("email", "string"),
    column("name", "string"),
    column("tier", "string"),
    column("notes", "string"),
    decimal_column("balance", 12, 2),
    column("birth_date", "int32", logical="io.debezium.time.Date"),
    column("created_at", "int64", logical="io.debezium.time.MicroTimestamp"),
    column("updated_at", "string", logical="io.debezium.time.ZonedTimestamp"),
)

ORDER_COLUMNS: tuple[JsonDict, ...] = (
    column("id", "int64", optional=False),
    column("customer_id", "int32"),
    column("status", "string"),
    decimal_column("total", 10, 2),
    column("items", "string", logical="io.debezium.data.Json"),
    column("created_at", "int64", logical="io.debezium.time.MicroTimestamp"),
    column("updated_at", "string", logical="io.debezium.time.ZonedTimestamp"),
)

_SOURCE_SCHEMA: JsonDict = {
    "type": "struct",
    "fields": [
        column("version", "string", optional=False),
        column("connector", "string", optional=False),
        column("name", "string", optional=False),
        column("ts_ms", "int64", optional=False),
        {
            "type": "string",
            "optional": True,
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {"allowed": "true,last,false,incremental"},
            "default": "false",
            "field": "snapshot",
        },
        column("db", "string", optional=False),
        column("sequence", "string"),
        column("ts_us", "int64"),
        column("ts_ns", "int64"),
        column("schema", "string", optional=False),
        column("table", "string", optional=False),
        column("txId", "int64"),
        column("lsn", "int64"),
        column("xmin", "int64"),
    ],
    "optional": False,
    "name": "io.debezium.connector.postgresql.Source",
    "field": "source",
}

_TRANSACTION_SCHEMA: JsonDict = {
    "type": "struct",
    "fields": [
        column("id", "string", optional=False),
        column("total_order", "int64", optional=False),
        column("data_collection_order", "int64", optional=False),
    ],
    "optional": True,
    "name": "event.block",
    "version": 1,
    "field": "transaction",
}


def key_schema(topic: str, columns: tuple[JsonDict, ...]) -> JsonDict:
    """Schema of the record key: a struct of the primary-key column (the first column)."""
    return {"type": "struct", "fields": [columns[0]], "optional": False, "name": f"{topic}.Key"}


def envelope_schema(topic: str, columns: tuple[JsonDict, ...]) -> JsonDict:
    """Schema of a Debezium change-event value for a table with these columns."""

    def row(name: str) -> JsonDict:
        value = {"type": "struct", "fields": list(columns), "optional": True}
        return {**value, "name": f"{topic}.Value", "field": name}

    return {
        "type": "struct",
        "fields": [
            row("before"),
            row("after"),
            _SOURCE_SCHEMA,
            _TRANSACTION_SCHEMA,
            column("op", "string", optional=False),
            column("ts_ms", "int64"),
            column("ts_us", "int64"),
            column("ts_ns", "int64"),
        ],
        "optional": False,
        "name": f"{topic}.Envelope",
        "version": 2,
    }


def key_only_row(columns: tuple[JsonDict, ...], key: int) -> JsonDict:
    """The ``before`` image of a delete under REPLICA IDENTITY DEFAULT: the key, all else null."""
    row: JsonDict = dict.fromkeys((c["field"] for c in columns), None)
    row[columns[0]["field"]] = key
    return row


# --- entities ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Customer:
    """Current state of one ``customers`` row (amounts in cents, times in epoch µs)."""

    id: int
    email: str
    name: str
    tier: str
    notes: str | None
    toasted: bool  # notes are stored out of line: unchanged notes come as the placeholder
    balance: int
    birth_date: int  # days since epoch
    created_us: int
    updated_us: int

    def row(self, toast: bool = False) -> JsonDict:
        """The row image; ``toast`` replaces the notes by the TOAST placeholder."""
        return {
            "id": self.id,
            "email": self.email,
            "name": self.name,
            "tier": self.tier,
            "notes": TOAST_PLACEHOLDER if toast else self.notes,
            "balance": decimal_b64(self.balance),
            "birth_date": self.birth_date,
            "created_at": self.created_us,
            "updated_at": zoned_timestamp(self.updated_us),
        }


class Item(NamedTuple):
    """One order line: quantity (negative for a refund) of a product at a unit price."""

    sku: str  # plain text, no JSON escaping needed
    qty: int
    price: int  # cents


@dataclass(slots=True)
class Order:
    """Current state of one ``orders`` row plus its remaining lifecycle (next step last).

    ``total`` (cents, negative for refunds), its encoding and ``items_json`` follow ``items``:
    call :meth:`reprice` after changing them."""

    id: int
    customer_id: int
    status: str
    items: list[Item]
    created_us: int
    updated_us: int
    plan: list[str] = field(default_factory=list)
    total: int = field(default=0, init=False)
    total_b64: str = field(default="", init=False)
    items_json: str = field(default="", init=False)

    def __post_init__(self) -> None:
        self.reprice()

    def reprice(self) -> None:
        """Recompute ``total`` and ``items_json`` (as Postgres prints ``jsonb``: keys by length,
        then bytes) from ``items``."""
        total, lines = 0, []
        for sku, qty, price in self.items:
            total += qty * price
            lines.append(
                f'{{"qty": {qty}, "sku": "{sku}", "price": "{price // 100}.{price % 100:02d}"}}'
            )
        self.total = total
        self.total_b64 = decimal_b64(total)
        self.items_json = "[" + ", ".join(lines) + "]"

    def row(self) -> JsonDict:
        """The row image."""
        return {
            "id": self.id,
            "customer_id": self.customer_id,
            "status": self.status,
            "total": self.total_b64,
            "items": self.items_json,
            "created_at": self.created_us,
            "updated_at": zoned_timestamp(self.updated_us),
        }


# --- reference data ---------------------------------------------------------------------------

FIRST_NAMES = (
    "Ada", "Alan", "Amara", "Ana", "Bruno", "Chen", "Chloé", "Dmitri", "Elif", "Emma", "Farah",
    "Grace", "Hiro", "Ines", "Jonas", "José", "Kai", "Lena", "Łukasz", "Maya", "Noah", "Olga",
    "Priya", "Quinn", "Rosa", "Sven", "Tomás", "Uma", "Wei", "Yara", "Zoë",
)  # fmt: skip
LAST_NAMES = (
    "Adeyemi", "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "García", "Hansen", "Ibrahim",
    "Jensen", "Kowalski", "Lindqvist", "Müller", "Nakamura", "O'Brien", "Petrov", "Quispe",
    "Rossi", "Schmidt", "Tanaka", "Urbina", "Varga", "Wójcik", "Xu", "Yilmaz", "Zhang",
)  # fmt: skip
CATEGORIES = ("shoes", "jackets", "bags", "outdoor", "kitchen", "books", "toys", "garden")
SEARCHES = ("rain+jacket", "running+shoes", "gift", "sale", "backpack", "tent", "kettle", "lego")
NOTE_WORDS = (
    "customer", "prefers", "delivery", "after", "six", "call", "before", "shipping", "fragile",
    "items", "loyal", "since", "requested", "invoice", "by", "email", "gift", "wrap", "returns",
    "often", "sizes", "run", "small", "VIP", "account", "manager", "notified", "address",
    "changed", "twice", "do", "not", "leave", "at", "door", "ring", "bell", "café", "naïve",
)  # fmt: skip
