"""The pipeline page (``lakehouse status --html FILE``, served by ``lakehouse ui``): one
self-contained HTML file (inline SVG and CSS, no script, nothing loaded from anywhere) that
draws the pipeline as a graph.

Every table is a node (bronze, silver, gold with the alerts, baselines and late changes, SQL
models and the quarantine, with rows, freshness, quarantined records, failed expectations, the
last micro-batch and gold's late changes; a table no current declaration makes marked
orphaned), every flow an edge (bronze -> silver -> gold, inputs -> model, silver -> quarantine;
the last batch's input rows and how far the flow lags), and each flow has a chart of its
micro-batches' durations and input rows from ``system.event_log``. It is drawn from the object
``lakehouse status --json`` prints (:func:`lakehouse.ops.status.status_json`): each node and
edge carries ``data-*`` attributes with the JSON values it shows.
"""

from __future__ import annotations

import html
import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from lakehouse_core.errors import ConfigError
from lakehouse_core.layout import QUARANTINE_TABLE, Warehouse

#: Micro-batches per flow drawn in its chart (the newest ones).
CHART_BATCHES = 40
NODE_W, NODE_H, GAP_X, GAP_Y, MARGIN = 250, 112, 190, 26, 16
CHART_W, CHART_H, CHART_PAD = 420, 150, 34
LAYER_COLOURS = {
    "bronze": "#b87333",
    "silver": "#8a99a8",
    "gold": "#c9a227",
    "quarantine": "#c0392b",
    "model": "#d4a72c",
    "orphaned": "#9aa3ad",
}
#: The column of the graph each kind of node is drawn in.
COLUMNS = {"bronze": 0, "silver": 1, "gold": 2, "model": 2, "quarantine": 2}
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1d2733; background: #f7f8fa; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 8px; }
.meta { color: #55606e; margin-bottom: 16px; } .failing { color: #b42318; }
svg text { font: 12px system-ui, sans-serif; fill: #1d2733; }
svg .title { font-weight: 600; font-size: 13px; }
svg .edge { fill: none; stroke: #6b7785; stroke-width: 2; }
svg .edge.quarantine { stroke: #c0392b; stroke-dasharray: 5 4; }
svg .label rect { fill: #ffffff; stroke: #c9d1da; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
.chart { width: 440px; background: #fff; border: 1px solid #d5dbe2; border-radius: 6px;
  padding: 8px; }
.chart h3 { font-size: 13px; margin: 0 0 4px; }
.legend { font-size: 12px; color: #55606e; }
.bar { fill: #7fa7d9; } .line { fill: none; stroke: #d9822b; stroke-width: 2; }
"""


def render_pipeline_page(
    status: dict[str, Any], batches: list[dict[str, Any]], refresh_seconds: float | None = None
) -> str:
    """The page for ``status`` (the ``status --json`` object) and ``batches`` (event-log rows
    with ``query``, ``event``, ``batch_id``, ``timestamp``, ``input_rows``, ``duration_ms``;
    only ``progress`` rows are drawn), as HTML text; with ``refresh_seconds``, the browser
    loads it again at that interval (``lakehouse ui``)."""
    nodes, edges = _graph(status)
    progress = [b for b in batches if b.get("event", "progress") == "progress"]
    failing = [f"{f['table']}: {f['error']}" for f in status.get("failing") or []]
    run = status.get("running")
    state = "not running" if run is None else ("running" if run.get("alive") else "stopped")
    charts = [
        _chart(flow, query, [b for b in progress if b.get("query") == query])
        for flow, query in _flows(status, {b.get("query") for b in progress})
    ]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        ""
        if refresh_seconds is None
        else f'<meta http-equiv="refresh" content="{refresh_seconds:g}">',
        f"<title>Pipeline: {_e(status.get('warehouse', ''))}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Pipeline {_e(status.get('warehouse', ''))}</h1>",
        f'<div class="meta" id="meta" data-at="{_e(status.get("at"))}" data-state="{state}"'
        f' data-event-log-rows="{status.get("event_log_rows", 0)}">'
        f"status at {_e(_time(status.get('at')))} &middot; pipeline {state} &middot; "
        f"event log {_n(status.get('event_log_rows', 0))} rows</div>",
        *(f'<div class="failing">failing: {_e(line)}</div>' for line in failing),
        _graph_svg(nodes, edges),
        "<h2>Micro-batches per flow (system.event_log)</h2>",
        '<div class="legend">bars: input rows per batch; line: batch duration</div>',
        f'<div class="charts">{"".join(charts)}</div>',
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_pipeline_page(warehouse: Warehouse, status: dict[str, Any], target: Path) -> Path:
    """Write the page of ``status`` (``status --json``'s object for ``warehouse``) to
    ``target``, the batches read from the warehouse's event log without Spark; ``target``."""
    target.write_text(render_pipeline_page(status, read_batches(warehouse)), encoding="utf-8")
    return target


def pipeline_server(page: Callable[[], str], host: str, port: int) -> ThreadingHTTPServer:
    """An HTTP server on ``host``:``port`` (0: any free port) answering ``GET /`` with a page
    made by ``page()`` at each request (any other path: 404); call ``serve_forever``.

    Raises:
        ConfigError: ``host`` is not a loopback address (the page is for this machine).
    """
    try:
        loopback = ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except OSError as error:
        raise ConfigError(f"--host {host} does not resolve ({error}); use 127.0.0.1.") from None
    if not loopback:
        raise ConfigError(
            f"--host {host} is not a loopback address: the pipeline page is served to this "
            "machine only; use 127.0.0.1 (or localhost) and forward the port if others need it."
        )

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/":
                self.send_error(404, "the pipeline page is at /")
                return
            body = page().encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a refreshing page would log a line every few seconds."""

    return ThreadingHTTPServer((host, port), Handler)


def read_batches(warehouse: Warehouse) -> list[dict[str, Any]]:
    """The event log's ``progress`` rows (query, batch id, start time in ISO 8601, input
    rows, duration), read with ``deltalake``; [] where there is no event log yet."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(warehouse.event_log):
        return []
    columns = ["query", "event", "batch_id", "timestamp", "input_rows", "duration_ms"]
    rows = DeltaTable(warehouse.event_log).to_pyarrow_table(columns=columns).to_pylist()
    return [
        {**row, "timestamp": row["timestamp"].isoformat() if row["timestamp"] else None}
        for row in rows
        if row["event"] == "progress"
    ]


class _Node:
    """A table of the graph: its layer, name, the lines it shows and their JSON values."""

    def __init__(
        self,
        layer: str,
        name: str,
        fields: Sequence[tuple[str, str, Any]],
        column: int | None = None,
    ) -> None:
        self.layer, self.name, self.fields = layer, name, list(fields)
        self.column = COLUMNS[layer] if column is None else column
        self.x = self.y = 0

    def anchor(self, side: str) -> tuple[float, float]:
        return (self.x + (NODE_W if side == "out" else 0), self.y + NODE_H / 2)


def _graph(status: dict[str, Any]) -> tuple[list[_Node], list[dict[str, Any]]]:
    """The nodes (laid out in columns: bronze, silver, gold and quarantine) and edges."""
    quality = _failed_expectations(status.get("quality") or [])
    bronze_batch = status.get("bronze_last_batch")
    nodes: dict[str, _Node] = {}
    edges: list[dict[str, Any]] = []
    silver = status.get("silver") or []
    for entry in silver:
        if entry["bronze_table"] not in nodes:
            nodes[entry["bronze_table"]] = _Node(
                "bronze",
                entry["bronze_table"],
                [
                    ("records", f"records {_n(entry['bronze_records'])}", entry["bronze_records"]),
                    ("version", f"version {_n(entry['bronze_version'])}", entry["bronze_version"]),
                    ("newest_record", f"newest {_time(entry['newest_record'])}", None),
                    ("last_batch", f"last batch {_batch(bronze_batch)}", _id(bronze_batch)),
                ],
            )
    for entry in silver:
        failed, expectations = quality.get(entry["table"], (0, 0))
        nodes[entry["table"]] = _Node(
            "silver",
            entry["table"],
            [
                ("rows", f"rows {_n(entry['rows'])}", entry["rows"]),
                (
                    "freshness_seconds",
                    f"freshness {_seconds(entry['freshness_seconds'])}",
                    entry["freshness_seconds"],
                ),
                ("quarantined", f"quarantined {_n(entry['quarantined'])}", entry["quarantined"]),
                ("failed_expectations", f"expectations failed {failed} of {expectations}", failed),
                (
                    "last_batch",
                    f"last batch {_batch(entry['last_batch'])}",
                    _id(entry["last_batch"]),
                ),
            ],
        )
        edges.append(
            _edge(entry["bronze_table"], entry["table"], entry, "records_behind", "records")
        )
    order = {entry["table"]: i for i, entry in enumerate(silver)}  # gold beside its input
    for entry in sorted(status.get("gold") or [], key=lambda g: order.get(g["input"], 0)):
        failed, expectations = quality.get(entry["table"], (0, 0))
        nodes[entry["table"]] = _Node(
            "gold",
            entry["table"],
            [
                ("rows", f"rows {_n(entry['rows'])}", entry["rows"]),
                (
                    "late_changes",
                    f"late changes {_n(entry['late_changes'])}",
                    entry["late_changes"],
                ),
                ("failed_expectations", f"expectations failed {failed} of {expectations}", failed),
                ("watermark", f"watermark {_time(entry['watermark'])}", None),
                (
                    "last_batch",
                    f"last batch {_batch(entry['last_batch'])}",
                    _id(entry["last_batch"]),
                ),
            ],
        )
        edges.append(_edge(entry["input"], entry["table"], entry, "versions_behind", "commits"))
    for entry in status.get("models") or []:
        behind = entry["inputs_behind"]
        nodes[entry["table"]] = _Node(
            "model",
            entry["table"],
            [
                ("kind", "SQL model", None),
                ("rows", f"rows {_n(entry['rows'])}", entry["rows"]),
                ("inputs_behind", f"behind {'-' if behind is None else _n(behind)}", behind),
                (
                    "last_batch",
                    f"last refresh {_batch(entry['last_batch'])}",
                    _id(entry["last_batch"]),
                ),
            ],
        )
        for source in entry["inputs"]:
            if source in nodes:
                edges.append(_edge(source, entry["table"], entry, "inputs_behind", "commits"))
    for entry in status.get("other_gold") or []:
        nodes[entry["table"]] = _Node(
            "gold",
            entry["table"],
            [
                ("what", entry["what"], None),
                ("rows", f"rows {_n(entry['rows'])}", entry["rows"]),
            ],
        )
    for entry in status.get("orphaned") or []:
        nodes[entry["table"]] = _Node(
            "orphaned",
            entry["table"],
            [
                ("orphaned", "orphaned: no declaration", True),
                ("rows", f"rows {_n(entry['rows'])}", entry["rows"]),
            ],
            column=COLUMNS.get(entry["table"].partition(".")[0], 2),
        )
    if silver:
        quarantine = f"silver.{QUARANTINE_TABLE}"
        total = sum(entry["quarantined"] for entry in silver)
        nodes[quarantine] = _Node("quarantine", quarantine, [("rows", f"rows {_n(total)}", total)])
        for entry in silver:
            edges.append(
                {
                    "source": entry["table"],
                    "target": quarantine,
                    "kind": "quarantine",
                    "label": (f"{_n(entry['quarantined'])} quarantined",),
                    "values": {"quarantined": entry["quarantined"]},
                }
            )
    _layout(list(nodes.values()))
    for edge in edges:
        edge["from"], edge["to"] = nodes[edge["source"]], nodes[edge["target"]]
    return list(nodes.values()), edges


def _edge(
    source: str, target: str, entry: dict[str, Any], behind: str, unit: str
) -> dict[str, Any]:
    """A flow's edge: the last batch's input rows of ``target``'s query and its lag."""
    rows = (entry.get("last_batch") or {}).get("input_rows")
    return {
        "source": source,
        "target": target,
        "kind": "flow",
        "label": (f"{_n(rows)} rows/batch", f"lag {_n(entry[behind])} {unit}"),
        "values": {"input_rows": rows, behind: entry[behind]},
    }


def _layout(nodes: list[_Node]) -> None:
    """Columns: bronze, silver, then gold (SQL models after the declarations) above the
    quarantine; orphaned tables under their layer's; rows top down."""
    filled = [0, 0, 0]
    for node in nodes:
        column = node.column
        node.x = MARGIN + column * (NODE_W + GAP_X)
        node.y = MARGIN + filled[column] * (NODE_H + GAP_Y)
        filled[column] += 1


def _graph_svg(nodes: list[_Node], edges: list[dict[str, Any]]) -> str:
    width = MARGIN * 2 + 3 * NODE_W + 2 * GAP_X
    height = MARGIN * 2 + max((n.y for n in nodes), default=0) + NODE_H
    # Curves under the nodes; the labels of the edges (in their edge's group) above them.
    drawn = [_edge_svg(e, labelled=False) for e in edges] + [_node_svg(n) for n in nodes]
    drawn += [_edge_svg(e, labelled=True) for e in edges]
    return (
        f'<svg id="graph" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}" role="img" aria-label="pipeline graph">'
        + "".join(drawn)
        + "</svg>"
    )


def _node_svg(node: _Node) -> str:
    colour = LAYER_COLOURS[node.layer]
    values = "".join(
        f' data-{key.replace("_", "-")}="{_e(value)}"' for key, _, value in node.fields
    )
    lines = "".join(
        f'<text x="{node.x + 12}" y="{node.y + 42 + 15 * i}" data-field="{key}">{_e(text)}</text>'
        for i, (key, text, _) in enumerate(node.fields)
    )
    return (
        f'<g class="node {node.layer}" data-table="{_e(node.name)}" data-layer="{node.layer}"'
        f"{values}>"
        f'<rect x="{node.x}" y="{node.y}" width="{NODE_W}" height="{NODE_H}" rx="8" '
        f'fill="#ffffff" stroke="{colour}" stroke-width="2"/>'
        f'<rect x="{node.x}" y="{node.y}" width="{NODE_W}" height="24" rx="8" fill="{colour}"/>'
        f'<text class="title" x="{node.x + 12}" y="{node.y + 17}" fill="#fff">'
        f"{_e(node.name)}</text>{lines}</g>"
    )


def _edge_svg(edge: dict[str, Any], labelled: bool) -> str:
    """A cubic curve from the source's right side to the target's left side (``labelled``:
    the edge's group with its values and its label on the curve instead: halfway along a
    silver flow, near its table for gold, and nearer its silver table on a quarantine edge)."""
    (x1, y1), (x2, y2) = edge["from"].anchor("out"), edge["to"].anchor("in")
    bend = (x2 - x1) / 2
    path = f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"
    at = 0.3 if edge["kind"] == "quarantine" else 0.5 if edge["from"].layer == "bronze" else 0.72
    label_x = x1 + (x2 - x1) * at
    label_y = y1 + (y2 - y1) * (3 * at**2 - 2 * at**3)  # the curve's height at ``at``
    lines: tuple[str, ...] = edge["label"]
    width = 7 * max(len(line) for line in lines) + 12
    height = 15 * len(lines) + 4
    values = "".join(
        f' data-{key.replace("_", "-")}="{_e(value)}"' for key, value in edge["values"].items()
    )
    texts = "".join(
        f'<text x="{label_x:.1f}" y="{label_y - height / 2 + 14 + 15 * i:.1f}" '
        f'text-anchor="middle">{_e(line)}</text>'
        for i, line in enumerate(lines)
    )
    if not labelled:
        return f'<path class="edge {edge["kind"]}" d="{path}"/>'
    return (
        f'<g class="flow {edge["kind"]}" data-source="{_e(edge["source"])}" '
        f'data-target="{_e(edge["target"])}"{values}>'
        f'<g class="label"><rect x="{label_x - width / 2:.1f}" y="{label_y - height / 2:.1f}" '
        f'width="{width}" height="{height}" rx="4"/>{texts}</g></g>'
    )


def _flows(status: dict[str, Any], queries: set[Any]) -> list[tuple[str, str]]:
    """Each flow's name and the streaming query that runs it (the query status names where
    it is in ``queries``; else a gold table's own query, or, where only that one is in
    ``queries``, the query its input's declarations share; a model's refresh)."""
    flows = [("source -> bronze", "bronze")]
    for entry in status.get("silver") or []:
        name = entry["table"].split(".", 1)[1]
        flows.append((f"{entry['bronze_table']} -> {entry['table']}", f"silver_{name}"))
    for entry in status.get("gold") or []:
        own = f"gold_{entry['table'].split('.', 1)[1]}"
        shared = f"gold_shared_{entry['input'].split('.', 1)[1]}"
        query = shared if own not in queries and shared in queries else own
        if entry.get("query") in queries:  # the query status names, where it ran
            query = entry["query"]
        flows.append((f"{entry['input']} -> {entry['table']}", query))
    for entry in status.get("models") or []:
        flows.append((f"{', '.join(entry['inputs'])} -> {entry['table']}", entry["query"]))
    return flows


def _chart(flow: str, query: str, batches: list[dict[str, Any]]) -> str:
    """An SVG chart of the newest batches of ``query``: bars of input rows, a line of
    durations (each bar's ``data-*`` its JSON values)."""
    shown = sorted(batches, key=lambda b: (b.get("timestamp") or "", b["batch_id"]))
    shown = shown[-CHART_BATCHES:]
    inner_w, inner_h = CHART_W - 2 * CHART_PAD, CHART_H - 2 * CHART_PAD
    most_rows = max((b.get("input_rows") or 0 for b in shown), default=0) or 1
    longest = max((b.get("duration_ms") or 0 for b in shown), default=0) or 1
    step = inner_w / max(1, len(shown))
    bars, points = [], []
    for i, batch in enumerate(shown):
        rows, duration = batch.get("input_rows") or 0, batch.get("duration_ms") or 0
        height = inner_h * rows / most_rows
        x = CHART_PAD + i * step
        bars.append(
            f'<rect class="bar" x="{x + step * 0.15:.1f}" y="{CHART_PAD + inner_h - height:.1f}"'
            f' width="{step * 0.7:.1f}" height="{height:.1f}" data-batch-id="{batch["batch_id"]}"'
            f' data-input-rows="{rows}" data-duration-ms="{duration}"><title>batch '
            f"#{batch['batch_id']}: {_n(rows)} rows, {duration / 1000:.1f} s</title></rect>"
        )
        points.append(f"{x + step / 2:.1f},{CHART_PAD + inner_h * (1 - duration / longest):.1f}")
    line = f'<polyline class="line" points="{" ".join(points)}"/>' if points else ""
    empty = (
        ""
        if shown
        else f'<text x="{CHART_W / 2}" y="{CHART_H / 2}" text-anchor="middle">no batches</text>'
    )
    axes = (
        f'<line x1="{CHART_PAD}" y1="{CHART_PAD + inner_h}" x2="{CHART_PAD + inner_w}" '
        f'y2="{CHART_PAD + inner_h}" stroke="#9aa5b1"/>'
        f'<text x="{CHART_PAD}" y="{CHART_PAD - 8}">max {_n(most_rows if shown else 0)} rows</text>'
        f'<text x="{CHART_PAD + inner_w}" y="{CHART_PAD - 8}" text-anchor="end">'
        f"max {longest / 1000 if shown else 0:.1f} s</text>"
    )
    return (
        f'<div class="chart" data-flow="{_e(flow)}" data-query="{_e(query)}">'
        f"<h3>{_e(flow)} <small>({_e(query)}, {len(shown)} batches)</small></h3>"
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{CHART_W}" height="{CHART_H}">'
        f"{axes}{''.join(bars)}{line}{empty}</svg></div>"
    )


def _failed_expectations(quality: Iterable[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Per table: how many of its expectations failed on some row, and how many it has."""
    counts: dict[str, tuple[int, int]] = {}
    for row in quality:
        failed, total = counts.get(row["table"], (0, 0))
        counts[row["table"]] = (failed + (1 if row["failed"] else 0), total + 1)
    return counts


def _batch(batch: dict[str, Any] | None) -> str:
    if not batch:
        return "none"
    return (
        f"#{batch['batch_id']}, {_n(batch['input_rows'])} rows, {batch['duration_ms'] / 1000:.1f} s"
    )


def _id(batch: dict[str, Any] | None) -> Any:
    return None if not batch else batch["batch_id"]


def _n(value: Any) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def _time(value: Any) -> str:
    return "-" if not value else str(value).replace("T", " ")[:19]


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} s"


def _e(value: Any) -> str:
    return "" if value is None else html.escape(str(value), quote=True)
