"""Gold: windowed aggregates over silver entities, registered for SQL as ``gold.<name>``."""
