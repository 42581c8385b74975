"""The dbt project (dbt_project.yml at the repository root): its generated layer
(models/staging) equals a fresh `cumulus dbt generate` from the demo views (the command's
--check, as CI runs it) and is marked as generated; dbt itself parses the project
(models, docs blocks, exposures) with a throwaway profile; the profile and task
environment carry the session factory's settings; dbt's run results are read per node.
No JVM: `dbt parse` connects to nothing."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from sqlreadskit import DEMO_VIEWS, REPO, SCHEMA

from cumulus.cli import main
from cumulus.config import Settings
from cumulus.dbt.generate import GENERATED_BY, MARKER, STAGING, generate, staging_model
from cumulus.dbt.profile import PROFILE, TARGET, dbt_env, profile_text, write_profile
from cumulus.dbt.run import invocation, run_results
from cumulus.pipeline.dbt import stable_epoch
from cumulus.schema import load_schema
from cumulus.spark.session import spark_conf
from cumulus.sql.views import compile_views

PROJECT = REPO  # dbt_project.yml; models/staging, models/marts; macros/; tests/dbt/
GENERATE = ["dbt", "generate", "--schema", str(SCHEMA), *map(str, DEMO_VIEWS)]  # the demo's views, in order


def demo_generation():
    views = [(p.stem, p.read_text()) for p in DEMO_VIEWS]
    return generate(compile_views(load_schema(SCHEMA), views))


def test_committed_staging_models_equal_a_fresh_generation(capsys) -> None:
    """What CI checks: `cumulus dbt generate --check` on the committed files."""
    code = main([*GENERATE, "--check"])
    err = capsys.readouterr().err
    assert code == 0, f"{err}\nrun: cumulus dbt generate --schema demo/tpch_schema.sql demo/views/*.sql"
    names = {p.name for p in demo_generation().files}
    assert {f"{staging_model(p.stem)}.sql" for p in DEMO_VIEWS} <= names


def test_generate_rewrites_and_check_names_the_stale_files(tmp_path, capsys) -> None:
    project = ["--project-dir", str(tmp_path)]
    assert main([*GENERATE, *project, "--check"]) == 1  # nothing written yet: every file missing
    assert main([*GENERATE, *project]) == 0
    assert main([*GENERATE, *project, "--check"]) == 0
    capsys.readouterr()
    edited = tmp_path / STAGING / f"{staging_model('pricing_summary')}.sql"
    edited.write_text("select 1\n")
    stale = tmp_path / STAGING / f"{staging_model('gone')}.sql"
    stale.write_text("select 1\n")
    before = {p: p.read_text() for p in (tmp_path / STAGING).iterdir()}
    assert main([*GENERATE, *project, "--check"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err  # one line, like `ruff format --check`
    assert f"{STAGING / edited.name}: differs" in err and f"{STAGING / stale.name}: not generated" in err
    assert {p: p.read_text() for p in (tmp_path / STAGING).iterdir()} == before  # --check writes nothing
    assert main([*GENERATE, *project]) == 0
    assert not stale.exists() and edited.read_text().startswith(f"-- {MARKER}")
    assert main([*GENERATE, *project, "--check"]) == 0


def test_generated_files_are_marked() -> None:
    """A header line for readers, `meta.generated_by` for dbt (its manifest), and
    linguist-generated for GitHub's diffs (.gitattributes)."""
    files = sorted(demo_generation().files)
    for rel in files:
        first = (PROJECT / rel).read_text().splitlines()[0]
        assert MARKER in first and first.startswith(("-- ", "# ")), (rel, first)
    models = yaml.safe_load((PROJECT / STAGING / "_cumulus__models.yml").read_text())["models"]
    assert all(m["config"]["meta"]["generated_by"] == GENERATED_BY for m in models)
    sources = yaml.safe_load((PROJECT / STAGING / "_cumulus__sources.yml").read_text())["sources"]
    assert all(s["config"]["meta"]["generated_by"] == GENERATED_BY for s in sources)
    written_by_hand = [STAGING.parent / "marts" / "nation_revenue.sql", STAGING.parent / "marts" / "_marts.yml"]
    attrs = subprocess.run(["git", "check-attr", "linguist-generated", "--", *map(str, files + written_by_hand)],
                           cwd=PROJECT, capture_output=True, text=True, check=True).stdout.splitlines()
    assert attrs == [f"{rel}: linguist-generated: true" for rel in files] + [
        f"{rel}: linguist-generated: unspecified" for rel in written_by_hand]


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


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> dict:
    """dbt's manifest of the project from `dbt parse`, run as `cumulus dbt parse` runs it
    (cumulus.dbt.run.invocation: the profile of a throwaway home, the project dir from
    cumulus.dbt.profile), from another folder. Parsing connects to nothing."""
    settings = Settings(home=tmp_path_factory.mktemp("dbt-parse") / "home")
    write_profile(settings)
    argv, env = invocation(settings, None, "parse", [])
    out = subprocess.run(argv, env=env, cwd=settings.home, capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, (out.stdout + out.stderr)[-5000:]
    return json.loads((settings.home / "dbt" / "target" / "manifest.json").read_text())


def _models(manifest: dict) -> dict[str, dict]:
    return {n["name"]: n for n in manifest["nodes"].values() if n["resource_type"] == "model"}


def test_dbt_finds_the_project_at_the_repository_root(manifest) -> None:
    """dbt_project.yml at the root; models in models/staging and models/marts, macros in
    macros/, the data tests in tests/dbt/ (pytest's tree holds no other dbt file)."""
    assert manifest["metadata"]["project_name"] == "cumulus"
    folders = {m["original_file_path"].rsplit("/", 1)[0]: m["fqn"][1] for m in _models(manifest).values()}
    assert folders == {"models/staging": "staging", "models/marts": "marts"}
    singular = {n["original_file_path"] for n in manifest["nodes"].values()
                if n["resource_type"] == "test" and n["original_file_path"].endswith(".sql")}
    assert singular == {str(p.relative_to(REPO)) for p in (REPO / "tests" / "dbt").glob("*.sql")} != set()
    generic = {m["original_file_path"] for m in manifest["macros"].values() if m["package_name"] == "cumulus"
               and m["name"].startswith("test_")}
    assert generic == {str(p.relative_to(REPO)) for p in (REPO / "tests" / "dbt" / "generic").glob("*.sql")}
    ours = {m["original_file_path"] for m in manifest["macros"].values() if m["package_name"] == "cumulus"} - generic
    assert ours == {str(p.relative_to(REPO)) for p in (REPO / "macros").glob("*.sql")}


def test_docs_describe_every_model_and_column(manifest) -> None:
    """What `dbt docs generate` shows: each model's description comes from a docs block of
    models/docs.md, every column is described, and the site has the project's overview."""
    assert "doc.cumulus.__overview__" in manifest["docs"]
    for name, model in _models(manifest).items():
        assert model["description"].strip() and "{{" not in model["description"], name
        assert model["doc_blocks"], name  # a doc() call, rendered
        undescribed = [c for c, col in model["columns"].items() if not col["description"].strip()]
        assert undescribed == [], (name, undescribed)
        assert model["columns"]["as_of_epoch"]["description"] == manifest["docs"]["doc.cumulus.cumulus_as_of_epoch"][
            "block_contents"], name
        generated = model["config"]["meta"].get("generated_by")
        assert generated == (GENERATED_BY if model["fqn"][1] == "staging" else None), name
    assert {s["config"]["meta"].get("generated_by") for s in manifest["sources"].values()} == {GENERATED_BY}


def test_exposures_read_the_marts(manifest) -> None:
    exposures = manifest["exposures"]
    marts = {uid for uid, n in manifest["nodes"].items() if n["resource_type"] == "model" and n["fqn"][1] == "marts"}
    assert marts <= {d for e in exposures.values() for d in e["depends_on"]["nodes"]}
    for e in exposures.values():
        assert e["type"] in ("dashboard", "analysis", "application") and e["owner"]["name"], e["name"]
        assert e["description"].strip() and e["depends_on"]["nodes"], e["name"]


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
    sources = yaml.safe_load((PROJECT / STAGING / "_cumulus__sources.yml").read_text())
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
