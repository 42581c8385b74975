"""The random kill loop: the whole pipeline (ingest of three sources in a random order,
their applies, the close with its repair, fold, compaction, tags and ledger row, and
maintenance between the applies or after the close) runs in a worker process that is
killed with SIGKILL at a random instant, then started again, which resumes from what
the tables say; over and over. A kill's clock starts at a step of a random kind (or at
the worker's start, or at the moment a close seals its epoch, so that some kills land
between the seal and the ledger's `closed` row, where a rerun must resume the sealed
epoch); the kinds come in shuffled rounds, so every kind gets its share. After every run,
each epoch closed since is verified:

- its stable views equal DuckDB over the tuples alive at its end (tests/oracle.py);
- its ledger row counts every event of its landing files; events.* hold each exactly
  once (no event lost, none appended twice);
- the quarantine holds each planted bad row exactly once (one per file);
- every ingest batch was applied by exactly one apply (no delta applied twice);
- every table's `epoch-N` tag is the snapshot its ledger row names, and after the last
  run every `stable` branch is at the latest epoch's, and every results.<view> table
  holds that epoch's rows, tagged.

    python tests/engine/killloop.py --kills 200      (make soak)

prints, last, `soak: K kills, E epochs verified, 0 lost, 0 duplicated` (with the real
numbers) and exits 1 on any failure. tests/engine/test_kill_loop.py runs it in CI with
6 kills (one of every kind of instant). The worker is this file too (`worker HOME
LANDING THROUGH SEED`): it calls the engine library (cumulus.app.Engine), as the
DAG's steps and the CLI do."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Queue

from cumulus.store.tables import tables_of

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO / "tests")]

SCHEMA = REPO / "tests" / "fixtures" / "schemas" / "simple.sql"
VIEWS = ("chain_rst", "self_join_r", "triangle", "star_s")  # a chain, a self-join, a cycle, a star
SOURCES = {"a": ({"r"}, 1), "b": ({"s"}, 2), "c": ({"t"}, 3)}  # name: (relations, priority)
EVENTS_PER_EPOCH = 45
PREFIX = "killloop:"


def view_sql(name: str) -> str:
    return (REPO / "tests" / "fixtures" / "views" / "simple" / f"{name}.sql").read_text()


# ---------------------------------------------------------------- the stream


@dataclass
class Stream:
    """Epoch n's events are chunks[n - 1]; each source's files are written under
    `landing/epoch-n/<source>`, with one bad row planted in every file of 3 rows or more."""

    landing: Path
    chunks: list[list] = field(default_factory=list)
    planted: dict[int, int] = field(default_factory=dict)  # epoch -> bad rows planted

    @classmethod
    def make(cls, landing: Path, epochs: int, seed: int) -> Stream:
        from cumulus.ingest.synthetic import generate_events
        from cumulus.schema import load_schema

        events = generate_events(load_schema(SCHEMA), EVENTS_PER_EPOCH * epochs, seed=seed, domain=4, delete_ratio=0.3)
        stream = cls(landing, [events[k * EVENTS_PER_EPOCH:(k + 1) * EVENTS_PER_EPOCH] for k in range(epochs)])
        for n in range(1, epochs + 1):
            stream.planted[n] = stream._write(n)
        return stream

    def _write(self, n: int) -> int:
        from enginekit import write_events

        planted = 0
        for name, (relations, _) in SOURCES.items():
            folder = write_events(self.chunks[n - 1], self.folder(n, name), relations)
            for f in folder.glob("*.csv"):
                lines = f.read_text().splitlines()
                if len(lines) >= 3:  # a row of the wrong arity, among good ones
                    f.write_text("\n".join([*lines[:2], "999|1|7", *lines[2:]]) + "\n")
                    planted += 1
        return planted

    def folder(self, n: int, source: str) -> Path:
        return self.landing / f"epoch-{n}" / source

    def events_through(self, n: int) -> list:
        return [e for chunk in self.chunks[:n] for e in chunk]


# ---------------------------------------------------------------- the worker


def say(line: str) -> None:
    print(f"{PREFIX} {line}", flush=True)


def setup(home: Path, master: str = "local[2]", spark=None) -> None:
    """A home on the simple schema with the views and three sources (not killed), whose
    steps run on `master` (a standalone cluster's URL: a few shuffle partitions, as its
    data is tiny). The setup itself runs on a local master: creating tables and views
    needs no executors, and a cluster app would start two executor JVMs for it. Given a
    Spark session (a test's), it runs there, under the home's own catalog name."""
    from cumulus.app import Engine
    from cumulus.config import load_settings, with_overrides
    from cumulus.ingest.sources import add_source
    from cumulus.store.home import init_home

    home.mkdir(parents=True, exist_ok=True)
    conf = "" if master.startswith("local") else '\n[spark]\n"spark.sql.shuffle.partitions" = "4"\n'
    # A catalog name of the home's own: a session (a test's) may hold two homes, one per name.
    catalog = f"kill_{zlib.crc32(str(home.resolve()).encode()):08x}"
    # publish = "closed": the loop does not validate, so the close publishes (moves
    # `stable`, writes results.<view>), and kills land in that too: results_driver_rows = 0,
    # so that the tables are updated by the groups an epoch touched (Spark's query, the
    # driver's commit), not rewritten from the driver's own reads of these small maps.
    (home / "cumulus.toml").write_text(f'catalog = "{catalog}"\nspark_master = "{master}"\npublish = "closed"\n'
                                       'map_compaction_ratio = 0.5\nmap_compaction_min_rows = 20\n'
                                       'results_touched_share = 1.0\nresults_touched_min_rows = 0\n'
                                       f'results_driver_rows = 0\nbase_compaction_ratio = 0.5\n{conf}')
    engine = Engine(with_overrides(load_settings(home), spark_master="local[2]"), spark)
    init_home(engine.home, SCHEMA)
    for name, (_, priority) in SOURCES.items():
        add_source(engine.settings, name, priority)
    for name in VIEWS:
        engine.add_view(name, view_sql(name), "sql")
    say("set up")


def worker(home: Path, landing: Path, through: int, seed: int) -> None:
    """Close every epoch up to `through`, resuming whatever a killed run left: a sealed
    epoch is closed first; the open one gets its sources' files (in a random order: the
    arrival order is not the version order), their applies (in another), its close and,
    maintenance (snapshot expiry with nothing retained beyond what tags, branches and the
open epoch need, compaction): between the applies of odd epochs, after the close of even
ones."""
    from cumulus.app import Engine
    from cumulus.store.ledger import APPLIED, OPEN, ledger_rows

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    engine = Engine.open(home)
    engine.spark  # noqa: B018 (the session starts here: the kill is timed from `ready`)
    say("ready")
    rng = random.Random(seed)
    while True:
        rows = ledger_rows(engine.spark, engine.settings)
        sealed = [r.epoch for r in rows if r.state == APPLIED]
        if sealed:  # a close resumes the interrupted one: named, or not (`epoch_to_close`)
            say(f"step close epoch {sealed[0]} (sealed)")
            closed, _ = engine.close(sealed[0] if rng.random() < 0.5 else None)
            assert closed == sealed[0], f"the close took epoch {closed}, not the sealed epoch {sealed[0]}"
            continue
        n = next(r.epoch for r in rows if r.state == OPEN)
        if n > through:
            say("done")
            return
        for name in rng.sample(sorted(SOURCES), len(SOURCES)):
            say(f"step ingest {name} epoch {n}")
            engine.ingest(name, [str(Stream(landing).folder(n, name))], fmt="dbtoaster")
        for i, name in enumerate(rng.sample(sorted(SOURCES), len(SOURCES))):
            if i == 1 and n % 2:  # beside the applies: the open epoch's pinned reads must stay
                say(f"step maintenance within epoch {n}")
                engine.maintain(retain_last=1, retain_for=dt.timedelta(0))
            say(f"step apply {name} epoch {n}")
            engine.apply(name, n)
        say(f"step close epoch {n}")
        engine.close(n)
        if n % 2 == 0:
            say(f"step maintenance after epoch {n}")
            engine.maintain(retain_last=1, retain_for=dt.timedelta(0))


# ---------------------------------------------------------------- the loop


@dataclass
class Run:
    code: int | None
    killed: bool
    step: str  # the worker's last step line when it ended
    logger: str  # the module of the worker's last log line (which part of the step)
    out: str


# Where a kill's clock starts, how often, and within how many seconds of it the kill lands
# (at most --max-delay): a kill that waits for a late step pays the cold start of every
# step before it (seconds each, in a fresh JVM), an early one does not. A step's window is
# about its length in a fresh JVM, so most of its kills land in it: a close (repair, fold,
# compaction, tags, ledger) is longer than an ingest, an apply or maintenance. `sealed`
# starts the clock when a close has sealed its epoch (the ledger's log line): its kills
# land before the fold, compaction and tags that precede the `closed` row. A kill whose
# step ends before its instant waits for the next step of the kind (run_worker), so it
# lands in a step of the kind it waits for, not in the one after.
STEPS = {"ready": (4, 6.0), "ingest": (2, 3.0), "apply": (2, 3.0), "close": (2, 6.0), "maintenance": (1, 3.0),
         "sealed": (1, 1.0)}  # kind: (weight, window in seconds)
SEALED_LINE = "open -> applied"


def kill_points(rng: random.Random, kills: int) -> list[str]:
    """The kind of step each kill waits for: every kind once (in a random order), then
    shuffled rounds of STEPS by weight (each kind gets its share, in a random order)."""
    pool = [kind for kind, (weight, _) in STEPS.items() for _ in range(weight)]
    points = rng.sample(list(STEPS), len(STEPS))
    while len(points) < kills:
        points += rng.sample(pool, len(pool))
    return points[:kills]


def run_worker(argv: list[str], delay: Callable[[float], float] | None, at: str = "ready",
               ready_timeout: float = 300) -> Run:
    """The worker in a process group of its own; SIGKILLed `delay(limit)` seconds after it
    says `ready`, starts a step of kind `at` or seals an epoch (None: left to finish; a
    worker that ends first was not killed). A kill lands in a step of the kind it waits
    for: when that step ends before the kill's instant, the kill waits for the next step
    of that kind and draws its instant again, within the length the last one took
    (`limit`; unbounded, `math.inf`, the first time). A `ready` kill lands wherever its
    instant falls."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    queue: Queue[tuple[float, str | None]] = Queue()
    mark = {"ready": f"{PREFIX} ready", "sealed": SEALED_LINE}.get(at, f"{PREFIX} step {at}")

    def collect() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            queue.put((time.monotonic(), line))
        queue.put((time.monotonic(), None))  # the worker ended

    def marks(line: str) -> bool:
        return mark in line if at == "sealed" else line.startswith(mark)

    reader = threading.Thread(target=collect, daemon=True)
    reader.start()
    killed = False
    deadline = aimed = None  # the kill's instant, and when the step it aims at began
    waiting_since = time.monotonic()
    while True:
        now = time.monotonic()
        if deadline is None and delay is not None and now - waiting_since > ready_timeout:
            deadline, aimed = now + delay(math.inf), now  # the mark never came: kill anyway
        try:
            t, line = queue.get(timeout=None if deadline is None else max(0.0, deadline - now))
        except Empty:
            t, line = deadline, ""
        if line is None:
            break
        if line:
            lines.append(f"{t - started:7.1f} {line}")
        if killed or delay is None:
            continue
        if deadline is not None and at != "ready" and line.startswith((f"{PREFIX} step ", f"{PREFIX} done")):
            limit, deadline = t - aimed, None  # the aimed-at step ended first: aim at the next one
            if marks(line):
                deadline, aimed = t + delay(limit), t
        elif deadline is None and line and marks(line):
            deadline, aimed = t + delay(math.inf), t
        elif deadline is not None and t >= deadline and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            killed = True
    code = proc.wait(timeout=900)
    reader.join(timeout=10)
    while not queue.empty():  # what the worker wrote before its kill, not read yet
        t, line = queue.get()
        if line:
            lines.append(f"{t - started:7.1f} {line}")
    text = [ln.split(" ", 1)[1] if " " in ln.lstrip() else ln for ln in (x.lstrip() for x in lines)]
    steps = [ln.split(" ", 2)[2].strip() for ln in text if ln.startswith(f"{PREFIX} step ")]
    loggers = [ln.split(":", 1)[0] for ln in text if ln.startswith("cumulus.")]
    return Run(code, killed, steps[-1] if steps else "start", loggers[-1] if loggers else "-", "".join(lines))


