"""Declared gold tables: a windowed aggregate over one silver table, as data.

A :class:`GoldTable` names its silver source, the event-time column, a :class:`Window`, the
group-by columns, the :class:`Measure` s, an optional filter in the safe condition grammar
(:mod:`lakehouse_core.conditions`, never SQL text), an optional enrichment :class:`Join` with
another silver table, or a time-bounded :class:`StreamJoin` (a ``row`` window: one gold row per
source row, measuring another silver table's rows in a lookback before it). The same
declaration comes from a ``[[gold]]`` entry of the pipeline TOML
(:func:`lakehouse_core.loader.gold_table_from`) or from Python. Every mistake found at load
raises one :class:`~lakehouse_core.errors.ConfigError` naming it and the fix; columns are checked
against the source's schema once it is known (:meth:`GoldTable.check_columns`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any, Literal, cast, get_args

from lakehouse_core.conditions import (
    Condition,
    Expr,
    condition_columns,
    parse_condition,
    parse_expression,
)
from lakehouse_core.durations import duration_micros, require_duration
from lakehouse_core.errors import ConfigError
from lakehouse_core.expects import Expectation, check_expectations, expectations_to_mapping
from lakehouse_core.identifiers import require_identifier
from lakehouse_core.layout import LATE_EVENTS
from lakehouse_core.measure_expressions import split

WindowKind = Literal["tumbling", "hopping", "session", "sliding", "count", "row"]
WINDOW_KINDS: tuple[WindowKind, ...] = get_args(WindowKind)
#: The window settings each kind needs (all others must be left out).
WINDOW_SETTINGS: Mapping[str, tuple[str, ...]] = {
    "tumbling": ("size",),
    "hopping": ("size", "slide"),
    "session": ("gap",),
    "sliding": ("lookback",),
    "count": ("count",),
    "row": (),
}
MeasureFn = Literal[
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "count_distinct",
    "approx_percentile",
    "span_seconds",
    "last",
    "max_by",
    "min_by",
    "expr",
]
MEASURE_FNS: tuple[MeasureFn, ...] = get_args(MeasureFn)
#: The columns a gold table has besides its group-by columns and measures.
WINDOW_INDEX = "window_index"
#: Measures that take their ``column`` from the row with the greatest (least) ``by``.
BY_FNS = ("max_by", "min_by")
#: What an enrichment join's entity row is taken as of (see :class:`Join`).
JOIN_AS_OF = ("event_time", "current")


@dataclass(frozen=True)
class Window:
    """An event-time window: ``tumbling`` (size), ``hopping`` (size, slide), ``session``
    (gap: a group's session ends after that long without an event), ``sliding`` (lookback:
    for each event time of a group, the events of the lookback before it), ``count`` (every
    ``count`` events of a group in event-time order) or ``row`` (only with a
    :class:`StreamJoin`: one window per source row, ``[t - within, t]`` before its event time
    t; it takes no settings). ``start_as``/``end_as`` name the columns that hold the window's
    bounds."""

    kind: WindowKind
    size: str | None = None
    slide: str | None = None
    gap: str | None = None
    lookback: str | None = None
    count: int | None = None
    start_as: str = "window_start"
    end_as: str = "window_end"

    def __post_init__(self) -> None:
        if self.kind not in WINDOW_KINDS:
            raise ConfigError(
                f"Unknown window kind {self.kind!r}. Must be one of {', '.join(WINDOW_KINDS)}."
            )
        needed = WINDOW_SETTINGS[self.kind]
        for setting in ("size", "slide", "gap", "lookback", "count"):
            value = getattr(self, setting)
            if not needed and value is not None:
                raise ConfigError(
                    f"A {self.kind} window takes no settings (its bound is the stream join's "
                    f"within): remove {setting}."
                )
            if setting in needed and value is None:
                raise ConfigError(
                    f"A {self.kind} window needs {' and '.join(needed)}: add "
                    f"{setting} = {'100' if setting == 'count' else repr('10 minutes')}."
                )
            if setting not in needed and value is not None:
                raise ConfigError(
                    f"A {self.kind} window takes {' and '.join(needed)}, not {setting}: "
                    f"remove {setting}."
                )
        if self.kind == "count" and (
            isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1
        ):
            raise ConfigError(
                f"Invalid window count {self.count!r}: use a whole number of events, 1 or more."
            )
        require_identifier(self.start_as, "window column name (start_as)")
        require_identifier(self.end_as, "window column name (end_as)")
        if self.start_as == self.end_as:
            raise ConfigError(f"start_as and end_as are both {self.start_as!r}: pick two names.")

    def check_durations(self, owner: str) -> None:
        """Check the window's durations (``owner`` names the gold table in the error): each
        reads as a duration above 0, and a hopping window's slide does not exceed its size.

        Raises:
            ConfigError: one line naming ``owner`` and the setting (``window.size``).
        """
        for setting in ("size", "slide", "gap", "lookback"):
            value = getattr(self, setting)
            if value is not None:
                require_duration(value, f"window.{setting}", owner=owner)
        if self.kind == "hopping":
            assert self.size is not None and self.slide is not None
            if duration_micros(self.slide) > duration_micros(self.size):
                raise ConfigError(
                    f"A hopping window's slide ({self.slide}) must not exceed its size "
                    f"({self.size}); use a tumbling window for gaps between windows."
                )

    @property
    def per_group(self) -> bool:
        """Whether a change can move every window of its group (session, sliding, count), so
        the group is recomputed whole; else only the windows holding the change's time."""
        return self.kind in ("session", "sliding", "count")

    @property
    def key_column(self) -> str:
        """The column that, with the group-by columns, identifies a row of the gold table."""
        if self.kind == "count":
            return WINDOW_INDEX
        return self.end_as if self.kind in ("sliding", "row") else self.start_as

    @property
    def columns(self) -> tuple[str, ...]:
        """The window's columns in the gold table."""
        bounds = (self.start_as, self.end_as)
        return (WINDOW_INDEX, *bounds) if self.kind == "count" else bounds


