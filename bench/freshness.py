"""Freshness: seconds from a file landing to its effect being readable on the fresh views,
with the warm engine picking the files up by itself (`--mode warm-engine`: `cumulus
engine serve --cadence C`) or through Airflow's cumulus_microbatch DAG (`--mode airflow`:
`airflow standalone`, the DAG every `--microbatch` seconds, its Spark tasks handing their
steps to a warm engine that does not look at the landing folders itself).

A generated TPC-H stream (scale `--scale`, two sources) makes a home with the demo views;
the engine loads and closes epoch 1. Then the sales source's epoch-2 events (orders and
line items, inserts and deletes) are cut into `--files` pairs of small files, dropped into
the source's landing folder of the open epoch one pair every `--every` seconds (written
under a hidden name, then renamed, as producers do). For each pair the clock runs from
the rename until the pair's files are in the manifest under an ingest batch that a
finished apply took, plus one read of every view after that:

- pyiceberg: through PyIceberg (no JVM: what a Python reader or the CLI does);
- sql: through Spark SQL, `SELECT * FROM views.<name>` (the catalog views a SQL client,
  dbt or the Thrift endpoint reads), in a Spark session this script holds open.

Reported per mode and read: p50, p95 and max over the pairs.

    .venv/bin/python bench/freshness.py --mode warm-engine --files 20 --every 4 --cadence 1
    .venv/bin/python bench/freshness.py --mode airflow --files 10 --every 20 --microbatch 15

write bench/results/freshness.{md,json} (a run replaces its mode's rows, keeps the other's).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from cumulus.store.tables import tables_of

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
VIEWS = sorted((REPO / "demo" / "views").glob("*.sql"))
BIN = Path(sys.executable).parent
QUIET = open(os.devnull, "w")  # noqa: SIM115 - for the whole run


def cut(lines: list[str], parts: int) -> list[list[str]]:
    """`parts` consecutive pieces, none empty (a file with fewer lines is cut in fewer)."""
    size = -(-len(lines) // parts)
    return [lines[i * size:(i + 1) * size] for i in range(parts) if lines[i * size:(i + 1) * size]]


def wait_applied(catalog, settings, paths: list[str], timeout: float) -> bool:
    """True once every path is in an ingest batch that a finished apply took. An apply
    is finished at its commit to maps.entries, so the manifest and the applies are read
    again only after that table or the manifest has a new snapshot: a read of their
    metadata every 0.1 s instead of two scans, which on 2 cores took CPU from the engine
    being measured."""
    from cumulus.engine.apply import apply_records
    from cumulus.store.rows import read_rows

    watched = [t.split(".", 1)[1] for t in (tables_of(settings).maps, tables_of(settings).files)]  # PyIceberg drops the catalog
    seen = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = [catalog.load_table(t).metadata.current_snapshot_id for t in watched]
        if current == seen:
            time.sleep(0.1)
            continue
        seen = current
        rows = [r for r in read_rows(catalog, tables_of(settings).files) if r["path"] in paths]
        batches = {r["batch_id"] for r in rows if r["status"] == "ingested"}  # a duplicate changes nothing
        if len({r["path"] for r in rows if r["status"] in ("ingested", "duplicate")}) == len(paths):
            taken = set()
            for record in apply_records(catalog, settings):
                if record.status == "done":
                    taken.update(record.ingest_batches or [])
            if batches <= taken:
                return True
        time.sleep(0.1)
    return False


def quantiles(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=20, method="inclusive") if len(values) >= 2 else values * 19
    return {"p50_s": round(statistics.median(values), 2), "p95_s": round(q[18], 2), "max_s": round(max(values), 2)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Home:
    """The home, its stream with epoch 2's sales held back, and its warm engine."""

    def __init__(self, work: Path, scale: float, pipeline: dict[str, str]):
        from cumulus.config import load_settings
        from cumulus.ingest.tpch_stream import generate

        self.work = work
        self.stream = generate(scale, 2, 0.01, work / "stream", 7)
        self.sales2 = self.stream.root / "sales" / "epoch-2"
        self.held = work / "held"
        self.held.mkdir(parents=True)
        shutil.move(str(self.sales2), self.held / "sales")
        shutil.move(str(self.stream.root / "catalog" / "epoch-2"), self.held / "catalog")
        self.sales2.mkdir()
        self.home = work / "home"
        cmd = [sys.executable, str(REPO / "scripts" / "demo_home.py"), "--home", str(self.home), "--schema",
               str(REPO / "demo" / "tpch_schema.sql"), "--stream", str(self.stream.root), "--spark-master", "local[2]"]
        cmd += [f"--view={p.stem}={p}" for p in VIEWS]
        cmd += [f"--pipeline={k}={v}" for k, v in pipeline.items()]
        subprocess.run(cmd, check=True, stdout=QUIET, stderr=subprocess.PIPE)
        self.settings = load_settings(self.home)
        self.engine: subprocess.Popen | None = None

    def start_engine(self, cadence: float, env: dict[str, str] | None = None) -> None:
        from cumulus.pipeline.client import engine_state

        log = (self.work / "engine.log").open("w")
        self.engine = subprocess.Popen([str(BIN / "cumulus"), "--home", str(self.home), "engine", "serve",
                                        "--cadence", str(cadence)], stdout=log, stderr=log, env=env,
                                       start_new_session=True)
        while engine_state(self.settings) is None:
            if self.engine.poll() is not None:
                raise SystemExit(f"the engine did not start: {self.work / 'engine.log'}")
            time.sleep(0.5)

    def close_epoch_one(self) -> None:
        from cumulus.pipeline.client import EngineClient, engine_state

        client = EngineClient(engine_state(self.settings)["url"])
        for source in ("sales", "catalog"):
            folder = str(self.stream.root / source / "epoch-1")
            assert client.run("ingest", ["--home", str(self.home), "--source", source, folder], lambda _: None) == 0
            assert client.run("apply", ["--home", str(self.home), "--source", source], lambda _: None) == 0
        assert client.run("close", ["--home", str(self.home), "--epoch", "1"], lambda _: None) == 0

    def stop_engine(self) -> None:
        subprocess.run([str(BIN / "cumulus"), "--home", str(self.home), "engine", "stop"], capture_output=True,
                       timeout=300)
        if self.engine is not None and self.engine.poll() is None:
            self.engine.kill()

    def drop_pairs(self, files: int, every: float, timeout: float, sql: bool) -> dict[str, list[float]]:
        """Drop epoch 2's sales in pairs; each pair's seconds until readable, per read
        (through Spark SQL too if `sql`)."""
        from cumulus.engine.publish import view_names
        from cumulus.read import Reader
        from cumulus.spark.session import spark_session
        from cumulus.store.catalog import pyiceberg_catalog

        catalog, reader = pyiceberg_catalog(self.settings), Reader(self.settings)
        spark = spark_session(self.settings, app_name="freshness-reader") if sql else None
        queries = [f"SELECT * FROM {view_names(self.settings, p.stem)[0]}" for p in VIEWS] if sql else []
        for query in queries:  # the session's first queries, before any clock runs
            spark.sql(query).collect()
        pieces = {rel: cut((self.held / "sales" / f"{rel}.tbl").read_text().splitlines(keepends=True), files)
                  for rel in ("orders", "lineitem")}
        seconds: dict[str, list[float]] = {"pyiceberg": [], **({"sql": []} if sql else {})}
        for k in range(max(len(parts) for parts in pieces.values())):
            paths = []
            t0 = time.monotonic()
            for rel, parts in pieces.items():
                if k < len(parts):
                    final = self.sales2 / f"{rel}.part-{k:04d}.tbl"
                    hidden = final.with_name(f".{final.name}")
                    hidden.write_text("".join(parts[k]))
                    hidden.rename(final)
                    paths.append(str(final.resolve()))
            if not wait_applied(catalog, self.settings, paths, timeout):
                raise SystemExit(f"pair {k} not applied within {timeout:.0f} s; logs in {self.work}")
            applied = time.monotonic() - t0
            t = time.monotonic()
            for view in VIEWS:
                reader.read_view(view.stem)
            seconds["pyiceberg"].append(round(applied + time.monotonic() - t, 2))
            if queries:
                t = time.monotonic()
                for query in queries:
                    spark.sql(query).collect()
                seconds["sql"].append(round(applied + time.monotonic() - t, 2))
            print(f"pair {k}: applied after {applied:.2f} s; readable: "
                  + ", ".join(f"{read} {values[-1]:.2f} s" for read, values in seconds.items()), file=sys.stderr)
            time.sleep(max(0.0, every - (time.monotonic() - t0)))
        return seconds


