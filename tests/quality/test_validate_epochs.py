"""Validation of a closed epoch end to end on one tiny home (two views, one epoch): a map
corrupted at its tag fails the suites and the oracle (ledger failed-validation, exit
status 1, the failing checks named) and the epoch is not published: views_stable.* and
the read API's stable epoch do not show it; once the tag is repaired the same epoch
passes, is published (stable shows it) with its pages in the home's one Data Docs site
(replacing the failed run's), and `quality report` prints it; epoch 2 joins epoch 1 in
the site's history. Write-audit-publish: a failed epoch 3 holds a passing epoch 4 until
an operator accepts it with a reason. The tests run in order on one home."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from qualitykit import build_shop_home, corrupt_map, data_docs_rows, job_main, restore_tag

from cumulus.cli import main
from cumulus.store.catalog import pyiceberg_catalog
from cumulus.store.ledger import ledger_row
from cumulus.store.tables import Home, tables_of

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def shop(spark, tmp_path_factory):
    default_catalog = spark.conf.get("spark.sql.defaultCatalog")
    home = build_shop_home(spark, tmp_path_factory.mktemp("quality") / "home")
    yield home
    spark.conf.set("spark.sql.defaultCatalog", default_catalog)  # the CLI switched it


def _cli(home, *args: str) -> int:
    return main(["--home", str(home.settings.home), *args])


def _ledger(home):
    return ledger_row(pyiceberg_catalog(home.settings), home.settings, home.epoch)


def _stable_rows(spark, settings, name: str) -> list[tuple]:
    """views_stable.<name> by name, as any Spark SQL reader sees it."""
    from cumulus.engine.publish import view_names
    from cumulus.store.tables import attach_catalog

    attach_catalog(Home(spark, settings))
    return sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {view_names(settings, name)[1]}").collect())


def _view_at(settings, name: str, epoch: int) -> list[tuple]:
    from cumulus.read import At, Reader

    return sorted(Reader(settings).read_view(name, At(epoch)))


def _stable_epoch(settings) -> int | None:
    from cumulus.engine.publish import stable_epoch
    from cumulus.store.ledger import ledger_rows

    row = stable_epoch(settings, ledger_rows(pyiceberg_catalog(settings), settings))
    return row.epoch if row else None


def test_a_corrupted_map_fails_validation(spark, shop, capsys) -> None:
    corrupt_map(spark, shop.settings, "sales_count", shop.epoch)
    status = job_main("validate")(["--home", str(shop.settings.home)])  # default: the latest closed epoch
    out = capsys.readouterr().out
    assert status == 1, out
    row = _ledger(shop)
    assert (row.state, row.validation) == ("failed-validation", "failed")
    failed = json.loads(row.validation_detail)["failed_checks"]
    assert "tags.match_ledger" in failed  # the tag was moved after the close
    assert "maps.counts_not_negative" in failed  # an entry sums to -1
    assert "oracle.views_equal_sql" in failed and "oracle.sales" in failed  # its count is off
    assert "oracle.returned" not in failed and "base.mult_positive" not in failed
    assert "failed checks:" in out and "maps.counts_not_negative" in out
    assert (shop.settings.home / "reports" / "epoch-1" / "index.html").is_file()  # forwards to the report
    summary = json.loads((shop.settings.home / "reports" / "epoch-1" / "summary.json").read_text())
    # the report: the page of the first failed suite in the one site
    assert summary["report"] == summary["suites"][0]["page"] and Path(summary["report"]).is_file()
    assert "/reports/data_docs/validations/tags/epoch-1/" in summary["report"]
    (sales,) = [v for v in summary["views"] if v["view"] == "sales"]
    # the group's count sums to -1: the engine's view has no such group
    assert sales["differences"] and "group missing in the engine" in sales["differences"][0]["difference"]

    assert _cli(shop, "quality", "report") == 0  # default: the latest validated epoch
    report = capsys.readouterr().out
    assert "epoch 1: validation failed" in report and "FAILED" in report and "oracle.sales" in report
    # never published: the stable branch, views_stable.* and the read API show no epoch
    assert _stable_epoch(shop.settings) is None and _stable_rows(spark, shop.settings, "sales") == []
    assert _cli(shop, "read", "sales", "--stable") == 4  # NOT_FOUND
    assert "no epoch is published yet" in capsys.readouterr().err


def test_after_a_repair_the_epoch_passes_and_is_published(spark, shop, capsys) -> None:
    restore_tag(spark, shop.settings, shop.epoch)
    assert _cli(shop, "validate") == 0  # a failed epoch is no longer waiting: named explicitly
    assert "nothing to validate" in capsys.readouterr().out
    status = _cli(shop, "validate", "--epoch", str(shop.epoch))
    out = capsys.readouterr().out
    assert status == 0, out
    row = _ledger(shop)
    assert (row.state, row.validation) == ("published", "passed")
    detail = json.loads(row.validation_detail)
    assert detail["failed_checks"] == [] and "/reports/data_docs/validations/tags/epoch-1/" in detail["report"]
    home = shop.settings.home
    site = home / "reports" / "data_docs"
    assert (home / "gx" / "great_expectations.yml").is_file() and (home / "reports" / "epoch-1" / "index.html").is_file()
    summary = json.loads((home / "reports" / "epoch-1" / "summary.json").read_text())
    assert summary["report"] == detail["report"] and summary["data_docs"] == str(site / "index.html")
    assert [s["suite"] for s in summary["suites"]] == ["tags", "maps", "base", "events", "oracle"]
    assert all(Path(s["page"]).is_file() for s in summary["suites"])
    # the site lists epoch 1 once per suite: the passing run replaced the failed one
    rows = data_docs_rows(site / "index.html")
    assert sorted((r["run"], r["suite"], r["status"]) for r in rows) == sorted(
        ("epoch-1", s, "Success") for s in ("tags", "maps", "base", "events", "oracle"))
    assert len(list((site / "validations").rglob("*.html"))) == 5
    assert {v["view"]: v["success"] for v in summary["views"]} == {"sales": True, "returned": True}
    maps = summary["suites"][1]
    assert maps["rows"] > 0 and len(maps["tables"]) == 7
    assert "epoch 1: validation passed -> published" in out
    assert _stable_epoch(shop.settings) == 1
    assert _stable_rows(spark, shop.settings, "sales") == _view_at(shop.settings, "sales", 1) != []


def test_quality_report_prints_every_check_and_the_site(shop, capsys) -> None:
    assert _cli(shop, "quality", "report", "--epoch", "1") == 0
    out = capsys.readouterr().out
    assert "epoch 1: validation passed" in out
    for check in ("tags.present", "maps.counts_not_negative", "base.mult_positive", "events.versions_unique", "oracle.sales"):
        assert check in out
    summary = json.loads((shop.settings.home / "reports" / "epoch-1" / "summary.json").read_text())
    assert f"report: {summary['report']}" in out and f"data docs (every epoch): {summary['data_docs']}" in out
    assert _cli(shop, "quality", "report", "--epoch", "1", "--format", "json") == 0
    assert json.loads(capsys.readouterr().out)["outcome"] == "passed"


def test_a_published_epoch_is_only_reported_again(shop, capsys) -> None:
    assert _cli(shop, "validate", "--epoch", "1") == 0
    assert "already published" in capsys.readouterr().out
    assert _ledger(shop).state == "published"



def test_a_later_epoch_checks_what_it_touched_and_full_checks_everything(spark, shop, tmp_path, capsys) -> None:
    """Epoch 2 adds one order of a new region, and a faulty row (versioned as epoch 1)
    drives the count of another region to -1 before the close. The full validation
    (every entry, the oracle) fails on it; epoch 2's default validation covers only the
    entries and tuples the epoch touched, skips the oracle, and passes."""
    from cumulus.engine.close import close_epoch
    from cumulus.engine.registry import batch_plan
    from cumulus.ingest.job import ingest_files
    from cumulus.read import Reader

    settings = shop.settings
    home = Home(spark, settings)
    folder = tmp_path / "epoch2"
    folder.mkdir()
    (folder / "orders.csv").write_text("1|1|9001|zz|2024-05-01|12.50|1.5\n")
    ingest_files(home, "shop", [folder], fmt="dbtoaster")
    hit = corrupt_map(spark, settings, "sales_count", 1, retag=False)
    reader = Reader(settings)
    close_epoch(home, batch_plan(reader.compilation), 2)
    # (main still holds the row of the first test's corruption too: the count is below -1)
    assert reader.entries("sales_count", hit, reader.stable(2))[hit] < 0
    assert ("zz",) in reader.entries("sales_count", (), reader.stable(2))

    assert _cli(shop, "validate", "--epoch", "2", "--full") == 1
    out = capsys.readouterr().out
    assert "validating in full" in out
    failed = json.loads(ledger_row(pyiceberg_catalog(settings), settings, 2).validation_detail)["failed_checks"]
    assert "maps.counts_not_negative" in failed and "oracle.sales" in failed
    # failed: stable stays on epoch 1 (no region zz)
    assert _stable_epoch(settings) == 1 and _stable_rows(spark, settings, "sales") == _view_at(settings, "sales", 1)
    assert not any(row[0] == "zz" for row in _stable_rows(spark, settings, "sales"))

    assert _cli(shop, "validate", "--epoch", "2") == 0  # the default for epoch 2: what it touched
    out = capsys.readouterr().out
    assert "validating what the epoch touched" in out and "at epoch 11 or with --full" in out
    assert "oracle " not in out and "oracle." not in out  # no view recomputed, no oracle check
    summary = json.loads((settings.home / "reports" / "epoch-2" / "summary.json").read_text())
    assert summary["scope"] == "touched" and summary["views"] == []
    assert _ledger_state(shop, 2) == "published"
    # the one site's history: epoch 1 in full, epoch 2 as touched (its full run replaced)
    rows = data_docs_rows(settings.home / "reports" / "data_docs" / "index.html")
    assert sorted((r["run"], r["suite"]) for r in rows) == sorted(
        [("epoch-1", s) for s in ("tags", "maps", "base", "events", "oracle")]
        + [("epoch-2", s) for s in ("tags", "maps", "base", "events")])


def _ledger_state(home, epoch: int) -> str:
    return ledger_row(pyiceberg_catalog(home.settings), home.settings, epoch).state


def test_a_failed_epoch_holds_the_later_ones_until_it_is_accepted(spark, shop, tmp_path, capsys) -> None:
    """Write-audit-publish: epoch 3 fails, epoch 4 passes but is held (stable stays on 2,
    `epoch status` says why); `epoch publish 3 --accept-failed` needs a reason, keeps it in
    the ledger, and publishes 3 and then 4: stable moves to 4."""
    from cumulus.engine.close import close_epoch
    from cumulus.engine.registry import batch_plan
    from cumulus.ingest.job import ingest_files
    from cumulus.read import Reader

    settings = shop.settings
    home = Home(spark, settings)
    plan = batch_plan(Reader(settings).compilation)
    for epoch, region in ((3, "yy"), (4, "xx")):
        folder = tmp_path / f"epoch{epoch}"
        folder.mkdir()
        (folder / "orders.csv").write_text(f"1|1|{9000 + epoch}|{region}|2024-05-0{epoch}|10.00|1.0\n")
        ingest_files(home, "shop", [folder], fmt="dbtoaster")
        close_epoch(home, plan, epoch)
        if epoch == 3:
            corrupt_map(spark, settings, "sales_count", 3)  # its tag moved: tags.match_ledger fails
            assert _cli(shop, "validate", "--epoch", "3") == 1
    assert _ledger_state(shop, 3) == "failed-validation"
    assert _cli(shop, "validate") == 0  # the oldest closed epoch not validated: 4
    out = capsys.readouterr().out
    assert "epoch 4: validation passed -> held" in out and "epoch 3 is failed-validation" in out
    row = ledger_row(pyiceberg_catalog(settings), settings, 4)
    assert (row.state, row.validation) == ("closed", "passed")
    assert _stable_epoch(settings) == 2 and _stable_rows(spark, settings, "sales") == _view_at(settings, "sales", 2)
    # nor through results.<view> (its rows and tags) or dbt (its epoch: the macro's query)
    from cumulus.store.commit import table_metadata

    results = tables_of(settings).results("sales")
    assert sorted(map(tuple, spark.table(results).collect())) == _view_at(settings, "sales", 2)
    assert not {"epoch-3", "epoch-4"} & set(table_metadata(spark, results)["refs"])
    assert spark.sql(f"SELECT max(epoch) FROM {tables_of(settings).ledger} WHERE state = 'published'").first()[0] == 2
    assert _cli(shop, "epoch", "status") == 0
    status = capsys.readouterr().out
    assert "stable epoch: 2" in status and "epoch 3 failed validation and holds every later epoch" in status
    assert "epoch 4 passed validation and is held" in status
    assert _cli(shop, "validate", "--epoch", "4") == 0 and "is held" in capsys.readouterr().out

    assert _cli(shop, "epoch", "publish", "3", "--accept-failed") == 2
    assert "needs a --reason" in capsys.readouterr().err
    assert _cli(shop, "epoch", "publish", "3", "--accept-failed", "--reason", "count off by one, known") == 0
    assert "stable epoch: 4" in capsys.readouterr().out
    three = ledger_row(pyiceberg_catalog(settings), settings, 3)
    assert three.state == "published" and "count off by one, known" in three.validation_detail
    assert _ledger_state(shop, 4) == "published" and _stable_epoch(settings) == 4
    assert _stable_rows(spark, settings, "sales") == _view_at(settings, "sales", 4)
    assert any(row[0] == "xx" for row in _stable_rows(spark, settings, "sales"))


RESULTS_READER = """
import json, sys
from pyiceberg.catalog import load_catalog

