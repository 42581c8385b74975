"""Concurrent sources for real, killed at random: a home whose Iceberg catalog is a real
PostgreSQL server (tests/pgkit.py), three sources in processes of their own ingesting
their part of the DBToaster TPC-H stream with deletes in a random arrival order and
applying at once (tests/engine/parallelkit.py), a closer closing (and so publishing)
each epoch. Meanwhile a killer SIGKILLs one of the four processes at a random instant,
PARALLEL_KILLS times (10 in CI; a soak: PARALLEL_KILLS=60 make soak-concurrent), and
starts it again. The applies overlap by construction (parallelkit.meet). Every closed
epoch's views equal DuckDB over the alive rows, every map equals the reference
interpreter, the ledger counts every event once, the stable branch and results.<view>
are at the last epoch, and the ledger shows repaired batches: applies that read a state
missing another source's deltas, which the close repaired (none repaired would prove
nothing).
The cyclic views (domestic_revenue, q05_local_supplier) compile to full M3: terms that
join two maps on a loop variable neither the event nor the target binds, so a repair's
correction there multiplies a missed delta with the other map's entries."""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from enginekit import write_epoch_files
from oracle import DuckOracle, alive_after, assert_view_equals_sql
from parallelkit import SOURCES, TPCH, setup
from pgkit import postgres_server

from cumulus.config import load_settings
from cumulus.ingest.dbtoaster import read_stream
from cumulus.m3.ast import MapRef, Var, terms
from cumulus.m3.interpreter import Interpreter
from cumulus.read import Reader
from cumulus.schema import load_schema
from cumulus.sql.views import compile_views
from cumulus.store.ledger import DONE, ledger_row

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
KIT = Path(__file__).resolve().parent / "parallelkit.py"
STREAM = REPO.parent / "shared" / "data" / "dbtoaster" / "tpch" / "standard_del"
# Eight views or more, a self-join and cycles among them.
VIEWS = ["lineitem_pairs_per_flag", "domestic_revenue", "q05_local_supplier", "revenue_by_nation_part",
         "customer_order_extremes", "orders_overall", "q03_shipping_priority", "q10_returned_items",
         "nation_stock_value"]
EPOCHS = int(os.environ.get("PARALLEL_EPOCHS", "2"))  # a soak takes more, for its kills


def shares_a_loop_variable(expr, params) -> bool:
    """A term with a loop variable (bound by neither the trigger nor a constant) that keys two of its maps."""
    for _, factors in terms(expr):
        seen: dict[str, int] = {}
        for f in factors:
            if isinstance(f, MapRef):
                for v in {a.name for a in f.args if isinstance(a, Var) and a.name not in params}:
                    seen[v] = seen.get(v, 0) + 1
        if any(n > 1 for n in seen.values()):
            return True
    return False


def start(*argv: str, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(KIT), *argv], stdout=log.open("a"), stderr=subprocess.STDOUT,
                            text=True)


