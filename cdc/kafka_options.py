"""Options of the Kafka source: parsing, validation, librdkafka settings and secret redaction.

Option names follow Spark's built-in Kafka source where one exists (matched case-insensitively,
as Spark does). Every problem is a :class:`~lakehouse_core.errors.ConfigError` whose one-line
message starts with ``Kafka source:``, names the option and says what is allowed; no message,
``repr`` or log line ever carries the value of a secret setting (:func:`is_secret`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lakehouse_core.errors import ConfigError

#: Prefix of every user-facing message of the Kafka source, so it can be found in Spark's traces.
MESSAGE_PREFIX = "Kafka source:"

KAFKA_PREFIX = "kafka."
DEFAULT_TIMEOUT_MS = 30_000
#: Sentinels of Spark's per-partition ``startingOffsets`` JSON.
EARLIEST = -2
LATEST = -1

#: Offsets per partition, keyed by (topic, partition).
PartitionOffsets = dict[tuple[str, int], int]
StartingOffsets = Literal["earliest", "latest"] | PartitionOffsets

_SOURCE_OPTIONS = (
    "subscribe",
    "subscribePattern",
    "startingOffsets",
    "maxOffsetsPerTrigger",
    "capFirstBatch",
    "failOnDataLoss",
    "includeHeaders",
    "timeoutMs",
    "minPartitions",
)

#: librdkafka settings the source manages itself, and why a user may not set them.
_MANAGED_SETTINGS = {
    "auto.offset.reset": "use the startingOffsets option",
    "enable.auto.commit": "offsets live in the Spark checkpoint",
    "auto.commit.enable": "offsets live in the Spark checkpoint",
    "enable.auto.offset.store": "offsets live in the Spark checkpoint",
    "enable.partition.eof": "the source needs end-of-partition events to stop reading",
    "key.deserializer": "keys are returned as bytes",
    "value.deserializer": "values are returned as bytes",
    "interceptor.classes": "interceptors are not supported",
}

#: Settings the source forces on every client it creates.
_FORCED_SETTINGS: dict[str, str | bool] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    # An offset below the log start (deleted by retention) is reported, never silently reset.
    "auto.offset.reset": "error",
}
#: Used when ``kafka.group.id`` is not set; the source never joins or commits to the group.
DEFAULT_GROUP_ID = "lakehouse-kafka-source"

_SECRET_MARKERS = ("password", "secret", "token", "jaas", "oauthbearer.config", "pem")
_PUBLIC_PEM = ("ssl.certificate.pem", "ssl.ca.pem")
REDACTED = "*****(redacted)"


def redacted(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with the value of every secret setting replaced by :data:`REDACTED`."""
    return {k: REDACTED if is_secret(k) else v for k, v in settings.items()}


def is_secret(setting: str) -> bool:
    """True if a librdkafka setting or option name holds a secret (its value is never shown)."""
    name = setting.lower()
    if name.removeprefix(KAFKA_PREFIX) in _PUBLIC_PEM:
        return False
    return any(marker in name for marker in _SECRET_MARKERS)


@dataclass(frozen=True)
class KafkaSourceOptions:
    """The validated options of one Kafka source.

    ``client_config`` is the librdkafka configuration for every consumer the source creates
    (the ``kafka.*`` options without their prefix, plus the forced settings); its secrets are
    hidden from ``repr``.
    """

    client_config: Mapping[str, str | bool] = field(repr=False)
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    starting_offsets: StartingOffsets = "earliest"
    max_offsets_per_trigger: int | None = None
    cap_first_batch: bool = False
    fail_on_data_loss: bool = True
    include_headers: bool = False
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    min_partitions: int | None = None

    def __repr__(self) -> str:
        return (
            f"KafkaSourceOptions(client_config={redacted(self.client_config)}, "
            f"subscribe={self.subscribe}, "
            f"subscribe_pattern={self.subscribe_pattern!r}, "
            f"starting_offsets={self.starting_offsets!r}, "
            f"max_offsets_per_trigger={self.max_offsets_per_trigger}, "
            f"cap_first_batch={self.cap_first_batch}, "
            f"fail_on_data_loss={self.fail_on_data_loss}, "
            f"include_headers={self.include_headers}, timeout_ms={self.timeout_ms}, "
            f"min_partitions={self.min_partitions})"
        )

    @property
    def bootstrap_servers(self) -> str:
        return str(self.client_config["bootstrap.servers"])

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000.0

    def subscribes_to(self, topic: str) -> bool:
        """True if ``topic`` is subscribed: listed in ``subscribe`` or fully matching the pattern.

        A pattern never matches internal topics (names starting with ``_``): list them instead.
        """
        if self.subscribe_pattern is None:
            return topic in self.subscribe
        return not topic.startswith("_") and re.fullmatch(self.subscribe_pattern, topic) is not None

    def scrub(self, text: str) -> str:
        """``text`` with every secret setting's value replaced by a placeholder."""
        for key, value in self.client_config.items():
            if is_secret(key) and isinstance(value, str) and value:
                text = text.replace(value, REDACTED)
        return text


