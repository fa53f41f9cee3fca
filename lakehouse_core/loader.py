"""The pipeline TOML loader: the one place that reads a config document into specs.

Its shape (which settings each table takes, and of which type) is declared once, as pydantic
models (a ``[[tables]]`` entry's made from the fields of :class:`TableSpec`) that forbid
unknown keys and take types strictly (a string where a list belongs, a bool where an integer
belongs, a float where an integer belongs are errors). A pydantic
:class:`~pydantic.ValidationError` becomes one :class:`~lakehouse_core.errors.ConfigError` line that
names the setting, where it is (``[[tables]]``, ``the window of [[gold]] 'revenue'``) and the
fix. The values' meaning is checked by the specs themselves (:mod:`lakehouse_core.specs`,
:mod:`lakehouse_core.gold_tables`, :mod:`lakehouse_core.patterns`, :mod:`lakehouse_core.alerting`,
:mod:`lakehouse_core.models`), which the loader builds from the checked document. Python
declarations (:mod:`lakehouse.declare`) go through the same readers.
"""

from __future__ import annotations

import tomllib
import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Literal,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import ErrorDetails

from lakehouse_core.alerting import AlertSpec
from lakehouse_core.errors import ConfigError
from lakehouse_core.expects import ACTION_SETTINGS, expectations_from, require_action
from lakehouse_core.gold_tables import (
    WINDOW_KINDS,
    GoldTable,
    Join,
    Measure,
    StreamJoin,
    TopN,
    Window,
    order_by_from,
)
from lakehouse_core.models import SqlModel, check_models
from lakehouse_core.patterns import Absent, Pattern, PatternMeasure, Step
from lakehouse_core.specs import (
    DATABRICKS_FORMS,
    CatalogSpec,
    DebeziumSpec,
    FreshSpec,
    MaintenanceSpec,
    PipelineConfig,
    QualitySpec,
    TableSpec,
)

# --- the shape of a pipeline TOML document ------------------------------------------------