def airflow_env(work: Path, home: Path, port: int) -> dict[str, str]:
    """`airflow standalone` on loopback with the repository's DAGs, SQLite metadata."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CUMULUS_")) or k == "CUMULUS_JARS_DIR"}
    env.update({
        "AIRFLOW_HOME": str(work / "airflow"), "CUMULUS_HOME": str(home), "PYTHONPATH": str(REPO),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"), "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
    })
    return env


def run_airflow(args) -> tuple[dict[str, list[float]], dict]:
    """Epoch 1 closed by the engine; then `airflow standalone` runs cumulus_microbatch every
    `--microbatch` s while the pairs are dropped. cumulus_epoch's interval (ten years from
    now) never comes due, so no close interferes."""
    start = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    home = Home(args.work, args.scale, {"start": start, "epoch_interval": "3650d", "maintenance_interval": "3650d",
                                        "microbatch_interval": f"{args.microbatch:g}s", "poke_interval": "3s"})
    env = airflow_env(args.work, home.home, free_port())
    subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=env, check=True, stdout=QUIET, stderr=QUIET)
    subprocess.run([str(BIN / "airflow"), "pools", "set", "cumulus_catalog", "1", "Cumulus catalog writers"],
                   env=env, check=True, stdout=QUIET, stderr=QUIET)
    home.start_engine(0, env)  # the tasks hand it their steps; it does not look at the landing itself
    log = (args.work / "standalone.log").open("w")
    airflow = None
    try:
        home.close_epoch_one()
        airflow = subprocess.Popen([str(BIN / "airflow"), "standalone"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        print(f"epoch 1 closed, airflow standalone starting; a pair every {args.every:g} s, "
              f"cumulus_microbatch every {args.microbatch:g} s", file=sys.stderr)
        first = args.work / "airflow" / "logs" / "dag_id=cumulus_microbatch"  # (its first run has started)
        deadline = time.monotonic() + 600
        while not first.is_dir():
            if airflow.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"cumulus_microbatch never ran; log: {args.work / 'standalone.log'}")
            time.sleep(1)
        seconds = home.drop_pairs(args.files, args.every, timeout=600, sql=args.sql)
    finally:
        try:
            if airflow is not None:
                os.killpg(airflow.pid, signal.SIGTERM)
                airflow.wait(timeout=120)
        finally:
            home.stop_engine()
    return seconds, {"every_s": args.every, "microbatch_s": args.microbatch}


def run_warm_engine(args) -> tuple[dict[str, list[float]], dict]:
    home = Home(args.work, args.scale, {})
    home.start_engine(args.cadence)
    try:
        home.close_epoch_one()
        print(f"engine up, epoch 1 closed; dropping a pair of files every {args.every:g} s", file=sys.stderr)
        seconds = home.drop_pairs(args.files, args.every, timeout=300, sql=args.sql)
    finally:
        home.stop_engine()
    return seconds, {"every_s": args.every, "cadence_s": args.cadence}


def report(rows: list[dict], out: Path) -> None:
    """freshness.json (every row) and freshness.md (a table, the targets, the commands)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "freshness.json").write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    lines = ["# Freshness: a landed file to a readable fresh view", "",
             "2 cores, Spark `local[2]`, the demo views, a generated TPC-H stream. Each pair of files (orders and line "
             "items of the sales source, inserts and deletes) is renamed into the open epoch's landing folder; the "
             "clock stops when a read of every view (through PyIceberg, or Spark SQL on the `views.*` catalog views) "
             "returns the state with the pair's events applied. bench/freshness.py says how.", "",
             "| mode | read | pairs | every s | p50 s | p95 s | max s | target p50 / p95 s |",
             "|:--|:--|---:|---:|---:|---:|---:|:--|"]
    targets = {"warm-engine": "5 / 15", "airflow": "30 / -"}
    for r in rows:
        lines.append(f"| {r['mode']} | {r['read']} | {r['pairs']} | {r['every_s']:g} | {r['p50_s']} | {r['p95_s']} | "
                     f"{r['max_s']} | {targets[r['mode']]} |")
    lines.append("")
    for r in rows:
        lines += [f"{r['mode']}, {r['read']}: `{r['command']}`; per pair (s): {', '.join(map(str, r['seconds']))}", ""]
    (out / "freshness.md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("warm-engine", "airflow"), default="warm-engine")
    parser.add_argument("--scale", type=float, default=0.001)
    parser.add_argument("--files", type=int, default=20,
                        help="pieces each of epoch 2's orders and lineitem files is cut in (fewer if it has fewer lines)")
    parser.add_argument("--every", type=float, default=4.0, help="seconds between drops")
    parser.add_argument("--cadence", type=float, default=1.0, help="warm-engine: its look at the landing, seconds")
    parser.add_argument("--microbatch", type=float, default=15.0, help="airflow: the micro-batch DAG's interval, s")
    parser.add_argument("--sql", action=argparse.BooleanOptionalAction, default=True,
                        help="read through Spark SQL too (a Spark session in this process, beside the engine's)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/cumulus-freshness"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    shutil.rmtree(args.work, ignore_errors=True)
    seconds, setting = (run_airflow if args.mode == "airflow" else run_warm_engine)(args)
    command = " ".join(["bench/freshness.py", *(argv if argv is not None else sys.argv[1:])])
    old = args.out / "freshness.json"
    rows = [r for r in (json.loads(old.read_text())["rows"] if old.is_file() else [])
            if r.get("mode") != args.mode and "read" in r]
    for read, values in seconds.items():
        rows.append({"mode": args.mode, "read": read, **quantiles(values), "pairs": len(values), **setting,
                     "scale": args.scale, "command": command, "seconds": values})
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "seconds"}))
    report(sorted(rows, key=lambda r: (r["mode"] != "warm-engine", r["read"])), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