@dataclass
class Outcome:
    kills: int = 0
    sealed: int = 0  # kills that left an epoch sealed but not closed
    verified: list[int] = field(default_factory=list)
    lost: int = 0
    duplicated: int = 0
    failures: list[str] = field(default_factory=list)
    killed_in: Counter = field(default_factory=Counter)

    def line(self) -> str:
        return (f"soak: {self.kills} kills, {len(self.verified)} epochs verified, "
                f"{self.lost} lost, {self.duplicated} duplicated")


def verify_epoch(settings, stream: Stream, n: int, out: Outcome) -> None:
    """Epoch n (closed) against its stream (see the module doc); failures go to `out`."""
    from oracle import DuckOracle, alive_after
    from pyiceberg.expressions import EqualTo

    from cumulus.engine.apply import APPLY_BATCH, APPLY_RECORD
    from cumulus.output import sort_key
    from cumulus.read import Reader
    from cumulus.schema import load_schema
    from cumulus.store.ledger import ledger_row

    def short(table: str) -> str:
        return table.split(".", 1)[1]

    reader = Reader(settings)
    fail = out.failures.append
    schema = load_schema(SCHEMA)
    oracle = DuckOracle(schema, alive_after(stream.events_through(n)))
    at = reader.stable(n)
    row = ledger_row(reader.catalog, settings, n)
    for table, snap in (row.snapshots if row else {}).items():  # tagged before the ledger row
        tag = reader.catalog.load_table(short(table)).metadata.refs.get(f"epoch-{n}")
        if tag is None or tag.snapshot_id != int(snap):
            fail(f"epoch {n}: {table}'s tag epoch-{n} is {tag}, the ledger row names snapshot {snap}")
    for name in VIEWS:
        got = sorted(reader.read_view(name, at), key=sort_key)
        want = sorted(oracle.query(view_sql(name)), key=sort_key)
        if got != want:
            fail(f"epoch {n}: view {name} is {got}, DuckDB says {want}")
    expected = Counter(e.relation for e in stream.chunks[n - 1])
    if row is None or row.events != sum(expected.values()):
        fail(f"epoch {n}: the ledger counts {row.events if row else None} events, the stream has {sum(expected.values())}")
    for rel in schema.relations:
        events = reader.catalog.load_table(short(tables_of(settings).events(rel.name))).scan(
            row_filter=EqualTo("epoch", n), selected_fields=("source_id", "seq")).to_arrow()
        distinct = len(set(zip(events["source_id"].to_pylist(), events["seq"].to_pylist(), strict=True)))
        out.duplicated += events.num_rows - distinct
        out.lost += max(0, expected[rel.name] - distinct)
        if distinct > expected[rel.name]:
            out.duplicated += distinct - expected[rel.name]
        if events.num_rows != expected[rel.name]:
            fail(f"epoch {n}: events.{rel.name} holds {events.num_rows} rows ({distinct} distinct), "
                 f"the stream has {expected[rel.name]}")
    quarantined = reader.catalog.load_table(short(tables_of(settings).quarantine)).scan(
        row_filter=EqualTo("epoch", n)).to_arrow().num_rows
    if quarantined != stream.planted[n]:
        fail(f"epoch {n}: {quarantined} rows in quarantine, {stream.planted[n]} bad rows planted")
    # Every ingest batch of the epoch taken by one apply (or the close's rebuild): the
    # records of cumulus.applies, and those left only on a maps commit (a kill between).
    owner: dict[str, set[str]] = {}
    applies = reader.catalog.load_table(short(tables_of(settings).applies)).scan(row_filter=EqualTo("epoch", n)).to_arrow()
    records = [(r["batch_id"], r["kind"], r["status"], json.loads(r["ingest_batches"] or "[]")) for r in applies.to_pylist()]
    for snap in reader.catalog.load_table(short(tables_of(settings).maps)).snapshots():
        summary = snap.summary.additional_properties if snap.summary else {}
        if APPLY_RECORD in summary:
            record = json.loads(summary[APPLY_RECORD])
            if record["epoch"] == n:
                records.append((summary[APPLY_BATCH], record["kind"], "done", record["ingest_batches"]))
    for batch_id, kind, status, batches in records:
        if status == "done" and kind in ("apply", "recompute"):
            for b in batches:
                owner.setdefault(b, set()).add(batch_id)
    twice = sorted(b for b, ids in owner.items() if len(ids) > 1)
    if twice:
        out.duplicated += len(twice)
        fail(f"epoch {n}: ingest batches applied more than once: {twice}")
    out.verified.append(n)


