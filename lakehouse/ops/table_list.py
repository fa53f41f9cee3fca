"""The tables of a warehouse with their layer, rows, version and freshness, read from their
Delta logs without Spark (as ``lakehouse status`` reads them: row counts from the log's per-file
statistics, the newest record's time from their maxima, never a scan of the data)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from lakehouse.ops.status import _delta, _files, _names, _newest, _rows
from lakehouse_core.layout import LAYERS, Layer, Warehouse

#: The column holding the source time of a layer's records: bronze keeps the time the record
#: reached the source (Kafka's, or the file's), silver the change's commit time in the
#: source database. Gold tables hold aggregates: no such time.
RECORD_TIME: dict[Layer, str] = {"bronze": "timestamp", "silver": "_source_ts"}


@dataclass(frozen=True)
class TableInfo:
    """One Delta table of a warehouse: ``name`` as SQL names it (``silver.orders``), its
    ``layer``, ``rows``, newest ``version``, when that version was committed
    (``last_modified``), and ``freshness_seconds``: how old its newest record is (its source
    time; None for gold, or a table without rows)."""

    name: str
    layer: Layer
    rows: int
    version: int
    last_modified: datetime
    freshness_seconds: float | None


def warehouse_tables(warehouse: Warehouse, now: datetime) -> list[TableInfo]:
    """Every Delta table of the bronze, silver and gold layers of ``warehouse`` at ``now``
    (timezone-aware), in layer order, then by name (empty: none yet).

    Raises:
        ConfigError: the warehouse is at a URI whose file system ``pyarrow`` cannot open.
    """
    found = []
    for layer in LAYERS:
        layer_dir = warehouse.table(layer, "x").rpartition("/")[0]
        for name in sorted(_names(layer_dir)):
            table = None if name.startswith(".") else _delta(f"{layer_dir}/{name}")
            if table is None:
                continue
            files = _files(table)
            column = RECORD_TIME.get(layer)
            newest = None if column is None else _newest(table, files, column)
            commit = table.history(1)[0]
            found.append(
                TableInfo(
                    name=f"{layer}.{name}",
                    layer=layer,
                    rows=_rows(table, files),
                    version=table.version(),
                    last_modified=datetime.fromtimestamp(int(commit["timestamp"]) / 1000, UTC),
                    freshness_seconds=None if newest is None else (now - newest).total_seconds(),
                )
            )
    return found