@dataclass(frozen=True)
class Measure:
    """One aggregate column: ``name`` = ``fn(column)`` over the window's rows for which
    ``filter`` (a condition, as Spark's ``FILTER (WHERE ...)``) is true. ``count`` without a
    column counts rows; ``approx_percentile`` takes ``percentile`` (0 to 1, default 0.5);
    ``span_seconds`` is the elapsed time in seconds (fractional) between the earliest and
    latest value of a timestamp column; ``last`` is the column's value in the row with the
    latest event time (of several at that time, the greatest value, nulls lowest);
    ``max_by``/``min_by`` the column's value in the row with the greatest/least ``by`` (rows
    with a null ``by`` left out; of several, the greatest/least value, nulls lowest). ``expr``
    (with ``fn = "expr"``) is an expression over aggregates (``max(battery) -
    min(battery)``): ``parts`` are its aggregates as measures of hidden columns (with the
    measure's filter), ``expression`` the checked expression over those columns."""

    name: str
    fn: MeasureFn
    column: str | None = None
    percentile: float | None = None
    filter: str | None = None
    by: str | None = None
    expr: str | None = None
    condition: Condition | None = field(default=None, init=False, compare=False, repr=False)
    parts: tuple[Measure, ...] = field(default=(), init=False, compare=False, repr=False)
    expression: Expr | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        require_identifier(self.name, "measure name")
        if self.fn not in MEASURE_FNS:
            raise ConfigError(
                f"Unknown measure function {self.fn!r} for measure {self.name!r}. "
                f"Must be one of {', '.join(MEASURE_FNS)}."
            )
        if self.fn == "expr" or self.expr is not None:
            self._split()
            return
        if self.column is None and self.fn != "count":
            raise ConfigError(
                f'Measure {self.name!r} ({self.fn}) needs a column: add column = "...".'
            )
        if self.column is not None:
            require_identifier(self.column, f"column of measure {self.name!r}")
        if self.fn in BY_FNS and self.by is None:
            raise ConfigError(
                f"Measure {self.name!r} ({self.fn}) needs by, the column whose "
                f"{'greatest' if self.fn == 'max_by' else 'least'} value picks the row: add "
                'by = "...".'
            )
        if self.fn not in BY_FNS and self.by is not None:
            raise ConfigError(
                f"Measure {self.name!r}: by only applies to max_by and min_by; remove it."
            )
        if self.by is not None:
            require_identifier(self.by, f"by of measure {self.name!r}")
        if self.filter is not None:
            where = f"filter of measure {self.name!r}"
            object.__setattr__(self, "condition", parse_condition(self.filter, where))
        if self.fn != "approx_percentile" and self.percentile is not None:
            raise ConfigError(
                f"Measure {self.name!r}: percentile only applies to approx_percentile; remove it."
            )
        if self.fn == "approx_percentile":
            value = self.percentile
            if value is None:
                object.__setattr__(self, "percentile", 0.5)
            elif (
                isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1
            ):
                raise ConfigError(
                    f"Invalid percentile {value!r} for measure {self.name!r}: use a number "
                    "from 0 to 1 (0.5 is the median)."
                )

    def _split(self) -> None:
        """Check an ``expr`` measure and set its ``parts`` and ``expression``."""
        if self.fn != "expr":
            raise ConfigError(
                f'Measure {self.name!r}: expr goes with fn = "expr" (or no fn), not with '
                f"{self.fn}: remove expr, or fn."
            )
        if not isinstance(self.expr, str):
            raise ConfigError(
                f'Measure {self.name!r} (expr) needs expr = "...", an expression over '
                "aggregates such as max(battery) - min(battery)."
            )
        extra = [s for s in ("column", "percentile", "by") if getattr(self, s) is not None]
        if extra:
            raise ConfigError(
                f"Measure {self.name!r} (expr) takes no {extra[0]}: its aggregates name their "
                "columns."
            )
        if self.filter is not None:
            where = f"filter of measure {self.name!r}"
            object.__setattr__(self, "condition", parse_condition(self.filter, where))
        aggregates, expression = split(self.expr, self.name)
        parts = tuple(
            Measure(a.name, cast(MeasureFn, a.fn), a.column, filter=self.filter) for a in aggregates
        )
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "expression", expression)

    @property
    def reads(self) -> tuple[str, ...]:
        """The input columns the measure reads: its column, ``by`` and its filter's (of an
        ``expr`` measure, its aggregates')."""
        if self.parts:
            return tuple(dict.fromkeys(c for part in self.parts for c in part.reads))
        read = [c for c in (self.column, self.by) if c is not None]
        if self.condition is not None:
            read += condition_columns(self.condition)
        return tuple(dict.fromkeys(read))

    @property
    def aggregates(self) -> tuple[Measure, ...]:
        """The plain measures computing this one: itself, or an ``expr`` measure's parts."""
        return self.parts or (self,)


