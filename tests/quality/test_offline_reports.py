"""The home's one Data Docs site (Great Expectations, file-backed context `<home>/gx/`):
two epochs validated into the same context as the runs epoch-1 (passes) and epoch-2
(fails; its first attempt stops after one suite, as a crashed job would, and the retry
replaces it). The context's files are on disk, every checkpoint carries GX's
UpdateDataDocsAction, the site's index lists both runs as history, each result has its
page, and the pages render where the pipeline runs with no internet access: every script,
style, font and image comes from the home's reports folder, and in headless Chromium that
resolves no host, the pages are styled and their tables have rows. Screenshots:
tests/artifacts/reports/. (No JVM: GX over pandas frames.)"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote

import pandas as pd
import pytest
import yaml
from browserkit import Browser
from qualitykit import data_docs_rows

from cumulus.config import Settings
from cumulus.quality.assets import ASSETS, CDN_FILES, external_loads, web_assets
from cumulus.quality.spec import load_suites
from cumulus.quality.summary import context_dir, site_dir, write_epoch_page

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
# The rows bootstrap-table drew in the index's Validation Results table.
HISTORY = """Array.from(document.querySelectorAll('table.ge-index-page-validation-results-table tbody tr'))
  .map(tr => tr.innerText.replace(/\\s+/g, ' ').trim())"""

BASE = pd.DataFrame({"relation": ["r", "r", "s"], "tuple": ['{"a":1}', '{"a":2}', '{"a":1}'], "mult": [2, 1, 1]})
MAPS = pd.DataFrame({"map": ["m1", "m1", "m2", "m1"], "key": ['{"k":1}', '{"k":2}', "{}", '{"k":3}'],
                     "value": [2.0, 1.0, 7.5, -1.0], "kind": ["count", "count", "value", "count"],
                     "null_key": [None] * 4})  # the last entry: a negative count


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A home after two validations, as validate leaves it: epoch-1 passes; epoch-2's
    maps suite fails (its page lists the rows that failed)."""
    from cumulus.quality.gxrun import GxRun

    if web_assets() is None:
        pytest.fail("the web assets are not installed: run scripts/setup.sh (npm ci in web/)")
    root = tmp_path_factory.mktemp("home")
    suites = load_suites()
    run = GxRun(root, "epoch-1")
    first = {"base": run.validate(suites["base"], BASE), "maps": run.validate(suites["maps"], MAPS.head(3))}
    run.finish()
    assert all(o.success for o in first.values())
    GxRun(root, "epoch-2").validate(suites["base"], BASE)  # then the job dies: no maps, no finish
    run = GxRun(root, "epoch-2")  # the retry, in a new process: everything is found, nothing refused
    second = {"base": run.validate(suites["base"], BASE), "maps": run.validate(suites["maps"], MAPS)}
    index = run.finish()
    assert second["base"].success and not second["maps"].success
    return SimpleNamespace(root=root, site=site_dir(root), index=index, outcomes={"epoch-1": first, "epoch-2": second})


def test_the_context_is_a_folder_of_the_home(home):
    import great_expectations as gx

    from cumulus.quality.gxrun import ACTION, SITE

    gx_dir = context_dir(home.root)
    config = yaml.safe_load((gx_dir / "great_expectations.yml").read_text())
    assert list(config["data_docs_sites"]) == [SITE]  # the one site; GX's local_site is gone
    assert config["data_docs_sites"][SITE]["store_backend"]["base_directory"] == "../reports/data_docs/"
    for name in ("base", "maps"):
        assert (gx_dir / "expectations" / f"{name}.json").is_file()
        assert (gx_dir / "validation_definitions" / f"{name}-pandas.json").is_file()
        assert (gx_dir / "checkpoints" / f"{name}-pandas.json").is_file()
        for run in ("epoch-1", "epoch-2"):  # one result per suite and run: the crashed attempt is replaced
            assert len(list((gx_dir / "uncommitted" / "validations" / name / run).glob("*/*.json"))) == 1

    context = gx.get_context(mode="file", project_root_dir=home.root)  # as the next validation opens it
    spec = load_suites()["maps"]
    suite = context.suites.get("maps")
    assert len(suite.expectations) == len(spec.checks) and suite.meta["sha256"] == spec.sha256
    checkpoint = context.checkpoints.get("maps-pandas")
    assert [type(a) for a in checkpoint.actions] == [gx.checkpoint.UpdateDataDocsAction]
    assert (checkpoint.actions[0].name, checkpoint.actions[0].site_names) == (ACTION, [SITE])
    assert [d.name for d in checkpoint.validation_definitions] == ["maps-pandas"]
    assert checkpoint.result_format["unexpected_index_column_names"] == list(spec.index_columns)


