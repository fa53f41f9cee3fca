"""The pipeline's settings as frozen specs that check themselves: per-table CDC contracts,
maintenance, quality and catalog settings, and :class:`PipelineConfig`, which holds them with
the gold declarations, patterns, alerts and SQL models.

A pipeline needs no file for standard Debezium topics: every topic not listed is read as a
Debezium table keyed by its record key and ordered by its connector's sequence. Plain event
streams are declared (``format = "events"`` with ``keys`` and ``sequence_by``); gold tables,
alerts, models and patterns exist only where declared (``[[gold]]`` entries,
:mod:`lakehouse_core.gold_tables`). Without a file a pipeline has no declarations at all (the demo
shop's settings live with the demo, :mod:`lakehouse_demo.settings`). A TOML document becomes
specs in :mod:`lakehouse_core.loader`; :mod:`lakehouse_core.config` offers both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, TypedDict

import tomli_w

from lakehouse_core.alerting import AlertSpec
from lakehouse_core.columns import column_name_problem
from lakehouse_core.conditions import Condition, parse_condition
from lakehouse_core.durations import duration_micros, require_duration
from lakehouse_core.errors import ConfigError
from lakehouse_core.expects import (
    DeclaredSuite,
    Expectation,
    QualityAction,
    check_expectations,
    expectations_to_mapping,
    require_action,
)
from lakehouse_core.gold_tables import (
    GoldTable,
    check_gold_tables,
    gold_table_to_mapping,
    settings_of,
)
from lakehouse_core.identifiers import entity_name_for_topic, require_identifier
from lakehouse_core.layout import HISTORY_SUFFIX, QUARANTINE_TABLE
from lakehouse_core.models import SqlModel, models_to_toml, reserved_gold_names
from lakehouse_core.patterns import Pattern, check_patterns, pattern_to_mapping
from lakehouse_core.widening import TYPE_WIDENING_MODES, TypeWidening

TableFormat = Literal["debezium", "events"]
TABLE_FORMATS: tuple[TableFormat, ...] = ("debezium", "events")
ConditionSetting = Literal["apply_as_deletes", "apply_as_truncates"]
IncompatibleTypePolicy = Literal["fail", "quarantine"]
INCOMPATIBLE_TYPE_POLICIES: tuple[IncompatibleTypePolicy, ...] = ("fail", "quarantine")
TypeMismatchPolicy = Literal["quarantine", "rescue"]
TYPE_MISMATCH_POLICIES: tuple[TypeMismatchPolicy, ...] = ("quarantine", "rescue")
ResnapshotMode = Literal["upsert", "full"]
RESNAPSHOT_MODES: tuple[ResnapshotMode, ...] = ("upsert", "full")
SCD_TYPES = (1, 2)
#: The other form some settings also take, as Databricks' ``create_auto_cdc_flow`` users write
#: them (one column as a string, ``stored_as_scd_type`` as ``"2"``); the spec normalises it.
DATABRICKS_FORMS: dict[str, type] = {"keys": str, "sequence_by": str, "stored_as_scd_type": str}
#: The fields of :class:`TableSpec` that are not its settings: what it is (its name, topic and
#: format, which the declaration's kind gives) and its expectations (declared apart).
NOT_SETTINGS = ("name", "topic", "format", "expectations")


@dataclass(frozen=True)
class TableSpec:
    """How one topic becomes one silver table (names as in Databricks AUTO CDC; each setting is
    described in docs/silver-semantics.md). Invalid or contradictory settings raise ConfigError."""

    name: str
    topic: str
    format: TableFormat = "debezium"
    keys: tuple[str, ...] | None = None
    sequence_by: tuple[str, ...] | None = None
    schema: str | None = None
    tombstone_retention_days: int = 7
    apply_as_deletes: str | None = None
    apply_as_truncates: str | None = None
    column_list: tuple[str, ...] | None = None
    except_column_list: tuple[str, ...] | None = None
    ignore_null_updates: bool = False
    #: Partial updates for only these columns / for all columns but these (either implies
    #: ``ignore_null_updates`` for the columns it selects).
    ignore_null_updates_column_list: tuple[str, ...] | None = None
    ignore_null_updates_except_column_list: tuple[str, ...] | None = None
    #: A second ordering column that breaks ties of ``sequence_by``.
    system_sequence_by: str | None = None
    #: A source column type no type holds with the table's: quarantine the records carrying a
    #: value in it (the rest of the table goes on), or stop the table's stream.
    on_incompatible_type: IncompatibleTypePolicy = "quarantine"
    #: A value its column's type does not hold (``"hot"`` in a double column): quarantine its
    #: record, or keep the record with the value in ``_rescued_data`` (docs/silver-semantics.md,
    #: "Values of the wrong type").
    on_type_mismatch: TypeMismatchPolicy = "quarantine"
    #: Snapshot reads are upserts compared by order (``upsert``), or also, for a Debezium
    #: table, the end of a full snapshot removes the rows it did not read that are older than
    #: it (``full``; docs/silver-semantics.md, "Re-snapshots").
    resnapshot: ResnapshotMode = "upsert"
    #: How the entity's tables take a wider column type (lakehouse_core.widening.TypeWidening).
    type_widening: TypeWidening = "rewrite"
    #: Delta deletion vectors on the entity's silver table: a MERGE marks the rows it replaces
    #: instead of rewriting their files (a reader feature; off by default).
    deletion_vectors: bool = False
    stored_as_scd_type: int = 1
    track_history_column_list: tuple[str, ...] | None = None
    track_history_except_column_list: tuple[str, ...] | None = None
    #: Expectations of the silver table (``expect``, ``expect_or_drop``, ``expect_or_fail``
    #: in TOML; :mod:`lakehouse_core.expects`).
    expectations: tuple[Expectation, ...] = ()

    def __post_init__(self) -> None:
        self._normalise_databricks_forms()
        require_identifier(self.name, "table name")
        if self.name == QUARANTINE_TABLE:
            raise ConfigError(f"Table name {self.name!r} is reserved for the quarantine table.")
        if self.format not in TABLE_FORMATS:
            raise ConfigError(
                f"Invalid format {self.format!r} for table {self.name!r}. "
                f"Must be one of {', '.join(TABLE_FORMATS)}."
            )
        for column in (*(self.keys or ()), *self.order_columns):
            _require_source_column(column, self.name)
        if self.system_sequence_by is not None and not self.sequence_by:
            raise ConfigError(
                f"Table {self.name!r}: system_sequence_by breaks ties of sequence_by; set "
                "sequence_by too."
            )
        if self.format == "events" and not (self.keys and self.sequence_by):
            raise ConfigError(
                f"Table {self.name!r} has format 'events': set both 'keys' and 'sequence_by' "
                "(the event id and the column that orders versions of an event)."
            )
        if self.tombstone_retention_days < 0:
            raise ConfigError("tombstone_retention_days must be 0 or more.")
        self._check_change_settings()
        if self.on_incompatible_type not in INCOMPATIBLE_TYPE_POLICIES:
            raise ConfigError(
                f"Invalid on_incompatible_type {self.on_incompatible_type!r} for table "
                f"{self.name!r}. Must be one of {', '.join(INCOMPATIBLE_TYPE_POLICIES)}."
            )
        if self.on_type_mismatch not in TYPE_MISMATCH_POLICIES:
            raise ConfigError(
                f"Invalid on_type_mismatch {self.on_type_mismatch!r} for table {self.name!r}. "
                f"Must be one of {', '.join(TYPE_MISMATCH_POLICIES)}."
            )
        if self.resnapshot not in RESNAPSHOT_MODES:
            raise ConfigError(
                f"Invalid resnapshot {self.resnapshot!r} for table {self.name!r}. "
                f"Must be one of {', '.join(RESNAPSHOT_MODES)}."
            )
        if self.resnapshot == "full" and self.format != "debezium":
            raise ConfigError(
                f'Table {self.name!r}: resnapshot = "full" needs Debezium\'s snapshot '
                'markers; an events table has none (remove the setting or set format = "debezium").'
            )
        if self.type_widening not in TYPE_WIDENING_MODES:
            raise ConfigError(
                f"Invalid type_widening {self.type_widening!r} for table {self.name!r}. "
                f"Must be one of {', '.join(TYPE_WIDENING_MODES)}."
            )
        self._check_history_settings()
        object.__setattr__(self, "expectations", tuple(self.expectations))
        check_expectations(self.expectations, f"silver table {self.name!r}", "silver")

    def _normalise_databricks_forms(self) -> None:
        """Take the settings as Databricks' ``create_auto_cdc_flow`` users write them: one
        ``sequence_by`` or key column as a string, ``stored_as_scd_type`` as ``"2"``."""
        for setting in ("keys", "sequence_by"):
            value = getattr(self, setting)
            if isinstance(value, str):
                object.__setattr__(self, setting, (value,))
            elif isinstance(value, list):
                object.__setattr__(self, setting, tuple(value))
        scd_type = self.stored_as_scd_type
        if isinstance(scd_type, str) and scd_type.strip() in ("1", "2"):
            object.__setattr__(self, "stored_as_scd_type", int(scd_type))

    @property
    def order_columns(self) -> tuple[str, ...]:
        """The columns that order a key's events: ``sequence_by``, then ``system_sequence_by``
        (empty: the connector's own sequence)."""
        system = (self.system_sequence_by,) if self.system_sequence_by else ()
        return (*(self.sequence_by or ()), *system)

    def ignores_nulls_of(self, column: str) -> bool:
        """Whether a null in value column ``column`` of an upsert keeps the previous value."""
        if self.ignore_null_updates_column_list is not None:
            return column in self.ignore_null_updates_column_list
        if self.ignore_null_updates_except_column_list is not None:
            return column not in self.ignore_null_updates_except_column_list
        return self.ignore_null_updates

    def condition(self, setting: ConditionSetting) -> Condition | None:
        """The parsed ``apply_as_deletes`` or ``apply_as_truncates`` condition, if set.

        Raises:
            ConfigError: the condition is outside the grammar of :mod:`lakehouse_core.conditions`.
        """
        text = self.apply_as_deletes if setting == "apply_as_deletes" else self.apply_as_truncates
        return None if text is None else parse_condition(text, f"{setting} of table {self.name!r}")

    def keeps_column(self, column: str) -> bool:
        """Whether silver keeps value column ``column`` (``column_list`` / ``except_column_list``;
        key and metadata columns are always kept)."""
        if self.column_list is not None:
            return column in self.column_list
        return column not in (self.except_column_list or ())

    def _check_change_settings(self) -> None:
        if self.schema is not None and self.format != "events":
            raise ConfigError(
                f"Table {self.name!r}: 'schema' is for format 'events' only; a Debezium table's "
                "columns come from its change events. Remove 'schema'."
            )
        self.condition("apply_as_deletes")
        self.condition("apply_as_truncates")
        if self.column_list is not None and self.except_column_list is not None:
            raise ConfigError(
                f"Table {self.name!r}: set either 'column_list' (the columns to keep) or "
                "'except_column_list' (the columns to drop), not both."
            )
        for column in (*(self.column_list or ()), *(self.except_column_list or ())):
            require_identifier(column, f"column of table {self.name!r}")
        partial = (
            self.ignore_null_updates_column_list,
            self.ignore_null_updates_except_column_list,
        )
        if all(listed is not None for listed in partial):
            raise ConfigError(
                f"Table {self.name!r}: set either 'ignore_null_updates_column_list' or "
                "'ignore_null_updates_except_column_list', not both."
            )
        for column in (*(partial[0] or ()), *(partial[1] or ())):
            require_identifier(column, f"column of table {self.name!r}")
        self.check_always_kept(self.keys or ())

    def check_always_kept(self, columns: Sequence[str]) -> None:
        """Raise ConfigError if ``except_column_list`` names one of ``columns`` (the key and
        metadata columns, which silver always keeps)."""
        for column in self.except_column_list or ():
            if column in columns:
                raise ConfigError(
                    f"Table {self.name!r}: 'except_column_list' lists {column!r}, but key and "
                    "metadata columns are always kept. Remove it from the list."
                )

    @property
    def history_name(self) -> str | None:
        """Name of the SCD type 2 history table (``<name>_history``), None for type 1."""
        return f"{self.name}{HISTORY_SUFFIX}" if self.stored_as_scd_type == 2 else None

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


def table_settings() -> tuple[str, ...]:
    """The settings of a table: the fields of :class:`TableSpec` but :data:`NOT_SETTINGS`, in
    their order. The TOML shape (:mod:`lakehouse_core.loader`), the Python declarations
    (:class:`TableSettings`) and the verify oracle's view derive from them."""
    return tuple(f.name for f in fields(TableSpec) if f.name not in NOT_SETTINGS)


class TableSettings(TypedDict, total=False):
    """The settings of :class:`TableSpec` as keyword arguments of the Python declarations
    (``cdc_table(name, **settings)``), each as Python users write it: a column list as any
    sequence (``keys`` and ``sequence_by`` also as one name), a choice as a string.

    A type checker needs it written out; ``tests/unit/test_table_settings.py`` fails when it
    and :func:`table_settings` drift apart, and names the setting.
    """

    keys: str | Sequence[str] | None
    sequence_by: str | Sequence[str] | None
    schema: str | None
    tombstone_retention_days: int
    apply_as_deletes: str | None
    apply_as_truncates: str | None
    column_list: Sequence[str] | None
    except_column_list: Sequence[str] | None
    ignore_null_updates: bool
    ignore_null_updates_column_list: Sequence[str] | None
    ignore_null_updates_except_column_list: Sequence[str] | None
    system_sequence_by: str | None
    on_incompatible_type: str
    on_type_mismatch: str
    resnapshot: str
    type_widening: str
    deletion_vectors: bool
    stored_as_scd_type: int | str
    track_history_column_list: Sequence[str] | None
    track_history_except_column_list: Sequence[str] | None


@dataclass(frozen=True)
class MaintenanceSpec:
    """Settings of ``lakehouse maintain`` (the ``[maintenance]`` table of the config file).

    ``vacuum_retention_hours``: VACUUM keeps files that versions of the last that many hours
    need (Delta's safety default is 168; below it, lagging streams and time travel can fail).
    ``bronze_retention_days``: drop bronze records ingested longer ago than that, if silver
    can still be rebuilt without them (None: keep bronze forever).
    """

    vacuum_retention_hours: int = 168
    bronze_retention_days: int | None = None

    def __post_init__(self) -> None:
        if _not_int(self.vacuum_retention_hours) or self.vacuum_retention_hours < 0:
            raise ConfigError(
                f"Invalid vacuum_retention_hours {self.vacuum_retention_hours!r}: "
                "use a whole number of hours, 0 or more (Delta's default is 168)."
            )
        days = self.bronze_retention_days
        if days is not None and (_not_int(days) or days < 1):
            raise ConfigError(
                f"Invalid bronze_retention_days {days!r}: use a whole number of days, 1 or more, "
                "or leave it out to keep bronze forever."
            )


@dataclass(frozen=True)
class FreshSpec:
    """The bound of a fresh read (the ``[fresh]`` table of the config; docs/fresh-reads.md):
    it folds at most ``max_records`` bronze records silver has not applied, of bronze commits
    at most ``max_age_seconds`` old; over either it says so in one line."""

    max_records: int = 100_000
    max_age_seconds: int = 1_800

    def __post_init__(self) -> None:
        for name, unit, default in (
            ("max_records", "records", 100_000),
            ("max_age_seconds", "seconds", 1_800),
        ):
            value = getattr(self, name)
            if _not_int(value) or value < 0:
                raise ConfigError(
                    f"Invalid [fresh] {name} {value!r}: use a whole number of {unit}, 0 or more "
                    f"(the default is {default})."
                )


@dataclass(frozen=True)
class QualitySpec:
    """Which data-quality suites a pipeline applies (the ``[quality]`` table of the config).

    ``suites``: a directory of Great Expectations suite files, ``<layer>/<table>.json``
    (None: no suites of the user's). ``packaged_suites``: also apply the suites shipped in
    ``expectations/suites`` (written for the demo shop); a user's suite of the same name wins.
    ``actions``: (``"<layer>.<table>.<expectation>"``, action) pairs that override the action
    in an expectation's ``meta``. ``validate_every``: how often a continuous run validates the
    whole tables (table-level expectations included, as ``lakehouse validate`` does), e.g.
    ``"1 hour"`` (None: only ``lakehouse validate`` does).
    """

    suites: str | None = None
    packaged_suites: bool = False
    actions: tuple[tuple[str, QualityAction], ...] = ()
    validate_every: str | None = None
    #: The expectations declared beside the pipeline's tables (set by :class:`PipelineConfig`
    #: from its tables and gold tables; not a ``[quality]`` setting, so not compared).
    declared: tuple[DeclaredSuite, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        for name, action in self.actions:
            require_action(action, f"{name!r} in [quality.actions]")
        if self.validate_every is not None:
            require_duration(self.validate_every, "validate_every", owner="[quality]")

    @property
    def validate_seconds(self) -> float | None:
        """Seconds between two validations of a continuous run (None: never)."""
        if self.validate_every is None:
            return None
        return duration_micros(self.validate_every) / 1_000_000

    @property
    def enabled(self) -> bool:
        return self.suites is not None or self.packaged_suites or bool(self.declared)

    def declared_for(self, layer: str, table: str) -> tuple[Expectation, ...]:
        """The expectations declared beside table ``<layer>.<table>`` (none: empty)."""
        for suite in self.declared:
            if (suite.layer, suite.table) == (layer, table):
                return suite.expectations
        return ()

    def action_for(self, name: str) -> QualityAction | None:
        """The configured action of expectation ``<layer>.<table>.<expectation>``, if any."""
        return dict(self.actions).get(name)


def _not_int(value: object) -> bool:
    return isinstance(value, bool) or not isinstance(value, int)


@dataclass(frozen=True)
class CatalogSpec:
    """Where the warehouse's tables get SQL names (``[catalog]``): ``<name>.<schema_prefix><layer>
    .<table>``, e.g. ``name = "main"``, ``schema_prefix = "shop_"`` -> ``main.shop_silver.orders``
    on a shared metastore. The defaults give ``silver.orders`` in the session's current catalog.
    """

    name: str | None = None
    schema_prefix: str = ""

    def __post_init__(self) -> None:
        if self.name is not None:
            require_identifier(self.name, "catalog name in [catalog]")
        if self.schema_prefix:
            require_identifier(self.schema_prefix, "schema_prefix in [catalog]")

    def schema(self, layer: str) -> str:
        """The schema a layer's tables are registered in (``shop_silver``)."""
        return f"{self.schema_prefix}{layer}"


@dataclass(frozen=True)
class DebeziumSpec:
    """The names of Debezium's own topics (``[debezium]``), as the connector is configured:
    silver makes no table of them unless a ``[[tables]]`` entry declares their topic (their
    records stay in bronze). ``signal_tables``: the signalling tables (Debezium's
    ``signal.data.collection``, ``<schema>.<table>`` or a table name); ``heartbeat_prefix``:
    ``topic.heartbeat.prefix`` (heartbeat topics are ``<prefix>.<topic.prefix>``);
    ``transaction_topic``: ``topic.transaction`` (the transaction metadata topic is
    ``<topic.prefix>.<transaction_topic>``). The defaults are Debezium's."""

    signal_tables: tuple[str, ...] = ("debezium_signal",)
    heartbeat_prefix: str = "__debezium-heartbeat"
    transaction_topic: str = "transaction"

    def __post_init__(self) -> None:
        if isinstance(self.signal_tables, str):
            object.__setattr__(self, "signal_tables", (self.signal_tables,))
        object.__setattr__(self, "signal_tables", tuple(self.signal_tables))
        for setting, value in (
            *(("signal_tables", name) for name in self.signal_tables),
            ("heartbeat_prefix", self.heartbeat_prefix),
            ("transaction_topic", self.transaction_topic),
        ):
            if not value or not value.strip(".") or value != value.strip():
                raise ConfigError(
                    f"[debezium] {setting} {value!r} is not a topic name part: write it as "
                    "the connector's setting has it, for example 'public.debezium_signal'."
                )

    def kind_of(self, topic: str) -> str | None:
        """What Debezium topic ``topic`` is by its name (None: none of Debezium's own)."""
        if topic.startswith(f"{self.heartbeat_prefix}."):
            return "Debezium's heartbeats"
        prefix, _, rest = topic.partition(".")
        if prefix and rest == self.transaction_topic:
            return "Debezium's transaction metadata"
        if any(topic == name or topic.endswith(f".{name}") for name in self.signal_tables):
            return "Debezium's signalling table"
        return None


@dataclass(frozen=True)
class PipelineConfig:
    """Everything a pipeline run needs besides the source and the warehouse."""

    tables: tuple[TableSpec, ...] = ()
    maintenance: MaintenanceSpec = field(default_factory=MaintenanceSpec)
    quality: QualitySpec = field(default_factory=QualitySpec)
    #: The bound of fresh reads (``[fresh]``).
    fresh: FreshSpec = field(default_factory=FreshSpec)
    catalog: CatalogSpec = field(default_factory=CatalogSpec)
    alerts: tuple[AlertSpec, ...] = ()

    #: Declared gold tables (``[[gold]]``).
    gold_tables: tuple[GoldTable, ...] = ()
    #: SQL models (``[[models]]``, :mod:`lakehouse_core.models`), in the order they refresh.
    models: tuple[SqlModel, ...] = ()
    #: Declared patterns across events (``[[patterns]]``, :mod:`lakehouse_core.patterns`).
    patterns: tuple[Pattern, ...] = ()
    #: The names of Debezium's own topics (``[debezium]``).
    debezium: DebeziumSpec = field(default_factory=DebeziumSpec)

    def __post_init__(self) -> None:
        alert_names = [alert.name for alert in self.alerts]
        repeated = sorted({name for name in alert_names if alert_names.count(name) > 1})
        if repeated:
            raise ConfigError(f"Alert names must be unique; repeated: {', '.join(repeated)}.")
        object.__setattr__(self, "gold_tables", tuple(self.gold_tables))
        check_gold_tables(self.gold_tables)
        names = [table.name for table in self.tables]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ConfigError(f"Table names must be unique; repeated: {', '.join(duplicates)}.")
        topics = [table.topic for table in self.tables]
        shared = sorted({topic for topic in topics if topics.count(topic) > 1})
        if shared:
            raise ConfigError(
                f"Each topic can have one [[tables]] entry; repeated: {', '.join(shared)}. "
                "Merge the entries of a topic into one."
            )
        for table in self.tables:
            _reject_history_name(self, table.name)
        resolved = tuple(self._resolve_as_of(t) for t in self.gold_tables)
        object.__setattr__(self, "gold_tables", resolved)
        object.__setattr__(self, "patterns", tuple(self.patterns))
        golds = (t.name for t in self.gold_declarations)
        check_patterns(self.patterns, reserved_gold_names(golds, self.alerts))
        declared = tuple(
            DeclaredSuite(layer, spec.name, spec.expectations)
            for layer, specs in (("silver", self.tables), ("gold", self.gold_tables))
            for spec in specs
            if spec.expectations
        )
        object.__setattr__(self, "quality", replace(self.quality, declared=declared))

    def to_mapping(self) -> dict[str, Any]:
        """The config as the TOML document :func:`load_config` reads (plain values; settings
        left at their defaults are left out)."""
        document: dict[str, Any] = {}
        if self.tables:
            document["tables"] = [table_to_mapping(table) for table in self.tables]
        if self.gold_tables:
            document["gold"] = [gold_table_to_mapping(table) for table in self.gold_tables]
        sections = (
            ("maintenance", self.maintenance),
            ("catalog", self.catalog),
            ("debezium", self.debezium),
            ("fresh", self.fresh),
        )
        for section, spec in sections:
            if settings_of(spec):
                document[section] = settings_of(spec)
        quality = {
            k: v for k, v in settings_of(self.quality).items() if k not in ("actions", "declared")
        }
        if self.quality.actions:
            quality["actions"] = dict(self.quality.actions)
        if quality:
            document["quality"] = quality
        if self.alerts:
            document["alerts"] = [settings_of(alert) for alert in self.alerts]
        if self.models:
            document["models"] = models_to_toml(self.models)
        if self.patterns:
            document["patterns"] = [pattern_to_mapping(pattern) for pattern in self.patterns]
        return document

    def to_toml(self) -> str:
        """The config as pipeline TOML text: :func:`lakehouse_core.loader.config_from_toml` (or
        :func:`~lakehouse_core.loader.load_config` of a file holding it) gives an equal config
        back."""
        return tomli_w.dumps(self.to_mapping(), multiline_strings=True)

    def _resolve_as_of(self, table: GoldTable) -> GoldTable:
        """``table`` with its join's ``as_of`` decided: event time when the entity keeps SCD
        type 2 history with source commit times (Debezium), else current.

        Raises:
            ConfigError: ``as_of = "event_time"`` for an entity without such a history.
        """
        join = table.join
        if join is None:
            return table
        spec = next((t for t in self.tables if t.name == join.entity), None)
        timed = spec is not None and spec.history_name is not None and spec.format == "debezium"
        if join.as_of == "event_time" and not timed:
            raise ConfigError(
                f"Gold table {table.name!r} joins {join.entity!r} as of event time, but it keeps "
                "no SCD type 2 history with source commit times (a Debezium table with "
                'stored_as_scd_type = 2): set as_of = "current" or declare that history.'
            )
        as_of = join.as_of or ("event_time" if timed else "current")
        return replace(table, join=replace(join, as_of=as_of))

    @property
    def taken_gold_names(self) -> dict[str, str]:
        """The gold table names that declarations, patterns and alerts hold, each with what
        holds it (a SQL model may read them, not take them)."""
        taken = reserved_gold_names((t.name for t in self.gold_declarations), self.alerts)
        return taken | {p.name: "a pattern ([[patterns]])" for p in self.patterns}

    @property
    def gold_declarations(self) -> tuple[GoldTable, ...]:
        """The declared gold tables of the pipeline (none unless declared)."""
        return self.gold_tables

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


def table_to_mapping(table: TableSpec) -> dict[str, Any]:
    """``table`` as its ``[[tables]]`` entry: its settings, and its expectations as the
    ``expect``, ``expect_or_drop`` and ``expect_or_fail`` tables."""
    entry = {k: v for k, v in settings_of(table).items() if k != "expectations"}
    return entry | expectations_to_mapping(table.expectations)


def _require_source_column(column: str, table: str) -> None:
    """Raise ConfigError unless silver can keep a source column named ``column``."""
    problem = column_name_problem(column) if isinstance(column, str) else "is not a string"
    if problem is not None:
        raise ConfigError(f"Table {table!r}: {problem}.")


def _reject_history_name(config: PipelineConfig, name: str, topic: str | None = None) -> None:
    """Raise if ``name`` is the history table name of one of the config's tables."""
    for table in config.tables:
        if table.history_name == name:
            subject = f"Topic {topic!r} maps to table {name!r}" if topic else f"Table {name!r}"
            raise ConfigError(
                f"{subject}, the history table of {table.name!r} (stored_as_scd_type = 2); "
                "declare it in [[tables]] with another name."
            )
