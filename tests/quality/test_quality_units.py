"""The data-quality pieces that need no JVM: the suite files, what the compiled program
says about each map, the oracle's comparison and SQL rewrite, the printed report."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest
from qualitykit import SHOP, VIEWS

from cumulus.errors import QualityError
from cumulus.quality.facts import COUNT, VALUE, map_facts
from cumulus.quality.oracle import (
    MISSING_IN_ENGINE,
    MISSING_IN_SQL,
    Tolerance,
    compare_view,
    same_value,
    spark_sql,
)
from cumulus.quality.spec import SUITES, load_suite, load_suites
from cumulus.quality.summary import failed_checks, ledger_detail, render_report
from cumulus.schema import load_schema
from cumulus.sql.views import compile_views

SIMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "schemas" / "simple.sql"


@pytest.fixture(scope="module")
def shop():
    return compile_views(load_schema(SHOP), list(VIEWS.items()))


# ---------------------------------------------------------------- suite files


def test_every_suite_file_loads_with_named_described_checks() -> None:
    suites = load_suites()
    assert list(suites) == list(SUITES)
    for spec in suites.values():
        assert spec.checks and spec.notes and len(spec.sha256) == 64
        for check in spec.checks:
            assert check.name.startswith(spec.name + ".") and check.description, check
    assert suites["oracle"].meta["double_relative_tolerance"] == 1e-9
    assert suites["events"].check("events.batches_committed").kwargs["value_set"] == {"$PARAMETER": "committed_batches"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: maps\nmeta: {frame: {a: x}}\nexpectations:\n  - type: t\n    kwargs: {column: a}\n", "meta.check"),
        ("name: maps\nmeta: {frame: {a: x}}\nexpectations:\n  - type: t\n    kwargs: {column: b}\n    meta: {check: maps.b}\n", "not in meta.frame"),
        ("name: base\nmeta: {frame: {a: x}}\nexpectations: []\n", "the file must be base.yml"),
        ("name: maps\nexpectations: []\n", "`meta` must be a dict"),
    ],
)
def test_a_broken_suite_file_is_refused_naming_the_file(tmp_path, text, message) -> None:
    path = tmp_path / "maps.yml"
    path.write_text(text)
    with pytest.raises(QualityError, match=message) as err:
        load_suite(path)
    assert str(path) in str(err.value)


# ---------------------------------------------------------------- map facts


def test_count_maps_and_keys_that_cannot_be_null(shop) -> None:
    facts = map_facts(shop)
    assert facts["sales_count"].kind == COUNT and facts["sales_count"].not_null_keys == ()  # region is nullable
    assert facts["sales_revenue"].kind == VALUE and facts["sales_revenue"].value_type == "decimal"
    assert facts["sales_first_day_values"].kind == COUNT
    assert facts["sales_first_day_values"].not_null_keys == ("o_date",)  # NOT NULL column
    assert facts["returned_count"].keys == () and facts["returned_count"].kind == COUNT
    join_maps = [f for f in facts.values() if f.keys == ("o_id",)]
    assert join_maps and all(f.not_null_keys == ("o_id",) for f in join_maps)


def test_join_columns_and_filtered_columns_cannot_be_null() -> None:
    views = [
        ("joined", "SELECT s.b, COUNT(*) AS n FROM r, s WHERE r.b = s.b GROUP BY s.b"),
        ("filtered", "SELECT a, SUM(b) AS total FROM r WHERE a > 1 GROUP BY a"),
        ("plain", "SELECT a, COUNT(*) AS n FROM r GROUP BY a"),
    ]
    facts = map_facts(compile_views(load_schema(SIMPLE), views))
    assert facts["joined_count"].not_null_keys == ("b",)  # an equi-join never matches NULL
    assert facts["filtered_count"].not_null_keys == ("a",)  # a > 1 is never true for NULL
    assert facts["filtered_total"].kind == VALUE
    assert facts["plain_count"].not_null_keys == ()  # simple.sql's columns are nullable


# ---------------------------------------------------------------- the oracle


def test_values_compare_exactly_except_doubles() -> None:
    assert same_value(Decimal("12.30"), Decimal("12.3"))
    assert not same_value(Decimal("12.30"), Decimal("12.31"))
    assert not same_value(Decimal("0.1"), Decimal("0.1000001"))
    assert same_value(7, Decimal("7.000000")) and not same_value(7, 8)
    assert same_value(0.1 + 0.2, 0.3) and not same_value(0.3, 0.3001)
    assert same_value(None, None) and not same_value(None, 0) and not same_value(0, None)
    assert same_value(dt.date(1995, 3, 1), dt.date(1995, 3, 1)) and not same_value(dt.date(1995, 3, 1), "1995-03-01")
    assert not same_value(True, 1)
    assert same_value(1.0, 1.0 + 1e-12, Tolerance()) and not same_value(1.0, 1.0 + 1e-6, Tolerance())


def test_compare_view_names_every_difference(shop) -> None:
    plan = shop.views["sales"]  # region, n, revenue, avg_weight, first_day
    day = dt.date(1995, 1, 1)
    engine = [
        (None, 2, Decimal("10.50"), 1.5, day),
        ("AIR", 1, Decimal("3.00"), 0.5, day),
        ("MAIL", 4, Decimal("9.99"), 2.0, day),
    ]
    recomputed = [
        (None, 2, Decimal("10.5"), 1.5000000000001, day),  # equal: scale and a double's last bits
        ("AIR", 1, Decimal("3.01"), 0.5, day),  # the decimal differs in its last digit
        ("SHIP", 1, Decimal("1.00"), 1.0, day),  # a group the engine lacks
    ]
    comparison = compare_view(plan, engine, recomputed)
    assert not comparison.equal and (comparison.engine_rows, comparison.recomputed_rows) == (3, 3)
    diffs = {json.loads(r["group"])["region"]: r["difference"] for r in comparison.differences}
    assert diffs == {
        "AIR": "revenue: engine 3.00, recomputed 3.01",
        "MAIL": MISSING_IN_SQL,
        "SHIP": MISSING_IN_ENGINE,
    }
    assert len(comparison.rows) == 4  # the NULL group matched and is equal
    assert compare_view(plan, engine[:1], recomputed[:1]).equal


def test_a_view_without_group_by_compares_its_one_row(shop) -> None:
    plan = shop.views["returned"]
    assert compare_view(plan, [(3,)], [(3,)]).equal
    (row,) = compare_view(plan, [(3,)], [(4,)]).differences
    assert row["group"] == "{}" and row["difference"] == "returns: engine 3, recomputed 4"


def test_the_sql_runs_over_the_expanded_base_views() -> None:
    schema = load_schema(SHOP)
    sql = spark_sql(VIEWS["sales"], schema, 3)
    assert "FROM cumulus_oracle_e3_orders AS orders" in sql
    assert "CAST(SUM(weight) AS DOUBLE) / COUNT(weight) AS avg_weight" in sql
    joined = spark_sql(VIEWS["returned"], schema, 3)
    assert "cumulus_oracle_e3_orders AS o" in joined and "cumulus_oracle_e3_returns AS r" in joined


# ---------------------------------------------------------------- the report


def _summary(failed: bool) -> dict:
    check = {"check": "maps.counts_not_negative", "expectation": "expect_column_values_to_not_be_in_set",
             "description": "", "success": not failed, "element_count": 10, "unexpected_count": int(failed),
             "examples": [{"map": "m", "key": "{}", "value": 0.0}] if failed else [], "error": None}
    suites = [{"suite": "maps", "success": not failed, "rows": 10, "checks": [check]}]
    views = [{"view": "v", "success": True, "engine_rows": 2, "recomputed_rows": 2, "differences": [], "error": None}]
    return {"epoch": 4, "outcome": "failed" if failed else "passed", "report": "/h/reports/epoch-4/index.html",
            "summary": "/h/reports/epoch-4/summary.json", "suites": suites, "views": views,
            "skipped": {"views": []}, "failed_checks": failed_checks(suites, views)}


def test_the_report_names_failed_checks_and_the_site() -> None:
    text = render_report(_summary(True))
    assert text.startswith("epoch 4: validation failed (1 failed: maps.counts_not_negative)")
    assert "FAILED" in text and '"map": "m"' in text and "oracle.v" in text and "2 rows equal" in text
    assert text.rstrip().endswith("report: /h/reports/epoch-4/index.html")
    detail = json.loads(ledger_detail(_summary(True)))
    assert detail["failed_checks"] == ["maps.counts_not_negative"] and detail["report"].endswith("index.html")
    assert "validation passed" in render_report(_summary(False))


def test_without_its_summary_file_the_report_comes_from_the_ledger(tmp_path) -> None:
    from cumulus.config import Settings
    from cumulus.quality.summary import summary_from_ledger
    from cumulus.store.ledger import LedgerRow

    settings = Settings(home=tmp_path)
    detail = ledger_detail(_summary(True))
    row = LedgerRow(epoch=4, state="failed-validation", validation="failed", validation_detail=detail)
    text = render_report(summary_from_ledger(settings, 4, row))
    assert text.startswith("epoch 4: validation failed (1 failed: maps.counts_not_negative)")
    assert "report: /h/reports/epoch-4/index.html" in text


def test_each_epoch_links_its_page_in_the_one_site(tmp_path) -> None:
    """The report is the first failed suite's page (else the first suite's); the ledger
    page links it relative to <home>/reports, and reports/epoch-N/index.html forwards to
    it. A ledger row naming a page elsewhere (a moved home) falls back to that forward."""
    from cumulus.config import Settings
    from cumulus.pipeline.status import data_docs_link, report_link
    from cumulus.quality.summary import report_page, site_dir, write_epoch_page

    settings = Settings(home=tmp_path)
    assert data_docs_link(settings) is None and report_link(settings, 2, None) is None
    runs = site_dir(tmp_path) / "validations"
    pages = {s: runs / s / "epoch-2" / "20240501T120000.000000Z" / f"cumulus-spark-{s}.html" for s in ("tags", "maps")}
    for page in [*pages.values(), site_dir(tmp_path) / "index.html"]:
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text("<html></html>")
    suites = [{"suite": s, "success": s != "maps", "page": str(p)} for s, p in pages.items()]
    assert report_page(suites) == str(pages["maps"])
    assert report_page([{**s, "success": True} for s in suites]) == str(pages["tags"])

    detail = ledger_detail({**_summary(True), "report": report_page(suites)})
    assert report_link(settings, 2, detail) == "data_docs/validations/maps/epoch-2/20240501T120000.000000Z/cumulus-spark-maps.html"
    assert data_docs_link(settings) == "data_docs/index.html"
    forward = write_epoch_page(settings, 2, pages["maps"])
    text = forward.read_text()
    assert 'url=../data_docs/validations/maps/epoch-2/20240501T120000.000000Z/cumulus-spark-maps.html"' in text
    assert 'href="../data_docs/index.html"' in text
    moved = ledger_detail({**_summary(True), "report": "/elsewhere/reports/data_docs/validations/maps/x.html"})
    assert report_link(settings, 2, moved) == "epoch-2/index.html"
    text = render_report({**_summary(False), "data_docs": "/h/reports/data_docs/index.html"})
    assert "data docs (every epoch): /h/reports/data_docs/index.html\n" in text
    assert text.rstrip().endswith("report: /h/reports/epoch-4/index.html")


def test_compare_view_of_limited_views_and_hidden_group_keys() -> None:
    """LIMIT/OFFSET: the recomputation gives every row; the engine's are compared with theirs
    and counted against the window (rows tied at its edge may be either). A view that does
    not show its group key is matched on whole rows."""
    from pathlib import Path

    from cumulus.schema import load_schema
    from cumulus.sql.views import compile_views

    tpch = load_schema(Path(__file__).resolve().parents[1] / "fixtures" / "schemas" / "tpch.sql")
    views = compile_views(tpch, [
        ("top", "SELECT o_custkey, SUM(o_totalprice) AS spent FROM orders GROUP BY o_custkey ORDER BY spent DESC LIMIT 2"),
        ("hidden", "SELECT COUNT(*) AS n FROM orders GROUP BY o_orderpriority"),
    ]).views
    every = [(1, Decimal("9")), (2, Decimal("7")), (3, Decimal("7")), (4, Decimal("1"))]
    assert compare_view(views["top"], [(1, Decimal("9")), (3, Decimal("7.00"))], every).equal  # a tie at the edge
    short = compare_view(views["top"], [(1, Decimal("9"))], every)
    assert [r["difference"] for r in short.differences] == ["LIMIT/OFFSET: the engine has 1 rows, the recomputation 2"]
    wrong = compare_view(views["top"], [(1, Decimal("9")), (2, Decimal("8"))], every)
    assert [r["difference"] for r in wrong.differences] == ["spent: engine 8, recomputed 7"]
    assert compare_view(views["hidden"], [(3,), (3,), (5,)], [(5,), (3,), (3,)]).equal
    assert not compare_view(views["hidden"], [(3,), (4,)], [(3,), (3,)]).equal
