"""Plain aligned tables for the command line: :mod:`lakehouse.ops.plain` (the status text and a
notebook's display use them too, below the command line)."""

from lakehouse.ops.plain import GAP, INDENT, Column, columns_for, table_lines

__all__ = ["GAP", "INDENT", "Column", "columns_for", "table_lines"]
