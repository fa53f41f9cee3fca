"""Typed, validated pipeline settings: per-table CDC contracts and gold job settings.

A pipeline needs no file for standard Debezium topics: every topic not listed is read as a
Debezium table keyed by its record key and ordered by its connector's sequence. Plain event
streams are declared (``format = "events"`` with ``keys`` and ``sequence_by``). A TOML file
with ``[[tables]]`` entries and a ``[gold]`` table overrides the defaults.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from lakehouse.errors import ConfigError
from lakehouse.identifiers import entity_name_for_topic, require_identifier
from lakehouse.layout import QUARANTINE_TABLE

TableFormat = Literal["debezium", "events"]
TABLE_FORMATS: tuple[TableFormat, ...] = ("debezium", "events")
SCD_TYPES = (1, 2)


_DURATION_UNITS = ("second", "minute", "hour", "day")


def _require_duration(text: str) -> None:
    amount, _, unit = text.partition(" ")
    if not amount.isdigit() or unit.rstrip("s") not in _DURATION_UNITS:
        raise ConfigError(
            f"Invalid duration {text!r}: write '<number> <unit>' with unit one of "
            f"{', '.join(_DURATION_UNITS)} (e.g. '10 minutes')."
        )


@dataclass(frozen=True)
class TableSpec:
    """How one topic becomes one silver table (names as in Databricks AUTO CDC)."""

    name: str
    topic: str
    format: TableFormat = "debezium"
    keys: tuple[str, ...] | None = None
    sequence_by: tuple[str, ...] | None = None
    schema: str | None = None
    tombstone_retention_days: int = 7
    stored_as_scd_type: int = 1
    track_history_column_list: tuple[str, ...] | None = None
    track_history_except_column_list: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        require_identifier(self.name, "table name")
        if self.name == QUARANTINE_TABLE:
            raise ConfigError(f"Table name {self.name!r} is reserved for the quarantine table.")
        if self.format not in TABLE_FORMATS:
            raise ConfigError(
                f"Invalid format {self.format!r} for table {self.name!r}. "
                f"Must be one of {', '.join(TABLE_FORMATS)}."
            )
        for column in (*(self.keys or ()), *(self.sequence_by or ())):
            require_identifier(column, f"column of table {self.name!r}")
        if self.format == "events" and not (self.keys and self.sequence_by):
            raise ConfigError(
                f"Table {self.name!r} has format 'events': set both 'keys' and 'sequence_by' "
                "(the event id and the column that orders versions of an event)."
            )
        if self.tombstone_retention_days < 0:
            raise ConfigError("tombstone_retention_days must be 0 or more.")
        self._check_history_settings()

    @property
    def history_name(self) -> str | None:
        """Name of the SCD type 2 history table (``<name>_history``), None for type 1."""
        return f"{self.name}_history" if self.stored_as_scd_type == 2 else None

    def _check_history_settings(self) -> None:
        scd_type = self.stored_as_scd_type
        if isinstance(scd_type, bool) or scd_type not in SCD_TYPES:
            raise ConfigError(
                f"Invalid stored_as_scd_type {self.stored_as_scd_type!r} for table "
                f"{self.name!r}. Must be 1 (latest row per key) or 2 (also keep a history table)."
            )
        included, excluded = self.track_history_column_list, self.track_history_except_column_list
        chosen = [
            setting
            for setting, value in (
                ("track_history_column_list", included),
                ("track_history_except_column_list", excluded),
            )
            if value is not None
        ]
        if chosen and self.stored_as_scd_type != 2:
            raise ConfigError(
                f"Table {self.name!r}: {chosen[0]} only applies to history tables; "
                "set stored_as_scd_type = 2 or remove it."
            )
        if len(chosen) == 2:
            raise ConfigError(
                f"Table {self.name!r}: set either track_history_column_list or "
                "track_history_except_column_list, not both."
            )
        if included is not None and not included:
            raise ConfigError(
                f"Table {self.name!r}: track_history_column_list is empty; name the columns "
                "whose changes start a new history row, or remove the setting to track all."
            )
        for column in (*(included or ()), *(excluded or ())):
            require_identifier(column, f"column of table {self.name!r}")
        if self.history_name is not None:
            require_identifier(self.history_name, f"history table name of {self.name!r}")


@dataclass(frozen=True)
class GoldSpec:
    """Inputs of the gold jobs: which silver tables and columns they aggregate."""

    orders_table: str = "orders"
    order_time: str = "created_at"
    order_amount: str = "total"
    revenue_window: str = "1 minute"
    clicks_table: str = "clickstream"
    click_user: str = "user_id"
    click_time: str = "ts"
    session_gap: str = "30 minutes"

    def __post_init__(self) -> None:
        for column in (
            self.orders_table,
            self.order_time,
            self.order_amount,
            self.clicks_table,
            self.click_user,
            self.click_time,
        ):
            require_identifier(column, "gold setting")
        for duration in (self.revenue_window, self.session_gap):
            _require_duration(duration)


@dataclass(frozen=True)
class PipelineConfig:
    """Everything a pipeline run needs besides the source and the warehouse."""

    tables: tuple[TableSpec, ...] = ()
    gold: GoldSpec = field(default_factory=GoldSpec)

    def __post_init__(self) -> None:
        names = [table.name for table in self.tables]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ConfigError(f"Table names must be unique; repeated: {', '.join(duplicates)}.")
        for table in self.tables:
            _reject_history_name(self, table.name)

    def spec_for_topic(self, topic: str) -> TableSpec:
        """The declared spec for ``topic``, or the Debezium defaults.

        Raises:
            ConfigError: the default entity name is the history table of a declared table.
        """
        for table in self.tables:
            if table.topic == topic:
                return table
        spec = TableSpec(name=entity_name_for_topic(topic), topic=topic)
        _reject_history_name(self, spec.name, topic)
        return spec


def _reject_history_name(config: PipelineConfig, name: str, topic: str | None = None) -> None:
    """Raise if ``name`` is the history table name of one of the config's tables."""
    for table in config.tables:
        if table.history_name == name:
            subject = f"Topic {topic!r} maps to table {name!r}" if topic else f"Table {name!r}"
            raise ConfigError(
                f"{subject}, the history table of {table.name!r} (stored_as_scd_type = 2); "
                "declare it in [[tables]] with another name."
            )


