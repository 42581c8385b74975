"""Concurrency repair and crash safety of the engine.

Repair: a batch applied against a state pinned before another source's batch committed
(as two concurrent applies would) leaves a gap on main; the close repairs it, and the
tag equals the serial result. Faults: apply and close killed at several points and rerun
end in the same tables as runs that never failed, with no delta applied twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from enginekit import CHAIN, SOURCES, write_events
from oracle import DuckOracle, assert_view_equals_sql

from cumulus.app import Engine
from cumulus.cli import main as cli_main
from cumulus.engine.apply import APPLY_BATCH, apply_source
from cumulus.engine.close import close_epoch
from cumulus.errors import EpochOrderError, ExitCode
from cumulus.faults import InjectedFault
from cumulus.ingest.job import ingest_files
from cumulus.output import sort_key
from cumulus.read import At, Reader
from cumulus.sql.derived import Maintainer
from cumulus.store.commit import snapshots
from cumulus.store.ledger import APPLIED, ledger_row, transition
from cumulus.store.tables import Home, tables_of

pytestmark = pytest.mark.e2e
NESTED = ("SELECT r.a, COUNT(*) AS n FROM r WHERE EXISTS (SELECT * FROM s WHERE s.b = r.b AND s.c > "
          "(SELECT MIN(t.d) FROM t WHERE t.c = s.c)) GROUP BY r.a")  # nested two deep


def ingest_both(spark, settings, events, folder):
    for name, (relations, _) in SOURCES.items():
        ingest_files(Home(spark, settings), name, [write_events(events, folder / name, relations)], fmt="dbtoaster")


def serial_maps(compiled, events):
    return Maintainer(compiled).run(events)  # (a nested view's derived relations kept after each event)


def alive(events):
    out: dict[str, list] = {}
    for e in events:
        bag = out.setdefault(e.relation, [])
        bag.append(e.values) if e.sign == "+" else bag.remove(e.values)
    return out


def assert_maps_at(reader, compiled, interp, at):
    entries = reader.all_entries(at)  # every map from one scan
    for m in compiled.maps:
        assert entries(m) == interp.entries(m), m


def no_batch_twice(spark, settings, plan):
    ids = [s.summary[APPLY_BATCH] for s in snapshots(spark, tables_of(settings).maps) if APPLY_BATCH in s.summary]
    assert len(ids) == len(set(ids)), f"a batch committed twice: {ids}"


def test_stale_batch_leaves_a_gap_on_main_and_close_repairs_it(spark, simple_home, tmp_path) -> None:
    settings, plan, compiled, events = simple_home
    home = Home(spark, settings)
    ingest_both(spark, settings, events, tmp_path / "in")
    before = snapshots(spark, tables_of(settings).maps)[-1].snapshot_id
    apply_source(home, plan, 1, 1)  # source a: r and s
    apply_source(home, plan, 1, 2, pin=before)  # source b read the state before a's commit
    reader = Reader(settings)
    interp = serial_maps(compiled, events)
    oracle = DuckOracle(compiled.schema, alive(events))
    fresh = reader.read_view("chain", At())
    want = oracle.query(CHAIN)
    assert sorted(fresh, key=sort_key) != sorted(want, key=sort_key), "main should miss the cross terms"
    # The gap is exactly the r-s-t terms: b's t events met no r-s state.
    assert sum(r[2] for r in fresh) < sum(r[2] for r in want)
    metrics = close_epoch(home, plan, 1)
    assert metrics["repaired_batches"] == 1
    at = reader.stable(1)
    view = type("AtTag", (), {"entries": staticmethod(reader.all_entries(at))})
    assert_view_equals_sql(compiled, "chain", view, oracle, "epoch 1 after repair")
    assert_maps_at(reader, compiled, interp, at)
    no_batch_twice(spark, settings, plan)


def test_a_close_that_fails_between_repairs_resumes_them(spark, simple_home, tmp_path, monkeypatch) -> None:
    """Three stale batches (each read the state before the first batch's commit); the
    close fails after committing the first repair. Its retry reads that correction back
    and repairs the others against it: the tag equals the serial result, each batch is
    repaired once."""
    settings, plan, compiled, events = simple_home
    home = Home(spark, settings)
    first, second = events[:80], events[80:]
    before = snapshots(spark, tables_of(settings).maps)[-1].snapshot_id
    ingest_both(spark, settings, first, tmp_path / "e1")
    apply_source(home, plan, 1, 1)
    apply_source(home, plan, 1, 2, pin=before)
    ingest_both(spark, settings, second, tmp_path / "e2")
    for source_id in (1, 2):
        apply_source(home, plan, 1, source_id, pin=before)
    monkeypatch.setenv("CUMULUS_FAULT", "repair.after-commit:raise")
    with pytest.raises(InjectedFault):
        close_epoch(home, plan, 1)
    monkeypatch.delenv("CUMULUS_FAULT")
    metrics = close_epoch(home, plan, 1)
    assert metrics["repaired_batches"] == 3  # the one the failed try committed counts too
    reader = Reader(settings)
    assert_maps_at(reader, compiled, serial_maps(compiled, events), reader.stable(1))
    no_batch_twice(spark, settings, plan)


def test_an_apply_of_the_next_epoch_waits_for_the_sealed_one_to_close(spark, simple_home, tmp_path) -> None:
    """Epoch 1 sealed (epoch 2 open, its events ingested) but not closed: its close will
    tag the maps' current snapshot, so an apply of epoch 2 now would put epoch-2 deltas
    into tag epoch-1 (a race test_parallel_applies met: the sources' applies of epoch 2
    came before the closer's tag). It is refused, NOT_YET; after the close it applies,
    and each tag holds exactly its epoch."""
    settings, plan, compiled, events = simple_home
    home = Home(spark, settings)
    first, second = events[:80], events[80:]
    ingest_both(spark, settings, first, tmp_path / "e1")
    for source_id in (1, 2):
        apply_source(home, plan, 1, source_id)
    transition(home, 1, APPLIED)  # the seal: new input goes to epoch 2
    ingest_both(spark, settings, second, tmp_path / "e2")
    with pytest.raises(EpochOrderError, match="epoch 2 source 1 cannot be applied yet: epoch 1 is sealed") as refused:
        apply_source(home, plan, 2, 1)
    assert refused.value.exit_code == ExitCode.NOT_YET
    close_epoch(home, plan, 1)
    for source_id in (1, 2):
        assert apply_source(home, plan, 2, source_id) is not None
    close_epoch(home, plan, 2)
    reader = Reader(settings)
    assert_maps_at(reader, compiled, serial_maps(compiled, first), reader.stable(1))
    assert_maps_at(reader, compiled, serial_maps(compiled, events), reader.stable(2))
    no_batch_twice(spark, settings, plan)


def run_cli(settings, *args, fault: str) -> subprocess.CompletedProcess:
    """The CLI in a process of its own, with `fault` injected (CUMULUS_FAULT)."""
    env = {**os.environ, "CUMULUS_FAULT": fault}
    return subprocess.run(
        [sys.executable, "-m", "cumulus.cli", "--home", str(settings.home), *args],
        env=env, capture_output=True, text=True, timeout=600,
    )


@pytest.mark.slow
def test_crashes_anywhere_then_retries_give_the_serial_result(spark, simple_home, tmp_path) -> None:
    """One home through a row of crashes, each a killed process (os._exit) or an
    exception at a named point, each followed by the next command resuming from what the
    tables say: apply dies after its commit to the maps table; close dies after sealing,
    applying what was left and folding, after compacting the maps, and fails after tagging; the last
    close completes (a nested view's derived relations too: they die after their commit,
    which a retry keeps). Every map at the tag then equals the serial result, and no batch
    committed twice. A crashing command is a process of its own (the CLI, as a
    spark-submitted step runs); a command that completes runs the CLI in this process, on
    its Spark session (as the warm engine runs a step): a JVM start less each."""
    settings, plan, compiled, events = simple_home
    compiled = Engine(settings, spark).add_view("nested", NESTED, "sql")  # its close step: derived-1
    ingest_both(spark, settings, events, tmp_path / "in")

    def completes(*args: str) -> None:
        assert cli_main(["--home", str(settings.home), *args]) == 0, args

    for args, fault in [
        (("apply", "--source", "a"), "apply.after-commit:exit"),
        (("apply", "--source", "a"), None),  # (all applied before the close: it is incremental)
        (("apply", "--source", "b"), None),
        (("epoch", "close"), "close.after-derived:exit"),
        (("epoch", "close", "--epoch", "1"), "close.after-fold:exit"),
        (("epoch", "close", "--epoch", "1"), "close.after-compact:exit"),
        (("epoch", "close", "--epoch", "1"), "close.after-tag:raise"),
    ]:
        if fault is None:
            completes(*args)
            continue
        crashed = run_cli(settings, *args, fault=fault)
        assert crashed.returncode != 0, f"{fault} did not fire: {crashed.stdout}{crashed.stderr}"
        assert ledger_row(spark, settings, 1).state != "closed"
    completes("epoch", "close", "--epoch", "1")
    assert ledger_row(spark, settings, 1).state == "closed"
    reader = Reader(settings)
    assert_maps_at(reader, compiled, serial_maps(compiled, events), reader.stable(1))
    no_batch_twice(spark, settings, plan)
    completes("epoch", "close", "--epoch", "1")  # closing a closed epoch is a no-op


def start_cli(settings, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cumulus.cli", "--home", str(settings.home), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(procs: list[subprocess.Popen]) -> list[tuple[int, str, str]]:
    """(exit code, stdout, stderr) of each process, once all ended."""
    outputs = [p.communicate(timeout=600) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs, strict=True)]


@pytest.mark.slow
def test_racing_closes_and_maintenance_beside_applies_lose_nothing(spark, simple_home, tmp_path) -> None:
    """Orchestration races between processes (the CLI, as spark-submitted steps run).

    1. Maintenance, compacting and expiring every snapshot it may (`--retain-last 1
       --retain-for 0s`), starts at once with the applies of both sources' second
       batches, while epoch 1 holds a stale batch (source b read the state before a's
       first commit): it compacts, and keeps the snapshot that batch read.
    2. Two closes of epoch 1 start at once (a scheduled run and a backfill of its
       interval), with a close of epoch 2 (the run after it): epoch 1 closes once, with
       its batch repaired against the kept snapshot; epoch 2 never closes before it (a
       close that comes too early is refused in one line: epoch 2 does not exist yet, or
       epoch 1 is sealed but not closed).
    Then epoch 1's tag equals DuckDB and the serial maps, with every event counted once
    and no batch applied twice."""
    from cumulus.store.ledger import CLOSED, DONE, ledger_rows
    from cumulus.store.rows import read_rows

    settings, plan, compiled, events = simple_home
    home = Home(spark, settings)
    half = len(events) // 2
    ingest_both(spark, settings, events[:half], tmp_path / "in1")
    pinned = snapshots(spark, tables_of(settings).maps)[-1].snapshot_id
    apply_source(home, plan, 1, 1)
    apply_source(home, plan, 1, 2, pin=pinned)
    ingest_both(spark, settings, events[half:], tmp_path / "in2")
    with (settings.home / "cumulus.toml").open("a") as toml:  # compact every table of two files or more
        toml.write("\n[pipeline]\nmin_input_files = 2\n")  # (the default, 5, leaves this small home's alone)

    results = finish([start_cli(settings, "maintenance", "--retain-last", "1", "--retain-for", "0s", "--format", "json"),
                      start_cli(settings, "apply", "--source", "a"), start_cli(settings, "apply", "--source", "b")])
    assert [code for code, _, _ in results] == [0, 0, 0], results
    kept = {s.snapshot_id for s in snapshots(spark, tables_of(settings).maps)}
    assert pinned in kept, "maintenance expired the snapshot the stale batch read"
    reports = [json.loads(line) for line in results[0][1].splitlines()]  # a JSON object per line
    assert sum(r["files_rewritten"] for r in reports) > 0, reports  # it compacted beside the applies

    results = finish([start_cli(settings, "epoch", "close"), start_cli(settings, "epoch", "close", "--epoch", "1"),
                      start_cli(settings, "epoch", "close", "--epoch", "2")])
    for code, _, err in results:
        if code != 0:  # only a close of epoch 2 that came before epoch 1's end may fail: before
            # the seal epoch 2 does not exist yet, after it epoch 1 is sealed but not closed
            said = [line for line in err.splitlines() if line.startswith("cumulus: error:")]
            assert len(said) == 1 and "Traceback" not in err, err
            assert ("epoch 2 is not in the ledger" in said[0]
                    or ("epoch 2 cannot be" in said[0] and "epoch 1" in said[0])), said
    rows = {r.epoch: r for r in ledger_rows(spark, settings)}
    closed = sorted(n for n, r in rows.items() if r.state in DONE)
    assert closed == list(range(1, len(closed) + 1)) and closed, rows
    assert all(rows[n].closed_at <= rows[n + 1].closed_at for n in closed[:-1]), rows
    revisions = read_rows(spark, tables_of(settings).ledger_log, {"epoch": 1, "state": CLOSED})
    assert len(revisions) == 1, f"epoch 1 was closed {len(revisions)} times"
    # the stale batch, and the batches after it that read its uncorrected deltas
    assert rows[1].metrics["repaired_batches"] >= 1 and rows[1].events == len(events), rows[1]

    reader = Reader(settings)
    at = reader.stable(1)
    view = type("AtTag", (), {"entries": staticmethod(reader.all_entries(at))})
    assert_view_equals_sql(compiled, "chain", view, DuckOracle(compiled.schema, alive(events)), "epoch 1 after the races")
    assert_maps_at(reader, compiled, serial_maps(compiled, events), at)
    no_batch_twice(spark, settings, plan)
