"""The dbt project (dbt_project.yml, models/) on the tiny home: `cumulus dbt build` (every model and test,
the epoch from the ledger: the latest published) and `cumulus dbt --epoch 1 docs
generate`; the marts are Iceberg tables whose numbers agree with the view read in
Python; and the DAG (dags/cumulus_dbt.py) is one `dbt build` task that parses without
writing or running anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from sqlreadskit import REPO

from cumulus.dbt.run import run_results
from cumulus.read import At, Reader
from cumulus.store.tables import Home

# The slow tier: they share the tiny TPC-H home (sqlreadskit), built once per run.
pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def cumulus_dbt(settings, *args: str, timeout: float = 300) -> str:
    out = subprocess.run(
        [str(BIN / "cumulus"), "--home", str(settings.home), "dbt", *args],
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-5000:]
    return out.stdout


def test_dbt_build_and_docs_on_the_stable_snapshot(spark, tpch_home) -> None:
    from cumulus.store.catalog import pyiceberg_catalog
    from cumulus.store.ledger import PUBLISHED, transition

    transition(Home(spark, tpch_home), 1, PUBLISHED, validation="passed")  # the DAG's publish step
    built = cumulus_dbt(tpch_home, "build")
    assert "ERROR=0" in built and "WARN=0" in built and "PASS=" in built, built[-3000:]
    # What the DAG's task lists per node: every model built, every test passed.
    nodes = run_results(tpch_home)
    assert {"nation_revenue", "stg_cumulus__pricing_summary"} <= {n.name for n in nodes if n.kind == "model"}
    assert {n.status for n in nodes if n.kind == "model"} == {"success"}
    assert {n.status for n in nodes if n.kind == "test"} == {"pass"} and not any(n.failed for n in nodes)

    docs = cumulus_dbt(tpch_home, "--epoch", "1", "docs", "generate")
    target = tpch_home.home / "dbt" / "target"
    assert "Catalog written" in docs and (target / "index.html").is_file()
    catalog = json.loads((target / "catalog.json").read_text())
    assert {"model.cumulus.nation_revenue", "model.cumulus.stg_cumulus__pricing_summary"} <= set(catalog["nodes"])
    compiled = next(target.rglob("stg_cumulus__order_priority_mix.sql")).read_text()
    assert "VERSION AS OF 'epoch-1'" in compiled and "{{" not in compiled
    assert_docs_render_offline(target)

    # The marts are Iceberg tables (PyIceberg loads them), built from tag epoch-1.
    tables = pyiceberg_catalog(tpch_home)
    nations = tables.load_table("marts.nation_revenue").scan().to_arrow().to_pylist()
    view = Reader(tpch_home).read_view("revenue_by_nation_brand", At(1))
    assert sum(Decimal(r["revenue"]) for r in nations) == sum(Decimal(r[2]) for r in view)
    assert {r["as_of_epoch"] for r in nations} == {1}
    assert len(nations) == len({r[0] for r in view})
    mix = tables.load_table("marts.order_priority_mix").scan().to_arrow().to_pylist()
    assert abs(sum(r["order_share"] for r in mix) - 1) < 1e-9
    assert sum(r["order_count"] for r in mix) == 1500  # epoch 1 holds every order; main lost some

    # docs/sql.md's PyIceberg and DuckDB blocks run as written, on this home.
    printed = run_doc_snippets(REPO / "docs" / "sql.md", tpch_home)
    assert "('marts',)" in printed and "revenue_share" in printed
    assert all(p in printed for p in ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"))


def assert_docs_render_offline(target: Path) -> None:
    """The dbt docs site (what `dbt docs serve` serves) in Chromium that resolves no host
    but loopback: it loads nothing from elsewhere (no usage tracker: the profile turns
    it off) and lists the project's models. Screenshot: tests/artifacts/reports/."""
    import functools
    import http.server
    import threading

    from browserkit import Browser

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(target))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    browser = Browser(target / ".chromium", offline=True)
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        text = browser.open(f"{base}/index.html#!/model/model.cumulus.nation_revenue",
                            expect=("marts.nation_revenue", "Columns"))
        asked, failed = browser.loads()
        assert all(u.startswith((base, "data:")) for u in asked), asked  # nothing from another host
        # dbt docs' own quirk: <img src="{{ getIcon(...) }}"> is asked for once before Angular
        # fills it in (same origin, aborted); anything else failing is a missing asset.
        assert [f for f in failed if "%7B%7B" not in f] == [], failed
        # The model's page: the project tree (staging folded) and the model's details.
        assert all(x in text for x in ("staging", "marts", "marts.nation_revenue", "Columns")), text[:2000]
        drawn = browser.evaluate("""({
            rows: document.querySelectorAll('table tr').length,
            font: getComputedStyle(document.body).fontFamily,
            nav: document.querySelectorAll('a[href*="#!/model/"]').length,
        })""")
        assert drawn["rows"] > 1 and drawn["nav"] >= 2 and "Times" not in drawn["font"], drawn  # styled, with tables
        shot = browser.screenshot(REPO / "tests" / "artifacts" / "reports" / "dbt-docs.png")
    finally:
        browser.close()
        server.shutdown()
    assert shot.stat().st_size > 20_000
    print(f"screenshot: {shot}")


