"""Local servers and workloads for tests, demos and scripts, not the product: a Kafka-protocol
broker, a throwaway PostgreSQL, the real Debezium capture, the PostgreSQL workload and its
comparison with silver. Only the command line's demo and workload commands use them in the
product (an import-linter contract keeps it so)."""