def verify_stable(settings, out: Outcome) -> None:
    """After a run that ended on its own: every table's `stable` branch is at the latest
    closed epoch's snapshot (a kill between the ledger row and the branches is mended by
    the next close)."""
    from cumulus.read import Reader
    from cumulus.store.ledger import ledger_row

    reader = Reader(settings)
    n = reader.latest_epoch()
    for table, snap in (ledger_row(reader.catalog, settings, n).snapshots or {}).items():
        stable = reader.catalog.load_table(table.split(".", 1)[1]).metadata.refs.get("stable")
        if stable is None or stable.snapshot_id != int(snap):
            out.failures.append(f"epoch {n}: {table}'s stable branch is {stable}, the ledger row names snapshot {snap}")
    from cumulus.engine.results import shows_epoch
    from cumulus.output import sort_key
    from cumulus.read import At

    for view in VIEWS:  # results.<view>: the published epoch's rows, tagged, as the current snapshot
        table = reader.catalog.load_table(f"results.{view}")
        tag = table.snapshot_by_name(f"epoch-{n}")
        current = table.current_snapshot()
        got = sorted((tuple(r.values()) for r in table.scan().to_arrow().to_pylist()), key=sort_key)
        if tag is None or current is None or not shows_epoch(json.loads(table.metadata.model_dump_json()), n):
            # (maintenance may have rewritten its files since: the same rows)
            out.failures.append(f"epoch {n}: results.{view} is not at its tag epoch-{n} ({tag}, {current})")
        elif got != sorted(reader.read_view(view, At(n)), key=sort_key):
            out.failures.append(f"epoch {n}: results.{view} differs from the view")


