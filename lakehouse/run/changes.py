"""What a change of declarations implies for the warehouse: the pure comparison behind
``lakehouse plan`` and the run's refusal of a silver change it cannot make.

:func:`declaration_changes` compares the declarations a warehouse recorded (its last run's,
:mod:`lakehouse.run.declarations`) with those given now and says, per declaration, what a run
with the given ones does about it:

* a new gold table or pattern: the run backfills it from its silver table's change feed;
* a changed gold table or pattern (window, measures, grouping, filter, steps, ...): the run
  rebuilds it from silver (:mod:`lakehouse.run.rebuild` drops it with its state, and the run
  backfills it as a new declaration); a change that alters none of its rows (its
  expectations, a pattern's ``alert``: :data:`NEUTRAL`) applies from now on and rebuilds nothing;
* a silver table whose ``keys``, ``sequence_by``, ``system_sequence_by``, SCD type, format or
  topic changed: its rows were merged under the old contract, which no run can undo; the run
  refuses (:func:`replay_needed`) until ``lakehouse replay --table <name>`` rebuilds it;
* another changed silver setting (deletes, column lists, partial updates, ...): it applies to
  the records the run reads from now on;
* changed expectations alone (of a silver or gold table): the run checks the rows it writes
  from now on, and the rows held are not checked again;
* a removed declaration: its table stays in place, no longer updated (orphaned), until
  ``lakehouse drop`` removes it;
* a changed SQL model: recomputed whole at its next refresh; settings: from the next run.

No Spark, no I/O: two :class:`~lakehouse_core.config.PipelineConfig` in, :class:`Change` out.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

from lakehouse_core.config import PipelineConfig, TableSpec
from lakehouse_core.gold_tables import GoldTable
from lakehouse_core.identifiers import entity_name_for_topic
from lakehouse_core.patterns import Pattern

#: What a change implies: the run backfills the table, applies the change from now on,
#: rebuilds it from silver, cannot make it (a replay must), leaves the table orphaned, or
#: nothing to any table.
Effect = Literal["backfill", "rebuild", "from_now", "replay", "orphaned", "recompute", "settings"]
Action = Literal["added", "removed", "changed"]

#: The silver settings whose change a run cannot apply to the rows it merged before: which row
#: a record replaces (keys), which record wins (sequence), whether history is kept (SCD type),
#: how records are read (format) and which records (topic).
CONTRACT_SETTINGS = (
    "keys",
    "sequence_by",
    "system_sequence_by",
    "stored_as_scd_type",
    "format",
    "topic",
)
#: The settings of a pattern whose change alters none of the rows its table holds: whether its
#: matches raise alerts (a gold table's or a silver table's are its expectations).
NEUTRAL = frozenset({"alert"})
#: Plural names of the kinds, as the config's sections call them.
_SECTIONS = (
    ("table", "tables"),
    ("gold", "gold_tables"),
    ("pattern", "patterns"),
    ("model", "models"),
    ("alert", "alerts"),
)
_SETTINGS = ("quality", "catalog", "maintenance", "debezium")
#: How a removed declaration's table is removed (``table``: ``gold.<name>``).
REMOVE = "to remove it: lakehouse drop {table} --yes"


@dataclass(frozen=True)
class Change:
    """One declaration the given declarations add, remove or change, and what a run does.

    ``kind``: ``table``, ``gold``, ``pattern``, ``model``, ``alert`` or ``settings``;
    ``settings``: the settings that changed (empty when added or removed); ``effect``: see
    :data:`Effect`; ``says``: what it implies, one sentence naming the command to run if any.
    """

    kind: str
    name: str
    action: Action
    effect: Effect
    says: str
    settings: tuple[str, ...] = ()

    @property
    def what(self) -> str:
        """``changed table orders (keys, sequence_by)``, ``added gold spend_last_hour``."""
        label = f"[{self.name}]" if self.kind == "settings" else f"{self.kind} {self.name}"
        detail = f" ({', '.join(self.settings)})" if self.settings else ""
        return f"{self.action} {label}{detail}"

    def line(self) -> str:
        """The change and what it implies, as ``lakehouse plan`` prints it."""
        return f"{self.what}: {self.says}"


def changed_settings(old: Any, new: Any) -> tuple[str, ...]:
    """The names of the dataclass fields (compared ones only) whose values differ."""
    return tuple(
        field.name
        for field in fields(old)
        if field.compare and getattr(old, field.name) != getattr(new, field.name)
    )


def declaration_changes(
    recorded: PipelineConfig, given: PipelineConfig, held: Collection[str] = ()
) -> list[Change]:
    """What ``given`` changes of the ``recorded`` declarations, and what a run with ``given``
    does about each change (see the module's docstring); empty when they declare the same.
    ``held``: the silver tables the warehouse holds; a table declared now that ``recorded``
    left to the Debezium defaults, held under the same name, is a change of its contract if
    its SCD type, sequence or format differs from theirs. Tables first, then gold tables,
    patterns, models, alerts and settings; within a kind, additions, removals, then changes,
    each in the order declared."""
    changes: list[Change] = []
    for kind, section in _SECTIONS:
        old = {entry.name: entry for entry in getattr(recorded, section)}
        new = {entry.name: entry for entry in getattr(given, section)}
        changes += [
            _added(kind, entry, recorded, held) for name, entry in new.items() if name not in old
        ]
        changes += [_removed(kind, entry) for name, entry in old.items() if name not in new]
        changes += [
            _changed(kind, old[name], entry)
            for name, entry in new.items()
            if name in old and old[name] != entry
        ]
    for name in _SETTINGS:
        before, after = getattr(recorded, name), getattr(given, name)
        if before != after:
            changes.append(
                Change(
                    "settings",
                    name,
                    "changed",
                    "settings",
                    "the run uses the new settings from its start",
                    changed_settings(before, after),
                )
            )
    return changes


def replay_needed(changes: Sequence[Change], present: Sequence[str] | None = None) -> list[Change]:
    """The changes a run cannot make (a silver table's contract, :data:`CONTRACT_SETTINGS`),
    of the silver tables in ``present`` (None: of every table)."""
    return [
        change
        for change in changes
        if change.effect == "replay" and (present is None or change.name in present)
    ]


def refusal(needed: Sequence[Change]) -> str:
    """The one line a run refuses with when ``needed`` (:func:`replay_needed`) is not empty."""
    tables = ", ".join(f"silver.{change.name}" for change in needed)
    what = "; ".join(change.what for change in needed)
    commands = " and ".join(f"lakehouse replay --table {change.name}" for change in needed)
    return (
        f"The declarations change how {tables} merges its records ({what}): the rows it holds "
        f"were merged under the old declarations, which a run cannot undo. Rebuild it from "
        f"bronze with the new declarations first: {commands} (given the same declarations), "
        "then run."
    )


def _added(kind: str, entry: Any, recorded: PipelineConfig, held: Collection[str]) -> Change:
    if kind == "table":
        defaults = _debezium_defaults(entry, recorded) if entry.name in held else ()
        if defaults:
            differ = "differs" if len(defaults) == 1 else "differ"
            says = (
                f"silver.{entry.name} was merged with the Debezium defaults, from which the "
                f"declared {', '.join(defaults)} {differ}: it must be rebuilt from bronze: "
                f"lakehouse replay --table {entry.name} (a run refuses until then)"
            )
            return Change(kind, entry.name, "added", "replay", says, defaults)
        says = (
            f"new: the run makes silver.{entry.name} from every record bronze holds of "
            f"topic {entry.topic}"
        )
        return Change(kind, entry.name, "added", "backfill", says)
    if kind in ("gold", "pattern"):
        says = f"new: the run backfills gold.{entry.name} from silver.{entry.source}"
        if kind == "gold" and _joins_a_running_share(entry, recorded):
            says += f" (in its first micro-batch: when silver.{entry.source} next changes)"
        return Change(kind, entry.name, "added", "backfill", says)
    if kind == "model":
        says = f"new: the run computes gold.{entry.name} at its first refresh"
        return Change(kind, entry.name, "added", "backfill", says)
    says = f"new: the run scores the rows of silver.{entry.source} against its baseline"
    return Change(kind, entry.name, "added", "from_now", says)


def _debezium_defaults(table: TableSpec, recorded: PipelineConfig) -> tuple[str, ...]:
    """The contract settings (but ``keys``: the Debezium key is usually the declared one) in
    which a newly declared ``table`` differs from the Debezium defaults a run of ``recorded``
    applied its topic with into a silver table of the same name (none: another name)."""
    if recorded.tables and any(t.topic == table.topic for t in recorded.tables):
        return ()
    defaults = TableSpec(name=entity_name_for_topic(table.topic), topic=table.topic)
    if defaults.name != table.name:
        return ()
    changed = changed_settings(defaults, table)
    return tuple(name for name in changed if name in CONTRACT_SETTINGS and name != "keys")


def _joins_a_running_share(table: GoldTable, recorded: PipelineConfig) -> bool:
    """Whether ``table`` joins a query that at least two ``recorded`` declarations share
    (:mod:`gold.jobs`: those without a join over one source): that query has run, and runs a
    micro-batch only when its silver table changes (a group of one had a query of its own,
    so the group it makes now starts a new query, whose first micro-batch reads everything)."""
    if not _shareable(table):
        return False
    ran = [other for other in recorded.gold_tables if other.source == table.source]
    return sum(1 for other in ran if _shareable(other)) >= 2


def _shareable(table: GoldTable) -> bool:
    """:func:`gold.jobs.shareable`, without loading Spark."""
    return table.join is None and table.stream_join is None


def _removed(kind: str, entry: Any) -> Change:
    if kind == "alert":
        says = (
            "the run no longer scores its rows; the alerts it raised stay in gold.alerts "
            "and its baseline stays"
        )
        return Change(kind, entry.name, "removed", "orphaned", says)
    layer = "silver" if kind == "table" else "gold"
    table = f"{layer}.{entry.name}"
    says = f"{table} stays in place, no longer updated (orphaned)"
    if kind == "table":
        says = (
            f"{table} stays in place (orphaned): the run no longer applies topic "
            f"{entry.topic} with its declaration, and replay, forget and maintain refuse while "
            f"the warehouse holds {table} undeclared"
        )
    says += f"; {REMOVE.format(table=table)}"
    return Change(kind, entry.name, "removed", "orphaned", says)


def _changed(kind: str, old: Any, new: Any) -> Change:
    settings = changed_settings(old, new)
    if settings == ("expectations",) and kind in ("table", "gold"):
        table = f"{'silver' if kind == 'table' else 'gold'}.{new.name}"
        says = (
            f"the run checks the rows it writes to {table} from now on with the new "
            "expectations; the rows it holds are not checked again (lakehouse validate checks "
            "the whole table)"
        )
        return Change(kind, new.name, "changed", "from_now", says, settings)
    if kind == "table":
        return _changed_table(old, new, settings)
    if kind in ("gold", "pattern"):
        assert isinstance(new, GoldTable | Pattern)
        if isinstance(new, Pattern) and set(settings) <= NEUTRAL:
            raises = "an alert for each match" if new.alert else "no alert for the matches"
            says = (
                f"the run raises {raises} it writes to gold.{new.name} from now on; the matches it "
                "holds are not rebuilt and the alerts raised stay"
            )
            return Change(kind, new.name, "changed", "from_now", says, settings)
        says = (
            f"the run rebuilds gold.{new.name} from silver.{new.source}: it drops the table "
            "with its state and backfills it as a new declaration; no other table is rewritten"
        )
        return Change(kind, new.name, "changed", "rebuild", says, settings)
    if kind == "model":
        says = f"the run's next refresh computes gold.{new.name} whole with the new SQL"
        return Change(kind, new.name, "changed", "recompute", says, settings)
    says = "the run scores the rows it reads from now on with the new settings"
    return Change(kind, new.name, "changed", "from_now", says, settings)


def _changed_table(old: TableSpec, new: TableSpec, settings: tuple[str, ...]) -> Change:
    contract = tuple(name for name in settings if name in CONTRACT_SETTINGS)
    if contract:
        says = (
            f"silver.{new.name} must be rebuilt from bronze: lakehouse replay --table "
            f"{new.name} (a run refuses until then)"
        )
        return Change("table", new.name, "changed", "replay", says, settings)
    says = (
        f"the run applies it to the records it reads from now on; the rows silver.{new.name} "
        f"holds stay as merged: lakehouse replay --table {new.name} applies it to all"
    )
    return Change("table", new.name, "changed", "from_now", says, settings)
