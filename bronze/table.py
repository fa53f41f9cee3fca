"""The bronze table schema and its creation."""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType, TimestampType

from cdc.files import SOURCED_KAFKA_SCHEMA
from lakehouse_core.delta_io import table_property
from lakehouse_core.errors import ConfigError
from lakehouse_core.identifiers import table_name_for_topic, topic_collision_message

#: The id of the bronze query's micro-batch that appended a record.
INGEST_BATCH = "_ingest_batch"

BRONZE_SCHEMA = StructType(
    [
        *SOURCED_KAFKA_SCHEMA.fields,
        StructField("_ingested_at", TimestampType()),
        StructField(INGEST_BATCH, LongType()),
    ]
)


#: Table property holding the topic a bronze table was created for.
TOPIC_PROPERTY = "lakehouse.topic"


def ensure_bronze_table(spark: SparkSession, path: str, topic: str) -> None:
    """Create the append-only bronze table for ``topic`` at ``path`` unless it exists.

    Raises:
        ConfigError: the table exists and holds another topic (their names map to one table).
    """
    if DeltaTable.isDeltaTable(spark, path):
        held = bronze_topic(spark, path)
        if held and held != topic:
            raise ConfigError(topic_collision_message(held, topic, table_name_for_topic(topic)))
        return
    (
        DeltaTable.createIfNotExists(spark)
        .location(path)
        .addColumns(BRONZE_SCHEMA)
        .property("delta.appendOnly", "true")
        .property(TOPIC_PROPERTY, topic)
        .execute()
    )


def bronze_topic(spark: SparkSession, path: str) -> str:
    """The topic a bronze table holds (from its table property)."""
    return table_property(spark, path, TOPIC_PROPERTY) or ""


def with_ingestion_metadata(records: DataFrame, batch_id: int) -> DataFrame:
    """Add ingestion time and micro-batch id to Kafka-shaped rows (pure transform)."""
    return records.select(
        *SOURCED_KAFKA_SCHEMA.fieldNames(),
        F.current_timestamp().alias("_ingested_at"),
        F.lit(batch_id).cast("bigint").alias(INGEST_BATCH),
    )
