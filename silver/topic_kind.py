"""What a topic without a declaration holds, read from its records: Debezium changes (silver
applies them with the Debezium defaults) or plain events (silver cannot guess their keys and
order, so they stay in bronze until the topic is declared)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

#: How many of a topic's JSON object values decide what it holds.
SAMPLE_RECORDS = 100
#: Fields of a Debezium change event (top level, or inside the converter's ``payload``); an
#: event stream's records have none of them.
CHANGE_FIELDS = ("op", "before", "after")


def holds_plain_events(bronze: DataFrame) -> bool:
    """Whether bronze rows of one topic (``value`` bytes) hold plain events: among the first
    :data:`SAMPLE_RECORDS` values that are JSON objects there is one and none is a change
    event (has a field of :data:`CHANGE_FIELDS`, at the top or in ``payload``). Tombstones,
    values that are not JSON objects and an empty topic say nothing: such a topic is read as
    Debezium, as before (its unreadable records go to quarantine)."""
    text = F.col("value").cast("string")
    keys = F.json_object_keys(text)
    payload_keys = F.json_object_keys(F.get_json_object(text, "$.payload"))
    change = F.lit(False)
    for name in CHANGE_FIELDS:
        change = change | F.coalesce(
            F.array_contains(keys, name) | F.array_contains(payload_keys, name), F.lit(False)
        )
    sample = bronze.where(keys.isNotNull()).select(change.alias("change")).limit(SAMPLE_RECORDS)
    found = sample.agg(
        F.count(F.lit(1)).alias("objects"), F.max(F.col("change").cast("int")).alias("changes")
    ).first()
    return found is not None and found.objects > 0 and not found.changes
