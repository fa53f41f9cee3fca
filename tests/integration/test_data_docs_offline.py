"""Data Docs that work without internet (issue 46, item 4): ``validate_warehouse`` with docs
on the shared shop warehouse, then

* no written page references anything on the web (a regex over every HTML file; CSS and SVG
  files load nothing from it either: no absolute ``url()``, ``@import``, ``href`` or ``src``);
* headless Chromium with the network off (no host resolves, every request goes to a closed
  local port): the index lists every validation result and every suite (its tables are built
  by bootstrap-table's script), and a validation page loads only local files, Font Awesome's
  font among them, and draws its status icons with it; a screenshot is written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from pyspark.sql import SparkSession

from expectations.offline_docs import VENDOR, external_references, site_files
from expectations.validate import DOCS_INDEX, Validation, validate_warehouse
from lakehouse_core.config import QualitySpec
from lakehouse_core.layout import Warehouse
from tests.browser import Browser, dump_dom_offline, screenshot_offline
from tests.warehouses import incremental_warehouse

pytestmark = pytest.mark.integration

#: A CSS or SVG reference that would load something from the web.
LOADS_FROM_WEB = re.compile(
    r"""(url\(\s*["']?|@import\s+["']?|\s(href|src)\s*=\s*["'])(https?:)?//""", re.I
)
#: Appended to a copy of a validation page: once the page and its fonts are loaded, writes
#: into the DOM what the page loaded (stylesheets, scripts, the ``src`` of each Font Awesome
#: ``@font-face``, resolved against its stylesheet), the Font Awesome faces that did load, and
#: each status icon's classes, font family and glyph (its ``::before`` content).
PROBE = """
<script>
window.addEventListener("load", () => document.fonts.ready.then(() => {
  const faces = [];
  for (const sheet of document.styleSheets) {
    for (const rule of sheet.cssRules) {
      if (rule instanceof CSSFontFaceRule && /Font Awesome/.test(rule.style.fontFamily)) {
        const src = rule.style.getPropertyValue("src").match(/url\\("?([^")]+)"?\\)/);
        if (src) faces.push(new URL(src[1], sheet.href).href);
      }
    }
  }
  const icons = [...document.querySelectorAll("i.fas")].map((i) => ({
    classes: i.className,
    family: getComputedStyle(i).fontFamily,
    glyph: getComputedStyle(i, "::before").content,
  }));
  const probe = document.createElement("pre");
  probe.id = "probe";
  probe.textContent = JSON.stringify({
    resources: [
      ...[...document.styleSheets].map((s) => s.href).filter(Boolean),
      ...[...document.scripts].map((s) => s.src).filter(Boolean),
      ...faces,
    ],
    loaded: [...document.fonts].filter((f) => f.status === "loaded").map((f) => f.family),
    icons: icons,
  });
  document.body.appendChild(probe);
}));
</script>
"""


@pytest.fixture(scope="module")
def docs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Validation]:
    """Data Docs of the shop warehouse's packaged suites: the site's directory and the run."""
    root = incremental_warehouse(spark, tmp_path_factory)
    target = tmp_path_factory.mktemp("data-docs")
    validation = validate_warehouse(
        spark, Warehouse.from_path(root), QualitySpec(packaged_suites=True), target
    )
    assert validation.docs == target / DOCS_INDEX
    return validation.docs.parent, validation


def test_no_page_references_the_web(docs: tuple[Path, Validation]) -> None:
    site, _ = docs
    pages = [p for p in site_files(site) if p.suffix == ".html"]
    assert len(pages) >= 3, pages  # the index, a suite page and a validation page at least
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert external_references(text) == [], page
        assert "integrity=" not in text and "crossorigin=" not in text, page
    for other in (p for p in site_files(site) if p.suffix != ".html"):
        assert LOADS_FROM_WEB.findall(other.read_text(encoding="utf-8")) == [], other
    vendor = site / VENDOR
    for shipped in (
        "jquery/dist/jquery.min.js",
        "bootstrap-table/dist/bootstrap-table.min.js",
        "@fortawesome/fontawesome-free/css/all.min.css",
        "@fortawesome/fontawesome-free/webfonts/fa-solid-900.woff2",
        "vega/build/vega.min.js",
    ):
        assert (vendor / shipped).is_file(), shipped


def test_offline_index_lists_every_validation_result(
    docs: tuple[Path, Validation], chromium: Browser
) -> None:
    site, validation = docs
    if chromium.executable is None:
        pytest.skip(f"no headless Chromium to open the Data Docs: {chromium.reason}")
    dom = BeautifulSoup(dump_dom_offline(chromium.executable, site / "index.html"), "html.parser")
    results, suites = (
        dom.select(f"#section-1-content-block-2-{n}-body-table tbody tr") for n in (1, 2)
    )
    tables = {v.table for v in validation.verdicts}
    assert len(tables) >= 3, tables
    pages = sorted((site / "validations").rglob("*.html"))
    assert len(results) == len(pages), [r.get_text(" ") for r in results]
    listed = {" ".join(row.get_text(" ").split()) for row in results}
    for table in tables:  # each run's row names its suite (the table) and its checkpoint
        assert any(f" {table} lakehouse-{table} " in f" {row} " for row in listed), (table, listed)
    assert {" ".join(row.get_text(" ").split()) for row in suites} == tables


def test_offline_validation_page_shows_its_status_icons(
    docs: tuple[Path, Validation], chromium: Browser, tmp_path: Path
) -> None:
    site, _ = docs
    if chromium.executable is None:
        pytest.skip(f"no headless Chromium to open the Data Docs: {chromium.reason}")
    page = sorted((site / "validations" / "silver").rglob("*.html"))[0]
    probed = page.with_name("probed.html")
    probed.write_text(
        page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8"
    )
    dom = BeautifulSoup(dump_dom_offline(chromium.executable, probed), "html.parser")
    probe = dom.select_one("#probe")
    assert probe is not None, "the probe did not run: the page's scripts failed"
    found = json.loads(probe.get_text())
    assert found["resources"], found
    assert all(name.startswith("file://") for name in found["resources"]), found["resources"]
    solid = [n for n in found["resources"] if n.endswith("/webfonts/fa-solid-900.woff2")]
    assert solid and Path(solid[0].removeprefix("file://")).is_file(), found["resources"]
    assert "Font Awesome 6 Free" in found["loaded"], found["loaded"]
    icons = found["icons"]
    assert any("fa-check-circle" in i["classes"] for i in icons), icons
    for icon in icons:
        assert "Font Awesome 6 Free" in icon["family"], icon
        assert icon["glyph"] not in ("none", "normal", '""'), icon  # a glyph is drawn
    png = screenshot_offline(chromium.executable, page, tmp_path / "data-docs-offline.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 50_000, png.stat().st_size  # a blank page is a few kB
    probed.unlink()
