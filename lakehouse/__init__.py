"""The roof of cdc-lakehouse: the command line, pipeline wiring, the demo and the operations
(replay, forget, maintain, verify) over the layers below (see docs/architecture.md)."""

__version__ = "0.1.0"
