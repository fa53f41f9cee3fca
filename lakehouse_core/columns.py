"""Which source column names silver can keep.

Silver keeps a source's columns beside columns of its own (``_sequence``, ``_op``, ...), and
works on a batch with helper columns (``_reason``, ``_tombstone``, ...); Delta's change feed
adds ``_change_type`` and friends. A source column whose name equals one of these, letter case
aside (Spark resolves names without case), would be taken for ours, so it is refused by name:
a declared one when the pipeline starts, a discovered one by quarantining the records that
carry a value in it. Every other plain name (``value``, ``key``, ``timestamp``, ``offset``,
``_id``, ...) is an ordinary column.
"""

from __future__ import annotations

from lakehouse_core.identifiers import MAX_IDENTIFIER, is_plain_identifier

#: The column of a change's op (Debezium's ``c``, ``u``, ``r``, ``d``, ``t``), and of why a
#: record is not kept (None: it is), in parsed events and silver rows.
OP, REASON = "_op", "_reason"
#: The data column of a table with ``on_type_mismatch = "rescue"`` that keeps a row's values
#: its columns' types do not hold: a JSON object of them, by column name, as sent (null: none).
RESCUED = "_rescued_data"
#: The column of a parsed event of a ``resnapshot = "full"`` table that marks the read ending
#: the table's full snapshot (:mod:`silver.snapshots`).
SNAPSHOT_END = "_snapshot_end"
#: Metadata columns every silver row carries, in this order after the data columns.
METADATA_COLUMNS = (
    "_sequence",
    OP,
    "_source_ts",
    "_bronze_topic",
    "_bronze_partition",
    "_bronze_offset",
)

#: Names silver, its history tables, its checks and Delta's change feed use beside the source's
#: columns, in the same rows (see docs/silver-semantics.md, "Column names").
RESERVED_COLUMNS = frozenset(
    {
        *METADATA_COLUMNS,
        # a parsed event's helper columns
        "_bronze_key",
        "_bronze_value",
        REASON,
        "_tombstone",
        "_unavailable",
        "_schema_hash",
        "_system_sequence",
        SNAPSHOT_END,
        # SCD type 2 history
        "__start_at",
        "__end_at",
        "__is_current",
        "__valid_from",
        "__valid_to",
        # Delta's change data feed
        "_change_type",
        "_commit_version",
        "_commit_timestamp",
        # columns the MERGE, truncation, history and checks add to a batch's rows
        "_order",
        "_current",
        "_latest",
        "_latest_order",
        "_rank",
        "_dropped",
        "_toast_dropped",
        "_latest_dropped",
        "_upsert",
        "_truncate",
        "_untruncated",
        "_floor",
        "_kept_floor",
        "_last_delete",
        "_end_truncate",
        "_want",
        "_have",
        "_kept",
        "_next",
        "_segment",
        "_starts",
        "_winner",
        "_quality_scope",
        RESCUED,
    }
)

_RESERVED_FOLDED = frozenset(name.lower() for name in RESERVED_COLUMNS)


def column_name_problem(name: str) -> str | None:
    """Why silver cannot keep a source column of this name (None: it can). The text is a
    quarantine reason and names the fix."""
    if not is_plain_identifier(name):
        return (
            f"column name {name[:MAX_IDENTIFIER]!r} is not a plain name (letters, digits and "
            "underscores, starting with a letter or underscore): rename it at the source"
        )
    if name.lower() in _RESERVED_FOLDED:
        return (
            f"column name {name!r} is reserved for silver's own columns "
            "(docs/silver-semantics.md, Column names): rename it at the source"
        )
    return None