def run_killing(argv: dict[str, tuple], markers: Path, epochs: int, kills: int, rng: random.Random,
                timeout: float) -> tuple[dict, list]:
    """Run the processes; SIGKILL one `kills` times, and start it again with the same
    arguments; then wait for all. Returns their outputs and what was killed
    (name@seconds[step]).

    - When: 0.5-3 s after some step ended since the last kill, or after the last kill's
      victim is up again (WARM seconds, its Spark session started) and so back in the
      step it redoes. The kills spread over the epochs, and a run never ends with kills
      left for want of a finished step: every kill delays the run by a restart, and the
      next may come once that restart is over.
    - Whom: a process in the step killed least so far, so every step gets its share: a
      source while it ingests, a source while it applies (every source ingested the
      epoch, it has not applied), the closer while it closes (and so publishes: every
      source applied). The step is read from the processes' markers; a kill lands a
      random 0-1.5 s into it, and only a process up WARM seconds is killed.
    - The last kills are kept for applies and closes; once every source is done, the
      last close takes whatever is left."""
    import time

    warm = 10.0
    logs = {name: Path(os.environ.get("TMPDIR", "/tmp")) / f"parallel-{os.getpid()}-{name}.log" for name in argv}
    for log in logs.values():
        log.write_text("")

    def done(name: str) -> bool:
        return (markers / name).exists()

    def step(name: str) -> str:
        for n in range(1, epochs + 1):
            if name == "closer":
                if not done(f"closed-{n}"):
                    return "close" if all(done(f"applied-{n}-{s}") for s in SOURCES) else "wait"
            elif not done(f"applied-{n}-{name}"):
                if not done(f"ingested-{n}-{name}"):
                    return "ingest"
                return "apply" if all(done(f"ingested-{n}-{s}") for s in SOURCES) else "wait"
        return "done"

    procs = {name: start(*args, log=logs[name]) for name, args in argv.items()}
    born = dict.fromkeys(procs, time.monotonic())
    started, killed, by_step = time.monotonic(), [], dict.fromkeys(("ingest", "apply", "close"), 0)
    keep = dict.fromkeys(("apply", "close"), max(1, kills // 5))  # kills kept for the later steps of an epoch
    progress, victim = -1, None  # markers when the last kill came, and whom it killed
    while len(killed) < kills and any(p.poll() is None for p in procs.values()):
        time.sleep(rng.uniform(0.5, 3.0))
        stepped = len(list(markers.iterdir())) > progress
        if not stepped and (victim is None or time.monotonic() - born[victim] <= warm):
            continue
        ready = [n for n, p in procs.items() if p.poll() is None and time.monotonic() - born[n] > warm]
        working = {n: step(n) for n in ready}
        working = {n: k for n, k in working.items() if k in by_step}
        owed = {k: max(0, kept - by_step[k]) for k, kept in keep.items()}
        sources_done = all(step(s) == "done" for s in procs if s != "closer")
        if kills - len(killed) <= sum(owed.values()) and not sources_done:  # kept for applies and closes
            working = {n: k for n, k in working.items() if owed.get(k)}
        if not working:
            continue
        kind = min(set(working.values()), key=lambda k: (by_step[k], rng.random()))  # the step killed least
        name = rng.choice(sorted(n for n, k in working.items() if k == kind))
        time.sleep(rng.uniform(0.0, 1.5))
        if procs[name].poll() is not None or step(name) != kind:
            continue
        procs[name].kill()
        procs[name].wait()
        by_step[kind] += 1
        progress, victim = len(list(markers.iterdir())), name
        killed.append(f"{name}@{time.monotonic() - started:.0f}s[{kind}]")
        with logs[name].open("a") as log:
            log.write(f"--- SIGKILL at {killed[-1]}; started again\n")
        procs[name] = start(*argv[name], log=logs[name])
        born[name] = time.monotonic()
    for p in procs.values():
        p.wait(timeout=timeout)
    outs = {name: log.read_text() for name, log in logs.items()}
    for name, p in procs.items():
        assert p.returncode == 0, f"{name} failed ({p.returncode}):\n{outs[name][-6000:]}"
    return outs, killed


def test_three_sources_apply_at_once_and_the_close_repairs_them(spark, tmp_path) -> None:
    seed = int(os.environ.get("PARALLEL_SEED", random.randrange(1_000_000)))
    print(f"seed {seed} (PARALLEL_SEED={seed} replays the arrival delays)")
    schema = load_schema(TPCH)
    stream = read_stream(STREAM, schema)
    cuts = [len(stream) * k // (EPOCHS + 1) for k in range(EPOCHS)] + [len(stream)]
    chunks = [stream[lo:hi] for lo, hi in itertools.pairwise(cuts)]
    landing, markers, home = tmp_path / "landing", tmp_path / "markers", tmp_path / "home"
    markers.mkdir()
    for n, rows in enumerate(chunks, start=1):
        for name, (relations, _) in SOURCES.items():
            write_epoch_files(rows, landing / f"epoch-{n}" / name, relations)

    with postgres_server() as pg:
        home.mkdir()
        # publish = "closed": no validation here, the close publishes (kills land in it too)
        (home / "cumulus.toml").write_text(f'catalog = "par"\nspark_master = "local[2]"\npublish = "closed"\n{pg.toml()}')
        setup(home, VIEWS, spark)  # in this process's session (a JVM start less than a process of its own)
        argv = {name: ("source", str(home), str(landing), str(markers), name, str(EPOCHS), str(seed + i))
                for i, name in enumerate(SOURCES)}
        argv["closer"] = ("closer", str(home), str(markers), str(EPOCHS))
        kills = int(os.environ.get("PARALLEL_KILLS", "10"))
        outs, killed = run_killing(argv, markers, EPOCHS, kills, random.Random(seed), timeout=1800)
        print(f"kills: {len(killed)} ({', '.join(killed)})")
        assert len(killed) == kills, killed
        assert {k.split('[')[1] for k in killed} >= {'ingest]', 'apply]', 'close]'}, killed

        settings = load_settings(home)
        reader = Reader(settings)
        compiled = compile_views(schema, [(v, (REPO / "tests" / "fixtures" / "views" / "tpch" / f"{v}.sql").read_text())
                                          for v in VIEWS])
        interp = Interpreter(compiled.checked)
        assert any(shares_a_loop_variable(s.expr, t.params) for t, s in compiled.program.statements())
        read = {a.relation for m in compiled.maps.values() for a in m.query.atoms}
        repaired = 0
        for n, rows in enumerate(chunks, start=1):
            row = ledger_row(reader.catalog, settings, n)
            assert row is not None and row.state in DONE, f"epoch {n}: {row}"
            events = sum(r.event.relation in read for r in rows)  # of the relations some view reads
            assert row.metrics["events"] == events, f"epoch {n}: the close applied {row.metrics['events']} events of {events}"
            assert row.events == len(rows), f"epoch {n}: the ledger counts {row.events} events ingested of {len(rows)}"
            repaired += row.metrics["repaired_batches"]
            for r in rows:
                interp.process(r.event)
            oracle = DuckOracle(schema, alive_after([r.event for chunk in chunks[:n] for r in chunk]))
            at = reader.stable(n)
            at_tag = SimpleNamespace(entries=reader.all_entries(at))  # every map from one scan
            for name in VIEWS:
                assert_view_equals_sql(compiled, name, at_tag, oracle, f"epoch {n} (seed {seed})")
            for m in compiled.checked.maps:
                assert at_tag.entries(m) == interp.entries(m), f"map {m} at epoch {n} (seed {seed})"
        # published: every stable branch at the last epoch's snapshot, results.<view> its rows
        from cumulus.output import sort_key
        from cumulus.read import At

        last = ledger_row(reader.catalog, settings, EPOCHS)
        for table, snap in last.snapshots.items():
            ref = reader.catalog.load_table(table.split(".", 1)[1]).metadata.refs.get("stable")
            assert ref is not None and ref.snapshot_id == int(snap), (table, ref, snap)
        for name in VIEWS:
            results = reader.catalog.load_table(f"results.{name}")
            assert results.snapshot_by_name(f"epoch-{EPOCHS}").snapshot_id == results.current_snapshot().snapshot_id
            got = sorted((tuple(r.values()) for r in results.scan().to_arrow().to_pylist()), key=sort_key)
            assert got == sorted(reader.read_view(name, At(EPOCHS)), key=sort_key), name
        applied = "".join(outs[s] for s in SOURCES)
        print(f"{repaired} batches repaired over {EPOCHS} epochs")
        assert repaired > 0, (f"no batch was repaired: the sources never applied at once, so the test proved "
                              f"nothing (seed {seed}):\n{applied[-3000:]}")