def parse_options(options: Mapping[str, str]) -> KafkaSourceOptions:
    """Validate the options given to ``readStream.format(...).option(...)``.

    Raises:
        ConfigError: an option is missing, unknown, managed by the source, or has a bad value.
    """
    lowered = {key.lower(): str(value) for key, value in options.items()}
    known = {name.lower(): name for name in _SOURCE_OPTIONS}
    unknown = sorted(k for k in lowered if k not in known and not k.startswith(KAFKA_PREFIX))
    if unknown:
        raise ConfigError(
            f"{MESSAGE_PREFIX} unknown option(s) {', '.join(unknown)}. Allowed: "
            f"{', '.join(_SOURCE_OPTIONS)} and kafka.<librdkafka setting>."
        )
    config = _client_config(lowered)
    subscribe, pattern = _subscription(lowered.get("subscribe"), lowered.get("subscribepattern"))
    parsed = KafkaSourceOptions(
        client_config=config,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        starting_offsets=_starting_offsets(lowered.get("startingoffsets", "earliest")),
        max_offsets_per_trigger=_positive_int(lowered, "maxOffsetsPerTrigger"),
        cap_first_batch=_boolean(lowered, "capFirstBatch", default=False),
        fail_on_data_loss=_boolean(lowered, "failOnDataLoss", default=True),
        include_headers=_boolean(lowered, "includeHeaders", default=False),
        timeout_ms=_positive_int(lowered, "timeoutMs") or DEFAULT_TIMEOUT_MS,
        min_partitions=_positive_int(lowered, "minPartitions"),
    )
    if isinstance(parsed.starting_offsets, dict):
        strays = sorted({t for t, _ in parsed.starting_offsets if not parsed.subscribes_to(t)})
        if strays:
            raise ConfigError(
                f"{MESSAGE_PREFIX} startingOffsets names topic(s) {', '.join(strays)} that the "
                "query does not subscribe to. List only subscribed topics."
            )
    return parsed


def _client_config(lowered: Mapping[str, str]) -> dict[str, str | bool]:
    settings = {k[len(KAFKA_PREFIX) :]: v for k, v in lowered.items() if k.startswith(KAFKA_PREFIX)}
    if not settings.get("bootstrap.servers", "").strip():
        raise ConfigError(
            f"{MESSAGE_PREFIX} option kafka.bootstrap.servers is required "
            "(a comma-separated list of HOST:PORT)."
        )
    for setting, reason in _MANAGED_SETTINGS.items():
        if setting in settings:
            raise ConfigError(
                f"{MESSAGE_PREFIX} option kafka.{setting} is not supported: {reason}. Remove it."
            )
    config: dict[str, str | bool] = {"group.id": DEFAULT_GROUP_ID, **settings}
    config.update(_FORCED_SETTINGS)
    return config


def _subscription(subscribe: str | None, pattern: str | None) -> tuple[tuple[str, ...], str | None]:
    if (subscribe is None) == (pattern is None):
        raise ConfigError(
            f"{MESSAGE_PREFIX} set exactly one of 'subscribe' (a comma-separated list of topics) "
            "or 'subscribePattern' (a regular expression)."
        )
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ConfigError(
                f"{MESSAGE_PREFIX} subscribePattern {pattern!r} is not a valid regular "
                f"expression ({error})."
            ) from None
        return (), pattern
    assert subscribe is not None
    topics = tuple(dict.fromkeys(t.strip() for t in subscribe.split(",") if t.strip()))
    if not topics:
        raise ConfigError(f"{MESSAGE_PREFIX} option subscribe lists no topic.")
    return topics, None


def _starting_offsets(text: str) -> StartingOffsets:
    value = text.strip()
    if value.lower() in ("earliest", "latest"):
        return "earliest" if value.lower() == "earliest" else "latest"
    problem = (
        f"{MESSAGE_PREFIX} invalid startingOffsets {text!r}: use 'earliest', 'latest' or JSON "
        'like {"topic":{"0":23,"1":-2}} (-2 earliest, -1 latest).'
    )
    try:
        document = json.loads(value)
    except ValueError:
        raise ConfigError(problem) from None
    if not isinstance(document, dict) or not document:
        raise ConfigError(problem)
    offsets: PartitionOffsets = {}
    for topic, partitions in document.items():
        if not isinstance(partitions, dict):
            raise ConfigError(problem)
        for partition, offset in partitions.items():
            if not (
                str(partition).isdigit()
                and isinstance(offset, int)
                and not isinstance(offset, bool)
                and offset >= EARLIEST
            ):
                raise ConfigError(problem)
            offsets[(topic, int(partition))] = offset
    return offsets


def _positive_int(lowered: Mapping[str, str], name: str) -> int | None:
    text = lowered.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(
            f"{MESSAGE_PREFIX} option {name} must be a positive integer, not {text!r}."
        )
    return value


def _boolean(lowered: Mapping[str, str], name: str, default: bool) -> bool:
    text = lowered.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise ConfigError(
            f"{MESSAGE_PREFIX} option {name} must be 'true' or 'false', not {text!r}."
        )
    return text.strip().lower() == "true"
