"""The ground floor of cdc-lakehouse: what every layer uses and nothing that imports a layer.

Errors, settings, identifiers, the warehouse layout, the Spark session factory, streaming
helpers, the condition grammar and generic Delta I/O (see docs/architecture.md).
"""
