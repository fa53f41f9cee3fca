"""The bronze job: one streaming query from a source into one Delta table per topic."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from bronze.table import ensure_bronze_table, with_ingestion_metadata
from core.identifiers import bronze_tables_for_topics
from core.layout import Warehouse
from core.streaming import Trigger, idempotent_write_options, query_app_id

BRONZE_QUERY = "bronze"

#: Told the records of each topic in each micro-batch the bronze query appended.
TopicListener = Callable[[Mapping[str, int]], None]


def start_bronze(
    source: DataFrame,
    warehouse: Warehouse,
    trigger: Trigger,
    listener: TopicListener | None = None,
) -> StreamingQuery:
    """Start streaming ``source`` (Kafka-shaped rows) into ``<warehouse>/bronze/<topic>``;
    ``listener`` is told each micro-batch's records per topic (in this Python process)."""
    checkpoint = warehouse.checkpoint(BRONZE_QUERY)
    writer = (
        source.writeStream.queryName(BRONZE_QUERY)
        .option("checkpointLocation", checkpoint)
        .foreachBatch(
            append_batch_by_topic(
                warehouse, query_app_id(source.sparkSession, checkpoint), listener
            )
        )
    )
    return trigger.apply(writer).start()


def append_batch_by_topic(
    warehouse: Warehouse, app_id: str, listener: TopicListener | None = None
) -> Callable[[DataFrame, int], None]:
    """A foreachBatch function appending each topic's rows to its bronze table exactly once."""

    checked: set[str] = set()  # topics whose table was created or checked by this query

    def append(batch: DataFrame, batch_id: int) -> None:
        rows = with_ingestion_metadata(batch, batch_id).persist()
        try:
            counts = {r.topic: int(r["count"]) for r in rows.groupBy("topic").count().collect()}
            tables = bronze_tables_for_topics(list(counts))
            for topic in sorted(counts):
                path = warehouse.table("bronze", tables[topic])
                if topic not in checked:
                    ensure_bronze_table(rows.sparkSession, path, topic)
                    checked.add(topic)
                (
                    rows.where(F.col("topic") == topic)
                    .write.format("delta")
                    .mode("append")
                    .options(**idempotent_write_options(app_id, batch_id))
                    .save(path)
                )
        finally:
            rows.unpersist()
        if listener is not None:
            listener(counts)

    return append
