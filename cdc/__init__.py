"""Sources: the Kafka record format, the file source, Debezium parsing and the workload generator."""
