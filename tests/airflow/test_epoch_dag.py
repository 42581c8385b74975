"""Epochs through the real cumulus_epoch DAG (`airflow dags test`, SQLite metadata) over a
tiny generated TPC-H stream (two sources, inserts and deletes). The Spark steps run in
the home's warm engine (`cumulus engine serve`, handed over by the tasks), except epoch
3, run after the engine was killed with -9: the tasks find it gone and spark-submit
their steps themselves; a restarted engine takes over again for the rest.

1. epoch 1 (the initial load): published; every view at tag epoch-1 equals DuckDB over
   the rows alive after epoch 1;
2. epoch 2 with the catalog source late (its folder missing): the run waits
   `late_timeout`, closes without it and records the folder in late_files; the views
   equal DuckDB over sales through epoch 2 and catalog through epoch 1;
3. the late folder arrives: epoch 3 takes it with its own (a `carried` entry) and the
   views equal DuckDB over everything through epoch 3;
4. a rerun of the closed epoch 2 changes nothing; a run ahead of the ledger fails.
"""

from __future__ import annotations

import pytest
from airflowkit import (
    AirflowEnv,
    WarmEngine,
    assert_stable_equals_duckdb,
    ledger,
    logical_date,
    make_stream,
    plugin_probe,
)

pytestmark = [pytest.mark.airflow, pytest.mark.e2e, pytest.mark.slow]

LATE_TIMEOUT_S = 15


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("epochs")
    stream = make_stream(root, epochs=3)
    env = AirflowEnv(root, pipeline={"late_timeout": f"{LATE_TIMEOUT_S}s"})
    engines = []
    try:
        env.setup(stream)
        engines.append(WarmEngine(env))
        yield env, stream, engines
    finally:
        env.close()
        for engine in engines:
            if engine.proc.poll() is None:
                engine.kill()


def test_epochs_late_source_and_rerun(pipeline):
    env, stream, engines = pipeline

    run = env.dags_test("cumulus_epoch", logical_date(1))
    assert (run.stdout + run.stderr).count("handed to the warm engine") >= 6  # ingest, apply per source; close; validate
    rows = ledger(env)
    assert rows[1].state == "published" and rows[1].validation == "passed", rows[1]
    assert rows[2].state == "open"
    assert rows[1].events == sum(b.rows for b in stream.batches if b.epoch == 1)
    assert not rows[1].late_files
    assert set(assert_stable_equals_duckdb(env, stream, 1, 1)) == {"segment_orders", "order_priority_mix"}

    # Epoch 2: the catalog's folder has not landed.
    folder = stream.folder("catalog", 2)
    held = folder.with_name(".held-epoch-2")
    folder.rename(held)
    env.dags_test("cumulus_epoch", logical_date(2))
    rows = ledger(env)
    assert rows[2].state == "published", rows[2]
    late = [e for e in rows[2].late_files or [] if e["kind"] == "late"]
    assert [(e["source"], e["folder"], e["to_epoch"]) for e in late] == [("catalog", str(folder), 3)]
    assert rows[2].events == stream.batch("sales", 2).rows  # sales only
    assert_stable_equals_duckdb(env, stream, 2, {"sales": 2, "catalog": 1})

    # The late files arrive; epoch 3 takes them along with its own. The engine is killed
    # first: its state file stays, the tasks see its process gone and spark-submit.
    engines[0].kill()
    assert (env.home / "engine" / "engine.json").is_file()
    held.rename(folder)
    run = env.dags_test("cumulus_epoch", logical_date(3))
    assert "handed to the warm engine" not in run.stdout + run.stderr and "spark-submit" in run.stdout + run.stderr
    rows = ledger(env)
    assert rows[3].state == "published", rows[3]
    carried = [e for e in rows[3].late_files or [] if e["kind"] == "carried"]
    assert [(e["source"], e["folder"]) for e in carried] == [("catalog", str(folder))]
    assert not [e for e in rows[3].late_files if e["kind"] == "late"]
    assert rows[3].events == sum(b.rows for b in stream.batches if b.epoch == 3) + stream.batch("catalog", 2).rows
    assert_stable_equals_duckdb(env, stream, 3, 3)

    # A restarted engine takes over. A rerun of the closed epoch 2 (the DAG's epoch param):
    # every step finds its work done.
    engines.append(WarmEngine(env))
    before = ledger(env)
    env.dags_test("cumulus_epoch", logical_date(4), params={"epoch": 2})
    after = ledger(env)
    assert [(r.epoch, r.state, r.snapshots, r.events) for r in after.values()] == \
           [(r.epoch, r.state, r.snapshots, r.events) for r in before.values()]
    assert max(after) == 4 and after[4].state == "open"

    # The UI plugin shows the ledger: states, counts, validation, report, late files.
    probe = plugin_probe(env)
    assert probe["codes"] == [200, 200, 200]
    epochs = {e["epoch"]: e for e in probe["status"]["epochs"]}
    assert [epochs[n]["state"] for n in (1, 2, 3, 4)] == ["published"] * 3 + ["open"]
    assert epochs[2]["events"] == rows[2].events and epochs[1]["deltas"] > 0
    assert epochs[1]["validation"] == "passed" and epochs[1]["report"].startswith("data_docs/validations/tags/epoch-1/")
    assert probe["status"]["data_docs"] == "data_docs/index.html"  # one site, every epoch's results
    assert epochs[2]["late"][0]["source"] == "catalog"
    assert {v["name"]: (v["stable_epoch"], v["stable_rows"]) for v in probe["status"]["views"]} == {
        "segment_orders": (3, 5), "order_priority_mix": (3, 5)}
    assert "Cumulus ledger" in probe["page"] and probe["page"].count(">published<") == 3
    assert probe["page"].count('<svg class="plot"') == 4 and epochs[2]["step_seconds"]["fold"] > 0
    assert epochs[2]["stable_lag_s"] > 0

    # A run for epoch 5 while epoch 4 is open fails: epochs close in order.
    proc = env.dags_test("cumulus_epoch", logical_date(5), check=False, params={"epoch": 5})
    assert proc.returncode != 0
    assert "epoch 4 is still open" in proc.stdout + proc.stderr
    assert max(ledger(env)) == 4
    assert engines[1].stop() == 0 and not (env.home / "engine" / "engine.json").exists()
