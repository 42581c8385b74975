"""The pipeline's pure parts (no Airflow, no JVM): [pipeline] configuration, the data
interval -> epoch mapping, landing folders and readiness, late folders from the ledger."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from cumulus.config import load_pipeline_config, parse_duration
from cumulus.errors import ConfigError
from cumulus.ingest.landing import (
    SourceWork,
    epoch_for_interval,
    interval_of_epoch,
    is_ready,
    landing_files,
    landing_folder,
    late_folders,
    run_epoch_choice,
)

UTC = dt.UTC


def test_defaults_without_a_home(tmp_path):
    cfg = load_pipeline_config(tmp_path / "nowhere")
    assert cfg.epoch_interval == dt.timedelta(hours=1)
    assert cfg.retries >= 2 and cfg.pool == "cumulus_catalog" and cfg.landing_layout == "epoch-{epoch}"


def test_toml_then_environment(tmp_path, monkeypatch):
    (tmp_path / "cumulus.toml").write_text(
        '[pipeline]\nepoch_interval = "15m"\nlate_timeout = 90\ncatchup = true\nstart = "2025-03-01T00:00:00"\n'
    )
    monkeypatch.setenv("CUMULUS_PIPELINE_LATE_TIMEOUT", "2m")
    cfg = load_pipeline_config(tmp_path)
    assert cfg.epoch_interval == dt.timedelta(minutes=15)
    assert cfg.late_timeout == dt.timedelta(minutes=2)  # the environment wins
    assert cfg.catchup is True
    assert cfg.start == dt.datetime(2025, 3, 1, tzinfo=UTC)  # naive means UTC


@pytest.mark.parametrize("bad", ['bogus = 1', 'epoch_interval = "soon"', 'landing_layout = "{nope}"',
                                 'retries = "many"', 'epoch_interval = "0s"', 'engine_wait = -5'])
def test_bad_settings_are_refused(tmp_path, bad):
    (tmp_path / "cumulus.toml").write_text(f"[pipeline]\n{bad}\n")
    with pytest.raises(ConfigError, match=r"\[pipeline\]"):
        load_pipeline_config(tmp_path)


def test_durations():
    assert parse_duration("90s") == dt.timedelta(seconds=90)
    assert parse_duration("1.5h") == dt.timedelta(minutes=90)
    assert parse_duration(30) == dt.timedelta(seconds=30)
    assert parse_duration("2w") == dt.timedelta(days=14)


def test_intervals_map_to_epochs_and_back(tmp_path):
    cfg = load_pipeline_config(tmp_path, start="2024-01-01T00:00:00+00:00", epoch_interval="1d", first_epoch=3)
    start = dt.datetime(2024, 1, 1, tzinfo=UTC)
    # A scheduled interval [start, start+1d) ends at start+1d: the first epoch.
    assert epoch_for_interval(cfg, start + dt.timedelta(days=1)) == 3
    assert epoch_for_interval(cfg, start + dt.timedelta(days=4)) == 6
    # An end off the grid (a manual run at noon) belongs to the interval containing it.
    assert epoch_for_interval(cfg, start + dt.timedelta(days=1, hours=12)) == 4
    for epoch in (3, 4, 9):
        begin, end = interval_of_epoch(cfg, epoch)
        assert end - begin == dt.timedelta(days=1)
        assert epoch_for_interval(cfg, end) == epoch
    with pytest.raises(ConfigError, match="not after"):
        epoch_for_interval(cfg, start)


def test_which_epoch_a_run_is(tmp_path):
    cfg = load_pipeline_config(tmp_path, start="2024-01-01T00:00:00+00:00", epoch_interval="1d")
    assert cfg.catchup is False  # a fresh DAG does not queue a run per hour since 2024
    end = dt.datetime(2024, 1, 5, tzinfo=UTC)  # the 4th interval
    # The declared param wins over everything.
    assert run_epoch_choice(cfg, 7, "scheduled", end)[0] == 7
    assert run_epoch_choice(cfg, "7", "backfill", end)[0] == 7
    # A backfill names intervals: their epochs.
    assert run_epoch_choice(cfg, None, "backfill", end) == (4, "a backfill: the data interval ending 2024-01-05T00:00:00+00:00")
    class RunType:  # Airflow's DagRunType enum: its str is "DagRunType.BACKFILL_JOB"
        value = "backfill"

        def __str__(self):
            return "DagRunType.BACKFILL_JOB"

    assert run_epoch_choice(cfg, None, RunType(), end)[0] == 4
    # Without catchup, scheduled and manual runs take the open epoch (the scheduler skipped intervals).
    assert run_epoch_choice(cfg, None, "scheduled", end) == (None, "the open epoch")
    assert run_epoch_choice(cfg, "", "manual", end) == (None, "the open epoch")
    # With catchup, every interval since start is an epoch.
    on = load_pipeline_config(tmp_path, start="2024-01-01T00:00:00+00:00", epoch_interval="1d", catchup="true")
    assert run_epoch_choice(on, None, "DagRunType.SCHEDULED", end)[0] == 4
    assert run_epoch_choice(on, None, "manual", None) == (None, "the open epoch")


def test_landing_layout_and_readiness(tmp_path):
    cfg = load_pipeline_config(tmp_path, landing_layout="{ds}/part-{epoch}", start="2024-01-01", epoch_interval="1d")
    folder = landing_folder(cfg, tmp_path / "landing", 2)
    assert folder == (tmp_path / "landing" / "2024-01-02" / "part-2").resolve()
    assert not is_ready(cfg, folder)
    folder.mkdir(parents=True)
    (folder / "orders.tbl").write_text("1|2|\n")
    (folder / "_tmp.tbl").write_text("partial\n")
    (folder / ".hidden").write_text("x\n")
    assert [p.name for p in landing_files(folder)] == ["orders.tbl"]
    assert not is_ready(cfg, folder)  # files, but no marker yet
    (folder / "_SUCCESS").write_text("")
    assert is_ready(cfg, folder)
    anyfile = load_pipeline_config(tmp_path, ready_marker="")
    assert is_ready(anyfile, folder)


def test_late_folders_come_from_earlier_epochs_only():
    rows = [
        SimpleNamespace(epoch=1, late_files=None),
        SimpleNamespace(epoch=2, late_files=[{"kind": "late", "source": "catalog", "folder": "/l/catalog/epoch-2"},
                                             {"kind": "carried", "source": "sales", "folder": "/l/sales/epoch-1"}]),
        SimpleNamespace(epoch=3, late_files=[{"kind": "late", "source": "catalog", "folder": "/l/catalog/epoch-2"},
                                             {"kind": "late", "source": "sales", "folder": "/l/sales/epoch-3"}]),
    ]
    assert late_folders(rows, before=3) == {"catalog": ["/l/catalog/epoch-2"]}
    assert late_folders(rows, before=4) == {"catalog": ["/l/catalog/epoch-2"], "sales": ["/l/sales/epoch-3"]}


def test_source_work_paths():
    ready = SourceWork("sales", 1, "/l/sales/epoch-2", True, ["/l/sales/epoch-2/orders.tbl"], ["/l/sales/epoch-1"])
    assert ready.paths() == ["/l/sales/epoch-2", "/l/sales/epoch-1"]
    waiting = SourceWork("sales", 1, "/l/sales/epoch-2", False, ["/l/sales/epoch-2/orders.tbl"])
    assert waiting.paths() == []  # an epoch run takes a folder once it is complete
    assert waiting.paths(require_ready=False) == ["/l/sales/epoch-2"]  # a micro-batch takes what landed
    taken = SourceWork("sales", 1, "/l/sales/epoch-2", True, [])
    assert taken.paths() == []


def test_the_engine_state_file_says_where_it_runs_and_stale_ones_are_ignored(tmp_path, monkeypatch):
    """On this host the pid tells whether the engine lives (a dead pid, or this very
    process after a container restart, is stale); from another host (an engine in its own
    container) the state is taken as written and only the engine's answer tells. An engine
    bound to every interface is reached by this host's name unless given a URL."""
    import json
    import os
    import socket
    import subprocess
    import sys

    from cumulus.pipeline.client import engine_state
    from cumulus.pipeline.server import EngineServer, state_path

    settings = SimpleNamespace(home=tmp_path)
    path = state_path(settings)
    path.parent.mkdir(parents=True)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    here, there = socket.gethostname(), socket.gethostname() + "-other"
    for host, pid, alive in [(here, int(gone.stdout), False), (here, os.getpid(), False), (here, os.getppid(), True),
                             (there, int(gone.stdout), True), (None, os.getppid(), True)]:
        state = {"pid": pid, "url": "http://cumulus-engine:8790", **({"host": host} if host else {})}
        path.write_text(json.dumps(state))
        assert (engine_state(settings) == state) is alive, state
    monkeypatch.setenv("CUMULUS_ENGINE_TOKEN", "t0ken")  # (beyond loopback only with one)
    for host, url, want in [("0.0.0.0", None, f"http://{here}:"), ("127.0.0.1", None, "http://127.0.0.1:"),
                            ("0.0.0.0", "http://cumulus-engine:8790/", "http://cumulus-engine:8790")]:
        server = EngineServer(settings, port=0, host=host, url=url)
        try:
            assert server.url.startswith(want) and (url or server.url.endswith(f":{server.port}")), server.url
        finally:
            server._http.server_close()