class Shape(BaseModel):
    """A table of the config document: its settings and their types (strict, no others).

    ``where`` names the table in messages (``{parent}``: where its parent is; ``{name}``: the
    entry's ``name``). ``missing`` is the message for a missing required setting
    (``{where}``, ``{required}``: the first missing, ``{missing}``: all, joined by "and").
    ``messages`` holds, per setting, the message for a value of the wrong type when the
    generic one ("Setting 'x' in ... must be a string, not 5.") would not show the form.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    where: ClassVar[str] = "{parent}"
    missing: ClassVar[str] = "{where} needs {required!r}: set it."
    messages: ClassVar[Mapping[str, str | Callable[[Any, str], str]]] = {}

    @classmethod
    def where_of(cls, entry: object, parent: str) -> str:
        """How messages name one table of this shape (``entry``), inside ``parent``."""
        name = entry.get("name", "") if isinstance(entry, Mapping) else ""
        return cls.where.format(parent=parent, name=f" {name!r}" if name != "" else "")


#: The message of an ``expect`` table that is not of name = condition text.
_EXPECT_MESSAGES = {
    setting: f"'{setting}' of {{where}} must be a table of expectation name = condition, "
    f'e.g. {setting} = {{{{ total_not_negative = "total >= 0" }}}}.'
    for setting in ("expect", "expect_or_drop", "expect_or_fail")
}


class _TableEntry(Shape):
    """A ``[[tables]]`` entry (its fields: :func:`_table_fields`)."""

    where = "[[tables]]"
    missing = "Each [[tables]] entry needs 'name' and 'topic'."
    messages = _EXPECT_MESSAGES


def _toml_type(annotation: Any, setting: str) -> Any:
    """The TOML type of a spec field of type ``annotation``: a tuple of strings as a list, a
    choice (``Literal``) as a string (the spec says which values it allows), with the other
    form the setting takes (:data:`~lakehouse_core.specs.DATABRICKS_FORMS`)."""
    kinds = [k for k in get_args(annotation) if k is not type(None)]
    if get_origin(annotation) not in (Union, types.UnionType):
        kinds = [annotation]
    toml: Any = None
    for kind in kinds:
        read = list[str] if get_origin(kind) is tuple else kind
        read = str if get_origin(kind) is Literal else read
        toml = read if toml is None else toml | read
    other = DATABRICKS_FORMS.get(setting)
    return toml if other is None else toml | other


def _table_fields() -> dict[str, Any]:
    """The fields of the ``[[tables]]`` shape: one for each field of :class:`TableSpec`,
    required where the spec has no default, else optional (left out: the spec's default);
    its expectations as the ``expect``, ``expect_or_drop`` and ``expect_or_fail`` tables."""
    hints = get_type_hints(TableSpec)
    shape: dict[str, Any] = {}
    for spec_field in dataclass_fields(TableSpec):
        name = spec_field.name
        if name == "expectations":
            continue
        kind = _toml_type(hints[name], name)
        required = spec_field.default is MISSING and spec_field.default_factory is MISSING
        # A name BaseModel already has (``schema``) is the field's alias.
        alias = name if hasattr(BaseModel, name) else None
        key = f"{name}_" if alias else name
        shape[key] = (
            (kind, Field(alias=alias)) if required else (kind | None, Field(None, alias=alias))
        )
    expect_tables = dict[str, str] | None
    return shape | {setting: (expect_tables, None) for setting in ACTION_SETTINGS.values()}


if TYPE_CHECKING:

    class TableShape(_TableEntry):
        """A ``[[tables]]`` entry: the settings of :class:`TableSpec` (made below)."""

else:
    TableShape = create_model("TableShape", __base__=_TableEntry, **_table_fields())


_WINDOW_EXAMPLE = 'window = { kind = "tumbling", size = "1 minute" }'
_JOIN_EXAMPLE = 'join = { entity = "customers", on = { customer_id = "id" }, columns = ["tier"] }'
_STREAM_JOIN_EXAMPLE = (
    'stream_join = { source = "clickstream", on = { customer_id = "user_id" }, '
    'event_time = "ts", within = "30 minutes" }'
)
_TOP_N_EXAMPLE = 'top_n = { n = 3, order_by = "bids DESC" }'


def _literal(text: str) -> str:
    """``text`` as a part of a message template (its braces doubled)."""
    return text.replace("{", "{{").replace("}", "}}")


class WindowShape(Shape):
    where = "the window of {parent}"
    missing = f"The window of {{parent}} needs a kind: one of {', '.join(WINDOW_KINDS)}."

    kind: str
    size: str | None = None
    slide: str | None = None
    gap: str | None = None
    lookback: str | None = None
    count: int | None = None
    start_as: str | None = None
    end_as: str | None = None


class GoldMeasureShape(Shape):
    where = "a measure of {parent}"
    missing = "Each measure of {parent} needs name and fn (and most a column), or name and expr."

    name: str
    fn: str | None = None
    column: str | None = None
    percentile: float | None = None
    filter: str | None = None
    by: str | None = None
    expr: str | None = None


class JoinShape(Shape):
    where = "the join of {parent}"
    missing = f"The join of {{parent}} needs {{required!r}}, e.g. {_literal(_JOIN_EXAMPLE)}."
    messages = {
        "on": "'on' of the join of {parent} must map each source column to the entity's key "
        'column, e.g. on = {{ customer_id = "id" }} (or list names both sides share).',
        "columns": "'columns' of the join of {parent} must be a list of column names.",
    }

    entity: str
    on: list[str] | dict[str, str]
    columns: list[str]
    prefix: str | None = None
    as_of: str | None = None


class StreamJoinShape(Shape):
    where = "the stream join of {parent}"
    missing = (
        f"The stream join of {{parent}} needs {{required!r}}, e.g. "
        f"{_literal(_STREAM_JOIN_EXAMPLE)}."
    )
    messages = {
        "on": "'on' of the stream join of {parent} must map each source column to the other "
        'table\'s column, e.g. on = {{ customer_id = "user_id" }} (or list names both sides '
        "share).",
    }

    source: str
    on: list[str] | dict[str, str]
    event_time: str
    within: str


class TopNShape(Shape):
    where = "the top_n of {parent}"
    missing = f"The top_n of {{parent}} needs {{required!r}}, e.g. {_literal(_TOP_N_EXAMPLE)}."
    messages = {
        "partition_by": "'partition_by' of the top_n of {parent} must be a list of column names.",
        "order_by": lambda value, _: (
            f'top_n order_by must be a string like "bids DESC", not {value!r}.'
        ),
    }

    n: int
    order_by: str
    partition_by: list[str] | None = None


def _gold_entries(value: Any, _: str) -> str:
    if isinstance(value, Mapping):
        return (
            "The older [gold] table (the demo shop's two gold tables) is gone: declare each "
            "gold table as a [[gold]] entry (examples/shop.toml has the shop's two)."
        )
    if not isinstance(value, list):
        return (
            "'gold' must be [[gold]] entries (one per gold table): write each gold table as a "
            "[[gold]] entry with its name, source, event_time, window and measures."
        )
    return "'gold' must be a list of tables: write each gold table as a [[gold]] entry."


class GoldShape(Shape):
    where = "[[gold]]{name}"
    missing = (
        "{where} needs {required!r}; a gold table names name, source, event_time, window and "
        "measures (group_by, columns, filter, top_n, join, stream_join, watermark_delay are "
        "optional; with stream_join, window is too)."
    )
    messages = {
        "window": f"'window' of {{where}} must be a table, e.g. {_literal(_WINDOW_EXAMPLE)}.",
        "measures": "'measures' of {where} must be a list of tables, e.g. "
        'measures = [{{ name = "revenue", fn = "sum", column = "total" }}].',
        "group_by": "'group_by' of {where} must be a list of column names.",
        "columns": "'columns' of {where} must be a table of column name = Spark SQL "
        'expression, e.g. columns = {{ price_eur = "price * 0.908", bid_hour = '
        '"hour(dateTime)" }}.',
        "join": f"'join' of {{where}} must be a table, e.g. {_literal(_JOIN_EXAMPLE)}.",
        "stream_join": f"'stream_join' of {{where}} must be a table, e.g. "
        f"{_literal(_STREAM_JOIN_EXAMPLE)}.",
        "top_n": f"'top_n' of {{where}} must be a table, e.g. {_literal(_TOP_N_EXAMPLE)}.",
        **_EXPECT_MESSAGES,
    }

    name: str
    source: str
    event_time: str
    window: WindowShape | None = None
    measures: list[GoldMeasureShape]
    group_by: list[str] | None = None
    filter: str | None = None
    watermark_delay: str | None = None
    join: JoinShape | None = None
    stream_join: StreamJoinShape | None = None
    columns: dict[str, str] | None = None
    top_n: TopNShape | None = None
    expect: dict[str, str] | None = None
    expect_or_fail: dict[str, str] | None = None


class StepShape(Shape):
    where = "a step of {parent}"
    missing = "Each step of {parent} needs a name."

    name: str
    condition: str | None = None
    times: int | str | None = None
    contiguity: str | None = None


class AbsentShape(Shape):
    where = "the absent step of {parent}"
    missing = "The absent step of {parent} needs condition and within."

    condition: str
    within: str


class PatternMeasureShape(Shape):
    where = "a measure of {parent}"
    missing = "Each measure of {parent} needs name and fn."

    name: str
    fn: str
    column: str | None = None
    step: str | None = None


class PatternShape(Shape):
    where = "[[patterns]]{name}"
    missing = (
        "{where} needs {required!r}; a pattern names name, source, event_time, steps and "
        "within (partition_by, absent, after_match, contiguity, measures, watermark_delay and "
        "alert are optional)."
    )
    messages = {
        "steps": "'steps' of {where} must be a list of tables, e.g. "
        'steps = [{{ name = "first", condition = "..." }}].',
        "measures": "'measures' of {where} must be a list of tables, e.g. "
        'measures = [{{ name = "events", fn = "count" }}].',
        "absent": "'absent' of {where} must be a table, e.g. "
        'absent = {{ condition = "...", within = "30 minutes" }}.',
        "partition_by": "'partition_by' of {where} must be a list of column names.",
    }

    name: str
    source: str
    event_time: str
    steps: list[StepShape]
    within: str
    partition_by: list[str] | None = None
    absent: AbsentShape | None = None
    after_match: str | None = None
    measures: list[PatternMeasureShape] | None = None
    watermark_delay: str | None = None
    alert: bool | None = None
    contiguity: str | None = None


class AlertShape(Shape):
    where = "[[alerts]]"
    missing = "An [[alerts]] entry lacks {missing_comma}: set it."

    name: str
    source: str
    key: str
    value: str
    event_time: str
    method: str | None = None
    threshold: float | None = None
    min_history: int | None = None
    row_key: str | None = None


class ModelShape(Shape):
    where = "[[models]]"
    missing = "A [[models]] entry lacks {missing}: set it."
    messages = {
        "key": lambda value, _: (
            f"Setting 'key' in [[models]] must be a list of column names, not {value!r}."
        ),
    }

    name: str
    sql: str
    key: list[str] | str | None = None


class QualityShape(Shape):
    where = "[quality]"
    messages = {
        "actions": "'actions' in [quality] must be a table: write [quality.actions], then "
        'lines like "silver.orders.total_not_negative" = "fail".',
    }

    suites: str | None = None
    packaged_suites: bool | None = None
    #: Expectation -> action; an action's value is checked by :func:`require_action`.
    actions: dict[str, Any] | None = None
    validate_every: str | None = None


class CatalogShape(Shape):
    where = "[catalog]"

    name: str | None = None
    schema_prefix: str | None = None


class MaintenanceShape(Shape):
    where = "[maintenance]"

    vacuum_retention_hours: int | None = None
    bronze_retention_days: int | None = None


class FreshShape(Shape):
    where = "[fresh]"

    max_records: int | None = None
    max_age_seconds: int | None = None


class DebeziumShape(Shape):
    where = "[debezium]"

    signal_tables: list[str] | str | None = None
    heartbeat_prefix: str | None = None
    transaction_topic: str | None = None


class DocumentShape(Shape):
    where = "the config file"
    messages = {
        "tables": "'tables' must be a list of tables: write each as a [[tables]] entry with "
        "its name, topic and settings.",
        "gold": _gold_entries,
        "models": "'models' must be a list of tables: write each SQL model as a [[models]] "
        "entry with its name and sql.",
        "patterns": "'patterns' must be a list of tables: write each pattern as a "
        "[[patterns]] entry with its name, source, event_time, steps and within.",
        "alerts": "'alerts' must be a list of tables: write each as an [[alerts]] entry with "
        "its name, source, key, value and event_time.",
        "catalog": "'catalog' must be a table: write [catalog] on its own line, then name and "
        "schema_prefix.",
        "quality": "'quality' must be a table: write [quality] on its own line, then its "
        "settings (suites, packaged_suites, and a [quality.actions] table).",
        "maintenance": "'maintenance' must be a table: write [maintenance] on its own line, "
        "then its settings (vacuum_retention_hours, bronze_retention_days).",
        "debezium": "'debezium' must be a table: write [debezium] on its own line, then its "
        "settings (signal_tables, heartbeat_prefix, transaction_topic).",
        "fresh": "'fresh' must be a table: write [fresh] on its own line, then its settings "
        "(max_records, max_age_seconds).",
    }

    tables: list[TableShape] | None = None
    gold: list[GoldShape] | None = None
    maintenance: MaintenanceShape | None = None
    quality: QualityShape | None = None
    catalog: CatalogShape | None = None
    alerts: list[AlertShape] | None = None
    models: list[ModelShape] | None = None
    patterns: list[PatternShape] | None = None
    debezium: DebeziumShape | None = None
    fresh: FreshShape | None = None


# --- pydantic's errors as one line ----------------------------------------------------------

#: How a message names the type pydantic expected, by its error type.
_KINDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "true or false",
    "float_type": "a number",
    "list_type": "a list of strings",
    "dict_type": "a table",
    "model_type": "a table",
}


def _allowed(shape: type[Shape]) -> list[str]:
    return sorted(field.alias or name for name, field in shape.model_fields.items())


def nested_shape(shape: type[Shape], setting: str) -> type[Shape] | None:
    """The shape of the tables setting ``setting`` of ``shape`` holds (one, or a list of
    them), or None for a setting of plain values."""
    field = next(
        (f for n, f in shape.model_fields.items() if (f.alias or n) == setting),
        None,
    )
    pending = [field.annotation] if field is not None else []
    while pending:
        kind = pending.pop()
        if isinstance(kind, type) and issubclass(kind, Shape):
            return kind
        if get_origin(kind) in (list, Union, types.UnionType):
            pending.extend(get_args(kind))
    return None


class _Located:
    """One pydantic error placed in the document: the shape and ``where`` of the table that
    holds the bad setting (``parent``: where that table is), the setting, its value there,
    the path of the error's value in the document and that value (``leaf``)."""

    def __init__(self, root: type[Shape], document: object, parent: str, error: ErrorDetails):
        self.type = error["type"]
        self.shape, self.parent = root, parent
        self.where = root.where_of(document, parent)
        self.setting: str | None = None
        self.value: Any = None
        self.path: list[str | int] = []
        self.setting_path: list[str | int] = []
        node: Any = document
        loc = list(error["loc"])
        for index, segment in enumerate(loc):
            table = node
            if isinstance(segment, int) or (isinstance(node, Mapping) and segment in node):
                node = node[segment]  # a list item or a key of the document
            elif not (self.type == "missing" and index == len(loc) - 1):
                continue  # the member of a union pydantic tried: not in the document
            self.path.append(segment)
            if self.setting is not None and isinstance(segment, str):
                nested = nested_shape(self.shape, self.setting)
                if nested is not None:  # a setting of a table inside the setting's value
                    self.parent, self.shape = self.where, nested
                    self.where = nested.where_of(table, self.parent)
                    self.setting = None
            if self.setting is None and isinstance(segment, str):
                self.setting, self.value = segment, node
                self.setting_path = list(self.path)
        self.leaf = node

    @property
    def kind(self) -> str:
        """How a message names the type pydantic expected."""
        return _KINDS.get(self.type, "a valid value")


def _message(root: type[Shape], document: object, parent: str, error: ValidationError) -> str:
    """The one line for the first mistake ``error`` reports: unknown settings first, then
    missing ones, then values of the wrong type, each in the order of the document."""
    located = [_Located(root, document, parent, e) for e in error.errors()]
    rank = {"extra_forbidden": 0, "missing": 1}
    first = min(located, key=lambda found: rank.get(found.type, 2))
    same_table = [
        found
        for found in located
        if found.type == first.type and found.path[:-1] == first.path[:-1]
    ]
    if first.type == "extra_forbidden":
        unknown = sorted({str(found.setting) for found in same_table})
        return (
            f"Unknown setting(s) {', '.join(unknown)} in {first.where}. "
            f"Allowed: {', '.join(_allowed(first.shape))}."
        )
    if first.type == "missing":
        missing = [str(found.setting) for found in same_table]
        return first.shape.missing.format(
            where=first.where,
            parent=first.parent,
            required=missing[0],
            missing=" and ".join(missing),
            missing_comma=", ".join(missing),
        )
    setting = str(first.setting)
    custom = first.shape.messages.get(setting)
    if callable(custom):
        return custom(first.value, first.where)
    if custom is not None:
        return custom.format(where=first.where, parent=first.parent)
    # Of a union's members (each failed), name the deepest error (a list's item), else the
    # type of every member.
    union = [found for found in located if found.setting_path == first.setting_path]
    deepest = max(len(found.path) for found in union)
    union = [found for found in union if len(found.path) == deepest]
    kinds = " or ".join(dict.fromkeys(found.kind for found in union))
    return f"Setting {setting!r} in {first.where} must be {kinds}, not {union[0].leaf!r}."


def checked(shape: type[Shape], table: object, parent: str = "") -> dict[str, Any]:
    """``table`` (a table of the config document, plain values as ``tomllib`` gives) if it has
    ``shape``: a copy of it as a dict.

    Raises:
        ConfigError: an unknown setting, a missing one or a value of the wrong type, one line
            naming the first (``parent``: where the table is, for the message).
    """
    if not isinstance(table, Mapping):
        where = shape.where_of(table, parent)
        raise ConfigError(f"{where[:1].upper()}{where[1:]} must be a table, not {table!r}.")
    try:
        shape.model_validate(table)
    except ValidationError as error:
        raise ConfigError(_message(shape, table, parent, error)) from None
    return dict(table)


# --- the checked document as specs ----------------------------------------------------------


def load_config(path: str | Path | None) -> PipelineConfig:
    """Read a TOML pipeline file; ``path`` None: a pipeline without declarations (Debezium
    topics still become silver tables; nothing else is assumed).

    Raises:
        ConfigError: the file is missing, not TOML, or holds unknown or invalid settings.
    """
    if path is None:
        return PipelineConfig()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as error:
        raise ConfigError(f"Config file {path} not found.") from error
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"Config file {path} is not UTF-8 text (byte {error.start}): save it as UTF-8."
        ) from None
    return config_from_mapping(parse_toml(text, f"Config file {path}"), Path(path).parent)


