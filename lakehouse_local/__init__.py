"""Local servers and workloads for tests, the demo and scripts, outside the product's wheel: a
Kafka-protocol broker, a throwaway PostgreSQL, the real Debezium capture, the PostgreSQL workload
and its comparison with silver. The product imports nothing of it (an import-linter contract)."""
