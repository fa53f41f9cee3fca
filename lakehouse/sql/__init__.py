"""SQL over the warehouse's tables: one checked statement in a session (:mod:`.session`), and
Spark's Thrift JDBC/ODBC server (:mod:`.serve`). The statement check itself is the ground's
(:mod:`lakehouse_core.sql_guard`)."""