def config_from_toml(text: str, base: str | Path = ".") -> PipelineConfig:
    """The config that pipeline TOML ``text`` declares; a relative ``[quality]`` suites
    directory is taken relative to ``base``.

    Raises:
        ConfigError: not TOML, or unknown or invalid settings (as :func:`load_config`).
    """
    return config_from_mapping(parse_toml(text, "Config text"), Path(base))


def parse_toml(text: str, what: str) -> dict[str, Any]:
    """The document of TOML ``text`` (``what``: how an error names it).

    Raises:
        ConfigError: it is not valid TOML or nests too deeply.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{what} is not valid TOML: {error}.") from error
    except RecursionError:
        raise ConfigError(f"{what} nests arrays or tables too deeply.") from None


def config_from_mapping(document: Mapping[str, Any], base: Path = Path(".")) -> PipelineConfig:
    """The config of a parsed pipeline TOML document (plain values, as ``tomllib`` gives;
    :meth:`PipelineConfig.to_mapping` writes one); a relative ``[quality]`` suites directory is
    taken relative to ``base``.

    Raises:
        ConfigError: unknown or invalid settings, one line naming the first.
    """
    checked(DocumentShape, document)
    config = PipelineConfig(
        tables=tuple(_table(entry) for entry in document.get("tables", [])),
        gold_tables=tuple(_gold_table(entry) for entry in document.get("gold", [])),
        maintenance=MaintenanceSpec(**document.get("maintenance", {})),
        quality=_quality(document.get("quality", {}), base),
        catalog=CatalogSpec(**document.get("catalog", {})),
        alerts=tuple(AlertSpec(**entry) for entry in document.get("alerts", [])),
        models=tuple(_model(entry) for entry in document.get("models", [])),
        patterns=tuple(_pattern(entry) for entry in document.get("patterns", [])),
        debezium=DebeziumSpec(**document.get("debezium", {})),
        fresh=FreshSpec(**document.get("fresh", {})),
    )
    return replace(config, models=check_models(config.models, config.taken_gold_names))


def table_from(entry: Mapping[str, Any]) -> TableSpec:
    """One ``[[tables]]`` entry as a :class:`TableSpec`.

    Raises:
        ConfigError: a missing, unknown, mistyped or invalid setting.
    """
    return _table(checked(TableShape, entry))


def _table(entry: Mapping[str, Any]) -> TableSpec:
    values: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v
        for k, v in entry.items()
        if k not in ACTION_SETTINGS.values()
    }
    owner = f"silver table {entry['name']!r}"
    return TableSpec(**values, expectations=expectations_from(entry, owner))


def alerts_from(entries: Any) -> tuple[AlertSpec, ...]:
    """The ``[[alerts]]`` entries, each checked as an :class:`AlertSpec`."""
    checked(DocumentShape, {"alerts": entries})
    return tuple(AlertSpec(**entry) for entry in entries)


def catalog_from(settings: Any) -> CatalogSpec:
    """The ``[catalog]`` table: ``name`` and ``schema_prefix``."""
    checked(DocumentShape, {"catalog": settings})
    return CatalogSpec(**settings)


def maintenance_from(settings: Any) -> MaintenanceSpec:
    """The ``[maintenance]`` table.

    Raises:
        ConfigError: not a table, or an unknown or invalid setting.
    """
    checked(DocumentShape, {"maintenance": settings})
    return MaintenanceSpec(**settings)


def quality_from(settings: Any, base: Path) -> QualitySpec:
    """The ``[quality]`` table; a relative ``suites`` directory is relative to ``base`` (the
    directory of the config file)."""
    checked(DocumentShape, {"quality": settings})
    return _quality(settings, base)


def _quality(settings: Mapping[str, Any], base: Path) -> QualitySpec:
    suites = settings.get("suites")
    if suites is not None and "://" not in suites:
        suites = str(base / suites)
    pairs = tuple(
        (str(name), require_action(action, f"{name!r} in [quality.actions]"))
        for name, action in settings.get("actions", {}).items()
    )
    return QualitySpec(
        suites=suites,
        packaged_suites=settings.get("packaged_suites", False),
        actions=pairs,
        validate_every=settings.get("validate_every"),
    )


def model_from(entry: Mapping[str, Any]) -> SqlModel:
    """A ``[[models]]`` entry of a config file as a :class:`SqlModel`.

    Raises:
        ConfigError: unknown or missing settings, wrong types, or what :class:`SqlModel`
            refuses.
    """
    return _model(checked(ModelShape, entry))


def _model(entry: Mapping[str, Any]) -> SqlModel:
    key = entry.get("key", [])
    return SqlModel(
        name=entry["name"], sql=entry["sql"], key=(key,) if isinstance(key, str) else tuple(key)
    )


def gold_table_from(entry: Mapping[str, Any]) -> GoldTable:
    """The declaration of one ``[[gold]]`` TOML entry (a mapping of plain values).

    Raises:
        ConfigError: a missing, unknown or invalid setting.
    """
    return _gold_table(checked(GoldShape, entry))


def _gold_table(entry: Mapping[str, Any]) -> GoldTable:
    if "window" not in entry and "stream_join" not in entry:
        where = GoldShape.where_of(entry, "")
        raise ConfigError(GoldShape.missing.format(where=where, required="window"))
    return GoldTable(
        name=entry["name"],
        source=entry["source"],
        event_time=entry["event_time"],
        window=Window(**entry.get("window", {"kind": "row"})),
        measures=tuple(_measure(measure, entry["name"]) for measure in entry["measures"]),
        group_by=tuple(entry.get("group_by", ())),
        filter=entry.get("filter"),
        watermark_delay=entry.get("watermark_delay", "10 minutes"),
        join=_join(entry["join"]) if "join" in entry else None,
        stream_join=_stream_join(entry["stream_join"]) if "stream_join" in entry else None,
        computed=tuple(entry.get("columns", {}).items()),
        top_n=_top_n(entry["top_n"]) if "top_n" in entry else None,
        expectations=expectations_from(entry, f"gold table {entry['name']!r}"),
    )


def _part(field: str, shape: type[Shape], value: object, where: str) -> dict[str, Any]:
    """``value`` checked as the ``field`` table of a gold table (``where``)."""
    if not isinstance(value, Mapping):
        message = GoldShape.messages[field]
        assert isinstance(message, str)
        raise ConfigError(message.format(where=where))
    return checked(shape, value, where)


def _pairs(on: list[str] | dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The (source column, other column) pairs of a join's ``on``: a list names columns both
    sides share."""
    return tuple((c, c) for c in on) if isinstance(on, list) else tuple(on.items())