@dataclass(frozen=True)
class TopN:
    """Keep only the first ``n`` rows of each window (and of each ``partition_by`` values,
    group-by columns) in ``order_by`` order: ``(column, descending)`` pairs over the gold
    table's own columns; ties are broken by the group-by columns, ascending; nulls come last.
    ``order_by`` reads ``"bids DESC, auction"`` in TOML."""

    n: int
    order_by: tuple[tuple[str, bool], ...]
    partition_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ConfigError(f"Invalid top_n n {self.n!r}: use a whole number of rows, 1 or more.")
        object.__setattr__(self, "partition_by", tuple(self.partition_by))
        object.__setattr__(self, "order_by", tuple((str(c), bool(d)) for c, d in self.order_by))
        if not self.order_by:
            raise ConfigError('top_n needs order_by, e.g. order_by = "bids DESC".')
        for column, _ in self.order_by:
            require_identifier(column, "order_by column of top_n")
        for column in self.partition_by:
            require_identifier(column, "partition_by column of top_n")


def order_by_from(text: object) -> tuple[tuple[str, bool], ...]:
    """The ``(column, descending)`` pairs of an ``order_by`` text: ``"bids DESC, auction"``.

    Raises:
        ConfigError: not a comma-separated list of names, each optionally ASC or DESC.
    """
    if not isinstance(text, str):
        raise ConfigError(f'top_n order_by must be a string like "bids DESC", not {text!r}.')
    pairs = []
    for part in text.split(","):
        words = part.split()
        direction = words[1].upper() if len(words) == 2 else "ASC"
        if not 1 <= len(words) <= 2 or direction not in ("ASC", "DESC"):
            raise ConfigError(
                f"Invalid top_n order_by {text!r}: write column names, each optionally "
                'followed by ASC or DESC, separated by commas (e.g. "bids DESC, auction").'
            )
        pairs.append((words[0], direction == "DESC"))
    return tuple(pairs)


