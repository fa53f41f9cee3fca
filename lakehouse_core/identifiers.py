"""Checks for names that end up in table paths or SQL, so no SQL is built from unchecked text."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from lakehouse_core.errors import ConfigError

MAX_IDENTIFIER = 128
_PLAIN_NAME = re.compile(rf"[A-Za-z_][A-Za-z0-9_]{{0,{MAX_IDENTIFIER - 1}}}")
_NON_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]+")


def is_plain_identifier(name: object) -> bool:
    """Whether ``name`` is a plain identifier (letters, digits, underscore, at most
    :data:`MAX_IDENTIFIER` characters, not starting with a digit)."""
    return isinstance(name, str) and _PLAIN_NAME.fullmatch(name) is not None


def require_identifier(name: str, what: str = "name") -> str:
    """Return ``name`` if it is a plain identifier (letters, digits, underscore).

    Raises:
        ConfigError: naming the offending value and what is allowed.
    """
    if not is_plain_identifier(name):
        raise ConfigError(
            f"Invalid {what} {name!r}: use letters, digits and underscores only, "
            f"starting with a letter or underscore (at most {MAX_IDENTIFIER} characters)."
        )
    return name


def quote_identifier(name: str, what: str = "name") -> str:
    """Return a checked identifier in backquotes, safe to place in a SQL statement."""
    return f"`{require_identifier(name, what)}`"


def table_name_for_topic(topic: str) -> str:
    """Map a topic (``shop.public.orders``) to a bronze table name (``shop_public_orders``).

    A name longer than an identifier may be (Kafka allows 249 characters) keeps its start and
    ends with a digest of the whole topic, so that long topics still get tables of their own.
    """
    name = _NON_NAME_CHARS.sub("_", topic).strip("_").lower()
    if not name or name[0].isdigit():
        name = f"t_{name}"
    if len(name) > MAX_IDENTIFIER:
        digest = hashlib.sha256(topic.encode("utf-8")).hexdigest()[:16]
        name = f"{name[: MAX_IDENTIFIER - len(digest) - 1]}_{digest}"
    return require_identifier(name, "table name derived from topic")


def entity_name_for_topic(topic: str) -> str:
    """Default silver entity for a topic: its last dot-separated part (``orders``)."""
    return table_name_for_topic(topic.rsplit(".", 1)[-1])


def bronze_tables_for_topics(topics: Iterable[str]) -> dict[str, str]:
    """The bronze table name of each topic.

    Raises:
        ConfigError: two topics map to one table name (``shop.public.orders`` and
            ``shop.public_orders``); their records would mix, so nothing is written.
    """
    topic_of: dict[str, str] = {}  # table name -> the topic that has it
    for topic in sorted(set(topics)):
        name = table_name_for_topic(topic)
        if name in topic_of:
            raise ConfigError(topic_collision_message(topic_of[name], topic, name))
        topic_of[name] = topic
    return {topic: name for name, topic in topic_of.items()}


def topic_collision_message(first: str, second: str, table: str) -> str:
    return (
        f"Topics {first!r} and {second!r} both map to bronze table {table!r}; each topic needs "
        "its own table, so nothing of this batch was written. Read only one of them (Kafka "
        "option subscribe or subscribePattern), or move the other to a topic with a different "
        "name."
    )
