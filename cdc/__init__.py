"""Sources: the Kafka record format, the file source, Debezium parsing, the workload generator."""
