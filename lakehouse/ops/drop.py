"""Dropping a table the declarations no longer declare (an orphaned one, see
:mod:`lakehouse.run.changes`): its data and every piece of state the pipeline kept for it.

``silver.<t>``: the table, its history table, tombstones, truncation marks and history log,
and its query's checkpoint, idempotency id and pointer. ``gold.<t>``: the table (a declared
gold table, a pattern or a SQL model), the checkpoints of a query of its own (``gold_<t>``,
``pattern_<t>``) with their idempotency ids, pointers and its place in a shared query
(``gold_<t>.applied.json``), its watermark and its model state. Bronze is never dropped: it is
the system of record (``lakehouse forget`` removes a person's records from it).

A declared table is refused: the next run would make it again. Nothing else is touched: the
rows a gold table contributed to ``gold.late_events`` or ``gold.alerts`` stay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lakehouse.run.rebuild import gold_state_paths, state_paths
from lakehouse_core.config import PipelineConfig
from lakehouse_core.errors import ConfigError
from lakehouse_core.identifiers import require_identifier
from lakehouse_core.layout import HISTORY_SUFFIX, Warehouse

#: The layers whose tables can be dropped.
DROPPABLE = ("silver", "gold")


@dataclass(frozen=True)
class DropTarget:
    """A table to drop: its layer and name (``gold``, ``user_sessions``)."""

    layer: str
    name: str

    @property
    def table(self) -> str:
        return f"{self.layer}.{self.name}"

    @staticmethod
    def parse(text: str) -> DropTarget:
        """``silver.<name>`` or ``gold.<name>``.

        Raises:
            ConfigError: another layer, or not ``layer.name``.
        """
        layer, sep, name = text.partition(".")
        if not sep or layer not in DROPPABLE:
            raise ConfigError(
                f"Cannot drop {text!r}: name a silver or gold table as silver.<name> or "
                "gold.<name> (bronze is the system of record; lakehouse forget removes a "
                "person's records from it)."
            )
        return DropTarget(layer, require_identifier(name, "table name"))


def declared_tables(config: PipelineConfig) -> dict[str, str]:
    """The tables ``config`` declares (``silver.orders``, ``gold.order_bursts``), each with
    what declares it."""
    declared = {f"silver.{t.name}": f"[[tables]] {t.name}" for t in config.tables}
    declared |= {f"silver.{t.name}{HISTORY_SUFFIX}": f"[[tables]] {t.name}" for t in config.tables}
    declared |= {f"gold.{t.name}": f"[[gold]] {t.name}" for t in config.gold_tables}
    declared |= {f"gold.{p.name}": f"[[patterns]] {p.name}" for p in config.patterns}
    declared |= {f"gold.{m.name}": f"[[models]] {m.name}" for m in config.models}
    return declared


def refuse_declared(target: DropTarget, config: PipelineConfig) -> None:
    """Raise when ``config`` declares ``target``.

    Raises:
        ConfigError: one line naming the declaration to remove first.
    """
    by = declared_tables(config).get(target.table)
    if by is not None:
        raise ConfigError(
            f"{target.table} is declared ({by}): remove its declaration and run first (the next "
            "run would make it again); lakehouse plan shows it as removed then."
        )


def dropped_paths(
    warehouse: Warehouse, target: DropTarget, names: Callable[[str], Sequence[str]]
) -> list[str]:
    """What dropping ``target`` deletes (present paths only), listed with ``names`` (a
    directory's entry names, none if it does not exist); a gold table's as a run's rebuild
    drops it (:func:`lakehouse.run.rebuild.gold_state_paths`)."""
    if target.layer == "gold":
        return gold_state_paths(warehouse, target.name, names)
    entity = target.name
    candidates = [
        warehouse.table("silver", entity),
        warehouse.table("silver", f"{entity}{HISTORY_SUFFIX}"),
        warehouse.tombstones(entity),
        warehouse.truncations(entity),
        warehouse.history_log(entity),
    ]
    return state_paths(warehouse, candidates, [f"silver_{entity}"], names)