def test_the_warm_engine_beyond_loopback_asks_every_caller_for_its_token(tmp_path, monkeypatch):
    """Bound beyond loopback the engine needs $CUMULUS_ENGINE_TOKEN; with one, a request
    without it (or with another) is refused 401 and EngineClient, which sends it, is served."""
    import threading
    import urllib.error
    import urllib.request

    from cumulus.errors import CumulusError
    from cumulus.pipeline.client import EngineClient
    from cumulus.pipeline.server import EngineServer

    settings = SimpleNamespace(home=tmp_path)
    monkeypatch.delenv("CUMULUS_ENGINE_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="beyond loopback.*CUMULUS_ENGINE_TOKEN"):
        EngineServer(settings, port=0, host="0.0.0.0")
    monkeypatch.setenv("CUMULUS_ENGINE_TOKEN", "s3cret")
    server = EngineServer(settings, port=0, host="0.0.0.0", url=None)
    threading.Thread(target=server._http.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.port}"
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(urllib.request.Request(f"{url}/status", headers=headers), timeout=5)
            assert refused.value.code == 401
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(f"{url}/stop", data=b"{}", method="POST"), timeout=5)
        assert refused.value.code == 401 and not server._stop.is_set()
        assert EngineClient(url).status()["url"] == server.url
        monkeypatch.setenv("CUMULUS_ENGINE_TOKEN", "wrong")
        with pytest.raises(CumulusError, match="a token is required"):
            EngineClient(url).submit("close", [])
    finally:
        server._http.shutdown()
        server._http.server_close()