#: The demo shop's clickstream is a plain event stream; its CDC tables need no settings.
SHOP_CONFIG = PipelineConfig(
    tables=(
        TableSpec(
            name="clickstream",
            topic="shop.clickstream",
            format="events",
            keys=("event_id",),
            sequence_by=("ts",),
            schema="event_id string, user_id bigint, page string, action string, ts timestamp",
        ),
    )
)


def load_config(path: str | Path | None) -> PipelineConfig:
    """Read a TOML pipeline file, or return the shop defaults when ``path`` is None.

    Raises:
        ConfigError: the file is missing, not TOML, or holds unknown or invalid settings.
    """
    if path is None:
        return SHOP_CONFIG
    try:
        document = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise ConfigError(f"Config file {path} not found.") from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"Config file {path} is not valid TOML: {error}.") from error
    _reject_unknown(document, {"tables", "gold"}, "the config file")
    tables = tuple(_table_from(entry) for entry in document.get("tables", []))
    gold_settings = document.get("gold", {})
    _reject_unknown(gold_settings, {f.name for f in fields(GoldSpec)}, "[gold]")
    for setting, value in gold_settings.items():
        _require_type(setting, value, str, "[gold]")
    return PipelineConfig(tables=tables, gold=GoldSpec(**gold_settings))


_TABLE_TYPES: Mapping[str, type] = {
    "name": str,
    "topic": str,
    "format": str,
    "keys": list,
    "sequence_by": list,
    "schema": str,
    "tombstone_retention_days": int,
    "stored_as_scd_type": int,
    "track_history_column_list": list,
    "track_history_except_column_list": list,
}


_HISTORY_LISTS = ("track_history_column_list", "track_history_except_column_list")


def _table_from(entry: Mapping[str, Any]) -> TableSpec:
    _reject_unknown(entry, set(_TABLE_TYPES), "[[tables]]")
    if "name" not in entry or "topic" not in entry:
        raise ConfigError("Each [[tables]] entry needs 'name' and 'topic'.")
    values = dict(entry)
    for setting, value in values.items():
        _require_type(setting, value, _TABLE_TYPES[setting], "[[tables]]")
    for listed in ("keys", "sequence_by", *_HISTORY_LISTS):
        if listed in values:
            for item in values[listed]:
                _require_type(listed, item, str, "[[tables]]")
            values[listed] = tuple(values[listed])
    return TableSpec(**values)


def _require_type(setting: str, value: Any, expected: type, where: str) -> None:
    if not isinstance(value, expected) or isinstance(value, bool) is not (expected is bool):
        names = {str: "a string", int: "an integer", list: "a list of strings"}
        raise ConfigError(
            f"Setting {setting!r} in {where} must be {names.get(expected, expected.__name__)}, "
            f"not {value!r}."
        )


def _reject_unknown(settings: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(settings) - allowed)
    if unknown:
        raise ConfigError(
            f"Unknown setting(s) {', '.join(unknown)} in {where}. "
            f"Allowed: {', '.join(sorted(allowed))}."
        )
