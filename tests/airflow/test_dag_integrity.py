"""DAG integrity: every DAG in dags/ imports without errors (Airflow's DagBag, in a fresh
AIRFLOW_HOME), has tags and retries >= 2 on every task; the epoch DAG's shape (mapped
per-source tasks, ordering, pool, asset, interval from configuration); the UI plugin
loads with its FastAPI app and navigation entry; the tests' (and the demo's) one Airflow
process for many commands, scripts/airflow_runs.py. No Spark runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from airflowkit import REPO, AirflowEnv

pytestmark = pytest.mark.airflow

REPORT = r"""
import json, sys
from airflow.dag_processing.dagbag import DagBag
from airflow import plugins_manager

bag = DagBag(sys.argv[1])
dags = {}
for dag_id, dag in bag.dags.items():
    tasks = {}
    for t in dag.tasks:
        tasks[t.task_id] = {
            "retries": t.retries, "pool": t.pool, "trigger_rule": str(t.trigger_rule),
            "depends_on_past": t.depends_on_past, "mapped": t.get_closest_mapped_task_group() is not None,
            "mode": getattr(t, "mode", None), "soft_fail": getattr(t, "soft_fail", None),
            "outlets": [getattr(o, "uri", str(o)) for o in (t.outlets or [])],
            "downstream": sorted(t.downstream_task_ids), "type": type(t).__name__,
        }
    dags[dag_id] = {
        "tags": sorted(dag.tags), "max_active_runs": dag.max_active_runs, "catchup": dag.catchup,
        "timetable": type(dag.timetable).__name__, "delta": str(getattr(dag.timetable, "delta", "")),
        "fileloc": dag.fileloc, "tasks": tasks, "params": {k: dag.params.get_param(k).schema for k in dag.params},
    }
plugins = plugins_manager.get_fastapi_plugins()[0]
views, _ = plugins_manager._get_ui_plugins()
print("REPORT" + json.dumps({
    "errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": dags,
    "fastapi": [{"name": a["name"], "url_prefix": a["url_prefix"]} for a in plugins],
    "views": views,
}))
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    env = AirflowEnv(tmp_path_factory.mktemp("integrity"))
    env.airflow("db", "migrate")  # the metadata database
    yield env
    env.close()


@pytest.fixture(scope="module")
def report(env):
    environ = env.env()
    environ["CUMULUS_PIPELINE_EPOCH_INTERVAL"] = "2h"  # configuration reaches the DAG
    environ["CUMULUS_PIPELINE_POOL"] = "cumulus_test_pool"
    proc = subprocess.run([sys.executable, "-c", REPORT, str(REPO / "dags")], env=environ,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("REPORT"))
    return json.loads(line[len("REPORT"):])


def test_every_dag_imports(report):
    assert not report["errors"], "\n\n".join(f"{path}:\n{error[-3000:]}" for path, error in report["errors"].items())
    files = {p.name for p in (REPO / "dags").glob("*.py")}
    loaded = {d["fileloc"].rsplit("/", 1)[-1] for d in report["dags"].values()}
    assert files <= loaded, f"DAG files without a DAG: {files - loaded}"
    assert {"cumulus_epoch", "cumulus_microbatch", "cumulus_maintenance"} <= set(report["dags"])


def test_tags_and_retries(report):
    for dag_id, dag in report["dags"].items():
        assert dag["tags"], f"{dag_id} has no tags"
        for task_id, task in dag["tasks"].items():
            assert task["retries"] >= 2, f"{dag_id}.{task_id}: retries {task['retries']}"


def test_epoch_dag_shape(report):
    dag = report["dags"]["cumulus_epoch"]
    tasks = dag["tasks"]
    assert dag["max_active_runs"] == 1 and dag["catchup"] is False  # on only when configured
    assert dag["params"]["epoch"]["type"] == ["null", "integer"]  # declared, not an undeclared conf key
    assert dag["timetable"] == "DeltaDataIntervalTimetable" and dag["delta"] == "2:00:00"
    for name in ("source.wait", "source.ingest", "source.apply"):
        assert tasks[name]["mapped"], f"{name} is not mapped over the sources"
    assert tasks["source.wait"]["type"] == "LandingWait"  # waits for the landing files, deferred
    assert tasks["source.ingest"]["downstream"] == ["source.apply"]
    assert tasks["source.apply"]["downstream"] == ["close"]
    assert tasks["close"]["downstream"] == ["validate"] and tasks["validate"]["downstream"] == ["publish"]
    assert tasks["close"]["depends_on_past"] is True  # epochs close in order
    for name in ("source.ingest", "source.apply", "close", "validate"):
        assert tasks[name]["pool"] == "cumulus_test_pool", name  # the catalog writers' pool
    assert [u.rstrip("/") for u in tasks["publish"]["outlets"]] == ["cumulus://stable-snapshot"]
    assert report["dags"]["cumulus_maintenance"]["tasks"]["maintenance"]["pool"] == "cumulus_test_pool"


