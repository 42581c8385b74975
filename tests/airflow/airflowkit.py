"""Shared pieces of the Airflow tests (a module of its own name: pytest imports every
tests/*/conftest.py as `conftest`). An `AirflowEnv` is an AIRFLOW_HOME with SQLite
metadata, the repository's dags/ and plugins/, and a Cumulus home made from a tiny
generated TPC-H stream; tasks run the real spark_jobs through spark-submit. Its `airflow`
commands run in one Airflow process (scripts/airflow_runs.py), as the demo's do: about
16 s less per `dags test` than a process each."""

from __future__ import annotations

import datetime as dt
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

from envkit import child_env

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SCHEMA = REPO / "demo" / "tpch_schema.sql"
VIEWS = {
    "segment_orders": REPO / "tests" / "airflow" / "views" / "segment_orders.sql",
    "order_priority_mix": REPO / "demo" / "views" / "order_priority_mix.sql",
}
# The demo's views: the ones the dbt project's staging layer (models/staging) is generated for.
DEMO_VIEWS = {p.stem: p for p in sorted((REPO / "demo" / "views").glob("*.sql"))}
START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
INTERVAL = dt.timedelta(days=1)
ARTIFACTS = REPO / "tests" / "artifacts"


def logical_date(epoch: int) -> str:
    """The `airflow dags test` date of an epoch: the end of its interval (a manual run's
    data interval ends at its logical date)."""
    return (START + epoch * INTERVAL).isoformat()


def make_stream(root: Path, epochs: int = 3, scale: float = 0.001, fraction: float = 0.01, seed: int = 7):
    from cumulus.ingest.tpch_stream import generate

    return generate(scale, epochs, fraction, root / "stream", seed, customers_per_epoch=2)


