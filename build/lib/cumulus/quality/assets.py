"""Reports that render with no network. Great Expectations' Data Docs load their scripts,
styles and fonts from public CDNs (jsdelivr, cdnjs, unpkg, bootstrapcdn, code.jquery.com)
and their logo from an S3 bucket; where a pipeline runs without internet access the pages
are a bare list. The same files are installed from the npm registry (web/package.json,
by scripts/setup.sh into web/node_modules, or where $CUMULUS_WEB_ASSETS points), copied
once to `<home>/reports/_assets/`, and every page of the Data Docs site
(`<home>/reports/data_docs/`) is rewritten to load them by relative address, so the
reports open from disk, from the Airflow plugin's /cumulus/reports/ and from any static
file server alike.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

from cumulus.config import checkout_root

log = logging.getLogger("cumulus.quality")

WEB_ASSETS_ENV = "CUMULUS_WEB_ASSETS"
ASSETS = "_assets"  # under <home>/reports, next to the site
# Every address GX's templates (great_expectations/render/view/templates) load, and the
# file of the npm package (web/package.json) that serves it. Popper: GX names 1.12.9,
# below the 1.14.7 that bootstrap 4.3.1 asks for; the npm package is 1.16.1, the last 1.x.
CDN_FILES = {
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css": "bootstrap/dist/css/bootstrap.min.css",
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": "bootstrap/dist/js/bootstrap.min.js",
    "https://code.jquery.com/jquery-3.7.1.min.js": "jquery/dist/jquery.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js": "popper.js/dist/umd/popper.min.js",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css": "bootstrap-table/dist/bootstrap-table.min.css",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js": "bootstrap-table/dist/bootstrap-table.min.js",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/bootstrap-table-filter-control.min.js":
        "bootstrap-table/dist/extensions/filter-control/bootstrap-table-filter-control.min.js",
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.css":
        "bootstrap-table/dist/extensions/filter-control/bootstrap-table-filter-control.css",
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.min.css":
        "bootstrap-table/dist/extensions/filter-control/bootstrap-table-filter-control.min.css",
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css":
        "bootstrap-datepicker/dist/css/bootstrap-datepicker.min.css",
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js":
        "bootstrap-datepicker/dist/js/bootstrap-datepicker.min.js",
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css":
        "@forevolve/bootstrap-dark/dist/css/bootstrap-prefers-dark.css",
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css": "@fortawesome/fontawesome-free/css/all.min.css",
    "https://cdn.jsdelivr.net/npm/vega@5": "vega/build/vega.min.js",
    "https://cdn.jsdelivr.net/npm/vega-lite@5": "vega-lite/build/vega-lite.min.js",
    "https://cdn.jsdelivr.net/npm/vega-embed@6": "vega-embed/build/vega-embed.min.js",
}
# Folders a copied file loads by relative address (Font Awesome's ../webfonts/).
COMPANIONS = {"@fortawesome/fontawesome-free/css/all.min.css": "@fortawesome/fontawesome-free/webfonts"}
# The logo and icons: GX copies them into every site's static/images/ but links the bucket.
GX_IMAGES = "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/"
_TAG = re.compile(r"<(script|link|img|iframe|source)\b[^>]*>", re.IGNORECASE)
_GUARDS = re.compile(r'\s+(?:integrity|crossorigin)=(["\'])[^"\']*\1', re.IGNORECASE)
_STATIC = re.compile(r'(?P<attr>\b(?:src|href))=(?P<q>["\'])(?P<url>(?:\.\.?/)*static/[^"\']+)(?P=q)')
_LOADED = re.compile(r'(?P<attr>\b(?:src|href))=(?P<q>["\'])(?P<url>https?://[^"\']+)(?P=q)')


def web_assets() -> Path | None:
    """The npm packages the pages load (node_modules): $CUMULUS_WEB_ASSETS, else a
    checkout's web/node_modules (`make setup`); None when they are not installed (the
    pages then load them from their CDNs)."""
    configured = os.environ.get(WEB_ASSETS_ENV)
    checkout = checkout_root()
    if configured:
        root = Path(configured)
    elif checkout:
        root = checkout / "web" / "node_modules"
    else:
        return None
    return root if all((root / f).is_file() for f in CDN_FILES.values()) else None


def install_assets(reports: Path, source: Path) -> Path:
    """Copy the files the pages load to `reports/_assets/` (once: a file already there is
    kept); returns that folder."""
    target = reports / ASSETS
    for rel in sorted(set(CDN_FILES.values())):
        _copy(source / rel, target / rel)
        if rel in COMPANIONS:
            for file in sorted((source / COMPANIONS[rel]).iterdir()):
                _copy(file, target / COMPANIONS[rel] / file.name)
    return target


def _copy(src: Path, dst: Path) -> None:
    if dst.is_file() and dst.stat().st_size == src.stat().st_size:
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    shutil.copyfile(src, tmp)
    tmp.replace(dst)  # a reader never sees half a file


def localize_site(site: Path, assets: Path) -> int:
    """Rewrite every page of the Data Docs site in `site` to load the assets from
    `assets` and the GX images from the site's own static/images/; returns the pages
    changed; a link into the site's static/ that misses is mended. A rewritten tag loses its `integrity` and `crossorigin` (they guard a file
    from another host: Chromium refuses a cross-origin load from file://, and Popper is
    another version). Addresses it does not know are left alone (external_loads finds
    them)."""
    changed = 0
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")

        def local(m: re.Match, here: Path = page.parent) -> str:
            url = m["url"]
            if url in CDN_FILES:
                path = assets / CDN_FILES[url]
            elif url.startswith(GX_IMAGES):
                path = site / "static" / "images" / url[len(GX_IMAGES):].split("?", 1)[0]
            else:
                return m.group(0)
            return f'{m["attr"]}={m["q"]}{Path(os.path.relpath(path, here)).as_posix()}{m["q"]}'

        def static(m: re.Match, here: Path = page.parent) -> str:
            # GX counts one folder too few above a validation page (its favicon 404s)
            if (here / m["url"]).exists():
                return m.group(0)
            path = site / "static" / m["url"].split("static/", 1)[1]
            return f'{m["attr"]}={m["q"]}{Path(os.path.relpath(path, here)).as_posix()}{m["q"]}'

        def tag(m: re.Match) -> str:
            new = _LOADED.sub(local, m.group(0))
            return _STATIC.sub(static, m.group(0)) if new == m.group(0) else _GUARDS.sub("", new)

        new = _TAG.sub(tag, text)
        if new != text:
            page.write_text(new, encoding="utf-8")
            changed += 1
    return changed


def external_loads(html: str) -> list[str]:
    """The addresses a page loads from another host (scripts, styles, images, icons;
    plain links to other pages are not loads)."""
    loads = []
    for tag in _TAG.finditer(html):
        if tag[1].lower() == "link" and not re.search(r'rel=["\']?(stylesheet|icon|preload)', tag[0], re.IGNORECASE):
            continue
        loads += [m["url"] for m in _LOADED.finditer(tag[0])]
    return loads


def make_offline(site: Path) -> bool:
    """Make the site at `site` (`<home>/reports/data_docs/`) render with no network (a
    page an earlier run rewrote is read, not written again); False (with a warning) when
    the assets are not installed."""
    source = web_assets()
    if source is None:
        log.warning("%s: the report loads its scripts and styles from public CDNs: the web assets are not "
                    "installed (run scripts/setup.sh, or point $%s to a node_modules with web/package.json's "
                    "packages)", site, WEB_ASSETS_ENV)
        return False
    localize_site(site, install_assets(site.parent, source))
    return True