@dataclass(frozen=True)
class Join:
    """An enrichment join: each row of the gold table's source takes ``columns`` of the row of
    silver table ``entity`` whose key columns equal its own ``on`` columns (a left outer join:
    a row without a match keeps nulls). ``on`` pairs each source column with the entity's key
    column it equals; ``prefix`` is put before each joined column's name (so ``tier`` can be
    ``customer_tier``). Joined columns can be grouped by, measured and filtered on.

    ``as_of``: ``"event_time"`` takes the entity's version in force at the source row's event
    time (the entity must keep SCD type 2 history), ``"current"`` its current row; None (the
    default) lets the pipeline config decide: event time when the entity keeps history with
    source commit times (a Debezium table with ``stored_as_scd_type = 2``), else current."""

    entity: str
    on: tuple[tuple[str, str], ...]
    columns: tuple[str, ...]
    prefix: str = ""
    as_of: str | None = None

    def __post_init__(self) -> None:
        require_identifier(self.entity, "entity of the join")
        object.__setattr__(self, "on", tuple((str(a), str(b)) for a, b in self.on))
        object.__setattr__(self, "columns", tuple(self.columns))
        if not self.on:
            raise ConfigError(
                f"The join with {self.entity!r} has no 'on' columns: name the source column "
                f'that holds the entity\'s key, e.g. on = {{ customer_id = "id" }}.'
            )
        for source_column, entity_column in self.on:
            require_identifier(source_column, "source column of the join's 'on'")
            require_identifier(entity_column, f"column of {self.entity!r} in the join's 'on'")
        if not self.columns:
            raise ConfigError(
                f"The join with {self.entity!r} takes no columns: list the columns of "
                f'{self.entity!r} to add, e.g. columns = ["tier"].'
            )
        for column in self.columns:
            require_identifier(column, f"joined column of {self.entity!r}")
        repeated = sorted({c for c in self.columns if self.columns.count(c) > 1})
        if repeated:
            raise ConfigError(
                f"The join with {self.entity!r} lists column(s) {', '.join(repeated)} twice: "
                "list each once."
            )
        if self.prefix:
            require_identifier(self.prefix, "prefix of the join")
        if self.as_of is not None and self.as_of not in JOIN_AS_OF:
            raise ConfigError(
                f"Invalid as_of {self.as_of!r} in the join with {self.entity!r}. "
                f"Must be one of {', '.join(JOIN_AS_OF)}."
            )

    @property
    def at_event_time(self) -> bool:
        """Whether each source row takes the entity's version in force at its event time."""
        return self.as_of == "event_time"

    @property
    def outputs(self) -> tuple[str, ...]:
        """The names the joined columns take (``prefix`` + column)."""
        return tuple(f"{self.prefix}{column}" for column in self.columns)

    @property
    def renamed(self) -> tuple[tuple[str, str], ...]:
        """(entity column, name in the joined rows) of each joined column."""
        return tuple(zip(self.columns, self.outputs, strict=True))


