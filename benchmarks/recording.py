"""Where the benches write their figures: ``benchmarks/results/<kind>-<date>.json`` and the
latest of each kind beside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def write_results(result: dict[str, Any], kind: str, latest: str | None = None) -> None:
    """Write ``result`` (its ``date`` an ISO time) to ``results/<kind>-<date>.json`` and to
    ``results/<latest>`` (default ``latest-<kind>.json``)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = result["date"].replace(":", "").replace("-", "")
    for name in (f"{kind}-{stamp}.json", latest or f"latest-{kind}.json"):
        (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
