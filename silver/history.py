"""SCD type 2 history as pure transforms: a key's change events -> its versions -> the writes.

The history of a key is rebuilt from *all* of its change events each time one of them arrives
(``docs/silver-semantics.md``, "SCD type 2 history"), so it does not depend on arrival order or
micro-batch boundaries; :func:`history_changes` then keeps only the rows that differ from the
table, so rows that did not change are not written again.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructType
from pyspark.sql.window import WindowSpec

from lakehouse_core.columns import METADATA_COLUMNS, OP, SNAPSHOT_END
from lakehouse_core.config import TableSpec
from lakehouse_core.errors import ConfigError
from silver.parse import TRUNCATE_OP, UPSERT_OPS, order_of
from silver.snapshots import BEFORE_READS

START_AT = "__start_at"
END_AT = "__end_at"
IS_CURRENT = "__is_current"
#: A version's validity in the terms of the table's events (see :func:`validity_time`): when
#: it came into force and when it stopped (null while current), last in a history row.
VALID_FROM = "__valid_from"
VALID_TO = "__valid_to"
#: Columns of a history log row besides the key and row columns.
LOG_METADATA = (*METADATA_COLUMNS, "_unavailable")
#: What :func:`history_changes` asks for a row: ``insert``, ``update`` or ``delete``.
ACTION = "_action"
#: Column metadata that marks the key columns of the history log.
KEY_MARK = "lakehouse.key"


def tracked_columns(spec: TableSpec, columns: Sequence[str]) -> list[str]:
    """The columns whose change starts a new version.

    ``track_history_column_list`` if set, else every one of ``columns`` (the table's key and
    row columns) but those in ``track_history_except_column_list``.

    Raises:
        ConfigError: a listed column is not one of ``columns``.
    """
    included, excluded = spec.track_history_column_list, spec.track_history_except_column_list
    listed = [*(included or ()), *(excluded or ())]
    unknown = [name for name in listed if name not in columns]
    if unknown:
        setting = "track_history_column_list" if included else "track_history_except_column_list"
        raise ConfigError(
            f"Table {spec.name!r}: {setting} names column(s) {', '.join(unknown)} that the "
            f"table does not have; its columns are {', '.join(columns)}."
        )
    if included:
        return list(included)
    return [name for name in columns if name not in (excluded or ())]


def log_events(valid: DataFrame, keys: Sequence[str], columns: Sequence[str]) -> DataFrame:
    """History log rows for a batch's valid events (changes and truncates, as parsed).

    Columns: ``keys`` (marked with :data:`KEY_MARK` metadata, so a later batch without keyed
    events still knows them), the row ``columns`` and :data:`LOG_METADATA`; TOAST placeholders
    are kept as they came, since their value depends on the events before them.
    """
    marked = [F.col(key).alias(key, metadata={KEY_MARK: True}) for key in keys]
    return valid.select(*marked, *columns, *LOG_METADATA)


def snapshot_end_truncates(
    valid: DataFrame, keys: Sequence[str], columns: Sequence[str]
) -> DataFrame | None:
    """History log rows for the ends of full snapshots among a batch's ``valid`` events
    (``resnapshot = "full"``; :mod:`silver.snapshots`), in :func:`log_events`' columns.

    Each end is also a truncate placed just before its snapshot's reads, as in silver: a row
    with ``_op`` ``t``, null keys and row columns, the end's ``_sequence``, commit time and
    topic, and bronze partition and offset :data:`~silver.snapshots.BEFORE_READS`, so its
    order is below every read at the same position. None when the events carry no end marker
    (the table is not ``resnapshot = "full"``)."""
    if SNAPSHOT_END not in valid.columns:
        return None

    def typed(name: str, value: object) -> Column:
        return F.lit(value).cast(valid.schema[name].dataType)

    blank = {name: typed(name, None) for name in (*keys, *columns, "_unavailable")}
    before = {name: typed(name, BEFORE_READS) for name in ("_bronze_partition", "_bronze_offset")}
    ends = valid.where(F.col(SNAPSHOT_END)).withColumns({**blank, **before, OP: F.lit(TRUNCATE_OP)})
    return log_events(ends, keys, columns)


def key_columns(schema: StructType) -> list[str]:
    """The key columns of a history log schema (see :func:`log_events`)."""
    return [f.name for f in schema.fields if f.metadata.get(KEY_MARK)]


def touched_keys(events: DataFrame, keys: Sequence[str], history: DataFrame | None) -> DataFrame:
    """The distinct keys whose history a batch of log ``events`` can change.

    The keys of its change events, and, when ``history`` (the history table's rows) is given
    because the batch has truncates, the keys with a version open at one of them.
    """
    is_truncate = F.col(OP) == TRUNCATE_OP
    found = []
    if set(keys) <= set(events.columns):  # else the batch had no keyed (change) event
        found.append(events.where(~is_truncate).select(*keys))
    if history is not None:
        at = events.where(is_truncate).select(order_of().alias("_at"))
        spans = (F.col(START_AT) < F.col("_at")) & (
            F.col(END_AT).isNull() | (F.col(END_AT) > F.col("_at"))
        )
        found.append(history.crossJoin(at).where(spans).select(*keys))
    return reduce(DataFrame.unionByName, found).distinct()


def validity_time(order_columns: Sequence[str]) -> Column:
    """What a history's validity columns are measured in, over parsed events or log rows: the
    value of the first ``sequence_by`` column (``order_columns``: the spec's, empty if none),
    in its own type, else the change's source commit time (``_source_ts``: Debezium's
    ``source.ts_ms``, a timestamp)."""
    if order_columns:
        return F.col("_sequence")[order_columns[0]]
    return F.col("_source_ts")


def history_versions(
    log: DataFrame,
    keys: Sequence[str],
    tracked: Sequence[str],
    order_columns: Sequence[str] = (),
) -> DataFrame:
    """One row per version of every key in ``log``.

    ``log`` has the history log's columns (keys, row columns, :data:`LOG_METADATA`) and holds
    *every* change event of its keys plus the table's truncates (``_op`` ``t``, null keys).
    Per key, in order: an upsert whose ``tracked`` values (TOAST placeholders resolved) differ
    from the previous upsert's, or that follows a delete or truncate, starts a version; any other
    upsert updates the version in place. A version ends at the order of the first event after
    its last upsert (the next version's start, a delete or a truncate; a full snapshot's end is
    a truncate for the keys its snapshot did not read, see :func:`_unless_read`); a version
    with no later event is current.

    Returns: keys, row columns and metadata of the version's last upsert, then ``__start_at``
    (order of its first upsert), ``__end_at`` (null while current), ``__is_current``,
    ``__valid_from`` and ``__valid_to``: the :func:`validity_time` (``order_columns``: the
    spec's) of the events at ``__start_at`` and ``__end_at``, each raised to the latest one of
    the key's events and of the truncates that ended one of its versions, up to it, so a
    key's validities never overlap even where commit times step back (a sequence_by value
    never does); null where no event so far has one. A truncate that ends none of the key's
    versions leaves them as they are, so the validities of a key depend only on the key's
    events and the truncates :func:`touched_keys` finds for it.
    """
    columns = [c for c in log.columns if c not in keys and c not in LOG_METADATA]
    is_truncate = F.col(OP) == TRUNCATE_OP
    changes = log.where(~is_truncate)
    every_key = changes.select(*keys).distinct()
    truncates = _unless_read(
        every_key.crossJoin(log.where(is_truncate).select(*LOG_METADATA)), changes, keys
    )
    stream = changes.unionByName(truncates, allowMissingColumns=True).withColumns(
        {"_order": order_of(), "_upsert": F.col(OP).isin(*UPSERT_OPS)}
    )
    by_key = Window.partitionBy(*keys).orderBy("_order")
    so_far = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    # A truncate counts for a key's validity only where it ends one of its versions (the
    # event before it is an upsert), so a truncate that arrives late changes the validity of
    # no key but those it ends, the keys :func:`touched_keys` rebuilds.
    ending = F.coalesce(F.lag("_upsert").over(by_key), F.lit(False))
    raised = stream.withColumn("_raises", ~is_truncate | ending)
    # A segment is a run of events after a delete or truncate: TOAST looks back only within it.
    segmented = raised.withColumns(
        {
            "_segment": F.count_if(~F.col("_upsert")).over(so_far),
            VALID_FROM: F.max(F.when(F.col("_raises"), validity_time(order_columns))).over(so_far),
        }
    )
    in_segment = (
        Window.partitionBy(*keys, "_segment")
        .orderBy("_order")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    strings = [
        f.name
        for f in log.schema.fields
        if f.name in columns and isinstance(f.dataType, StringType)
    ]
    resolved = segmented.withColumns({name: _resolve_toast(name, in_segment) for name in strings})

    same = reduce(
        Column.__and__,
        [F.col(name).eqNullSafe(F.lag(name).over(by_key)) for name in tracked],
        F.lit(True),
    )
    continues = F.coalesce(F.lag("_upsert").over(by_key), F.lit(False)) & same
    marked = resolved.withColumns(
        {
            "_starts": F.col("_upsert") & ~continues,
            "_next": F.lead("_order").over(by_key),
            VALID_TO: F.lead(VALID_FROM).over(by_key),
        }
    )
    numbered = marked.withColumn("_version", F.count_if("_starts").over(so_far))
    latest = F.max_by(F.struct(*columns, *METADATA_COLUMNS, "_next", VALID_TO), "_order")
    versions = (
        numbered.where("_upsert")
        .groupBy(*keys, "_version")
        .agg(
            F.min("_order").alias(START_AT),
            F.min_by(VALID_FROM, "_order").alias(VALID_FROM),
            latest.alias("_latest"),
        )
    )
    return versions.select(
        *keys,
        *[F.col(f"_latest.{name}").alias(name) for name in (*columns, *METADATA_COLUMNS)],
        START_AT,
        F.col("_latest._next").alias(END_AT),
        F.col("_latest._next").isNull().alias(IS_CURRENT),
        VALID_FROM,
        F.col(f"_latest.{VALID_TO}").alias(VALID_TO),
    )


def _unless_read(truncates: DataFrame, changes: DataFrame, keys: Sequence[str]) -> DataFrame:
    """Per key, the table's ``truncates`` but the ends of full snapshots that read the key.

    A full snapshot's end (:func:`snapshot_end_truncates`: bronze partition
    :data:`~silver.snapshots.BEFORE_READS`) ends the versions of the keys its snapshot did
    not read; a key it read (a read, ``_op`` ``r``, at the end's ``_sequence``: a full
    snapshot reads every row at one position) goes on in the version its read continues or
    starts, as after any upsert."""
    reads = changes.where(F.col(OP) == "r").select(*keys, F.col("_sequence").alias("_read_at"))
    is_end = F.col("t._bronze_partition") == BEFORE_READS
    read_by_end = reduce(
        Column.__and__,
        [F.col(f"t.{key}").eqNullSafe(F.col(f"r.{key}")) for key in keys],
        is_end & (F.col("t._sequence") == F.col("_read_at")),
    )
    return truncates.alias("t").join(reads.alias("r"), read_by_end, "left_anti")


def history_changes(desired: DataFrame, existing: DataFrame, keys: Sequence[str]) -> DataFrame:
    """The writes that turn ``existing`` history rows into ``desired`` ones (same keys).

    A row is identified by its keys and ``__start_at``. Returns the columns of ``desired`` and
    ``_action``: ``insert`` (only desired), ``update`` (both, some value differs) or
    ``delete`` (only existing; its other columns are null). Equal rows are left out, so
    closed versions that did not change are never rewritten.
    """
    identity = [*keys, START_AT]
    values = [c for c in desired.columns if c not in identity]
    want = desired.select(*identity, F.struct(*values).alias("_want"))
    have = existing.select(*identity, F.struct(*values).alias("_have"))
    action = (
        F.when(F.col("_have").isNull(), "insert")
        .when(F.col("_want").isNull(), "delete")
        .when(~F.col("_want").eqNullSafe(F.col("_have")), "update")
    )
    return (
        want.join(have, identity, "full_outer")
        .select(*identity, "_want.*", action.alias(ACTION))
        .where(F.col(ACTION).isNotNull())
        .select(*desired.columns, ACTION)
    )


def _resolve_toast(name: str, in_segment: WindowSpec) -> Column:
    """The column's value, or for a TOAST placeholder the latest real value of the segment."""
    unavailable = F.coalesce(F.col("_unavailable"), F.array().cast("array<string>"))
    real = F.when(
        F.col("_upsert") & ~F.array_contains(unavailable, name), F.struct(F.col(name).alias("v"))
    )
    latest_real = F.last(real, ignorenulls=True).over(in_segment)
    return F.coalesce(latest_real, F.struct(F.col(name).alias("v")))["v"]