def test_plugin_registers_its_app_and_nav_entry(report):
    assert {"name": "cumulus", "url_prefix": "/cumulus"} in report["fastapi"]
    views = [v for v in report["views"] if v.get("url_route") == "cumulus"]
    assert views and views[0]["destination"] == "nav" and views[0]["href"].endswith("/cumulus/")


def test_the_landing_trigger_fires_ready_or_late(tmp_path):
    import asyncio
    import time

    from cumulus.pipeline.triggers import LandingReadyTrigger

    async def first_event(trigger):
        async for event in trigger.run():
            return event.payload

    folder = tmp_path / "epoch-1"
    late = LandingReadyTrigger(str(folder), "_SUCCESS", 0.05, time.time() + 0.3)
    started = time.monotonic()
    assert asyncio.run(first_event(late)) == {"ready": False}
    assert time.monotonic() - started >= 0.25  # it waited for the deadline
    folder.mkdir()
    (folder / "part-0.csv").write_text("x\n")
    assert asyncio.run(first_event(late)) == {"ready": False}  # no marker yet
    (folder / "_SUCCESS").write_text("")
    ready = LandingReadyTrigger(str(folder), "_SUCCESS", 0.05, time.time() + 60)
    assert asyncio.run(first_event(ready)) == {"ready": True}
    classpath, kwargs = ready.serialize()
    assert classpath == "cumulus.pipeline.triggers.LandingReadyTrigger" and LandingReadyTrigger(**kwargs).folder == str(folder)


def test_a_task_follows_its_engine_step_then_defers(monkeypatch):
    """A Spark task that handed its step to the warm engine follows it for engine_wait:
    done in time, the step's exit status decides in the task (1 from validate: failed,
    not retried); not done, the task defers to EngineStepTrigger from the log lines it has
    shown. The engine's answers are scripted here (the real engine: test_epoch_dag)."""
    from airflow.sdk.exceptions import AirflowFailException, TaskDeferred

    import cumulus.pipeline.operators
    from cumulus.pipeline.client import EngineClient
    from cumulus.pipeline.operators import CumulusSparkJob

    class Scripted(EngineClient):  # the client's own follow, over scripted answers
        def __init__(self, answers):
            super().__init__("http://127.0.0.1:1")
            self.answers, self.asked = list(answers), []

        def submit(self, job, args):
            return 7

        def step(self, step_id, offset=0):
            self.asked.append(offset)
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def handed(answers, wait_s, job="ingest"):
        engine = Scripted(answers)
        monkeypatch.setattr(cumulus.pipeline.operators, "find_engine", lambda settings: engine)  # (as it calls it)
        task = CumulusSparkJob(task_id=job, job=job, home="/nowhere")
        task.application_args = ["--home", "/nowhere"]
        return task._handed_to_engine({}, None, wait_s, 1), engine

    running = {"state": "running", "lines": ["parsing"], "next": 1}
    done, engine = handed([running, {"state": "done", "lines": ["done"], "next": 2, "exit": 0}], 10)
    assert done is True and engine.asked == [0, 1]
    with pytest.raises(AirflowFailException, match="validate exited 1: final"):
        handed([{"state": "done", "lines": [], "next": 0, "exit": 1}], 10, job="validate")
    with pytest.raises(TaskDeferred) as deferred:
        handed([running, {"state": "running", "lines": [], "next": 1}], 0.6)
    trigger = deferred.value.trigger
    assert (trigger.step_id, trigger.offset) == (7, 1) and deferred.value.method_name == "engine_step_done"
    with pytest.raises(TaskDeferred) as at_once:
        handed([running], 0)
    assert at_once.value.trigger.offset == 0


def test_one_airflow_process_runs_commands_as_the_cli_would(env) -> None:
    """Each command's exit status and output come back apart; a command that fails (here
    argparse's) leaves the process running the next; structured output stays clean."""
    runner = env.runner
    assert runner is not None and runner.alive  # the fixture's `db migrate` started it
    bad = env.airflow("pools", "no-such-action", check=False)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    pools = env.airflow("pools", "list", "--output", "json")
    assert "default_pool" in {p["pool"] for p in json.loads(pools.stdout)}
    assert env.runner is runner and runner.alive  # the same process throughout
