"""Great Expectations Data Docs that work without internet: the browser assets their pages
load from public CDNs (Bootstrap, jQuery, Popper, bootstrap-table, bootstrap-datepicker,
bootstrap-dark, Font Awesome, Vega) are copied next to the site and the pages' links rewritten
to relative paths; links to GX's web site lose their target and its remote logo becomes the
local one.

The assets come from the npm packages pinned in ``expectations/docs_assets/package.json`` (and
its lock file, with integrity hashes), the versions GX's templates reference, installed by
``make venv`` into ``<venv>/share/lakehouse/data-docs-assets`` (or the directory named by
``LAKEHOUSE_DOCS_ASSETS``).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from lakehouse_core.errors import ConfigError

#: Where ``make venv`` installs the asset packages (their ``node_modules`` directory).
ASSETS_ENV = "LAKEHOUSE_DOCS_ASSETS"
DEFAULT_ASSETS = Path(sys.prefix, "share", "lakehouse", "data-docs-assets", "node_modules")
#: Where the assets go in the site, relative to its root (GX keeps its own under ``static``).
VENDOR = PurePosixPath("static", "vendor")
#: GX's own logo, shipped in every site, for the pages that load it from the web.
LOCAL_LOGO = PurePosixPath("static", "images", "logo-long.png")

#: Each CDN address GX's templates load, by the end of its path (whatever the host), and the
#: file of the installed npm package that replaces it (``\1`` and ``\2``: the groups matched).
ASSETS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern + r"$"), target)
    for pattern, target in (
        (r"/bootstrap-table@[\d.]+/dist/(.+)", r"bootstrap-table/dist/\1"),
        (r"/bootstrap/4\.[\d.]+/(css|js)/(.+)", r"bootstrap/dist/\1/\2"),
        (r"/popper\.js/[\d.]+/umd/(.+)", r"popper.js/dist/umd/\1"),
        (r"/font-awesome/6\.[\d.]+/css/(.+)", r"@fortawesome/fontawesome-free/css/\1"),
        (r"/bootstrap-datepicker/[\d.]+/(css|js)/(.+)", r"bootstrap-datepicker/dist/\1/\2"),
        (r"/@forevolve/bootstrap-dark@[\d.]+/dist/(.+)", r"@forevolve/bootstrap-dark/dist/\1"),
        (r"/jquery-3\.[\d.]+\.min\.js", r"jquery/dist/jquery.min.js"),
        (r"/npm/vega@5", r"vega/build/vega.min.js"),
        (r"/npm/vega-lite@5", r"vega-lite/build/vega-lite.min.js"),
        (r"/npm/vega-embed@6", r"vega-embed/build/vega-embed.min.js"),
    )
)
#: Directories a copied file needs beside it (Font Awesome's CSS loads ``../webfonts``).
COMPANIONS = {"@fortawesome/fontawesome-free/css": ("@fortawesome/fontawesome-free/webfonts",)}
#: An absolute address, with its quotes or parenthesis, in an attribute or a CSS ``url()``.
ATTRIBUTE = re.compile(r"""\s(href|src|action)\s*=\s*(["'])(https?:)?//[^"']*\2""", re.I)
CSS_URL = re.compile(r"""url\(\s*(["']?)(https?:)?//[^"')]*\1\s*\)""", re.I)
#: Subresource-integrity and CORS attributes, which pin CDN bytes and block ``file:`` loads.
INTEGRITY = re.compile(r"""\s(integrity|crossorigin)\s*=\s*(["'])[^"']*\2""", re.I)
#: Any absolute web address that is not an XML namespace name (SVG's ``xmlns``).
EXTERNAL = re.compile(
    r"""(?<!xmlns=["'])(?<!xmlns:xlink=["'])(?<![:\w/])(https?:)?//[\w.-]+\.[a-z]{2,}"""
)
#: The site's files that can reference other files.
TEXT_SUFFIXES = (".html", ".css", ".svg")


def assets_root() -> Path:
    """The installed asset packages (``node_modules``).

    Raises:
        ConfigError: they are not installed.
    """
    root = Path(os.environ.get(ASSETS_ENV) or DEFAULT_ASSETS)
    if not (root / "bootstrap-table").is_dir():
        raise ConfigError(
            f"The Data Docs assets are not installed at {root}. Run `make venv` (it installs "
            f"them with npm), or point {ASSETS_ENV} at a node_modules directory holding "
            "expectations/docs_assets/package.json's packages."
        )
    return root


def local_asset(url: str) -> str | None:
    """The installed file (path under ``node_modules``) that replaces the CDN ``url``, or None
    if ``url`` is not one of the assets GX's templates load."""
    path = re.sub(r"^(https?:)?//[^/]+", "", url.split("?")[0].split("#")[0])
    for pattern, target in ASSETS:
        match = pattern.search(path)
        if match:
            return match.expand(target)
    return None


def rewrite_page(text: str, depth: int, assets: set[str]) -> str:
    """``text`` (an HTML page ``depth`` directories below the site root) with its CDN links
    pointing at the copies under :data:`VENDOR` (each added to ``assets``), integrity and CORS
    attributes dropped, other web links removed and remote images made the local logo."""
    up = "../" * depth

    def attribute(match: re.Match[str]) -> str:
        name, quote = match.group(1), match.group(2)
        url = match.group(0).split(quote, 1)[1][:-1]
        asset = local_asset(url)
        if asset is not None:
            assets.add(asset)
            return f" {name}={quote}{up}{VENDOR / asset}{quote}"
        if name.lower() == "src":
            return f" {name}={quote}{up}{LOCAL_LOGO}{quote}"
        return ""  # a link or form target on the web: the text stays, the target goes

    text = INTEGRITY.sub("", text)
    text = ATTRIBUTE.sub(attribute, text)
    return CSS_URL.sub("none", text)


def site_files(site: Path) -> Iterator[Path]:
    """The files of ``site`` that can reference other files (HTML, CSS, SVG)."""
    return (p for p in sorted(site.rglob("*")) if p.is_file() and p.suffix in TEXT_SUFFIXES)


def external_references(text: str) -> list[str]:
    """The absolute web addresses in ``text``, but XML namespace names."""
    return [m.group(0) for m in EXTERNAL.finditer(text)]


def make_offline(site: Path, assets: Path | None = None) -> list[str]:
    """Rewrite the Data Docs site at ``site`` (the directory of its ``index.html``) to load
    nothing from the web, copying the assets it uses from ``assets`` (default:
    :func:`assets_root`); the asset paths copied.

    Raises:
        ConfigError: the assets are not installed, or one the pages load is missing from them.
    """
    source = assets_root() if assets is None else assets
    used: set[str] = set()
    for path in site_files(site):
        if path.is_relative_to(site / VENDOR):
            continue
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".html":
            depth = len(path.relative_to(site).parts) - 1
            rewritten = rewrite_page(text, depth, used)
        else:
            rewritten = CSS_URL.sub("none", text)
            rewritten = ATTRIBUTE.sub("", rewritten)
        if rewritten != text:
            path.write_text(rewritten, encoding="utf-8")
    for asset in sorted(used):
        _copy(source, asset, site / VENDOR)
    return sorted(used)


def _copy(source: Path, asset: str, target: Path) -> None:
    origin = source / asset
    if not origin.is_file():
        raise ConfigError(
            f"The Data Docs asset {asset} is not in {source}. Reinstall the assets "
            "(`make venv`) from expectations/docs_assets/package-lock.json."
        )
    (target / asset).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(origin, target / asset)
    package = asset.split("/")[0] if not asset.startswith("@") else "/".join(asset.split("/")[:2])
    for license_file in (source / package).glob("LICENSE*"):
        shutil.copyfile(license_file, target / package / license_file.name)
    folder = str(PurePosixPath(asset).parent)
    for companion in COMPANIONS.get(folder, ()):
        shutil.copytree(source / companion, target / companion, dirs_exist_ok=True)