def test_the_one_site_lists_every_epoch_as_history(home):
    rows = data_docs_rows(home.index)
    assert sorted((r["run"], r["suite"], r["status"]) for r in rows) == [
        ("epoch-1", "base", "Success"), ("epoch-1", "maps", "Success"),
        ("epoch-2", "base", "Success"), ("epoch-2", "maps", "Failed"),
    ]
    pages = {(r["run"], r["suite"]): home.site / unquote(r["page"]) for r in rows}
    for run, outcomes in home.outcomes.items():
        for suite, outcome in outcomes.items():
            page = pages[(run, suite)]
            assert page.is_file() and outcome.page == page, (page, outcome.page)
            assert page.relative_to(home.site).parts[:3] == ("validations", suite, run)
    # one page per result: the crashed attempt's page left with its result
    assert len(list((home.site / "validations").rglob("*.html"))) == 4


def test_no_page_loads_anything_from_another_host(home):
    pages = sorted(home.site.rglob("*.html"))
    assert len(pages) >= 7  # the index, two suites, four validations
    for page in pages:
        assert external_loads(page.read_text()) == [], page
    assets = home.site.parent / ASSETS
    assert all((assets / f).is_file() for f in CDN_FILES.values())
    assert any((assets / "@fortawesome/fontawesome-free/webfonts").glob("*.woff2"))


def test_the_pages_render_styled_with_no_network(home, tmp_path):
    failed = home.outcomes["epoch-2"]["maps"].page  # its table of failed rows
    forward = write_epoch_page(Settings(home=home.root), 2, failed)  # as validate writes reports/epoch-2/
    browser = Browser(tmp_path / "chromium", offline=True)
    shots = []
    try:
        pages = (("data-docs-history", home.index, ["Validation Results", "epoch-1", "epoch-2", "maps", "base"]),
                 ("data-docs-validation", failed, ["Failed", "1 unexpected values found", "-1.0"]))
        for name, page, says in pages:
            text = browser.open(page.as_uri(), expect=tuple(says))
            asked, failures = browser.loads()
            assert failures == [], failures
            assert all(url.startswith(("file://", "data:")) for url in asked), asked
            styled = browser.evaluate(STYLED)
            assert styled["navbar"] == "flex" and styled["cell_padding"] >= 4, styled
            assert styled["rows"] > 0 and styled["jquery"] and styled["bootstrap_table"] and styled["vega"], styled
            assert styled["icons"], styled
            assert all(x in text for x in says), text[:1000]
            if page == home.index:  # the history as drawn: one row per suite and epoch, the newest first
                drawn = browser.evaluate(HISTORY)
                assert len(drawn) == 4 and all("epoch-2" in r for r in drawn[:2]), drawn
                assert all("epoch-1" in r for r in drawn[2:]), drawn
            shots.append(browser.screenshot(ARTIFACTS / f"{name}.png"))
        browser.open(forward.as_uri(), expect=("Failed",))  # reports/epoch-2/index.html forwards to the epoch's page
        assert browser.evaluate("location.href") == failed.as_uri()
    finally:
        browser.close()
    for shot in shots:
        assert shot.stat().st_size > 20_000, shot
        print(f"screenshot: {shot}")
