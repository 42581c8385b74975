"""The warm engine on its own (`cumulus engine serve`, no Airflow): it finds the landed
files of the open epoch, ingests and applies them, and the fresh views on main equal
DuckDB over the rows alive; steps handed to it over its API (close, validate) publish
the epoch; killed with -9 at a random instant while it works on the next epoch, a
restarted engine resumes from the tables and the epoch closes exactly (every view equal
to DuckDB, no event lost or applied twice); `engine status` and `engine stop` work."""

from __future__ import annotations

import json
import random
import subprocess
import time

import pytest
from airflowkit import (
    VENV_BIN,
    AirflowEnv,
    WarmEngine,
    assert_landing_taken,
    assert_stable_equals_duckdb,
    ledger,
    make_stream,
)

from cumulus.pipeline.client import EngineClient, engine_state

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def eventually(what: str, check, timeout: float = 300, every: float = 1.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout:.0f} s: {what}") from None
            time.sleep(every)


def cli(env: AirflowEnv, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "cumulus"), "--home", str(env.home), *args], env=env.env(),
                          capture_output=True, text=True, timeout=300)


def test_landed_files_become_fresh_values_and_a_killed_engine_resumes(tmp_path):
    stream = make_stream(tmp_path, epochs=2)
    env = AirflowEnv(tmp_path)
    env.setup(stream, airflow=False)  # the engine alone: no Airflow here
    engines = [WarmEngine(env, cadence=1)]
    try:
        # Epoch 1's folders have landed: the engine ingests and applies them by itself.
        started = time.monotonic()
        eventually("epoch 1's files taken and their events applied to main",
                   lambda: (assert_landing_taken(env, 1), assert_stable_equals_duckdb(env, stream, None, 1)), every=2)
        fresh_s = time.monotonic() - started
        status = json.loads(cli(env, "engine", "status", "--format", "json").stdout)
        assert status["url"].startswith("http://127.0.0.1:") and status["pid"] == engines[0].proc.pid
        landing = {(s["job"], s["state"], s["exit"]) for s in status["steps"] if s["origin"] == "landing"}
        assert {("ingest", "done", 0), ("apply", "done", 0)} <= landing, status["steps"]
        table = cli(env, "engine", "status")
        assert table.returncode == 0 and "current_step" in table.stdout, table.stderr

        # Steps handed over the API, as Airflow's tasks do: close and validate epoch 1.
        client = EngineClient(engine_state(_settings(env))["url"])
        lines: list[str] = []
        assert client.run("close", ["--home", str(env.home)], lines.append) == 0
        assert any("epoch 1" in line for line in lines), lines[-20:]
        assert client.run("validate", ["--home", str(env.home), "--epoch", "1"], lines.append) == 0
        assert ledger(env)[1].state == "published"
        assert_stable_equals_duckdb(env, stream, 1, 1)

        # Epoch 2 is open and its folders are there: the engine starts on them; kill -9 it
        # at a random instant of that work, then start a new one.
        time.sleep(random.uniform(0.5, 6.0))
        engines[0].kill()
        engines.append(WarmEngine(env, cadence=1))
        # (A view may not read every relation: its values can be right before the last
        # source's files are taken, and a close then would leave those files late.)
        eventually("epoch 2's files taken and their events applied to main after the restart",
                   lambda: (assert_landing_taken(env, 2), assert_stable_equals_duckdb(env, stream, None, 2)), every=2)
        client = EngineClient(engine_state(_settings(env))["url"])
        assert client.run("close", ["--home", str(env.home), "--epoch", "2"], lines.append) == 0
        assert_stable_equals_duckdb(env, stream, 2, 2)
        rows = ledger(env)
        assert rows[2].events == sum(b.rows for b in stream.batches if b.epoch == 2)  # none lost, none twice
        print(f"fresh values on main {fresh_s:.1f} s after the engine was up (epoch 1: the initial load)")

        assert engines[1].stop() == 0
        assert engine_state(_settings(env)) is None
        gone = cli(env, "engine", "status")
        assert gone.returncode != 0 and "no warm engine runs" in gone.stderr and "Traceback" not in gone.stderr
    finally:
        for engine in engines:
            if engine.proc.poll() is None:
                engine.kill()


def _settings(env: AirflowEnv):
    from cumulus.config import load_settings

    return load_settings(env.home)
