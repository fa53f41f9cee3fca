"""Core of cdc-lakehouse: configuration, the Spark session factory and the command line."""

__version__ = "0.1.0"
