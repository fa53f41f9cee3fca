"""One entity key: its columns, a validated value, and the bronze records that belong to it.

A bronze record belongs to key K when the silver job files it under K: its Debezium record key
(with or without the ``schema``/``payload`` wrapper), or for tables with configured ``keys`` and
for event streams the key columns of its row. A Debezium record that has no usable record key
also belongs to K when its ``after`` (else ``before``) image carries K; such records are the
ones silver quarantines as ``missing key``. Truncate events carry no row and belong to no key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from lakehouse_core.config import TableSpec
from lakehouse_core.errors import ConfigError
from silver.parse import as_text, discover_layout, parse_changes

KeyValue = str | int | float | bool

#: Bronze coordinates, as named in parsed events and in bronze rows.
EVENT_COORDINATES = ("_bronze_partition", "_bronze_offset")


@dataclass(frozen=True)
class EntityKey:
    """One key value of an entity: column name -> value, with each column's silver type."""

    values: Mapping[str, KeyValue]
    types: Mapping[str, DataType]

    def matches(self, prefix: str = "") -> Column:
        """True for rows whose key columns (optionally ``prefix``-qualified) equal this key."""
        return reduce(
            lambda a, b: a & b,
            [F.col(f"{prefix}{name}") == self.literal(name) for name in self.values],
        )

    def describe(self) -> str:
        return ", ".join(f"{name}={value!r}" for name, value in self.values.items())

    def literal(self, name: str) -> Column:
        """The value of key column ``name`` as a literal of its type (null if it does not fit)."""
        return F.lit(self.values[name]).try_cast(self.types[name])


def parse_key(text: str) -> dict[str, KeyValue]:
    """A ``--key`` argument: a JSON object of key column -> scalar value.

    Raises:
        ConfigError: not JSON, not an object, empty, or a value that is null, a list or an object.
    """
    example = "e.g. '{\"id\": 42}'"
    try:
        document = json.loads(text)
    except ValueError as error:
        raise ConfigError(
            f"--key is not valid JSON ({error}); write a JSON object, {example}."
        ) from error
    if not isinstance(document, dict) or not document:
        raise ConfigError(f"--key must be a JSON object of key columns and values, {example}.")
    for name, value in document.items():
        if not isinstance(value, str | int | float | bool):
            raise ConfigError(
                f"--key value of {name!r} is {json.dumps(value)}; use a string or number."
            )
    return document


def entity_key(
    spark: SparkSession, bronze: DataFrame, spec: TableSpec, values: Mapping[str, KeyValue]
) -> EntityKey:
    """Check ``values`` against the entity's key columns, as silver reads them from ``bronze``
    (configured ``keys``, else the fields of the Debezium record keys).

    Raises:
        ConfigError: the columns differ from the key columns, or a value does not fit its type.
    """
    texts = as_text(bronze)
    layout = discover_layout(texts, spec)
    names = list(spec.keys or layout.key_names)
    if set(values) != set(names):
        raise ConfigError(
            f"--key for table {spec.name!r} must name exactly its key column(s) "
            f"{', '.join(names) or '(none found in bronze)'}; got {', '.join(values)}."
        )
    schema = parse_changes(texts, spec, layout).schema
    key = EntityKey({name: values[name] for name in names}, {n: schema[n].dataType for n in names})
    casts = spark.range(1).select(*[key.literal(n).alias(n) for n in names]).first()
    assert casts is not None
    for name in names:
        if casts[name] is None:
            raise ConfigError(
                f"--key value {values[name]!r} of column {name!r} is not a valid "
                f"{key.types[name].simpleString()}."
            )
    return key


def records_of_key(bronze: DataFrame, spec: TableSpec, key: EntityKey) -> DataFrame:
    """Distinct ``(partition, offset)`` of the bronze records that belong to ``key``."""
    events = _parse(bronze, spec)
    if not set(key.values) <= set(events.columns):  # no record has a key (empty table)
        return bronze.select("partition", "offset").limit(0)
    by_key = events.where(key.matches()).select(*EVENT_COORDINATES)
    if spec.format == "debezium" and not spec.keys:
        keyless = events.where(_any_null(list(key.values))).select(*EVENT_COORDINATES)
        by_image = (
            _parse(bronze, replace(spec, keys=tuple(key.values)))
            .where(key.matches())
            .select(*EVENT_COORDINATES)
            .join(keyless, list(EVENT_COORDINATES), "left_semi")
        )
        by_key = by_key.unionByName(by_image)
    return by_key.distinct().withColumnsRenamed(
        {"_bronze_partition": "partition", "_bronze_offset": "offset"}
    )


def coordinates_condition(
    coordinates: Sequence[tuple[int, int]], partition: str = "partition", offset: str = "offset"
) -> Column:
    """True for rows at one of ``coordinates`` (``(partition, offset)`` pairs)."""
    by_partition: dict[int, list[int]] = {}
    for part, off in coordinates:
        by_partition.setdefault(part, []).append(off)
    if not by_partition:
        return F.lit(False)
    return reduce(
        lambda a, b: a | b,
        [
            (F.col(partition) == part) & F.col(offset).isin(sorted(offsets))
            for part, offsets in sorted(by_partition.items())
        ],
    )


def _parse(bronze: DataFrame, spec: TableSpec) -> DataFrame:
    texts = as_text(bronze)
    return parse_changes(texts, spec, discover_layout(texts, spec))


def _any_null(columns: list[str]) -> Column:
    return reduce(lambda a, b: a | b, [F.col(c).isNull() for c in columns])
