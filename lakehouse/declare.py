"""Pipelines declared in Python: the tables, gold tables, patterns, alerts, SQL models and
settings a pipeline TOML declares, as keyword arguments with the names Databricks AUTO CDC
(``create_auto_cdc_flow``) and ``pyspark.pipelines`` users know.

>>> from lakehouse import Lakehouse, cdc_table, events_table, gold_table, tumbling, measure
>>> lh = Lakehouse(
...     "/tmp/wh",
...     tables=[cdc_table("orders", topic="shop.public.orders", stored_as_scd_type=2),
...             events_table("clicks", topic="shop.clickstream", keys=["event_id"],
...                          sequence_by="ts")],
...     gold=[gold_table("revenue", source="orders", event_time="created_at",
...                      window=tumbling("1 minute"),
...                      measures=[measure.sum("total", name="revenue")])],
... )
>>> print(lh.config.to_toml())   # the same pipeline as TOML

One validation path: each constructor builds the TOML entry of its arguments and reads it with
the loader of the config file (:mod:`lakehouse_core.loader`), so a declaration is the same frozen
spec its TOML gives and a mistake raises, on construction, the
:class:`~lakehouse_core.errors.ConfigError` line its TOML raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any, Unpack

from lakehouse_core.alerting import AlertSpec
from lakehouse_core.config import (
    CatalogSpec,
    MaintenanceSpec,
    PipelineConfig,
    QualitySpec,
    TableSpec,
)
from lakehouse_core.errors import ConfigError
from lakehouse_core.expects import Expectation, check_expectations, expectations_to_mapping
from lakehouse_core.gold_tables import (
    GoldTable,
    Join,
    Measure,
    StreamJoin,
    TopN,
    Window,
    gold_table_to_mapping,
    part_to_mapping,
    settings_of,
)
from lakehouse_core.loader import (
    alerts_from,
    catalog_from,
    config_from_mapping,
    config_from_toml,
    gold_table_from,
    join_from,
    maintenance_from,
    model_from,
    pattern_from,
    quality_from,
    stream_join_from,
    table_from,
    top_n_from,
)
from lakehouse_core.models import SqlModel
from lakehouse_core.patterns import Absent, Pattern, PatternMeasure, Step
from lakehouse_core.specs import TableSettings, table_settings

__all__ = [
    "Absent",
    "AlertSpec",
    "CatalogSpec",
    "Expectation",
    "GoldTable",
    "Join",
    "MaintenanceSpec",
    "Measure",
    "Pattern",
    "PatternMeasure",
    "PipelineConfig",
    "QualitySpec",
    "SqlModel",
    "Step",
    "StreamJoin",
    "TableSpec",
    "TopN",
    "Window",
    "absent",
    "alert",
    "catalog",
    "cdc_table",
    "config_from_toml",
    "count_window",
    "events_table",
    "expect",
    "expect_all",
    "expect_all_or_drop",
    "expect_all_or_fail",
    "expect_or_drop",
    "expect_or_fail",
    "gold_table",
    "hopping",
    "join",
    "match_measure",
    "measure",
    "pattern",
    "pipeline_config",
    "quality",
    "retention",
    "session",
    "sliding",
    "sql_model",
    "step",
    "stream_join",
    "top_n",
    "tumbling",
]

#: A column list as Python users write it: one name, or a sequence of names.
Columns = str | Sequence[str]
#: A table's expectations as Python users write them: ``expect(...)`` declarations and the
#: groups ``expect_all(...)`` returns, in one list.
Expectations = Sequence[Expectation | Sequence[Expectation]]
#: The base of a relative suites directory declared in Python: the working directory.
_HERE = Path(".")


def _entry(**settings: Any) -> dict[str, Any]:
    """The TOML entry of keyword arguments: None left out (TOML has no null), tuples as lists,
    specs as their tables."""
    return {name: _plain(value) for name, value in settings.items() if value is not None}


def _plain(value: Any) -> Any:
    if isinstance(value, GoldTable):
        return gold_table_to_mapping(value)
    if isinstance(value, Join | StreamJoin | TopN):
        return part_to_mapping(value)
    if is_dataclass(value) and not isinstance(value, type):
        return settings_of(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


# --- expectations ---------------------------------------------------------------------------


def expect(name: str, condition: str) -> Expectation:
    """Expectation ``name``: rows should satisfy ``condition``; a row that does not is counted
    and warned about, and kept (Databricks' ``@dlt.expect``). ``condition`` is one column
    compared with constants (``"total >= 0"``, ``"status IN ('new', 'paid')"``,
    ``"email LIKE '%@%'"``, ``"customer_id IS NOT NULL"``; the forms are listed in
    :mod:`lakehouse_core.expects`); it is checked with the table it is declared on."""
    return Expectation(name, condition, "warn")


def expect_or_drop(name: str, condition: str) -> Expectation:
    """As :func:`expect`, but a row that breaks it goes to quarantine instead of the table
    (``@dlt.expect_or_drop``; silver tables only: a gold row is derived, never withheld)."""
    return Expectation(name, condition, "drop")


def expect_or_fail(name: str, condition: str) -> Expectation:
    """As :func:`expect`, but a row that breaks it fails the micro-batch, which commits
    nothing (``@dlt.expect_or_fail``)."""
    return Expectation(name, condition, "fail")


def expect_all(expectations: Mapping[str, str]) -> tuple[Expectation, ...]:
    """:func:`expect` of each name -> condition of ``expectations`` (``@dlt.expect_all``)."""
    return tuple(expect(name, condition) for name, condition in _named(expectations))


def expect_all_or_drop(expectations: Mapping[str, str]) -> tuple[Expectation, ...]:
    """:func:`expect_or_drop` of each name -> condition (``@dlt.expect_all_or_drop``)."""
    return tuple(expect_or_drop(name, condition) for name, condition in _named(expectations))


def expect_all_or_fail(expectations: Mapping[str, str]) -> tuple[Expectation, ...]:
    """:func:`expect_or_fail` of each name -> condition (``@dlt.expect_all_or_fail``)."""
    return tuple(expect_or_fail(name, condition) for name, condition in _named(expectations))


def _named(expectations: Mapping[str, str]) -> list[tuple[str, str]]:
    if not isinstance(expectations, Mapping):
        raise ConfigError(
            "expect_all takes a dict of expectation name -> condition, e.g. "
            f'{{"total_not_negative": "total >= 0"}}; not {expectations!r}.'
        )
    return list(expectations.items())


def _expect_tables(expectations: Expectations, owner: str, layer: str) -> dict[str, Any]:
    """The ``expect``/``expect_or_drop``/``expect_or_fail`` tables of a table's TOML entry
    for ``expectations``, checked first so that no mistake is lost in the tables (a name
    given twice, a condition without a GX form).

    Raises:
        ConfigError: as :func:`lakehouse_core.expects.check_expectations`.
    """
    if isinstance(expectations, Expectation | str | Mapping):
        expectations = [expectations]  # type: ignore[list-item]  # checked below
    flat: list[Any] = []
    for item in expectations:
        if isinstance(item, Sequence) and not isinstance(item, str):
            flat.extend(item)
        else:
            flat.append(item)
    check_expectations(flat, owner, layer)
    return expectations_to_mapping(flat)


# --- silver tables --------------------------------------------------------------------------


def cdc_table(
    name: str,
    *,
    topic: str | None = None,
    expectations: Expectations = (),
    **settings: Unpack[TableSettings],
) -> TableSpec:
    """Silver table ``name`` from the Debezium change events of ``topic`` (required; a
    ``[[tables]]`` entry; ``settings``: those of :class:`~lakehouse_core.specs.TableSpec`, as
    in Databricks' ``create_auto_cdc_flow``, see docs/silver-semantics.md). ``keys``/
    ``sequence_by`` default to the record key and the connector's own sequence.
    ``expectations``: :func:`expect`, :func:`expect_or_drop`, :func:`expect_or_fail` and
    ``expect_all...`` declarations of the silver rows.

    Raises:
        ConfigError: a missing, mistyped or invalid setting or expectation (the message its
            TOML gives).
    """
    tables = _expect_tables(expectations, f"silver table {name!r}", "silver")
    return table_from(_entry(name=name, topic=topic, **_known(settings, "cdc_table"), **tables))


def events_table(
    name: str,
    *,
    topic: str | None = None,
    expectations: Expectations = (),
    **settings: Unpack[TableSettings],
) -> TableSpec:
    """Silver table ``name`` from a plain event stream ``topic`` (``format = "events"``):
    each event's ``keys`` identify it, ``sequence_by`` orders its versions (all three
    required); ``schema`` (a Spark DDL string) fixes the columns, else they are inferred.
    ``settings`` and ``expectations``: as for :func:`cdc_table`.

    Raises:
        ConfigError: a missing, mistyped or invalid setting or expectation (the message its
            TOML gives).
    """
    tables = _expect_tables(expectations, f"silver table {name!r}", "silver")
    known = _known(settings, "events_table")
    return table_from(_entry(name=name, topic=topic, format="events", **known, **tables))


def _known(settings: Mapping[str, Any], declaration: str) -> Mapping[str, Any]:
    """``settings`` if each is a setting of a table (:func:`~lakehouse_core.specs.table_settings`).

    Raises:
        ConfigError: one that is not, named with the settings there are.
    """
    unknown = sorted(set(settings) - set(table_settings()))
    if unknown:
        raise ConfigError(
            f"{declaration}() has no setting {', '.join(unknown)}. "
            f"Allowed: {', '.join(sorted(table_settings()))} (and topic, expectations)."
        )
    return settings


# --- gold tables ----------------------------------------------------------------------------


def _window(kind: str, start_as: str, end_as: str, **settings: Any) -> Window:
    return Window(**_entry(kind=kind, start_as=start_as, end_as=end_as, **settings))


def tumbling(size: str, *, start_as: str = "window_start", end_as: str = "window_end") -> Window:
    """Fixed, non-overlapping windows of ``size`` (``"1 minute"``)."""
    return _window("tumbling", start_as, end_as, size=size)


def hopping(
    size: str, slide: str, *, start_as: str = "window_start", end_as: str = "window_end"
) -> Window:
    """Windows of ``size`` starting every ``slide`` (overlapping when ``slide`` < ``size``)."""
    return _window("hopping", start_as, end_as, size=size, slide=slide)


def session(gap: str, *, start_as: str = "window_start", end_as: str = "window_end") -> Window:
    """Per group, a session ends after ``gap`` without an event."""
    return _window("session", start_as, end_as, gap=gap)


def sliding(lookback: str, *, start_as: str = "window_start", end_as: str = "window_end") -> Window:
    """For each event time of a group, the group's events of the ``lookback`` before it."""
    return _window("sliding", start_as, end_as, lookback=lookback)


def count_window(
    count: int, *, start_as: str = "window_start", end_as: str = "window_end"
) -> Window:
    """Every ``count`` events of a group, in event-time order."""
    return _window("count", start_as, end_as, count=count)


class _Measures:
    """The gold measures as ``measure.<fn>(column, name=...)``; ``name`` defaults to
    ``<fn>_<column>`` (``count`` without a column: ``count``); ``filter`` is a condition, as
    Spark's ``FILTER (WHERE ...)``. Each raises ConfigError as its TOML does."""

    def __getattr__(self, fn: str) -> Any:
        """An unknown measure function: ConfigError (as ``fn = "<fn>"`` in TOML)."""
        if fn.startswith("_"):
            raise AttributeError(fn)
        return Measure(name=fn, fn=fn)  # type: ignore[arg-type]  # raises ConfigError

    @staticmethod
    def _make(fn: str, column: str | None, name: str | None, **settings: Any) -> Measure:
        default = fn if column is None else f"{fn}_{column}"
        return Measure(**_entry(name=name or default, fn=fn, column=column, **settings))

    def expr(self, expression: str, *, name: str, filter: str | None = None) -> Measure:
        """An expression over aggregates (count, sum, avg, min, max of columns), e.g.
        ``measure.expr("max(battery) - min(battery)", name="battery_drop")``."""
        return Measure(**_entry(name=name, fn="expr", expr=expression, filter=filter))

    def count(
        self, column: str | None = None, *, name: str | None = None, filter: str | None = None
    ) -> Measure:
        """Rows (with a column: its non-null values)."""
        return self._make("count", column, name, filter=filter)

    def sum(self, column: str, *, name: str | None = None, filter: str | None = None) -> Measure:
        """The sum of ``column``."""
        return self._make("sum", column, name, filter=filter)

    def avg(self, column: str, *, name: str | None = None, filter: str | None = None) -> Measure:
        """The mean of ``column``."""
        return self._make("avg", column, name, filter=filter)

    def min(self, column: str, *, name: str | None = None, filter: str | None = None) -> Measure:
        """The least value of ``column``."""
        return self._make("min", column, name, filter=filter)

    def max(self, column: str, *, name: str | None = None, filter: str | None = None) -> Measure:
        """The greatest value of ``column``."""
        return self._make("max", column, name, filter=filter)

    def count_distinct(
        self, column: str, *, name: str | None = None, filter: str | None = None
    ) -> Measure:
        """The number of distinct non-null values of ``column``."""
        return self._make("count_distinct", column, name, filter=filter)

    def approx_percentile(
        self,
        column: str,
        percentile: float = 0.5,
        *,
        name: str | None = None,
        filter: str | None = None,
    ) -> Measure:
        """The approximate ``percentile`` (0 to 1) of ``column``."""
        return self._make("approx_percentile", column, name, percentile=percentile, filter=filter)

    def span_seconds(
        self, column: str, *, name: str | None = None, filter: str | None = None
    ) -> Measure:
        """Seconds between the earliest and latest value of timestamp ``column``."""
        return self._make("span_seconds", column, name, filter=filter)

    def last(self, column: str, *, name: str | None = None, filter: str | None = None) -> Measure:
        """``column`` of the row with the latest event time."""
        return self._make("last", column, name, filter=filter)

    def max_by(
        self, column: str, by: str, *, name: str | None = None, filter: str | None = None
    ) -> Measure:
        """``column`` of the row with the greatest ``by`` (arg-max)."""
        return self._make("max_by", column, name, by=by, filter=filter)

    def min_by(
        self, column: str, by: str, *, name: str | None = None, filter: str | None = None
    ) -> Measure:
        """``column`` of the row with the least ``by`` (arg-min)."""
        return self._make("min_by", column, name, by=by, filter=filter)


#: Gold measures: ``measure.sum("total", name="revenue")``, ``measure.count()``, ...
measure = _Measures()


def join(
    entity: str,
    *,
    on: Mapping[str, str] | Sequence[str],
    columns: Sequence[str],
    prefix: str = "",
    as_of: str | None = None,
) -> Join:
    """An enrichment join with silver table ``entity``: ``on`` maps each source column to the
    entity's key column (or lists names both share); ``columns`` are added, each after
    ``prefix``; ``as_of``: ``"event_time"`` or ``"current"`` (None: the pipeline decides)."""
    return join_from(
        _entry(entity=entity, on=on, columns=columns, prefix=prefix or None, as_of=as_of),
        "gold table",
    )


def stream_join(
    source: str, *, on: Mapping[str, str] | Sequence[str], event_time: str, within: str
) -> StreamJoin:
    """A time-bounded stream-stream join with silver table ``source``: its rows whose
    ``event_time`` lies within ``within`` before each source row's and whose ``on`` columns
    equal its own."""
    return stream_join_from(
        _entry(source=source, on=on, event_time=event_time, within=within), "gold table"
    )


def top_n(n: int, *, order_by: str, partition_by: Sequence[str] = ()) -> TopN:
    """Keep the first ``n`` rows of each window in ``order_by`` order (``"bids DESC,
    auction"``), per ``partition_by`` values."""
    return top_n_from(
        _entry(n=n, order_by=order_by, partition_by=list(partition_by) or None), "gold table"
    )


def gold_table(
    name: str,
    *,
    source: str | None = None,
    event_time: str | None = None,
    measures: Sequence[Measure] | None = None,
    window: Window | None = None,
    group_by: Columns = (),
    columns: Mapping[str, str] | None = None,
    filter: str | None = None,
    join: Join | None = None,
    stream_join: StreamJoin | None = None,
    top_n: TopN | None = None,
    watermark_delay: str = "10 minutes",
    expectations: Expectations = (),
) -> GoldTable:
    """Gold table ``gold.<name>``: ``measures`` of silver ``source``'s rows per ``group_by``
    values and ``window`` of ``event_time`` (a ``[[gold]]`` entry, docs/gold.md); ``columns``
    computes columns (name -> Spark SQL expression) first; ``filter`` keeps the rows it is
    true for. ``source``, ``event_time``, ``measures`` and ``window`` are required (``window``
    may be left out with a ``stream_join``: one row per source row). ``expectations``:
    :func:`expect` and :func:`expect_or_fail` declarations (and their ``expect_all`` forms)
    of the gold rows.

    Raises:
        ConfigError: a missing or invalid setting (the message its TOML gives).
    """
    entry = _entry(
        name=name,
        source=source,
        event_time=event_time,
        window=window,
        measures=None if measures is None else list(measures),
        group_by=[group_by] if isinstance(group_by, str) else list(group_by) or None,
        columns=dict(columns) if columns else None,
        filter=filter,
        join=join,
        stream_join=stream_join,
        top_n=top_n,
        watermark_delay=watermark_delay,
    )
    tables = _expect_tables(expectations, f"gold table {name!r}", "gold")
    return gold_table_from(entry | tables)


# --- patterns -------------------------------------------------------------------------------


def step(
    name: str,
    condition: str = "TRUE",
    *,
    times: int | str = 1,
    contiguity: str | None = None,
) -> Step:
    """A pattern step: ``times`` events (``1``, ``"3+"``, ``"2..5"``, optional ``"?"``,
    ``"*"``) satisfying
    ``condition`` (default: every event), which may read earlier steps as ``step.column``;
    ``contiguity`` ``"strict"`` or ``"relaxed"`` (default: the pattern's)."""
    # An invalid contiguity raises ConfigError in Step, as contiguity = "..." does in TOML.
    return Step(name, condition, times, contiguity)  # type: ignore[arg-type]


def absent(condition: str, *, within: str) -> Absent:
    """No event satisfying ``condition`` may follow the last step within ``within``."""
    return Absent(condition=condition, within=within)


class _MatchMeasures:
    """The pattern measures as ``match_measure.<fn>(column, step=..., name=...)``: over the
    events of ``step`` in a match (every event of it when None); ``name`` defaults to
    ``<fn>_<column>``."""

    def __getattr__(self, fn: str) -> Any:
        """An unknown pattern measure function: ConfigError (as ``fn = "<fn>"`` in TOML)."""
        if fn.startswith("_"):
            raise AttributeError(fn)
        return PatternMeasure(name=fn, fn=fn)  # type: ignore[arg-type]  # raises ConfigError

    @staticmethod
    def _make(fn: str, column: str | None, step: str | None, name: str | None) -> PatternMeasure:
        default = fn if column is None else f"{fn}_{column}"
        return PatternMeasure(**_entry(name=name or default, fn=fn, column=column, step=step))

    def first(
        self, column: str, *, step: str | None = None, name: str | None = None
    ) -> PatternMeasure:
        """``column`` of the first event."""
        return self._make("first", column, step, name)

    def last(
        self, column: str, *, step: str | None = None, name: str | None = None
    ) -> PatternMeasure:
        """``column`` of the last event."""
        return self._make("last", column, step, name)

    def count(
        self, column: str | None = None, *, step: str | None = None, name: str | None = None
    ) -> PatternMeasure:
        """The number of events (with a column: of its non-null values)."""
        return self._make("count", column, step, name)

    def min(
        self, column: str, *, step: str | None = None, name: str | None = None
    ) -> PatternMeasure:
        """The least value of ``column``."""
        return self._make("min", column, step, name)

    def max(
        self, column: str, *, step: str | None = None, name: str | None = None
    ) -> PatternMeasure:
        """The greatest value of ``column``."""
        return self._make("max", column, step, name)

    def sum(
        self, column: str, *, step: str | None = None, name: str | None = None
    ) -> PatternMeasure:
        """The sum of ``column``."""
        return self._make("sum", column, step, name)


#: Pattern measures: ``match_measure.first("page", step="cart", name="product_page")``.
match_measure = _MatchMeasures()


def pattern(
    name: str,
    *,
    source: str | None = None,
    event_time: str | None = None,
    steps: Sequence[Step] | None = None,
    within: str | None = None,
    partition_by: Columns = (),
    absent: Absent | None = None,
    measures: Sequence[PatternMeasure] = (),
    after_match: str = "skip_past_last",
    watermark_delay: str = "10 minutes",
    alert: bool = False,
    contiguity: str = "relaxed",
) -> Pattern:
    """Pattern ``gold.<name>``: per ``partition_by`` values of silver ``source``, in
    ``event_time`` order, the matches of ``steps`` spanning less than ``within`` (with
    ``absent``: followed by no such event); a ``[[patterns]]`` entry, docs/patterns.md.
    ``source``, ``event_time``, ``steps`` and ``within`` are required.

    Raises:
        ConfigError: a missing or invalid setting (the message its TOML gives).
    """
    entry = _entry(
        name=name,
        source=source,
        event_time=event_time,
        steps=None if steps is None else list(steps),
        within=within,
        partition_by=[partition_by] if isinstance(partition_by, str) else list(partition_by),
        absent=absent,
        measures=list(measures),
        after_match=after_match,
        watermark_delay=watermark_delay,
        alert=alert,
        contiguity=contiguity,
    )
    return pattern_from(entry)


# --- alerts, models, settings ---------------------------------------------------------------


def alert(
    name: str,
    *,
    source: str | None = None,
    key: str | None = None,
    value: str | None = None,
    event_time: str | None = None,
    method: str = "mad",
    threshold: float = 3.5,
    min_history: int = 5,
    row_key: str = "id",
) -> AlertSpec:
    """Alert ``name``: rows of silver ``source`` whose ``value`` scores above ``threshold``
    against the baseline of their ``key`` (``lakehouse fit``) land in ``gold.alerts``; an
    ``[[alerts]]`` entry. ``source``, ``key``, ``value`` and ``event_time`` are required.

    Raises:
        ConfigError: a missing or invalid setting (the message its TOML gives).
    """
    return alerts_from([_entry(**locals())])[0]


def sql_model(name: str, *, sql: str | None = None, key: Columns = ()) -> SqlModel:
    """SQL model ``gold.<name>``: the result of one read-only ``sql`` query over bronze,
    silver and gold tables, refreshed after each micro-batch that changed its inputs; ``key``
    columns let a refresh MERGE only changed rows (a ``[[models]]`` entry, docs/models.md).

    Raises:
        ConfigError: the query is not one allowed read, or the key does not fit it.
    """
    keys = [key] if isinstance(key, str) else list(key)
    return model_from(_entry(name=name, sql=sql, key=keys or None))


def quality(
    *,
    suites: str | None = None,
    packaged_suites: bool = False,
    actions: Mapping[str, str] | None = None,
    validate_every: str | None = None,
) -> QualitySpec:
    """The ``[quality]`` settings: a directory of suites (relative to the working directory),
    the packaged ones, per-expectation actions (``{"silver.orders.total_not_negative":
    "fail"}``) and how often a continuous run validates whole tables.

    Raises:
        ConfigError: an unknown action or a bad duration.
    """
    settings = _entry(
        suites=suites,
        packaged_suites=packaged_suites,
        actions=dict(actions) if actions else None,
        validate_every=validate_every,
    )
    return quality_from(settings, _HERE)


def catalog(name: str | None = None, *, schema_prefix: str = "") -> CatalogSpec:
    """The ``[catalog]`` settings: tables are ``<name>.<schema_prefix><layer>.<table>``."""
    return catalog_from(_entry(name=name, schema_prefix=schema_prefix or None))


def retention(
    *, vacuum_retention_hours: int = 168, bronze_retention_days: int | None = None
) -> MaintenanceSpec:
    """The ``[maintenance]`` settings of ``lakehouse maintain``."""
    return maintenance_from(
        _entry(
            vacuum_retention_hours=vacuum_retention_hours,
            bronze_retention_days=bronze_retention_days,
        )
    )


def pipeline_config(
    *,
    tables: Iterable[TableSpec] = (),
    gold: Iterable[GoldTable] = (),
    patterns: Iterable[Pattern] = (),
    alerts: Iterable[AlertSpec] = (),
    models: Iterable[SqlModel] = (),
    quality: QualitySpec | None = None,
    catalog: CatalogSpec | None = None,
    maintenance: MaintenanceSpec | None = None,
) -> PipelineConfig:
    """The pipeline these declarations make: exactly what is declared (no gold table unless
    ``gold`` names one), checked together as the config file is (unique names, joins,
    patterns and models against each other).

    Raises:
        ConfigError: a declaration of the wrong kind in a list, or what the config file's
            checks refuse.
    """
    kinds: tuple[tuple[str, Iterable[Any], type, str], ...] = (
        ("tables", tables, TableSpec, "cdc_table(...) or events_table(...)"),
        ("gold", gold, GoldTable, "gold_table(...)"),
        ("patterns", patterns, Pattern, "pattern(...)"),
        ("alerts", alerts, AlertSpec, "alert(...)"),
        ("models", models, SqlModel, "sql_model(...)"),
    )
    lists: dict[str, tuple[Any, ...]] = {}
    for setting, given, kind, made_by in kinds:
        if isinstance(given, str | Mapping) or not isinstance(given, Iterable):
            raise ConfigError(f"{setting}= takes a list of {made_by} declarations, not {given!r}.")
        lists[setting] = tuple(given)
        for item in lists[setting]:
            if not isinstance(item, kind):
                raise ConfigError(
                    f"{setting}= takes {made_by} declarations, not {type(item).__name__} {item!r}."
                )
    for setting, value, kind, made_by in (
        ("quality", quality, QualitySpec, "quality(...)"),
        ("catalog", catalog, CatalogSpec, "catalog(...)"),
        ("maintenance", maintenance, MaintenanceSpec, "retention(...)"),
    ):
        if value is not None and not isinstance(value, kind):
            raise ConfigError(f"{setting}= takes {made_by}, not {value!r}.")
    config = PipelineConfig(
        tables=lists["tables"],
        gold_tables=lists["gold"],
        patterns=lists["patterns"],
        alerts=lists["alerts"],
        models=lists["models"],
        quality=quality or QualitySpec(),
        catalog=catalog or CatalogSpec(),
        maintenance=maintenance or MaintenanceSpec(),
    )
    return config_from_mapping(config.to_mapping(), _HERE)