catalog = load_catalog(sys.argv[1])  # from $PYICEBERG_HOME/.pyiceberg.yaml, written by init
out = {}
for view in ("sales", "returned"):
    table = catalog.load_table(f"results.{view}")
    for epoch in (1, 2, 3, 4):
        snapshot = table.snapshot_by_name(f"epoch-{epoch}")
        con = table.scan(snapshot_id=snapshot.snapshot_id).to_duckdb(table_name="r")
        out[f"{view}@{epoch}"] = [[str(v) for v in row] for row in con.execute("SELECT * FROM r").fetchall()]
    out[f"{view}@current"] = [[str(v) for v in row] for row in table.scan().to_pandas().itertuples(index=False)]
assert not [m for m in sys.modules if m.split(".")[0] == "cumulus"]
print(json.dumps(out))
"""


def test_results_tables_hold_every_published_epoch_for_any_iceberg_reader(spark, shop, tmp_path) -> None:
    """results.<view> at each published epoch's tag, read by PyIceberg (load_catalog from
    the config file init wrote) and DuckDB in a process that imports no Cumulus code,
    equals the view's rows as Cumulus reads them; its current snapshot is the stable epoch's.
    Later epochs updated the tables by their touched groups: the reader applies the MERGEs'
    delete files."""
    import os
    import subprocess
    import sys

    from cumulus.engine.results import results_updates

    settings = shop.settings
    updates = [results_updates(Home(spark, settings), epoch) for epoch in (2, 3, 4)]
    assert any(how.get(view) == "touched" for how in updates for view in ("sales", "returned")), updates
    assert (settings.home / ".pyiceberg.yaml").is_file()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUMULUS_", "PYICEBERG_"))}
    done = subprocess.run([sys.executable, "-c", RESULTS_READER, settings.catalog], capture_output=True, text=True,
                          env={**env, "PYICEBERG_HOME": str(settings.home)}, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)

    def same(value: str) -> str:  # a decimal's value, whatever its scale (9.770000 is 9.77)
        from decimal import Decimal, InvalidOperation

        try:
            return format(Decimal(value).normalize(), "f")
        except InvalidOperation:
            return value

    def text(rows):
        return sorted([same(str(v)) for v in row] for row in rows)

    for view in ("sales", "returned"):
        for epoch in (1, 2, 3, 4):
            assert text(got[f"{view}@{epoch}"]) == text(_view_at(settings, view, epoch)), (view, epoch)
        assert text(got[f"{view}@current"]) == text(_view_at(settings, view, _stable_epoch(settings)))
