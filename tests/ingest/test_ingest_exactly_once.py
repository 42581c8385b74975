"""Exactly-once: a file is taken once, ever; an ingest that dies at any point (a killed
subprocess, an exception after the commit) is retried to exactly one copy of every row,
decided from the snapshot summaries and the manifest alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from envkit import child_env
from ingestkit import REPO, SHOP, events, write, write_home

from cumulus.faults import ENV, EXIT_CODE, FILE_ENV, InjectedFault
from cumulus.ingest.job import ingest_files
from cumulus.ingest.sources import add_source
from cumulus.store import commit
from cumulus.store.files import DUPLICATE, INGESTED, ROLLED_BACK
from cumulus.store.quarantine import list_rows
from cumulus.store.rows import read_rows
from cumulus.store.tables import Home, tables_of


@pytest.fixture(scope="module")
def home(tmp_path_factory, spark):
    from cumulus.store.home import init_home

    settings = write_home(tmp_path_factory.mktemp("xhome"), "ingx")
    init_home(Home(spark, settings), SHOP)
    add_source(settings, "a", 1)
    return settings


def landing(root, first_id: int) -> list[str]:
    """A batch touching both relations (two events commits) with one bad row (a
    quarantine commit): orders first_id.. first_id+4, items for each, a delete."""
    ids = range(first_id, first_id + 5)
    orders = write(
        root / "orders.csv",
        "o_id,o_cust,o_total,o_date,o_note\n"
        + "".join(f"{i},1,{i}.25,2024-02-01,n{i}\n" for i in ids)
        + "999,1,oops,2024-02-01,bad\n",
    )
    items = write(
        root / "items.jsonl",
        "".join(f'{{"op": "+", "i_order": {i}, "i_qty": 2, "i_price": 1.5, "i_gift": true}}\n' for i in ids)
        + f'{{"op": "-", "i_order": {first_id}, "i_qty": 2, "i_price": 1.5, "i_gift": true}}\n',
    )
    return [str(orders), str(items)]


def expected(first_id: int) -> tuple[Counter, Counter]:
    ids = range(first_id, first_id + 5)
    return Counter((i, 1) for i in ids), Counter([(i, 1) for i in ids] + [(first_id, -1)])


def state(spark, settings, first_id: int) -> tuple[Counter, Counter]:
    ids = set(range(first_id, first_id + 5))
    orders = Counter((r["o_id"], r["op"]) for r in events(spark, settings, "orders") if r["o_id"] in ids)
    items = Counter((r["i_order"], r["op"]) for r in events(spark, settings, "items") if r["i_order"] in ids)
    return orders, items


def bad_rows(spark, settings, path) -> list[dict]:
    return [r for r in list_rows(spark, settings) if r["file"] == path]


def crashed_batches(spark, settings) -> set[str]:
    """Batch ids in events.* snapshot summaries that the manifest does not know."""
    return {
        s.summary[commit.BATCH_ID]
        for table in (tables_of(settings).events("orders"), tables_of(settings).events("items"))
        for s in commit.snapshots(spark, table)
        if commit.BATCH_ID in s.summary
    } - {r["batch_id"] for r in read_rows(spark, tables_of(settings).files)}


def check_retry(spark, settings, files, first_id, crashed):
    retry = ingest_files(Home(spark, settings), "a", files)
    assert retry.committed and retry.recovered == sorted(crashed)
    assert state(spark, settings, first_id) == expected(first_id)
    assert [r["line"] for r in bad_rows(spark, settings, files[0])] == [7]  # quarantined once
    manifest = read_rows(spark, tables_of(settings).files, {"batch_id": retry.batch_id})
    assert sorted(r["status"] for r in manifest) == [INGESTED, INGESTED]
    for batch in crashed:
        marker = read_rows(spark, tables_of(settings).files, {"batch_id": batch})
        assert [r["status"] for r in marker] == [ROLLED_BACK]


def test_killed_between_relation_commits(spark, home, tmp_path):
    """SIGKILL from outside while the job holds the lock, after events.orders was appended
    and before events.items: the lock dies with the process, the retry rolls the batch
    back and takes the files again."""
    files = landing(tmp_path, 200)
    marker = tmp_path / "reached"
    env = child_env()
    env.update({ENV: "between-relations:sleep:600", FILE_ENV: str(marker)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "cumulus.cli", "--home", str(home.home), "ingest", "--source", "a", *files],
        env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the ingest never reached the fault point"
            time.sleep(0.5)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    crashed = crashed_batches(spark, home)
    assert len(crashed) == 1
    orders, items = state(spark, home, 200)
    assert orders == expected(200)[0] and not items  # half a batch, without a manifest
    check_retry(spark, home, files, 200, crashed)


def test_process_exit_after_the_commits_before_the_manifest(spark, home, tmp_path):
    """The job (python -m cumulus.jobs.ingest) dies (os._exit) after every events append, before
    the manifest: the rows are there, yet the retry must not keep them twice."""
    files = landing(tmp_path, 300)
    env = child_env()
    env[ENV] = "after-events:exit"
    died = subprocess.run(
        [sys.executable, "-m", "cumulus.jobs.ingest", "--home", str(home.home), "--source", "a", *files],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert died.returncode == EXIT_CODE, died.stderr[-3000:]
    crashed = crashed_batches(spark, home)
    assert len(crashed) == 1 and state(spark, home, 300) == expected(300)
    check_retry(spark, home, files, 300, crashed)


def test_exception_before_the_commit(spark, home, tmp_path, monkeypatch):
    files = landing(tmp_path, 100)
    monkeypatch.setenv(ENV, "before-commit:raise")
    with pytest.raises(InjectedFault):
        ingest_files(Home(spark, home), "a", files)
    monkeypatch.delenv(ENV)
    assert state(spark, home, 100) == (Counter(), Counter()) and not crashed_batches(spark, home)
    check_retry(spark, home, files, 100, set())


@pytest.mark.parametrize("point", ["after-events", "after-manifest"])
def test_exception_after_the_commit(spark, home, tmp_path, monkeypatch, point):
    first_id = 500 if point == "after-events" else 600
    files = landing(tmp_path, first_id)
    monkeypatch.setenv(ENV, f"{point}:raise")
    with pytest.raises(InjectedFault):
        ingest_files(Home(spark, home), "a", files)
    monkeypatch.delenv(ENV)
    retry = ingest_files(Home(spark, home), "a", files)
    assert state(spark, home, first_id) == expected(first_id)
    assert [r["line"] for r in bad_rows(spark, home, files[0])] == [7]
    if point == "after-manifest":  # the first run was complete: the retry takes nothing, records nothing
        assert not retry.committed and retry.recovered == [] and retry.files == []
        assert sorted(retry.already_taken) == sorted(str(Path(f).resolve()) for f in files)
    else:
        assert retry.committed and len(retry.recovered) == 1


def test_a_file_is_taken_once_ever(spark, home, tmp_path):
    files = landing(tmp_path / "first", 700)
    first = ingest_files(Home(spark, home), "a", files)
    # The same content under another name (a duplicate, recorded), and the files of the
    # first batch offered again from their paths (taken before: skipped, nothing recorded).
    copy = write(tmp_path / "again" / "orders.csv", open(files[0]).read())
    second = ingest_files(Home(spark, home), "a", [copy, copy.parent.parent / "first" / "orders.csv", files[1]])
    assert not second.committed and second.accepted == 0
    assert [(f.path, f.status, f.duplicate_of) for f in second.files] == [(str(Path(copy).resolve()), DUPLICATE, first.batch_id)]
    assert len(second.already_taken) == 2 and "2 file(s) taken before" in second.headline()
    assert state(spark, home, 700) == expected(700)
    manifest = read_rows(spark, tables_of(home).files, {"batch_id": second.batch_id})
    assert [r["status"] for r in manifest] == [DUPLICATE]
