"""The committed generated layer of the dbt project (models/models/staging) equals a fresh
`cumulus dbt generate` from the demo views, and the profile and task environment carry
the session factory's settings; dbt's run results are read per node. No JVM."""

from __future__ import annotations

import yaml
from sqlreadskit import DEMO_VIEWS, REPO, SCHEMA

from cumulus.config import Settings
from cumulus.dbt.generate import generate, staging_model
from cumulus.dbt.profile import PROFILE, TARGET, dbt_env, profile_text, write_profile
from cumulus.dbt.run import invocation, run_results
from cumulus.pipeline.dbt import stable_epoch
from cumulus.schema import load_schema
from cumulus.spark.session import spark_conf
from cumulus.sql.views import compile_views

PROJECT = REPO / "models"


def demo_generation():
    views = [(p.stem, p.read_text()) for p in DEMO_VIEWS]
    return generate(compile_views(load_schema(SCHEMA), views))


def test_committed_staging_models_equal_a_fresh_generation() -> None:
    generated = demo_generation()
    assert generated.differences(PROJECT) == [], "run: cumulus dbt generate --schema demo/tpch_schema.sql demo/views/*.sql"
    names = {p.name for p in generated.files}
    assert {f"{staging_model(p.stem)}.sql" for p in DEMO_VIEWS} <= names


def test_generation_check_reports_drift(tmp_path) -> None:
    generated = demo_generation()
    generated.write(tmp_path)
    assert generated.differences(tmp_path) == []
    first = next(p for p in generated.files if p.suffix == ".sql")
    (tmp_path / first).write_text("select 1\n")
    (tmp_path / first.with_name("stg_cumulus__gone.sql")).write_text("select 1\n")
    diffs = generated.differences(tmp_path)
    assert any("differs" in d for d in diffs) and any("stale" in d for d in diffs)
    generated.write(tmp_path)
    assert generated.differences(tmp_path) == []


def test_every_model_has_tests_and_sources_cover_the_maps() -> None:
    """Every staging and mart model is documented with tests (keys, invariants)."""
    docs = [yaml.safe_load(p.read_text()) for p in (PROJECT / "models").rglob("*.yml")]
    models = {m["name"]: m for d in docs for m in d.get("models", [])}
    sql_models = {p.stem for p in (PROJECT / "models").rglob("*.sql")}
    assert sql_models == set(models)
    for name, model in models.items():
        column_tests = [t for c in model.get("columns", []) for t in c.get("data_tests", [])]
        assert model.get("data_tests") or column_tests, name
        assert any(t == "not_null" for t in column_tests), name
    sources = {t["name"]: t for d in docs for s in d.get("sources", []) for t in s["tables"]}
    assert set(sources) == {"ledger", "entries"}  # the maps are one table, maps.entries
    compiled = compile_views(load_schema(SCHEMA), [(p.stem, p.read_text()) for p in DEMO_VIEWS])
    used = {m for v in compiled.views.values() for m in v.maps}
    assert all(f"`{m}`" in sources["entries"]["description"] for m in used)  # each map the views read is described


def test_profile_is_the_session_factory_conf(tmp_path) -> None:
    settings = Settings(home=tmp_path / "home", spark_master="local[2]")
    doc = yaml.safe_load(profile_text(settings))
    out = doc[PROFILE]["outputs"][TARGET]
    assert (out["type"], out["method"]) == ("spark", "session")
    conf = spark_conf(settings, app_name="cumulus-dbt")
    params = out["server_side_parameters"]
    assert params["spark.sql.catalogImplementation"] == "in-memory"
    options = params.pop("spark.driver.extraJavaOptions")
    assert options.startswith(conf.pop("spark.driver.extraJavaOptions"))  # the derby home stays
    assert "-Dlog4j2.configurationFile=" in options
    assert {k: v for k, v in params.items() if k != "spark.sql.catalogImplementation"} == conf
    path = write_profile(settings)
    assert (path.parent / "log4j2.properties").is_file()
    stamp = path.stat().st_mtime_ns
    assert write_profile(settings) == path and path.stat().st_mtime_ns == stamp  # unchanged: not rewritten
    env = dbt_env(settings)
    assert env["CUMULUS_HOME"] == str(settings.home) and env["SPARK_LOCAL_IP"] == "127.0.0.1"
    # The ledger source is catalog-qualified from CUMULUS_CATALOG: with the default catalog
    # name `cumulus`, a bare `cumulus.ledger` would name table `ledger` of catalog `cumulus`.
    assert env["CUMULUS_CATALOG"] == settings.catalog
    sources = yaml.safe_load((REPO / "models" / "models" / "staging" / "_cumulus__sources.yml").read_text())
    ledger = next(s for s in sources["sources"] if any(t["name"] == "ledger" for t in s["tables"]))
    assert ledger["schema"] == "{{ env_var('CUMULUS_CATALOG', 'cumulus') }}.cumulus"


def test_cumulus_dbt_command_line(tmp_path) -> None:
    import argparse

    from cumulus.commands.dbt import _take_epoch

    settings = Settings(home=tmp_path / "home")
    args = argparse.Namespace(epoch=None)
    rest = _take_epoch(args, ["--select", "marts", "--epoch", "3"])
    argv, env = invocation(settings, args.epoch, "build", rest)
    assert argv[1:] == ["build", "--select", "marts", "--vars", "{epoch: 3}"]
    assert env["DBT_PROFILES_DIR"] == str(settings.home / "dbt")
    assert env["DBT_TARGET_PATH"] == str(settings.home / "dbt" / "target")
    assert env["DBT_PROJECT_DIR"] == str(PROJECT)
    argv, _ = invocation(settings, None, "docs", ["generate"])
    assert argv[1:] == ["docs", "generate"]


class Event:
    def __init__(self, extra):
        self.extra = extra


def test_stable_epoch_from_asset_events() -> None:
    assert stable_epoch({}) is None and stable_epoch(None) is None
    events = {"snapshot": [Event({"epoch": 3, "tag": "epoch-3"}), Event({"epoch": 5, "tag": "epoch-5"})]}
    assert stable_epoch(events) == 5
    assert stable_epoch({"snapshot": [Event({"tag": "epoch-7"})]}) == 7
    assert stable_epoch({"snapshot": [Event({})]}) is None


def test_run_results_per_node(tmp_path) -> None:
    import json

    settings = Settings(home=tmp_path / "home")
    assert run_results(settings) == []  # no run yet
    target = settings.home / "dbt" / "target"
    target.mkdir(parents=True)
    (target / "run_results.json").write_text(json.dumps({"results": [
        {"unique_id": "model.cumulus.nation_revenue", "status": "success", "execution_time": 1.234, "message": "OK"},
        {"unique_id": "test.cumulus.not_null_x.5f1", "status": "fail", "execution_time": 0.5, "message": "Got 2 results"},
    ]}))
    got = run_results(settings)
    assert [(n.kind, n.name, n.status, n.seconds, n.failed) for n in got] == [
        ("model", "nation_revenue", "success", 1.23, False), ("test", "not_null_x", "fail", 0.5, True)]
