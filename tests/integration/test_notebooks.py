"""The notebooks run top to bottom in a Jupyter kernel of the project's interpreter, all in one
kernel (one Spark session, one shop warehouse for the quickstart, dashboard and quality
notebooks), and the plots are in their executed output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.notebooks import ORDER, execute_all, notebook_paths

pytestmark = pytest.mark.slow

#: The notebooks whose output must hold plots (image/png), and how many at least.
PLOTS = {"gold_dashboard": 6, "data_quality": 1}


def test_notebooks_run_and_show_their_plots(tmp_path: Path) -> None:
    assert [p.stem for p in notebook_paths()][: len(ORDER)] == list(ORDER)
    executed = execute_all(tmp_path)

    outputs = {
        name: [o for cell in notebook.cells for o in cell.get("outputs", [])]
        for name, notebook in executed.items()
    }
    for name, found in outputs.items():
        assert not [o for o in found if o.get("output_type") == "error"], name
    for name, plots in PLOTS.items():
        images = [o for o in outputs[name] if "image/png" in o.get("data", {})]
        assert len(images) >= plots, f"{name}: {len(images)} plots"

    def text(name: str) -> str:
        return "".join(
            o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs[name]
        )

    assert "streaming queries finished" in text("quickstart")
    assert "window_start" in text("quickstart")
    # The second part's late clicks corrected final windows; the fitted baseline scored orders.
    assert re.search(r"\| *user_sessions\| *[1-9]\d*\|", text("quickstart")), text("quickstart")
    assert "Fit(alert='big_orders'" in text("quickstart")
    assert "by mad against key" in text("quickstart")  # an alert's reason
    assert "silver.customers: 3 rows, expected 3: ok" in text("cdc_deep_dive")
    # A change showed in the fresh read before silver's next MERGE put it in the plain read.
    assert re.search(
        r"in the fresh read after [\d.]+ s, in the plain read after", text("fresh_reads")
    )
    assert re.search(r"silver\.\w+\.\w+ \((warn|drop|fail)\): \d+ checked", text("data_quality"))