@dataclass(frozen=True)
class StreamJoin:
    """A time-bounded stream-stream join: each source row (its group-by values and event time
    t) with the rows of silver table ``source`` whose ``event_time`` lies in
    ``[t - within, t]`` and whose ``on`` columns equal its own (``on`` pairs each column of
    the gold table's source with the other table's column it equals). The gold table's
    measures are taken over those rows (a row without any keeps count 0 and nulls); the gold
    table checks ``within``."""

    source: str
    on: tuple[tuple[str, str], ...]
    event_time: str
    within: str

    def __post_init__(self) -> None:
        require_identifier(self.source, "source of the stream join")
        object.__setattr__(self, "on", tuple((str(a), str(b)) for a, b in self.on))
        if not self.on:
            raise ConfigError(
                f"The stream join with {self.source!r} has no 'on' columns: name the source "
                f"column that equals one of {self.source!r}, e.g. on = {{ customer_id = "
                '"user_id" }.'
            )
        for source_column, other_column in self.on:
            require_identifier(source_column, "source column of the stream join's 'on'")
            require_identifier(other_column, f"column of {self.source!r} in the stream join's 'on'")
        require_identifier(self.event_time, f"event_time of the stream join with {self.source!r}")

    @property
    def within_micros(self) -> int:
        """The lookback ``within`` in microseconds."""
        return duration_micros(self.within)