def join_from(join: object, where: str) -> Join:
    """The :class:`Join` of a ``join = { entity, on, columns, prefix }`` setting of ``where``."""
    return _join(_part("join", JoinShape, join, where))


def _join(join: Mapping[str, Any]) -> Join:
    return Join(
        entity=join["entity"],
        on=_pairs(join["on"]),
        columns=tuple(join["columns"]),
        prefix=join.get("prefix", ""),
        as_of=join.get("as_of"),
    )


def stream_join_from(joined: object, where: str) -> StreamJoin:
    """The :class:`StreamJoin` of a ``[gold.stream_join]`` table of ``where``."""
    return _stream_join(_part("stream_join", StreamJoinShape, joined, where))


def _stream_join(joined: Mapping[str, Any]) -> StreamJoin:
    return StreamJoin(
        source=joined["source"],
        on=_pairs(joined["on"]),
        event_time=joined["event_time"],
        within=joined["within"],
    )


def top_n_from(top: object, where: str) -> TopN:
    """The :class:`TopN` of a ``top_n = { n, order_by, partition_by }`` table of ``where``."""
    return _top_n(_part("top_n", TopNShape, top, where))


def _top_n(top: Mapping[str, Any]) -> TopN:
    return TopN(top["n"], order_by_from(top["order_by"]), tuple(top.get("partition_by", ())))