class AirflowRunner:
    """scripts/airflow_runs.py in the background: `airflow` commands, one at a time, in
    one process (Airflow imported and its execution API started once)."""

    MARK = "[airflow_runs] "  # its own lines: "ready", then "exit N" after each command
    EXIT = MARK + "exit "
    GRACE_S = 30  # for the second stream's exit line, after the first's

    def __init__(self, env: dict[str, str]):
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "scripts" / "airflow_runs.py")], env=env, text=True, bufsize=1,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self.lines = {"out": queue.Queue(), "err": queue.Queue()}
        for name, stream in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            threading.Thread(target=self._pump, args=(stream, self.lines[name]), daemon=True).start()

    @staticmethod
    def _pump(stream, lines: queue.Queue) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)  # the runner ended

    def run(self, args: tuple[str, ...], timeout: float) -> subprocess.CompletedProcess:
        """One command's exit status and output, as `airflow ARGS` would give them."""
        if any("\n" in a for a in args):  # one command per line
            raise ValueError(f"an argument of airflow {args} has a line break")
        deadline = time.monotonic() + timeout
        self.proc.stdin.write(shlex.join(args) + "\n")
        self.proc.stdin.flush()
        out, status = self._until_exit("out", deadline, args)
        err, _ = self._until_exit("err", max(deadline, time.monotonic() + self.GRACE_S), args)
        return subprocess.CompletedProcess(["airflow", *args], status, out, err)

    def _until_exit(self, name: str, deadline: float, args) -> tuple[str, int]:
        text = []
        while True:
            try:
                line = self.lines[name].get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.close(kill=True)
                raise subprocess.TimeoutExpired(["airflow", *args], 0, "".join(text)) from None
            if line is None:
                return "".join(text), self.proc.wait()
            if line.startswith(self.EXIT):
                return "".join(text), int(line[len(self.EXIT):])
            if not line.startswith(self.MARK):  # (its "ready" line is nobody's output)
                text.append(line)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, kill: bool = False) -> None:
        """End it: at the end of its input (idle), or killed (`kill`, or not ending)."""
        if self.alive:
            if not kill:
                self.proc.stdin.close()
                try:
                    self.proc.wait(timeout=60)
                    return
                except subprocess.TimeoutExpired:
                    pass
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@dataclass
class AirflowEnv:
    root: Path
    pipeline: dict[str, str] = field(default_factory=dict)
    runner: AirflowRunner | None = field(default=None, repr=False)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def airflow_home(self) -> Path:
        return self.root / "airflow"

    def env(self) -> dict[str, str]:
        env = child_env(drop=("AIRFLOW", "CUMULUS_"))
        env.update({
            "AIRFLOW_HOME": str(self.airflow_home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            # dags/cumulus_dbt.py runs `dbt ls` while parsing: more than the default 30 s
            # on a busy 2-core machine.
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "180",
            "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": "240",
            "CUMULUS_HOME": str(self.home),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(REPO),
        })
        return env

    def airflow(self, *args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
        """`airflow ARGS` (in the environment's runner, started at its first command)."""
        log = self.root / "airflow-cli.log"
        t = time.perf_counter()
        if self.runner is None or not self.runner.alive:
            self.runner = AirflowRunner(self.env())
        proc = self.runner.run(args, timeout)
        with log.open("a") as fh:
            fh.write(f"\n$ airflow {' '.join(args)}  ({time.perf_counter() - t:.0f} s, exit {proc.returncode})\n")
            fh.write(proc.stdout[-200_000:] + proc.stderr[-200_000:])
        if check and proc.returncode != 0:
            raise AssertionError(f"airflow {' '.join(args)} exited {proc.returncode}; log: {log}\n"
                                 f"{(proc.stdout + proc.stderr)[-4000:]}")
        return proc

    def setup(self, stream, views: dict[str, Path] = VIEWS, airflow: bool = True) -> None:
        """The Cumulus home (one Spark process) and, with `airflow`, the Airflow metadata
        database with the catalog writers' pool."""
        settings = {"start": START.isoformat(), "epoch_interval": "1d", "retries": "2", "retry_delay": "3s",
                    "poke_interval": "3s", "late_timeout": "60s", **self.pipeline}
        cmd = [sys.executable, str(REPO / "scripts" / "demo_home.py"), "--home", str(self.home),
               "--schema", str(SCHEMA), "--stream", str(stream.root), "--spark-master", "local[2]"]
        cmd += [f"--view={name}={path}" for name, path in views.items()]
        cmd += [f"--pipeline={k}={v}" for k, v in settings.items()]
        proc = subprocess.run(cmd, env=self.env(), capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
        if airflow:
            self.metadata_database()

    def metadata_database(self) -> None:
        """airflow.db: `airflow db migrate` and the pool, run once per Airflow version and
        kept in .cache/airflow/ (about 25 s of one Airflow process on 2 cores), then copied
        into each environment (under a lock: the xdist workers share it). Migrating an
        empty SQLite database writes nothing of the AIRFLOW_HOME it ran in."""
        import fcntl
        from importlib.metadata import version

        cache = REPO / ".cache" / "airflow"
        cache.mkdir(parents=True, exist_ok=True)
        template = cache / f"airflow-{version('apache-airflow')}.db"
        target = self.airflow_home / "airflow.db"
        self.airflow_home.mkdir(parents=True, exist_ok=True)
        with (cache / "lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not template.is_file():
                self.airflow("db", "migrate")
                self.airflow("pools", "set", "cumulus_catalog", "1", "Cumulus catalog writers")
                self._copy_db(target, template)
                return
        self._copy_db(template, target)

    @staticmethod
    def _copy_db(source: Path, target: Path) -> None:
        """A consistent copy of a SQLite database (sqlite3's online backup), written whole
        to a temporary file first."""
        import sqlite3

        partial = target.with_name(target.name + ".partial")
        partial.unlink(missing_ok=True)
        src, dst = sqlite3.connect(source), sqlite3.connect(partial)
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()
        partial.replace(target)

    def close(self) -> None:
        """Stop the runner (a later command starts another)."""
        if self.runner is not None:
            self.runner.close()

    def dags_test(self, dag_id: str, date: str, check: bool = True, params: dict | None = None) -> subprocess.CompletedProcess:
        """`airflow dags test` of a run at `date`, with the DAG `params` given as its conf."""
        conf = ["--conf", json.dumps(params)] if params else []
        return self.airflow("dags", "test", dag_id, date, *conf, check=check)


class WarmEngine:
    """`cumulus --home H engine serve` of an environment's home, in the background."""

    def __init__(self, env: AirflowEnv, cadence: float = 0):
        self.env = env
        self.log = env.root / f"engine-{time.time_ns()}.log"
        self.proc = subprocess.Popen(
            [str(VENV_BIN / "cumulus"), "--home", str(env.home), "engine", "serve", "--cadence", str(cadence)],
            env=env.env(), stdout=subprocess.DEVNULL, stderr=self.log.open("w"), start_new_session=True,
        )
        # Up once the state file names this process (a killed engine leaves its own behind).
        state = env.home / "engine" / "engine.json"
        deadline = time.monotonic() + 180
        while not (state.is_file() and json.loads(state.read_text() or "{}").get("pid") == self.proc.pid):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the warm engine did not start; log: {self.log}\n{self.log.read_text()[-3000:]}")
            time.sleep(0.5)

    def steps(self) -> list[dict]:
        """The engine's own record of its latest steps (GET /status: job, args, origin, state, exit)."""
        from cumulus.pipeline.client import find_engine

        client = find_engine(settings_of(self.env))
        assert client is not None, f"the warm engine does not answer; log: {self.log}"
        return client.status()["steps"]

    def kill(self) -> None:
        """kill -9: no cleanup, its state file stays behind."""
        self.proc.kill()
        self.proc.wait(timeout=30)

    def stop(self) -> int:
        proc = subprocess.run([str(VENV_BIN / "cumulus"), "--home", str(self.env.home), "engine", "stop"],
                              env=self.env.env(), capture_output=True, text=True, timeout=300)
        self.proc.wait(timeout=60)
        return proc.returncode


def settings_of(env: AirflowEnv):
    from cumulus.config import load_settings

    return load_settings(env.home)


def ledger(env: AirflowEnv) -> dict:
    from cumulus.store.catalog import pyiceberg_catalog
    from cumulus.store.ledger import ledger_rows

    settings = settings_of(env)
    return {r.epoch: r for r in ledger_rows(pyiceberg_catalog(settings), settings)}


def assert_landing_taken(env: AirflowEnv, epoch: int) -> None:
    """Every file landed for `epoch`, of every source, has been taken by ingestion (the
    close seals the epoch: a file not taken by then is late, for the next epoch)."""
    from cumulus.config import load_pipeline_config
    from cumulus.ingest.landing import plan_epoch
    from cumulus.store.catalog import pyiceberg_catalog

    settings = settings_of(env)
    plan = plan_epoch(pyiceberg_catalog(settings), settings, load_pipeline_config(env.home), epoch)
    untaken = {s.source: s.untaken for s in plan.sources if s.untaken}
    assert not untaken, f"epoch {epoch}: files not taken yet: {untaken}"


def _typed(text: str, col):
    if col.type == "int":
        return int(text)
    if col.type == "decimal":
        return Decimal(text)
    if col.type == "date":
        return dt.date.fromisoformat(text)
    if col.type == "float":
        return float(text)
    return text


def assert_stable_equals_duckdb(env: AirflowEnv, stream, epoch: int | None, through) -> list[str]:
    """Every view read at tag epoch-N (PyIceberg; None: main, the fresh values) equals
    DuckDB over the stream's rows alive `through` (an epoch, or one per source). Returns
    the views checked."""
    from oracle import DuckOracle, assert_view_equals_sql

    from cumulus.ingest.tpch_stream import alive
    from cumulus.read import At, Reader
    from cumulus.schema import load_schema

    schema = load_schema(SCHEMA)
    rows = {rel.name: [tuple(_typed(v, c) for v, c in zip(row, rel.columns, strict=True))
                       for row in alive(stream, through)[rel.name]] for rel in schema.relations}
    oracle = DuckOracle(schema, rows)
    reader = Reader(settings_of(env))
    state = SimpleNamespace(entries=reader.all_entries(At(epoch)))  # every map from one scan
    checked = []
    for name in reader.compilation.views:
        assert_view_equals_sql(reader.compilation, name, state, oracle, f"epoch-{epoch}" if epoch else "main")
        checked.append(name)
    return checked


def task_states(env: AirflowEnv, dag_id: str, date: str) -> dict[str, str]:
    """task_id[map_index] -> state of the run of `date` (the dags test run)."""
    out = env.airflow("tasks", "states-for-dag-run", dag_id, _run_id(env, dag_id, date), "--output", "json")
    import json

    states = {}
    for row in json.loads(out.stdout[out.stdout.index("["):]):
        key = row["task_id"] + (f"[{row['map_index']}]" if str(row.get("map_index", -1)) not in ("-1", "") else "")
        states[key] = row["state"]
    return states


def _run_id(env: AirflowEnv, dag_id: str, date: str) -> str:
    import json

    out = env.airflow("dags", "list-runs", dag_id, "--output", "json")
    runs = json.loads(out.stdout[out.stdout.index("["):])
    want = dt.datetime.fromisoformat(date)
    for run in runs:
        if run.get("logical_date") and dt.datetime.fromisoformat(run["logical_date"]) == want:
            return run["run_id"]
    raise AssertionError(f"no run of {dag_id} at {date}: {runs}")


# ------------------------------------------------------------------ a real Airflow


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PLUGIN_PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import cumulus_plugin
from fastapi.testclient import TestClient

from airflow.api_fastapi.app import init_auth_manager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

app = cumulus_plugin.create_app()
assert TestClient(app).get("/api/status").status_code == 401  # behind the auth manager
token = init_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
client = TestClient(app, headers={"Authorization": f"Bearer {token}"})
status = client.get("/api/status")
page = client.get("/")
report = client.get("/reports/" + (status.json()["epochs"][0]["report"] or "missing"))
print("PROBE" + json.dumps({"status": status.json(), "page": page.text, "codes": [status.status_code,
      page.status_code, report.status_code]}))
"""


def plugin_probe(env: AirflowEnv) -> dict:
    """The UI plugin's FastAPI app on the env's home, in a fresh process (its JSON, its
    page, the first epoch's report)."""
    import json

    proc = subprocess.run([sys.executable, "-c", PLUGIN_PROBE, str(REPO / "plugins")], env=env.env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("PROBE"))
    return json.loads(line[len("PROBE"):])