@dataclass(frozen=True)
class GoldTable:
    """One declared gold table (``gold.<name>``): ``measures`` of the ``source`` silver table's
    rows (those matching ``filter``, with an ``event_time``) per ``group_by`` values and
    ``window``; with a ``join``, each source row first takes the joined entity's columns.
    With a ``stream_join`` (and a ``row`` window), the table has one row per distinct
    ``group_by`` values and event time of the source's rows, and ``measures`` are taken over
    the stream-joined table's rows in its lookback (their columns are that table's).
    ``watermark_delay`` is how far behind the newest event time seen a window counts as final
    (its rows get ``_final``; a later change to it is a late event). ``computed`` (``columns``
    in TOML) adds columns to each source row, in order, before the filter, the grouping and
    the measures see it: (name, Spark SQL expression) pairs, or a mapping. ``top_n`` keeps the
    first rows of each window (tumbling and hopping windows)."""

    name: str
    source: str
    event_time: str
    window: Window
    measures: tuple[Measure, ...]
    group_by: tuple[str, ...] = ()
    filter: str | None = None
    watermark_delay: str = "10 minutes"
    join: Join | None = None
    stream_join: StreamJoin | None = None
    computed: tuple[tuple[str, str], ...] = ()
    top_n: TopN | None = None
    #: Expectations of the gold table's rows (``expect`` and ``expect_or_fail`` in TOML;
    #: :mod:`lakehouse_core.expects`).
    expectations: tuple[Expectation, ...] = ()
    condition: Condition | None = field(default=None, init=False, compare=False, repr=False)
    expressions: tuple[tuple[str, Expr], ...] = field(
        default=(), init=False, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        require_identifier(self.name, "gold table name")
        if self.name == LATE_EVENTS:
            raise ConfigError(
                f"Gold table name {LATE_EVENTS!r} is reserved for the log of late changes "
                "(gold.late_events): pick another name."
            )
        where = f"gold table {self.name!r}"
        require_identifier(self.source, f"source of {where}")
        require_identifier(self.event_time, f"event_time of {where}")
        object.__setattr__(self, "group_by", tuple(self.group_by))
        object.__setattr__(self, "measures", tuple(self.measures))
        object.__setattr__(self, "expectations", tuple(self.expectations))
        check_expectations(self.expectations, where, "gold")
        for column in self.group_by:
            require_identifier(column, f"group_by column of {where}")
        if not self.measures:
            raise ConfigError(
                f"Gold table {self.name!r} has no measures: add at least one, e.g. "
                '{ name = "events", fn = "count" }.'
            )
        if isinstance(self.watermark_delay, str) and self.watermark_delay.startswith("-"):
            raise ConfigError(
                f"watermark_delay of {where} is negative ({self.watermark_delay!r}): it is how "
                "far the watermark trails the newest event time; write e.g. '10 minutes'."
            )
        owner = f"Gold table {self.name!r}"
        require_duration(self.watermark_delay, "watermark_delay", owner=owner)
        self.window.check_durations(owner)
        if self.stream_join is not None:
            require_duration(self.stream_join.within, "stream_join.within", owner=owner)
        outputs = [*self.group_by, *self.window.columns, *(m.name for m in self.measures)]
        repeated = sorted({name for name in outputs if outputs.count(name) > 1})
        if repeated:
            raise ConfigError(
                f"Gold table {self.name!r} would have the column(s) {', '.join(repeated)} "
                "twice (group_by, window columns and measure names share one table): rename "
                "the measure or set the window's start_as/end_as."
            )
        if self.filter is not None:
            condition = parse_condition(self.filter, f"filter of {where}")
            object.__setattr__(self, "condition", condition)
        self._check_computed()
        self._check_top_n()
        if self.join is not None and self.join.entity == self.source:
            raise ConfigError(
                f"Gold table {self.name!r} joins silver.{self.source} with itself: name "
                "another entity in join (a self-join is not supported)."
            )
        self._check_stream_join()

    def _check_computed(self) -> None:
        """Parse the computed columns; raise ConfigError for a bad name or expression."""
        pairs = self.computed.items() if isinstance(self.computed, Mapping) else self.computed
        computed = tuple((str(name), str(text)) for name, text in pairs)
        object.__setattr__(self, "computed", computed)
        names = [name for name, _ in computed]
        for name in names:
            require_identifier(name, f"computed column of gold table {self.name!r}")
            if names.count(name) > 1:
                raise ConfigError(
                    f"Gold table {self.name!r} computes column {name!r} twice: name it once."
                )
            if name == self.event_time:
                raise ConfigError(
                    f"Gold table {self.name!r}: event_time {name!r} cannot be a computed "
                    "column yet: name a timestamp column of the source."
                )
        if computed and self.stream_join is not None:
            raise ConfigError(
                f"Gold table {self.name!r}: computed columns are not supported with a stream "
                "join yet: compute them in another gold table or a SQL model."
            )
        expressions = tuple(
            (name, parse_expression(text, f"computed column {name!r} of gold table {self.name!r}"))
            for name, text in computed
        )
        object.__setattr__(self, "expressions", expressions)

    def _check_top_n(self) -> None:
        """Raise ConfigError if ``top_n`` does not fit the window or names unknown columns."""
        top = self.top_n
        if top is None:
            return
        if self.window.kind not in ("tumbling", "hopping"):
            raise ConfigError(
                f"Gold table {self.name!r}: top_n keeps the first rows of each window, which "
                f"takes a tumbling or hopping window, not {self.window.kind}."
            )
        for column, _ in top.order_by:
            if column not in self.columns:
                raise ConfigError(
                    f"Gold table {self.name!r}: top_n orders by {column!r}, which is not one of "
                    f"its columns ({', '.join(self.columns)})."
                )
        for column in top.partition_by:
            if column not in self.group_by:
                raise ConfigError(
                    f"Gold table {self.name!r}: top_n partition_by column {column!r} is not in "
                    "group_by: partition by group-by columns."
                )

    def _check_stream_join(self) -> None:
        """Raise ConfigError if the stream join and the window do not fit each other."""
        joined, rows = self.stream_join, self.window.kind == "row"
        if joined is None:
            if rows:
                raise ConfigError(
                    f"Gold table {self.name!r} has a row window but no stream join: add a "
                    "[gold.stream_join] table (source, on, event_time, within) or pick "
                    "another window kind."
                )
            return
        if not rows:
            raise ConfigError(
                f"Gold table {self.name!r} has a stream join, so one row per source row: set "
                'window = { kind = "row" } (or leave window out), not a '
                f"{self.window.kind} window."
            )
        if any(m.condition is not None for m in self.measures):
            raise ConfigError(
                f"Gold table {self.name!r}: measure filters are not supported with a stream "
                "join yet: filter the other table's rows in a gold table or a SQL model."
            )
        if any(m.parts for m in self.measures):
            raise ConfigError(
                f"Gold table {self.name!r}: expr measures are not supported with a stream join "
                "yet: compute the expression in a SQL model over this table."
            )
        if self.join is not None:
            raise ConfigError(
                f"Gold table {self.name!r} has both a join and a stream join: declare one "
                "(enrich the source in another gold table)."
            )
        if joined.source == self.source:
            raise ConfigError(
                f"Gold table {self.name!r} stream-joins silver.{self.source} with itself: name "
                "another silver table in stream_join.source."
            )
        for source_column, _ in joined.on:
            if source_column not in self.group_by:
                raise ConfigError(
                    f"Gold table {self.name!r}: the stream join's 'on' column "
                    f"{source_column!r} is not in group_by (each row needs one join key): add "
                    f"{source_column!r} to group_by."
                )

    @property
    def delay_micros(self) -> int:
        """The watermark delay in microseconds."""
        return duration_micros(self.watermark_delay)

    @property
    def columns(self) -> tuple[str, ...]:
        """The gold table's declared columns, in order (the table also has the finality columns
        of :mod:`gold.finality`)."""
        return (*self.group_by, *self.window.columns, *(m.name for m in self.measures))

    @property
    def key(self) -> tuple[str, ...]:
        """The columns that identify one row of the gold table."""
        return (*self.group_by, self.window.key_column)

    @property
    def source_columns(self) -> tuple[str, ...]:
        """Every source column the declaration reads (a joined or computed column is not)."""
        read = [self.event_time, *self.group_by]
        if self.stream_join is None:
            read += [c for m in self.measures for c in m.reads]
        if self.condition is not None:
            read += condition_columns(self.condition)
        for _, expression in self.expressions:
            read += condition_columns(expression)
        made = {*(self.join.outputs if self.join is not None else ()), *self.computed_names}
        read = [c for c in read if c not in made]
        if self.join is not None:
            read += [source_column for source_column, _ in self.join.on]
        return tuple(dict.fromkeys(read))

    @property
    def computed_names(self) -> tuple[str, ...]:
        """The names of the computed columns, in order."""
        return tuple(name for name, _ in self.computed)

    @property
    def other_columns(self) -> tuple[str, ...]:
        """Every column of the stream-joined table the declaration reads (none without one)."""
        joined = self.stream_join
        if joined is None:
            return ()
        read = [*(o for _, o in joined.on), joined.event_time]
        read += [c for m in self.measures for c in m.reads]
        return tuple(dict.fromkeys(read))

    def check_columns(
        self, available: Collection[str], entity: Collection[str] | None = None
    ) -> None:
        """Raise ConfigError naming the first column the declaration reads that the source
        lacks (``available``: the source's columns), and with a join, the first ``on`` or
        joined column the joined entity lacks (``entity``: its columns) or a joined name the
        source already has; with a stream join, the first column it reads that the other
        table (``entity``: its columns) lacks."""
        for column in self.source_columns:
            if column not in available:
                raise ConfigError(
                    f"Gold table {self.name!r} reads column {column!r}, which silver."
                    f"{self.source} does not have. Columns: {', '.join(sorted(available))}."
                )
        for column in self.computed_names:
            if column in available:
                raise ConfigError(
                    f"Gold table {self.name!r}: computed column {column!r} would hide silver."
                    f"{self.source}'s own {column!r}: give it another name."
                )
        if self.stream_join is not None and entity is not None:
            for column in self.other_columns:
                if column not in entity:
                    raise ConfigError(
                        f"Gold table {self.name!r} stream-joins column {column!r}, which "
                        f"silver.{self.stream_join.source} does not have. Columns: "
                        f"{', '.join(sorted(entity))}."
                    )
        if self.join is None or entity is None:
            return
        join = self.join
        for column in (*(e for _, e in join.on), *join.columns):
            if column not in entity:
                raise ConfigError(
                    f"Gold table {self.name!r} joins column {column!r}, which silver."
                    f"{join.entity} does not have. Columns: {', '.join(sorted(entity))}."
                )
        for column, output in join.renamed:
            if output in available:
                raise ConfigError(
                    f"Gold table {self.name!r}: joined column {column!r} of silver."
                    f"{join.entity} would hide silver.{self.source}'s own {output!r}: set a "
                    f'prefix in the join, e.g. prefix = "{join.entity}_".'
                )


def check_gold_tables(tables: Sequence[GoldTable]) -> None:
    """Raise ConfigError if two declarations share a name."""
    names = [table.name for table in tables]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"Gold table names must be unique; repeated: {', '.join(repeated)}.")


