"""A peer project's own test queries through Cumulus: every query of DBToaster's test
suite (a checkout of github.com/dbtoaster/dbtoaster-a5, `test/queries/<folder>/*.sql`,
given with --dbtoaster; its files are read in place, never copied here) is compiled as a
view of its own schema (the file's CREATE STREAM statements, INCLUDEs expanded) and
classified:

- incremental: compiled to M3; the reference interpreter replays it over streams with
  inserts and deletes (DBToaster's own data where it has the relations, shared/data/
  dbtoaster; then two random streams with deletes and NULLs) and its rows must equal
  DuckDB running the same SQL over the tuples alive, at three points of each stream;
- full refresh: the compiler refuses it with the construct and its position (`view add`
  then keeps it by full refresh; `full_refresh = "refuse"` refuses it);
- not a view: a one-line error, e.g. SQL that binds to no column (also DBToaster's own
  non-SQL extensions, such as `IN LIST` or `LISTMAX`).

A wrong answer fails the run (exit status 1). `--engine DIR` also runs the `simple`
folder's queries over R, S, T through the engine: one home, every query a view (refused
ones by full refresh), Spark plans for every apply and rebuild, three epochs (DBToaster's
tiny data, then random inserts and deletes with NULLs), each view at each tag against
DuckDB.

    git clone https://github.com/dbtoaster/dbtoaster-a5 /tmp/dbtoaster-a5
    .venv/bin/python bench/peer_queries.py --dbtoaster /tmp/dbtoaster-a5 [--engine /tmp/peer-home]

writes bench/results/peer_queries.{md,json}.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the tests' DuckDB oracle (tests/oracle.py)

from oracle import DuckOracle, assert_view_equals_sql  # noqa: E402

from cumulus.errors import CumulusError, UnsupportedSQLError  # noqa: E402
from cumulus.ingest.dbtoaster import read_events  # noqa: E402
from cumulus.ingest.synthetic import generate_events, write_dbtoaster  # noqa: E402
from cumulus.schema import Schema, parse_schema  # noqa: E402
from cumulus.sql.derived import Maintainer  # noqa: E402
from cumulus.sql.views import Compilation, compile_views  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "dbtoaster"
FOLDERS = ("simple", "simple/case01", "tpch", "employee", "finance", "mddb")
SIMPLE = {"r": ["a", "b"], "s": ["b", "c"], "t": ["c", "d"]}  # DBToaster's R, S, T (shared/data/dbtoaster/simple)


def statements(path: Path, root: Path) -> tuple[str, list[str]]:
    """The file's schema as CREATE TABLE statements, and its queries (INCLUDEs expanded)."""
    def include(m: re.Match) -> str:
        return (root / m.group(1).lstrip("./")).read_text()

    text = re.sub(r"INCLUDE\s+'([^']+)'\s*;", include, path.read_text())
    text = re.sub(r"/\*.*?\*/", "", re.sub(r"--[^\n]*", "", text), flags=re.S)
    ddl, queries = [], []
    for stmt in (s.strip() for s in text.split(";")):
        if m := re.match(r"CREATE\s+(?:STREAM|TABLE)\s+(\w+)\s*\((.*?)\)\s*(?:FROM\s+FILE|$)", stmt, re.S | re.I):
            ddl.append(f"CREATE TABLE {m.group(1).lower()} ({m.group(2)});")
        elif stmt and not stmt.upper().startswith("CREATE"):
            queries.append(stmt)
    return "\n".join(ddl), queries