def run_doc_snippets(doc: Path, settings) -> str:
    """Execute the ```python blocks of `doc` in order, in one namespace, with its
    `home = ...` and `catalog_name = ...` lines pointed at `settings`; their output."""
    import contextlib
    import io
    import re

    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)
    assert len(blocks) >= 2, doc
    code = "\n".join(blocks)
    code = re.sub(r'^home = ".*"$', f"home = {str(settings.home)!r}", code, flags=re.M)
    code = re.sub(r'^catalog_name = ".*"$', f"catalog_name = {settings.catalog!r}", code, flags=re.M)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(doc), "exec"), {})
    return out.getvalue()


DAG_CHECK = r"""
import json, sys
from airflow.dag_processing.dagbag import DagBag

bag = DagBag(dag_folder=sys.argv[1])
dag = bag.dags["cumulus_dbt"]
print(json.dumps({
    "errors": {k: str(v) for k, v in bag.import_errors.items()},
    "tasks": sorted(dag.task_dict),
    "retries": sorted({t.retries for t in dag.tasks}),
    "tags": sorted(dag.tags),
    "params": {k: dag.params.get_param(k).schema for k in dag.params},
    "schedule": [a.name for a in dag.timetable.asset_condition.iter_assets().values()]
        if hasattr(dag.timetable.asset_condition, "iter_assets") else str(dag.timetable),
}))
"""


@pytest.mark.airflow
def test_the_dbt_dag_is_one_build_and_parses_without_io(tmp_path) -> None:
    home = tmp_path / "home"  # no home yet: parsing must neither need nor create one
    env = {**os.environ, "CUMULUS_HOME": str(home), "AIRFLOW_HOME": str(tmp_path / "airflow"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "false", "SCARF_NO_ANALYTICS": "true"}
    dag_file = tmp_path / "dags"
    dag_file.mkdir()
    (dag_file / "cumulus_dbt.py").write_text((REPO / "dags" / "cumulus_dbt.py").read_text())
    out = subprocess.run([sys.executable, "-c", DAG_CHECK, str(dag_file)], env=env, capture_output=True,
                         text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-5000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["errors"] == {}
    assert got["tasks"] == ["build"] and got["retries"] == [2] and got["tags"] == ["cumulus", "dbt"]
    assert got["params"]["epoch"]["type"] == ["null", "integer"]
    assert "cumulus_stable_snapshot" in json.dumps(got["schedule"])
    assert not home.exists()  # no profile written, no dbt run at parse time
