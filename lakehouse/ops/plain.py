"""Tables as plain aligned text: readable in a pipe, a CI log or a narrow terminal, easy to
read back with ``awk`` or a script (each column's extent is the run of dashes under its header),
names never cut or broken."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Spaces between two columns, and the indent of a row under a name printed on its own line.
GAP, INDENT = 2, 4


@dataclass(frozen=True)
class Column:
    """A column of a printed table: its header, whether its cells are names (shown whole,
    left-aligned, on a line of their own when the row has no room) and, for the others, its
    rank when room runs out (the highest rank goes first; 0: never left out)."""

    header: str
    name: bool = False
    drop_rank: int = 0


def table_lines(
    title: str | None, columns: Sequence[Column], rows: Sequence[Sequence[Any]], width: int
) -> list[str]:
    """A table as plain aligned lines of at most ``width`` columns (where its names allow):
    the title (if any), the header, a rule of dashes under each column, then a row per item
    (``None`` shown as ``-``). Stacked, the rule is one run of dashes under all headers.

    Columns are left out, highest ``drop_rank`` first, until a row fits; if it still does not,
    name cells go on lines of their own (indented under the one before), the widest names
    first and no more of them than the rest of the row needs to fit, and the other cells on
    the line below. A cell is never cut or broken: a name longer than the whole
    width is the one thing that makes a line longer than ``width``.
    """
    cells = [["-" if value is None else str(value) for value in row] for row in rows]
    kept = list(range(len(columns)))

    def widths(chosen: list[int]) -> dict[int, int]:
        return {i: max([len(columns[i].header), *(len(r[i]) for r in cells)]) for i in chosen}

    def line_width(chosen: list[int]) -> int:
        return sum(widths(chosen).values()) + GAP * (len(chosen) - 1) + GAP

    droppable = sorted(
        (i for i, c in enumerate(columns) if c.drop_rank), key=lambda i: -columns[i].drop_rank
    )
    for i in droppable:
        if line_width(kept) <= width:
            break
        kept.remove(i)
    sizes = widths(kept)
    stacked = line_width(kept) > width
    chosen: list[int] = []  # the name columns that go on lines of their own, widest first
    for i in sorted((i for i in kept if columns[i].name), key=lambda i: -sizes[i]):
        if not stacked or (chosen and _fits(kept, chosen, sizes, width)):
            break
        chosen.append(i)
    names = [i for i in kept if i in chosen]
    inline = [i for i in kept if i not in names]
    depth = len(names) * INDENT

    def joined(values: dict[int, str], indent: int) -> str:
        parts = [
            values[i].ljust(sizes[i]) if columns[i].name else values[i].rjust(sizes[i])
            for i in inline
        ]
        return (" " * (GAP + indent) + (" " * GAP).join(parts)).rstrip()

    def stacked_lines(values: Sequence[str]) -> list[str]:
        own = [" " * (GAP + INDENT * k) + values[i] for k, i in enumerate(names)]
        rest = joined(dict(enumerate(values)), depth)
        return [*own, rest] if inline else own

    header = stacked_lines([c.header for c in columns])
    if stacked:
        rule = " " * GAP + "-" * (max(len(line) for line in header) - GAP)
    else:
        rule = joined({i: "-" * sizes[i] for i in inline}, 0)
    lines = [*([title] if title is not None else []), *header, rule]
    for row in cells:
        lines += stacked_lines(row)
    return lines


def _fits(kept: list[int], stacked: list[int], sizes: dict[int, int], width: int) -> bool:
    """Whether the cells of ``kept`` not in ``stacked`` fit ``width`` on the line below the
    stacked names (indented under the last of them)."""
    rest = [sizes[i] for i in kept if i not in stacked]
    return GAP + INDENT * len(stacked) + sum(rest) + GAP * max(0, len(rest) - 1) <= width


def is_number(text: str) -> bool:
    """Whether a printed cell is a number (right-aligned in its column)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def columns_for(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[Column]:
    """Columns for a table of printed cells: a column whose cells are all numbers (or
    ``NULL``) is right-aligned, every other one is a name column, never cut."""
    return [
        Column(
            header,
            name=not all(is_number(row[i]) or row[i] == "NULL" for row in rows) or not rows,
        )
        for i, header in enumerate(headers)
    ]