def replay(compiled: Compilation, events: list, checkpoints: int) -> int:
    """Replay `events` in the interpreter; every view == DuckDB at `checkpoints` points
    (AssertionError otherwise). The rows compared."""
    interp, alive, compared = Maintainer(compiled), {}, 0
    marks = {len(events) * k // checkpoints for k in range(1, checkpoints + 1)}
    for i, e in enumerate(events, 1):
        interp.process(e)
        bag = alive.setdefault(e.relation, [])
        bag.append(e.values) if e.sign == "+" else bag.remove(e.values)
        if i in marks:
            oracle = DuckOracle(compiled.schema, alive)
            for name in compiled.views:
                compared += assert_view_equals_sql(compiled, name, interp, oracle, f"event {i}/{len(events)}")
    return compared


def streams(folder: str, schema: Schema) -> list[list]:
    """The event streams a query of `folder` is replayed over."""
    out = []
    if folder == "tpch":
        out.append(read_events(DATA / "tpch" / "standard_del", schema))
    elif {r.name: list(r.column_names) for r in schema.relations}.items() <= SIMPLE.items():
        out.append(read_events(DATA / "simple" / "tiny", schema))
    return out + [generate_events(schema, 300, seed=seed, domain=4, delete_ratio=0.35) for seed in (1, 2)]


def sweep(root: Path) -> list[dict]:
    rows = []
    for folder in FOLDERS:
        for path in sorted((root / "test" / "queries" / folder).glob("*.sql")):
            if path.name.startswith("schemas"):
                continue
            ddl, queries = statements(path, root)
            for i, sql in enumerate(queries):
                name = f"{folder}/{path.stem}" + (f"#{i + 1}" if len(queries) > 1 else "")
                row = {"query": name, "rows": 0}
                try:
                    compiled = compile_views(parse_schema(ddl), [("v", sql)])
                except UnsupportedSQLError as exc:
                    row |= {"class": "full refresh", "why": str(exc).splitlines()[0]}
                except CumulusError as exc:
                    row |= {"class": "not a view", "why": str(exc).splitlines()[0]}
                else:
                    row["class"] = "incremental"
                    try:
                        for events in streams(folder.split("/")[0], compiled.schema):
                            row["rows"] += replay(compiled, events, 3)
                    except AssertionError as exc:
                        row |= {"class": "WRONG", "why": str(exc)[:400]}
                    except Exception as exc:  # DuckDB cannot run it (e.g. a NATURAL JOIN without a shared column)
                        row |= {"class": "no oracle", "why": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
                rows.append(row)
                print(f"{row['class']:>12}  {name}" + (f": {row['why'][:140]}" if "why" in row else
                                                       f": {row['rows']} rows equal DuckDB's"), flush=True)
    return rows


def engine_run(root: Path, work: Path, seed: int = 7) -> dict:
    """The `simple` queries over R, S, T as views of one home, three epochs through Spark."""
    from types import SimpleNamespace

    from cumulus.config import load_settings
    from cumulus.engine.close import close_epoch
    from cumulus.engine.registry import batch_plan
    from cumulus.engine.views import add_view
    from cumulus.ingest.job import ingest_files
    from cumulus.ingest.sources import add_source
    from cumulus.read import Reader
    from cumulus.schema import load_schema
    from cumulus.spark.session import spark_session
    from cumulus.store.home import init_home
    from cumulus.store.tables import Home

    schema_file = REPO / "tests" / "fixtures" / "schemas" / "simple.sql"
    schema = load_schema(schema_file)
    (work / "home").mkdir(parents=True)
    (work / "home" / "cumulus.toml").write_text(  # every apply and rebuild by Spark plans
        'catalog = "peer"\nspark_master = "local[2]"\npublish = "closed"\napply_local_events = 0\nrebuild_local_rows = 0\n')
    settings = load_settings(work / "home")
    home = Home(spark_session(settings, app_name="peer-queries"), settings)
    init_home(home, schema_file)
    add_source(settings, "a", 1)
    added, refused, compiled = [], {}, None
    for path in sorted((root / "test" / "queries" / "simple").glob("**/*.sql")):
        ddl, queries = statements(path, root)
        tables = re.findall(r"CREATE TABLE (\w+) \(([^)]*)\)", ddl)
        if not tables or any(SIMPLE.get(t) != [c.split()[0].lower() for c in cols.split(",")] for t, cols in tables):
            continue
        for i, sql in enumerate(queries):
            name = re.sub(r"\W", "_", f"q_{path.stem}" + (f"_{i + 1}" if len(queries) > 1 else "")).lower()
            try:
                compiled = add_view(home, schema, name, sql)
                added.append(name)
            except CumulusError as exc:
                refused[name] = str(exc).splitlines()[0]
    full = [n for n in added if compiled.views[n].refresh != "incremental"]
    print(f"engine: {len(added)} views ({len(full)} by full refresh), {len(refused)} refused", flush=True)
    plan, reader, rng = batch_plan(compiled), Reader(settings), random.Random(seed)
    alive: dict[str, list[tuple]] = {r.name: [] for r in schema.relations}
    epochs, wrong = [], []
    for epoch in range(1, 4):
        # epoch 1: DBToaster's tiny data; then random tuples (NULLs among them), each event a
        # delete of an alive tuple 45% of the time
        inserts = (read_events(DATA / "simple" / "tiny", schema) if epoch == 1 else
                   generate_events(schema, 400, seed=rng.randrange(10**6), delete_ratio=0.0))
        events = []
        for e in inserts:
            live = alive[e.relation]
            if epoch > 1 and live and rng.random() < 0.45:
                events.append(type(e)("-", e.relation, live.pop(rng.randrange(len(live)))))
            else:
                events.append(e)
                live.append(e.values)
        folder = write_dbtoaster(events, work / f"epoch-{epoch}", schema)  # (DBToaster's format, with deletes)
        started = time.perf_counter()
        ingest_files(home, "a", [folder], fmt="dbtoaster")
        metrics = close_epoch(home, plan, epoch)
        seconds = time.perf_counter() - started
        oracle = DuckOracle(schema, alive)
        at = SimpleNamespace(entries=reader.all_entries(reader.stable(epoch)))
        compared = 0
        for name in added:
            try:
                compared += assert_view_equals_sql(compiled, name, at, oracle, f"epoch {epoch}")
            except AssertionError as exc:
                wrong.append(str(exc)[:400])
        epochs.append({"epoch": epoch, "events": len(events), "mode": metrics["mode"], "seconds": round(seconds, 1),
                       "rows_compared": compared})
        print(f"engine: epoch {epoch}: {len(events)} events, {metrics['mode']}, {seconds:.0f} s, {compared} rows "
              f"compared, {len(wrong)} wrong so far", flush=True)
    return {"views": len(added), "full_refresh": full, "refused": refused, "epochs": epochs, "wrong": wrong}


def construct(why: str) -> str:
    """A refusal's kind: its line without the position and the parenthesized specifics."""
    why = re.sub(r"\.? v: line \d+, col \d+\.?$", "", why)
    while (shorter := re.sub(r"\s*\([^()]*\)", "", why)) != why:
        why = shorter
    return why.strip()


def report(rows: list[dict], engine: dict | None) -> str:
    by_folder = collections.defaultdict(collections.Counter)
    for r in rows:
        by_folder[r["query"].rsplit("/", 1)[0]][r["class"]] += 1
    classes = ("incremental", "full refresh", "not a view", "no oracle", "WRONG")
    out = ["# A peer project's test queries (DBToaster's test/queries)", "",
           "`bench/peer_queries.py` (its docstring says how each class is decided). Incremental queries "
           "were replayed in the reference interpreter and compared with DuckDB at three points of each stream.", "",
           "| folder | " + " | ".join(classes) + " |", "|:--|" + "--:|" * len(classes)]
    for folder, counts in by_folder.items():
        out.append(f"| {folder} | " + " | ".join(str(counts[c]) for c in classes) + " |")
    total = collections.Counter(r["class"] for r in rows)
    out.append("| **all** | " + " | ".join(f"**{total[c]}**" for c in classes) + " |")
    out += ["", f"Rows compared with DuckDB: {sum(r['rows'] for r in rows):,}.", "",
            "## Why a query has no incremental form (the compiler's one line, by construct)", "",
            "At `view add` such a view is kept by full refresh when Spark SQL runs it, and refused otherwise "
            "(DBToaster's own functions and syntax: LISTMAX, IN LIST, ...).", ""]
    reasons = collections.Counter(construct(r["why"]) for r in rows if r["class"] == "full refresh")
    out += [f"- {n} x {why}" for why, n in reasons.most_common()]
    out += ["", "## Every query", "", "| query | class | rows compared / why |", "|:--|:--|:--|"]
    out += [f"| {r['query']} | {r['class']} | {r.get('why', r['rows'])} |".replace("\n", " ") for r in rows]
    if engine:
        out += ["", "## Through the engine (Spark plans for every apply and rebuild)", "",
                f"{engine['views']} views of `simple` in one home, {len(engine['full_refresh'])} of them by full "
                f"refresh; {len(engine['refused'])} refused at `view add` (Spark SQL cannot run them either). "
                f"Wrong rows: {len(engine['wrong'])}.", "",
                "| epoch | events | mode | ingest + close s | rows compared |", "|--:|--:|:--|--:|--:|"]
        out += [f"| {e['epoch']} | {e['events']} | {e['mode']} | {e['seconds']} | {e['rows_compared']} |"
                for e in engine["epochs"]]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dbtoaster", type=Path, required=True, help="a checkout of dbtoaster/dbtoaster-a5")
    parser.add_argument("--engine", type=Path, help="a new folder: also run the simple queries through the engine")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "peer_queries")
    args = parser.parse_args(argv)
    if not (args.dbtoaster / "test" / "queries").is_dir():
        parser.error(f"{args.dbtoaster} has no test/queries: give a checkout of dbtoaster/dbtoaster-a5")
    rows = sweep(args.dbtoaster)
    engine = engine_run(args.dbtoaster, args.engine) if args.engine else None
    args.out.with_suffix(".json").write_text(json.dumps({"queries": rows, "engine": engine}, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(report(rows, engine))
    wrong = [r for r in rows if r["class"] == "WRONG"] + (engine["wrong"] if engine else [])
    print(f"{len(rows)} queries: {dict(collections.Counter(r['class'] for r in rows))}; wrong: {len(wrong)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
