"""A deterministic NEXMark workload: Person, Auction and Bid events as the file source's records.

The events follow the published generator's rules (the Nexmark suite of the Flink community):
out of every 50 events, 1 is a person, 3 are auctions and 46 are bids, by event number; event
``n`` has ``dateTime`` = base time + ``n`` / event rate; ids start at 1000 (persons, auctions)
and 10 (categories); a seller is a hot seller (the first person of the latest hundred) with
probability 1 - 1/``hot_sellers_ratio``, a bid is on the hot auction (the first of the latest
hundred) with probability 1 - 1/``hot_auction_ratio`` and by a hot bidder (the second person of
the latest hundred) with probability 1 - 1/``hot_bidders_ratio``; other sellers, bidders and
auctions are drawn from the active people and the auctions in flight, plus a few ids not yet
created (a bid can name an auction or bidder that appears later); prices are
``round(10 ** (6 u) * 100)``; an auction ``expires`` a random time after its ``dateTime`` with
a mean of the time until ``num_in_flight_auctions`` more auctions are created; ``extra`` pads
each event to its average size; half the bids come through one of four hot channels with one
URL each, the others through ``channel-<i>`` (i below 10,000), whose URLs carry
``&channel_id=...`` nine times in ten.

One deviation, on purpose: the published generator adds the first person id twice to a
bidder (its bidders are ids 2000 and above, which never match a person); here a bidder is a
person id, so joins of bids with persons find matches.

Delivery (:func:`deliver`): one topic per stream (:data:`TOPICS`), each record delivered at
most ``disorder`` positions away from its place in event order, a share ``straggler_rate``
held back ``straggler_delay`` positions (far behind the others, into a later run of the
pipeline), and a share ``duplicate_rate`` delivered twice (at-least-once redelivery: the
same key and value at a new offset, a little later). :func:`write_parts` writes the delivery
as JSON-lines files in parts, one part per run of the pipeline.

Keys: a person and an auction have their ``id``; a bid has none in NEXMark, so the pipeline
keys it by (``auction``, ``bidder``, ``dateTime``): a bidder's bid on an auction at one
millisecond. Above 1,000 events per second several events share a millisecond, so the
generator draws the bidder again (as a non-hot bidder) when that triple is taken.
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc.records import Record
from lakehouse_core.errors import ConfigError
from lakehouse_demo.generator import write_files
from lakehouse_demo.shop import iso_millis

PERSON, AUCTION, BID = "person", "auction", "bid"
#: The topic of each stream.
TOPICS = {PERSON: "nexmark.person", AUCTION: "nexmark.auction", BID: "nexmark.bid"}
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
CATEGORIES = 5
#: Ids ahead of the latest person or auction that a seller, bidder or bid may name.
ID_LEAD = 10
#: Hot sellers, bidders and auctions are the first (bidders: second) of each hundred.
HOT_BATCH = 100
US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = (
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
)
FIRST_NAMES: tuple[str, ...] = (
    *("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter"),
    "Walter",
)
LAST_NAMES: tuple[str, ...] = (
    *("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"),
)
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
CHANNELS = 10_000
#: 2026-01-01 23:59:00 UTC: a stream of a few minutes crosses midnight (per-day queries).
BASE_TIME_MS = 1_767_311_940_000
_MIN_STRING = 3
_PAD_POOL = 1 << 16


@dataclass(frozen=True)
class NexmarkConfig:
    """Settings of one generated stream (the published defaults where NEXMark has one)."""

    events: int = 10_000
    seed: int = 0
    #: Events per second of event time (``dateTime`` advances by 1 / rate per event).
    event_rate: int = 1_000
    base_time_ms: int = BASE_TIME_MS
    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    num_in_flight_auctions: int = 100
    num_active_people: int = 1000
    avg_person_bytes: int = 200
    avg_auction_bytes: int = 500
    avg_bid_bytes: int = 100
    #: Each record lands at most this many positions from its place in event order.
    disorder: int = 100
    #: Share of records held back ``straggler_delay`` positions.
    straggler_rate: float = 0.01
    straggler_delay: int = 2_000
    #: Share of records delivered twice.
    duplicate_rate: float = 0.02
    partitions: int = 2

    def __post_init__(self) -> None:
        for name in ("events", "event_rate", "partitions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"NEXMark {name} must be a whole number above 0, not {value!r}.")
        for name in ("straggler_rate", "duplicate_rate"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 <= value <= 0.5:
                raise ConfigError(f"NEXMark {name} must be a share from 0 to 0.5, not {value!r}.")
        if self.disorder < 0 or self.straggler_delay < 0:
            raise ConfigError("NEXMark disorder and straggler_delay must be 0 or more positions.")

    @property
    def total_proportion(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    def timestamp_ms(self, event_number: int) -> int:
        """The ``dateTime`` of event ``event_number`` (epoch milliseconds)."""
        return self.base_time_ms + event_number * 1_000_000 // self.event_rate // 1000


@dataclass(frozen=True)
class Event:
    """One NEXMark event: its stream (person, auction, bid), its event number and its fields
    (NEXMark's names; ``dateTime`` and ``expires`` as epoch milliseconds)."""

    kind: str
    number: int
    fields: dict[str, Any]

    @property
    def key(self) -> tuple[Any, ...]:
        """The event's key in the pipeline (see the module docstring)."""
        if self.kind == BID:
            return (self.fields["auction"], self.fields["bidder"], self.fields["dateTime"])
        return (self.fields["id"],)

    def value(self) -> dict[str, Any]:
        """The record value: the fields, times as ISO-8601 UTC with milliseconds."""
        value = dict(self.fields)
        for name in ("dateTime", "expires"):
            if name in value:
                value[name] = iso_millis(value[name])
        return value


def last_person(config: NexmarkConfig, event_id: int) -> int:
    """The latest person id (base 0) at event ``event_id`` (the new one, if it is a person)."""
    epoch, offset = divmod(event_id, config.total_proportion)
    return epoch * config.person_proportion + min(offset, config.person_proportion - 1)


def last_auction(config: NexmarkConfig, event_id: int) -> int:
    """The latest auction id (base 0) at event ``event_id`` (the new one, if it is one)."""
    epoch, offset = divmod(event_id, config.total_proportion)
    people, auctions = config.person_proportion, config.auction_proportion
    if offset < people:
        return (epoch - 1) * auctions + auctions - 1
    if offset >= people + auctions:
        return epoch * auctions + auctions - 1
    return epoch * auctions + offset - people


class _Draws:
    """The random draws of one stream (one seeded generator, used in event order)."""

    def __init__(self, config: NexmarkConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.pad = "".join(self.rng.choices("abcdefghijklmnopqrstuvwxyz", k=_PAD_POOL))
        self.hot_urls = tuple(self.url() for _ in HOT_CHANNELS)
        self.channel_urls: dict[int, str] = {}

    def string(self, max_length: int, special: str = " ") -> str:
        length = _MIN_STRING + self.rng.randrange(max_length - _MIN_STRING)
        letters = (
            special if self.rng.randrange(13) == 0 else chr(97 + self.rng.randrange(26))
            for _ in range(length)
        )
        return "".join(letters).strip()

    def extra(self, current: int, average: int) -> str:
        if current > average:
            return ""
        wanted = average - current
        delta = round(wanted * 0.2)
        size = wanted - delta + (self.rng.randrange(2 * delta) if delta else 0)
        start = self.rng.randrange(_PAD_POOL - size)
        return self.pad[start : start + size]

    def price(self) -> int:
        return round(math.pow(10.0, self.rng.random() * 6.0) * 100.0)

    def url(self) -> str:
        parts = (self.string(5, "_") for _ in range(3))
        return "https://www.nexmark.com/" + "/".join(parts) + "/item.htm?query=1"

    def channel(self) -> tuple[str, str]:
        if self.rng.randrange(2) > 0:
            hot = self.rng.randrange(len(HOT_CHANNELS))
            return HOT_CHANNELS[hot], self.hot_urls[hot]
        number = self.rng.randrange(CHANNELS)
        if number not in self.channel_urls:
            url = self.url()
            if self.rng.randrange(10) > 0:
                url += f"&channel_id={_reversed_bits(number)}"
            self.channel_urls[number] = url
        return f"channel-{number}", self.channel_urls[number]

    def person_id(self, event_id: int) -> int:
        """An active person, or one of the next few (base 0)."""
        people = last_person(self.config, event_id) + 1
        active = min(people, self.config.num_active_people)
        return people - active + self.rng.randrange(active + ID_LEAD)

    def auction_id(self, event_id: int) -> int:
        """An auction likely in flight, or one of the next few (base 0)."""
        latest = last_auction(self.config, event_id)
        lowest = max(latest - self.config.num_in_flight_auctions, 0)
        return lowest + self.rng.randrange(latest - lowest + 1 + ID_LEAD)


def _reversed_bits(number: int) -> int:
    """Java's ``Math.abs(Integer.reverse(number))`` (the minimum int stays negative)."""
    reversed_ = int(f"{number:032b}"[::-1], 2)
    signed = reversed_ - (1 << 32) if reversed_ >= 1 << 31 else reversed_
    return signed if signed == -(1 << 31) else abs(signed)


def generate(config: NexmarkConfig) -> list[Event]:
    """The stream's events in event order (event numbers 0 to ``events - 1``)."""
    draws, events = _Draws(config), []
    taken: set[tuple[int, int, int]] = set()
    for number in range(config.events):
        events.append(_event(draws, number, taken))
    return events


def _event(draws: _Draws, number: int, taken: set[tuple[int, int, int]]) -> Event:
    config, rng = draws.config, draws.rng
    at = config.timestamp_ms(number)
    offset = number % config.total_proportion
    if offset < config.person_proportion:
        name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
        email = f"{draws.string(7)}@{draws.string(5)}.com"
        card = " ".join(f"{rng.randrange(10_000):04d}" for _ in range(4))
        city, state = rng.choice(US_CITIES), rng.choice(US_STATES)
        size = 8 + len(name) + len(email) + len(card) + len(city) + len(state)
        person = {
            "id": last_person(config, number) + FIRST_PERSON_ID,
            "name": name,
            "emailAddress": email,
            "creditCard": card,
            "city": city,
            "state": state,
            "dateTime": at,
            "extra": draws.extra(size, config.avg_person_bytes),
        }
        return Event(PERSON, number, person)
    if offset < config.person_proportion + config.auction_proportion:
        if rng.randrange(config.hot_sellers_ratio) > 0:
            seller = last_person(config, number) // HOT_BATCH * HOT_BATCH
        else:
            seller = draws.person_id(number)
        category = FIRST_CATEGORY_ID + rng.randrange(CATEGORIES)
        initial = draws.price()
        ahead = config.num_in_flight_auctions * config.total_proportion
        horizon = config.timestamp_ms(number + ahead // config.auction_proportion) - at
        expires = at + 1 + rng.randrange(max(horizon * 2, 1))
        item, description = draws.string(20), draws.string(100)
        reserve = initial + draws.price()
        size = 8 + len(item) + len(description) + 40
        auction = {
            "id": last_auction(config, number) + FIRST_AUCTION_ID,
            "itemName": item,
            "description": description,
            "initialBid": initial,
            "reserve": reserve,
            "dateTime": at,
            "expires": expires,
            "seller": seller + FIRST_PERSON_ID,
            "category": category,
            "extra": draws.extra(size, config.avg_auction_bytes),
        }
        return Event(AUCTION, number, auction)
    if rng.randrange(config.hot_auction_ratio) > 0:
        auction_id = last_auction(config, number) // HOT_BATCH * HOT_BATCH
    else:
        auction_id = draws.auction_id(number)
    if rng.randrange(config.hot_bidders_ratio) > 0:
        bidder = last_person(config, number) // HOT_BATCH * HOT_BATCH + 1
    else:
        bidder = draws.person_id(number)
    while (auction_id + FIRST_AUCTION_ID, bidder + FIRST_PERSON_ID, at) in taken:
        bidder = draws.person_id(number)
    taken.add((auction_id + FIRST_AUCTION_ID, bidder + FIRST_PERSON_ID, at))
    price = draws.price()
    channel, url = draws.channel()
    bid = {
        "auction": auction_id + FIRST_AUCTION_ID,
        "bidder": bidder + FIRST_PERSON_ID,
        "price": price,
        "channel": channel,
        "url": url,
        "dateTime": at,
        "extra": draws.extra(32, config.avg_bid_bytes),
    }
    return Event(BID, number, bid)


def deliver(events: Sequence[Event], config: NexmarkConfig) -> list[Event]:
    """``events`` in delivery order: shuffled within ``disorder`` positions, stragglers held
    back ``straggler_delay`` positions, duplicates a little after the first copy (its own
    seeded draws, so the events do not depend on the delivery settings)."""
    rng = random.Random(f"delivery-{config.seed}")
    placed: list[tuple[float, int, Event]] = []
    for position, event in enumerate(events):
        at = position + rng.uniform(0, config.disorder)
        if rng.random() < config.straggler_rate:
            at += config.straggler_delay
        placed.append((at, len(placed), event))
        if rng.random() < config.duplicate_rate:
            placed.append((at + rng.uniform(1, config.disorder + 50), len(placed), event))
    placed.sort(key=lambda item: (item[0], item[1]))
    return [event for _, _, event in placed]


def records(delivered: Sequence[Event], config: NexmarkConfig) -> Iterator[Record]:
    """The delivered events as Kafka records of their topics (offsets per topic partition in
    delivery order; the record time is the latest event time delivered so far)."""
    offsets: dict[tuple[str, int], int] = {}
    clock = config.base_time_ms
    for event in delivered:
        topic = TOPICS[event.kind]
        if event.kind == BID:
            key = {"auction": event.fields["auction"], "bidder": event.fields["bidder"]}
        else:
            key = {"id": event.fields["id"]}
        partition = sum(event.key[:2]) % config.partitions
        offset = offsets.get((topic, partition), 0)
        offsets[(topic, partition)] = offset + 1
        clock = max(clock, event.fields["dateTime"])
        yield Record(topic, partition, offset, clock, key, event.value())


def write_parts(
    delivered: Sequence[Event], config: NexmarkConfig, out_dir: Path, parts: int = 1
) -> list[Path]:
    """Write the delivery as ``parts`` consecutive slices, slice ``i`` into ``out_dir/run-<i>``
    (one directory per run: move or copy them into the source folder between runs), and return
    the directories."""
    all_records = list(records(delivered, config))
    bounds = [len(all_records) * i // parts for i in range(parts + 1)]
    directories = []
    for part in range(parts):
        directory = out_dir / f"run-{part}"
        write_files(all_records[bounds[part] : bounds[part + 1]], directory)
        directories.append(directory)
    return directories


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the files")
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=int, default=1_000, help="events per second")
    parser.add_argument("--parts", type=int, default=1, help="runs to split the delivery in")
    args = parser.parse_args()
    config = NexmarkConfig(events=args.events, seed=args.seed, event_rate=args.rate)
    written = write_parts(deliver(generate(config), config), config, args.out, args.parts)
    print(f"{config.events} events in {', '.join(map(str, written))}")


if __name__ == "__main__":
    main()
