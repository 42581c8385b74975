"""The processes of the parallel-applies test (tests/engine/test_parallel_applies.py): one
per source, each ingesting its files of every epoch and applying them, and a closer. They
call the engine library (cumulus.app.Engine) in processes of their own, on a home
whose catalog is a PostgreSQL server, and meet through marker files:

    python tests/engine/parallelkit.py setup HOME VIEW...
    python tests/engine/parallelkit.py source HOME LANDING MARKERS NAME EPOCHS SEED
    python tests/engine/parallelkit.py closer HOME MARKERS EPOCHS

A source waits for its epoch to be open, sleeps a random while (the sources arrive in a
random order, not in their version order) and ingests (ingest holds the catalog lock
alone); once every source has ingested the epoch, all apply at once: applies of
different sources hold the lock shared, so each may read a state that misses another's
deltas, which the close repairs. They overlap by construction, not by luck: each apply,
once it has fixed the snapshot it reads (the fault point apply.after-record), waits
there until every other source has too (or has applied: nothing to apply, or done
before a kill), so every apply but the first to commit read a state without the others'
deltas (unless a kill lands between that wait and its commit). The closer closes each epoch once every source applied
(the home publishes at the close: the stable branch and results.<view>).

Every process may be SIGKILLed at any instant and started again with the same
arguments (the test's kill loop): it skips what its markers say it finished and redoes
the step it was in, which the engine makes safe (a file is ingested once ever, a batch
applied once, a close resumed)."""

from __future__ import annotations

import logging
import os
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TPCH = REPO / "tests" / "fixtures" / "schemas" / "tpch.sql"
SOURCES = {  # name: (relations, priority)
    "a": ({"orders", "customer"}, 1),
    "b": ({"lineitem"}, 2),
    "c": ({"part", "partsupp", "supplier", "nation", "region"}, 3),
}


def wait_for(paths: list[Path], what: str, timeout: float = 600, met=Path.exists) -> None:
    """Wait until `met` holds for every path (by default: it exists)."""
    deadline = time.monotonic() + timeout
    while not all(met(p) for p in paths):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.1)


def meet(markers: Path, n: int, name: str) -> None:
    """At the fault point between an apply's read and its commit: say that this process
    has read epoch n's state, and wait until every source has applied it or has a live
    process that read it (a source killed there reads again once started again)."""
    (markers / f"read-{n}-{name}").write_text(str(os.getpid()))

    def read_or_applied(source: str) -> bool:
        if (markers / f"applied-{n}-{source}").exists():
            return True
        try:
            os.kill(int((markers / f"read-{n}-{source}").read_text()), 0)
        except (FileNotFoundError, ValueError, ProcessLookupError):
            return False  # not read yet, or read by a process since killed
        return True

    wait_for(list(SOURCES), f"every source's read of epoch {n}", met=read_or_applied)


def setup(home: Path, views: list[str], spark=None) -> None:
    """The home's tables, sources and views: in `spark` when given (a test's session), else
    in this process's own."""
    from cumulus.app import Engine
    from cumulus.config import load_settings
    from cumulus.ingest.sources import add_source
    from cumulus.store.home import init_home

    engine = Engine(load_settings(home), spark)
    init_home(engine.home, TPCH)
    for name, (_, priority) in SOURCES.items():
        add_source(engine.settings, name, priority)
    for view in views:
        engine.add_view(view, (REPO / "tests" / "fixtures" / "views" / "tpch" / f"{view}.sql").read_text(), "sql")


def source(home: Path, landing: Path, markers: Path, name: str, epochs: int, seed: int) -> None:
    from cumulus.app import Engine
    from cumulus.faults import on_fault_point
    from cumulus.store.catalog import pyiceberg_catalog
    from cumulus.store.ledger import OPEN, ledger_rows

    rng = random.Random(seed)
    engine = Engine.open(home)
    catalog = pyiceberg_catalog(engine.settings)
    engine.spark  # noqa: B018 (started before the first epoch: the sources race from there)
    for n in range(1, epochs + 1):
        if (markers / f"applied-{n}-{name}").exists():  # done before a kill
            continue
        if not (markers / f"ingested-{n}-{name}").exists():
            while not any(r.epoch == n and r.state == OPEN for r in ledger_rows(catalog, engine.settings)):
                time.sleep(1.0)  # (a look at the ledger costs about 25 ms of CPU)
            time.sleep(rng.uniform(0.0, 2.0))
            engine.ingest(name, [str(landing / f"epoch-{n}" / name)], fmt="dbtoaster")
            (markers / f"ingested-{n}-{name}").touch()
        wait_for([markers / f"ingested-{n}-{s}" for s in SOURCES], f"every source's ingest of epoch {n}")
        time.sleep(rng.uniform(0.0, 0.3))
        on_fault_point("apply.after-record", lambda n=n: meet(markers, n, name))
        applied = engine.apply(name, n, wait=600)  # (epoch n-1's close may still run)
        print(f"parallelkit: epoch {n} source {name}: {applied.summary}", flush=True)
        (markers / f"applied-{n}-{name}").touch()


def closer(home: Path, markers: Path, epochs: int) -> None:
    from cumulus.app import Engine

    engine = Engine.open(home)
    engine.spark  # noqa: B018
    for n in range(1, epochs + 1):
        if (markers / f"closed-{n}").exists():  # done before a kill
            continue
        wait_for([markers / f"applied-{n}-{s}" for s in SOURCES], f"every source's apply of epoch {n}")
        _, metrics = engine.close(n)
        print(f"parallelkit: epoch {n} closed: {metrics['repaired_batches']} batches repaired", flush=True)
        (markers / f"closed-{n}").touch()


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    command, home = argv[0], Path(argv[1])
    if command == "setup":
        setup(home, argv[2:])
    elif command == "source":
        source(home, Path(argv[2]), Path(argv[3]), argv[4], int(argv[5]), int(argv[6]))
    elif command == "closer":
        closer(home, Path(argv[2]), int(argv[3]))
    else:
        raise SystemExit(f"unknown command {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
