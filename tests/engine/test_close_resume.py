"""`cumulus epoch close` killed with SIGKILL at random instants, then rerun: every epoch
with events ends closed, in order, and its stable views equal DuckDB over the rows alive
at its end.

Each close runs as its own process group and is killed at a random delay, either from
its start or from the moment its log says the epoch is sealed (so some kills always land
between the seal and the ledger's `closed` row, where a rerun that took the open epoch
used to close the wrong one). Odd epochs are rerun without `--epoch` (the close must
resume the sealed epoch), the even one with `--epoch N`. After a kill that left an epoch
sealed, the next epoch's events are ingested before the rerun, as a live pipeline would.
The random seed is printed; `KILL_SEED=N` replays a run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from enginekit import SOURCES, write_events
from oracle import DuckOracle, alive_after, assert_view_equals_sql

from cumulus.engine.close import close_epoch
from cumulus.engine.registry import batch_plan
from cumulus.engine.views import add_view
from cumulus.errors import EpochOrderError
from cumulus.ingest.job import ingest_files
from cumulus.output import sort_key
from cumulus.read import Reader
from cumulus.schema import load_schema
from cumulus.store.ledger import APPLIED, DONE, OPEN, ledger_rows

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
VIEWS = {name: (REPO / "tests" / "fixtures" / "views" / "simple" / f"{name}.sql").read_text()
         for name in ("chain_rst", "self_join_r")}
EPOCHS = 2  # tests/engine/test_kill_loop.py kills every step, the close too, over more epochs


def start_close(settings, epoch: int | None) -> tuple[subprocess.Popen, list[str], threading.Event]:
    """`cumulus epoch close` in a process group of its own; its output lines are collected
    and `sealed` is set once its log says the epoch left `open`."""
    argv = [sys.executable, "-m", "cumulus.cli", "--home", str(settings.home), "epoch", "close"]
    argv += ["--epoch", str(epoch)] if epoch is not None else []
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines: list[str] = []
    sealed = threading.Event()

    def collect() -> None:
        for line in proc.stdout:
            lines.append(line)
            if f"{OPEN} -> {APPLIED}" in line:
                sealed.set()

    threading.Thread(target=collect, daemon=True).start()
    return proc, lines, sealed


def kill_close(settings, epoch: int | None, rng: random.Random, after_seal: bool) -> None:
    """Start a close and SIGKILL its whole process group at a random instant: a random
    delay from its start, or from the moment it sealed the epoch (if it ends first, it
    simply ended)."""
    proc, lines, sealed = start_close(settings, epoch)
    if after_seal:
        sealed.wait(timeout=300)
        time.sleep(rng.uniform(0.0, 2.0))
    else:
        time.sleep(rng.uniform(1.0, 12.0))
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


def rerun_close(settings, epoch: int | None) -> str:
    """Run the close to completion (a retry after a crash); its output."""
    proc, lines, _ = start_close(settings, epoch)
    code = proc.wait(timeout=600)
    time.sleep(0.2)
    out = "".join(lines)
    assert code == 0, f"the rerun of epoch close failed ({code}):\n{out}"
    return out


def ingest_epoch(spark, settings, events, folder: Path) -> None:
    for name, (relations, _) in SOURCES.items():
        ingest_files(spark, settings, name, [write_events(events, folder / name, relations)], fmt="dbtoaster")


def test_close_killed_at_random_instants_resumes_every_epoch_in_order(spark, simple_home, tmp_path) -> None:
    seed = int(os.environ.get("KILL_SEED", random.randrange(1_000_000)))
    print(f"kill seed {seed} (KILL_SEED={seed} replays it)")
    rng = random.Random(seed)
    settings, _, compiled, events = simple_home
    schema = load_schema(REPO / "tests" / "fixtures" / "schemas" / "simple.sql")
    for name, sql in VIEWS.items():
        compiled = add_view(spark, settings, schema, name, sql)
    plan = batch_plan(compiled)
    chunks = [events[len(events) * k // EPOCHS: len(events) * (k + 1) // EPOCHS] for k in range(EPOCHS)]
    ingest_epoch(spark, settings, chunks[0], tmp_path / "in1")
    ingested = 1
    sealed_kills = 0
    reader = Reader(settings)
    for n in range(1, EPOCHS + 1):
        explicit = n % 2 == 0
        where = f"epoch {n} (seed {seed})"
        for after_seal in (False, True):
            state = {r.epoch: r.state for r in ledger_rows(spark, settings)}[n]
            # A resumed close does not seal again: its kill is timed from its start.
            kill_close(settings, n if explicit else None, rng, after_seal and state == OPEN)
            state = {r.epoch: r.state for r in ledger_rows(spark, settings)}[n]
            if state == APPLIED:
                sealed_kills += 1
                # A sealed epoch blocks every later one: no close, no seal jumps it.
                with pytest.raises(EpochOrderError, match=f"epoch {n} is sealed but not closed"):
                    close_epoch(spark, settings, plan, n + 1)
                if ingested == n and n < EPOCHS:  # the pipeline goes on: events land in n+1
                    ingest_epoch(spark, settings, chunks[n], tmp_path / f"in{n + 1}")
                    ingested += 1
        # A kill after the ledger row (the publish point) left the epoch closed: the rerun
        # names it, and mends its stable branches if the kill beat them.
        explicit = explicit or {r.epoch: r.state for r in ledger_rows(spark, settings)}[n] in DONE
        out = rerun_close(settings, n if explicit else None)
        if not explicit:
            assert f"closing epoch {n} (" in out, f"{where}: the rerun did not say which epoch it took:\n{out}"
        assert f"epoch {n} closed and tagged epoch-{n}" in out, out
        rows = ledger_rows(spark, settings)
        states = {r.epoch: r.state for r in rows}
        assert all(states[e] in DONE for e in range(1, n + 1)), f"{where}: {states}"
        assert states[n + 1] == OPEN and max(states) == n + 1, f"{where}: {states}"
        closed = next(r for r in rows if r.epoch == n)
        assert closed.events == len(chunks[n - 1]), f"{where}: {closed.events} events, ingested {len(chunks[n - 1])}"
        at = reader.stable()  # what `cumulus read NAME --stable` reads
        assert at.epoch == n
        for table, snap in closed.snapshots.items():  # every stable branch at the epoch, whatever the kills
            refs = reader.catalog.load_table(table.split(".", 1)[1]).metadata.refs
            assert refs["stable"].snapshot_id == refs[f"epoch-{n}"].snapshot_id == snap, f"{where}: {table}"
        oracle = DuckOracle(schema, alive_after(events[: sum(len(c) for c in chunks[:n])]))
        at_tag = SimpleNamespace(entries=lambda m, at=at: reader.entries(m, (), at))
        for name in VIEWS:
            assert_view_equals_sql(compiled, name, at_tag, oracle, where)
            assert sorted(reader.read_view(name, at), key=sort_key) == sorted(oracle.query(VIEWS[name]), key=sort_key), f"{name} at {where}"
        if ingested == n and n < EPOCHS:
            ingest_epoch(spark, settings, chunks[n], tmp_path / f"in{n + 1}")
            ingested += 1
    print(f"{sealed_kills} kills left an epoch sealed but not closed")
    assert sealed_kills >= EPOCHS, f"only {sealed_kills} kills landed between seal and close (seed {seed})"