def _measure(entry: Mapping[str, Any], table: str) -> Measure:
    """The measure of one ``measures`` table of gold table ``table``: ``fn`` is ``"expr"``
    when only ``expr`` is given."""
    if "fn" not in entry:
        if "expr" not in entry:
            parent = GoldShape.where_of({"name": table}, "")
            raise ConfigError(GoldMeasureShape.missing.format(parent=parent))
        entry = {"fn": "expr", **entry}
    return Measure(**entry)


def pattern_from(entry: Mapping[str, Any]) -> Pattern:
    """The declaration of one ``[[patterns]]`` TOML entry.

    Raises:
        ConfigError: a missing, unknown or invalid setting.
    """
    return _pattern(checked(PatternShape, entry))


def _pattern(entry: Mapping[str, Any]) -> Pattern:
    absent = entry.get("absent")
    texts = (
        "name",
        "source",
        "event_time",
        "within",
        "after_match",
        "watermark_delay",
        "contiguity",
    )
    return Pattern(
        **{setting: entry[setting] for setting in texts if setting in entry},
        steps=tuple(Step(**step) for step in entry["steps"]),
        partition_by=tuple(entry.get("partition_by", ())),
        absent=None if absent is None else Absent(absent["condition"], absent["within"]),
        measures=tuple(PatternMeasure(**m) for m in entry.get("measures", ())),
        alert=entry.get("alert", False),
    )
