"""Executing the notebooks: all of them in one Jupyter kernel (so one Spark session), in an
order where the gold dashboard and data-quality notebooks read the warehouse the quickstart
wrote; and rendering the executed copies to HTML (``make notebooks-docs``).

``python -m tests.notebooks OUT`` executes them in a temporary directory and writes
``OUT/<name>.html``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert import HTMLExporter
from nbformat import NotebookNode

NOTEBOOKS = Path(__file__).parents[1] / "notebooks"
#: The quickstart first: the dashboard and quality notebooks reuse its warehouse.
ORDER = ("quickstart", "gold_dashboard", "data_quality", "cdc_deep_dive")
CELL_TIMEOUT = 600


def notebook_paths() -> list[Path]:
    """Every notebook of ``notebooks/``, in :data:`ORDER` (others after, by name)."""
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(paths, key=lambda p: (rank.get(p.stem, len(ORDER)), p.stem))


def execute_all(workdir: Path) -> dict[str, NotebookNode]:
    """Execute every notebook top to bottom in one kernel, with ``LAKEHOUSE_NOTEBOOK_DIR``
    set to ``workdir``; the executed notebooks by name. A failing cell raises
    :class:`nbclient.exceptions.CellExecutionError` naming the notebook's cell."""
    executed: dict[str, NotebookNode] = {}
    client = NotebookClient(
        nbformat.v4.new_notebook(),
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    )
    env = {**os.environ, "LAKEHOUSE_NOTEBOOK_DIR": str(workdir)}
    with client.setup_kernel(env=env):
        for path in notebook_paths():
            notebook = nbformat.read(path, as_version=4)
            client.nb = notebook
            client.reset_execution_trackers()
            count = 0
            for index, cell in enumerate(notebook.cells):
                if cell.cell_type == "code":
                    count += 1
                client.execute_cell(cell, index, execution_count=count)
            executed[path.stem] = notebook
    return executed


def render(executed: dict[str, NotebookNode], out: Path) -> list[Path]:
    """Write each executed notebook as ``out/<name>.html`` (plots embedded)."""
    out.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter()
    written = []
    for name, notebook in executed.items():
        body, _ = exporter.from_notebook_node(notebook)
        target = out / f"{name}.html"
        target.write_text(body, encoding="utf-8")
        written.append(target)
    return written


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="lakehouse-notebooks-") as work:
        for page in render(execute_all(Path(work)), Path(sys.argv[1])):
            print(page)