def soak(kills: int, seed: int, work: Path, max_delay: float, epochs_ahead: int = 1,
         progress=print, master: str = "local[2]", spark=None) -> Outcome:
    """Kill the worker `kills` times at random instants, verify every epoch closed (with
    no kills: `epochs_ahead` epochs through one run), on Spark `master`. The home is set
    up in `spark` when given (a test's session: a JVM start less), else in a process."""
    from cumulus.config import load_settings
    from cumulus.read import Reader
    from cumulus.store.ledger import APPLIED, DONE, ledger_rows

    rng = random.Random(seed)
    points = kill_points(rng, kills)
    home, landing = work / "home", work / "landing"
    budget = 2 * kills + 10  # epochs the stream holds: a run closes one or two before its kill
    stream = Stream.make(landing, budget, seed)
    if spark is not None:
        setup(home, master, spark)
    elif (done := run_worker(["setup", str(home), master], None)).code != 0:
        raise SystemExit(f"the home could not be set up:\n{done.out}")
    settings = load_settings(home)
    out = Outcome()
    attempt = 0
    while True:
        attempt += 1
        kill = out.kills < kills
        # A run to be killed may go on through every epoch of the stream (so that the step
        # its kill waits for comes); the last run closes one more epoch and ends.
        # (at least two epochs in all, so that one closes after another's kills)
        through = budget if kill else max(max(out.verified, default=0) + epochs_ahead, 2)
        at = points[out.kills] if kill else "ready"
        window = min(STEPS[at][1], max_delay)
        run = run_worker(["worker", str(home), str(landing), str(through), str(seed * 1000 + attempt)],
                         (lambda limit, window=window: rng.uniform(0.0, min(window, limit))) if kill else None, at)
        (work / "runs").mkdir(exist_ok=True)
        (work / "runs" / f"run-{attempt}.log").write_text(run.out)
        if run.killed:
            out.kills += 1
            out.killed_in[f"{run.step.split()[0]}/{run.logger}"] += 1
        elif kill and run.code == 0:
            out.failures.append(f"run {attempt} closed every epoch of the stream ({budget}) before its kill")
            break
        elif run.code != 0:
            out.failures.append(f"run {attempt} failed ({run.code}) at {run.step}:\n{run.out[-4000:]}")
            break
        rows = ledger_rows(Reader(settings).catalog, settings)
        out.sealed += run.killed and any(r.state == APPLIED for r in rows)
        closed = [r.epoch for r in rows if r.state in DONE]
        for n in closed:
            if n not in out.verified:
                verify_epoch(settings, stream, n, out)
        if not run.killed:
            verify_stable(settings, out)
        progress(f"{PREFIX} run {attempt}: {'killed during ' + run.step if run.killed else 'finished'}; "
                 f"{out.kills} kills, epochs closed: {max(closed, default=0)}")
        if out.failures:
            break
        if not kill:
            break  # the last run, left to finish, closed everything up to `through`
    return out


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "setup":
        setup(Path(args[1]), *args[2:])
        return 0
    if args and args[0] == "worker":
        worker(Path(args[1]), Path(args[2]), int(args[3]), int(args[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("KILL_SEED", random.randrange(1_000_000))))
    parser.add_argument("--max-delay", type=float, default=6.0,
                        help="a kill lands up to this many seconds after the start of a step (of a random "
                             "kind; less for the shorter steps)")
    parser.add_argument("--work", type=Path, default=None)
    opts = parser.parse_args(args)
    print(f"{PREFIX} seed {opts.seed} (--seed {opts.seed} replays the kill instants)", flush=True)
    with tempfile.TemporaryDirectory(prefix="cumulus-soak-") as tmp:
        work = opts.work or Path(tmp)
        out = soak(opts.kills, opts.seed, work, opts.max_delay)
    for failure in out.failures:
        print(f"{PREFIX} FAILED: {failure}", flush=True)
    print(f"{PREFIX} kills per step: {dict(out.killed_in)}; {out.sealed} left an epoch sealed", flush=True)
    print(out.line(), flush=True)
    return 1 if out.failures or out.lost or out.duplicated else 0


if __name__ == "__main__":
    sys.exit(main())
