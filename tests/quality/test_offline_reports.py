"""An epoch's report (Great Expectations Data Docs) renders where the pipeline runs with no
internet access: every script, style, font and image comes from the home's reports
folder, and in headless Chromium that resolves no host, the pages are styled and their
tables have rows. Screenshots: tests/artifacts/reports/. (No JVM: GX over pandas frames.)"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from browserkit import Browser

from cumulus.quality.assets import ASSETS, CDN_FILES, external_loads, web_assets
from cumulus.quality.spec import load_suites

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "reports"

STYLED = """(() => {
  const nav = document.querySelector('nav.navbar');
  const cell = document.querySelector('table td');
  return {
    navbar: nav ? getComputedStyle(nav).display : null,          // bootstrap.css: flex
    cell_padding: cell ? parseFloat(getComputedStyle(cell).paddingTop) : null, // bootstrap's .table(-sm): 4.8-12 px; none: 1
    rows: document.querySelectorAll('table tbody tr').length,
    jquery: typeof window.jQuery === 'function',
    bootstrap_table: !!(window.jQuery && window.jQuery.fn.bootstrapTable),
    vega: typeof window.vegaEmbed === 'function',
    icons: document.fonts.check('900 16px "Font Awesome 6 Free"'),
  };
})()"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """An epoch's Data Docs site, as validate writes it: <home>/reports/epoch-1/, with a
    suite that passes and one that fails (its page lists the rows that failed)."""
    from cumulus.quality.gxrun import GxRun

    if web_assets() is None:
        pytest.fail("the web assets are not installed: run scripts/setup.sh (npm ci in web/)")
    reports = tmp_path_factory.mktemp("home") / "reports"
    run = GxRun(reports / "epoch-1", site_name="epoch-1", run_name="epoch-1")
    suites = load_suites()
    base = pd.DataFrame({"relation": ["r", "r", "s"], "tuple": ['{"a":1}', '{"a":2}', '{"a":1}'], "mult": [2, 1, 1]})
    maps = pd.DataFrame({"map": ["m1", "m1", "m2", "m1"], "key": ['{"k":1}', '{"k":2}', "{}", '{"k":3}'],
                         "value": [2.0, 1.0, 7.5, -1.0], "kind": ["count", "count", "value", "count"],
                         "null_key": [None] * 4})  # the last entry: a negative count
    assert run.validate(suites["base"], base).success
    assert not run.validate(suites["maps"], maps).success
    run.build_docs()
    return reports / "epoch-1"


def test_no_page_loads_anything_from_another_host(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 3  # the index, the suite, the validations
    for page in pages:
        assert external_loads(page.read_text()) == [], page
    assets = site.parent / ASSETS
    assert all((assets / f).is_file() for f in CDN_FILES.values())
    assert any((assets / "@fortawesome/fontawesome-free/webfonts").glob("*.woff2"))


def test_the_pages_render_styled_with_no_network(site, tmp_path):
    [failed_suite] = (site / "validations" / "maps").rglob("*.html")  # its table of failed rows
    browser = Browser(tmp_path / "chromium", offline=True)
    shots = []
    try:
        pages = (("data-docs-index", site / "index.html", ["maps", "base", "Validation Results"]),
                 ("data-docs-validation", failed_suite, ["Failed", "1 unexpected values found", "-1.0"]))
        for name, page, says in pages:
            text = browser.open(page.as_uri(), settle=2)
            asked, failed = browser.loads()
            assert failed == [], failed
            assert all(url.startswith(("file://", "data:")) for url in asked), asked
            styled = browser.evaluate(STYLED)
            assert styled["navbar"] == "flex" and styled["cell_padding"] >= 4, styled
            assert styled["rows"] > 0 and styled["jquery"] and styled["bootstrap_table"] and styled["vega"], styled
            assert styled["icons"], styled
            assert all(x in text for x in says), text[:1000]
            shots.append(browser.screenshot(ARTIFACTS / f"{name}.png"))
    finally:
        browser.close()
    for shot in shots:
        assert shot.stat().st_size > 20_000, shot
        print(f"screenshot: {shot}")