def settings_of(spec: Any) -> dict[str, Any]:
    """The settings of a frozen spec as its TOML entry holds them: each init field whose value
    is neither None nor its default, tuples as lists and nested specs as tables (the inverse of
    the readers of :mod:`lakehouse_core.loader` for specs whose fields are plain values)."""
    settings: dict[str, Any] = {}
    for spec_field in fields(spec):
        value = getattr(spec, spec_field.name)
        default = spec_field.default
        if not spec_field.init or value is None:
            continue
        if default is not MISSING and type(value) is type(default) and value == default:
            continue
        settings[spec_field.name] = _plain(value)
    return settings


def _plain(value: Any) -> Any:
    """``value`` with tuples as lists and specs as mappings of their settings."""
    if is_dataclass(value) and not isinstance(value, type):
        return settings_of(value)
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


def order_by_text(order_by: Sequence[tuple[str, bool]]) -> str:
    """The ``order_by`` text of ``(column, descending)`` pairs (:func:`order_by_from` reads
    it back): ``"bids DESC, auction"``."""
    return ", ".join(f"{column} DESC" if descending else column for column, descending in order_by)


def gold_table_to_mapping(table: GoldTable) -> dict[str, Any]:
    """``table`` as its ``[[gold]]`` entry (what :func:`lakehouse_core.loader.gold_table_from` reads
    back to an equal declaration): settings left at their defaults are left out."""
    entry: dict[str, Any] = {
        "name": table.name,
        "source": table.source,
        "event_time": table.event_time,
    }
    if table.group_by:
        entry["group_by"] = list(table.group_by)
    if table.filter is not None:
        entry["filter"] = table.filter
    if table.watermark_delay != "10 minutes":
        entry["watermark_delay"] = table.watermark_delay
    entry["measures"] = [settings_of(measure) for measure in table.measures]
    entry["window"] = settings_of(table.window)
    if table.computed:
        entry["columns"] = dict(table.computed)
    if table.join is not None:
        entry["join"] = part_to_mapping(table.join)
    if table.stream_join is not None:
        entry["stream_join"] = part_to_mapping(table.stream_join)
    if table.top_n is not None:
        entry["top_n"] = part_to_mapping(table.top_n)
    return entry | expectations_to_mapping(table.expectations)


def part_to_mapping(part: Join | StreamJoin | TopN) -> dict[str, Any]:
    """A join, stream join or top-N as the table of its ``[[gold]]`` entry (``on`` as a
    mapping, ``order_by`` as text); settings left at their defaults are left out."""
    if isinstance(part, TopN):
        top: dict[str, Any] = {"n": part.n, "order_by": order_by_text(part.order_by)}
        return top | ({"partition_by": list(part.partition_by)} if part.partition_by else {})
    return settings_of(part) | {"on": dict(part.on)}
