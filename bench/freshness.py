"""Freshness: seconds from a file landing to its effect being readable on the fresh view,
with the warm engine (`cumulus engine serve --cadence C`) picking the files up.

A generated TPC-H stream (scale `--scale`, two sources) makes a home with the demo views;
the engine loads and closes epoch 1. Then the sales source's epoch-2 events (orders and
line items, inserts and deletes) are cut into `--files` pairs of small files, dropped into
the source's landing folder of the open epoch one pair every `--every` seconds (written
under a hidden name, then renamed, as producers do). For each pair the clock runs from
the rename until a read of the view through PyIceberg (no JVM: what a user's reader
does) returns the state with the pair's events applied: the pair's files are in the
manifest under an ingest batch, that batch is in a finished apply, and the view read
after it returns. Reported: p50, p95 and max over the pairs.

    .venv/bin/python bench/freshness.py --scale 0.001 --files 20 --every 4 --cadence 1

writes bench/results/freshness.{md,json}. Not measured here: the same through Airflow's
cumulus_microbatch DAG (its interval is minutes by design), and reads through Spark SQL.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
VIEWS = sorted((REPO / "demo" / "views").glob("*.sql"))
BIN = Path(sys.executable).parent


def cut(lines: list[str], parts: int) -> list[list[str]]:
    """`parts` consecutive pieces, none empty (a file with fewer lines is cut in fewer)."""
    size = -(-len(lines) // parts)
    return [lines[i * size:(i + 1) * size] for i in range(parts) if lines[i * size:(i + 1) * size]]


def wait_applied(catalog, settings, paths: list[str], timeout: float) -> bool:
    """True once every path is in an ingest batch that a finished apply took."""
    from cumulus.engine.apply import apply_records
    from cumulus.store.rows import read_rows
    from cumulus.store.tables import files_table

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = [r for r in read_rows(catalog, files_table(settings)) if r["path"] in paths]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.001)
    parser.add_argument("--files", type=int, default=20,
                        help="pieces each of epoch 2's orders and lineitem files is cut in (fewer if it has fewer lines)")
    parser.add_argument("--every", type=float, default=4.0, help="seconds between drops")
    parser.add_argument("--cadence", type=float, default=1.0, help="the engine's look at the landing folders, seconds")
    parser.add_argument("--work", type=Path, default=Path("/tmp/cumulus-freshness"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    from cumulus.config import load_settings
    from cumulus.ingest.tpch_stream import generate
    from cumulus.pipeline.client import EngineClient, engine_state
    from cumulus.read import Reader
    from cumulus.store.catalog import pyiceberg_catalog

    shutil.rmtree(args.work, ignore_errors=True)
    stream = generate(args.scale, 2, 0.01, args.work / "stream", 7)
    # Epoch 2 is held back: its sales events are dropped in pieces, its catalog folder later.
    sales2 = stream.root / "sales" / "epoch-2"
    held = args.work / "held"
    held.mkdir(parents=True)
    shutil.move(str(sales2), held / "sales")
    shutil.move(str(stream.root / "catalog" / "epoch-2"), held / "catalog")
    sales2.mkdir()
    home = args.work / "home"
    cmd = [sys.executable, str(REPO / "scripts" / "demo_home.py"), "--home", str(home), "--schema",
           str(REPO / "demo" / "tpch_schema.sql"), "--stream", str(stream.root), "--spark-master", "local[2]"]
    cmd += [f"--view={p.stem}={p}" for p in VIEWS]
    subprocess.run(cmd, check=True, capture_output=True)
    settings = load_settings(home)
    log = (args.work / "engine.log").open("w")
    engine = subprocess.Popen([str(BIN / "cumulus"), "--home", str(home), "engine", "serve", "--cadence",
                               str(args.cadence)], stdout=log, stderr=log, start_new_session=True)
    try:
        while engine_state(settings) is None:
            if engine.poll() is not None:
                raise SystemExit(f"the engine did not start: {args.work / 'engine.log'}")
            time.sleep(0.5)
        client = EngineClient(engine_state(settings)["url"])
        for source in ("sales", "catalog"):
            client.run("ingest", ["--home", str(home), "--source", source, str(stream.root / source / "epoch-1")],
                       lambda _line: None)
            client.run("apply", ["--home", str(home), "--source", source], lambda _line: None)
        assert client.run("close", ["--home", str(home), "--epoch", "1"], lambda _line: None) == 0
        print(f"engine up, epoch 1 closed; dropping a pair of files every {args.every:g} s", file=sys.stderr)

        catalog, reader = pyiceberg_catalog(settings), Reader(settings)
        pieces = {rel: cut((held / "sales" / f"{rel}.tbl").read_text().splitlines(keepends=True), args.files)
                  for rel in ("orders", "lineitem")}
        latencies, dropped = [], 0
        for k in range(max(len(parts) for parts in pieces.values())):
            paths = []
            t0 = time.monotonic()
            for rel, parts in pieces.items():
                if k >= len(parts):
                    continue
                final = sales2 / f"{rel}.part-{k:04d}.tbl"
                hidden = sales2 / f".{final.name}"
                hidden.write_text("".join(parts[k]))
                hidden.rename(final)
                paths.append(str(final.resolve()))
            dropped += len(paths)
            if not wait_applied(catalog, settings, paths, timeout=300):
                raise SystemExit(f"pair {k} not applied within 300 s; engine log: {args.work / 'engine.log'}")
            for view in VIEWS:
                reader.read_view(view.stem)
            latency = time.monotonic() - t0
            latencies.append(round(latency, 2))
            print(f"pair {k}: readable after {latency:.2f} s", file=sys.stderr)
            time.sleep(max(0.0, args.every - (time.monotonic() - t0)))
    finally:
        subprocess.run([str(BIN / "cumulus"), "--home", str(home), "engine", "stop"], capture_output=True, timeout=300)
        if engine.poll() is None:
            engine.kill()

    q = statistics.quantiles(latencies, n=20, method="inclusive") if len(latencies) >= 2 else latencies * 19
    row = {"mode": "warm-engine", "p50_s": round(statistics.median(latencies), 2), "p95_s": round(q[18], 2),
           "max_s": max(latencies), "files": dropped, "drops": len(latencies), "every_s": args.every, "cadence_s": args.cadence,
           "scale": args.scale, "latencies_s": latencies}
    args.out.mkdir(parents=True, exist_ok=True)
    command = " ".join(["bench/freshness.py", *(argv if argv is not None else sys.argv[1:])])
    (args.out / "freshness.json").write_text(json.dumps({"command": command, "rows": [row]}, indent=1) + "\n")
    (args.out / "freshness.md").write_text(
        "# Freshness: a landed file to a readable fresh view\n\n"
        f"`{command}`, 2 cores, Spark `local[2]`, the demo views, TPC-H scale {args.scale:g}. Each pair of files "
        "(orders and line items of the sales source, inserts and deletes) is renamed into the open epoch's "
        "landing folder; the clock stops when a PyIceberg read of the views returns the state with the "
        "pair's events applied.\n\n"
        "| mode | pairs | every s | engine cadence s | p50 s | p95 s | max s |\n|:--|---:|---:|---:|---:|---:|---:|\n"
        f"| warm engine | {len(latencies)} | {args.every:g} | {args.cadence:g} | {row['p50_s']} | {row['p95_s']} | "
        f"{row['max_s']} |\n\nPer pair (s): {', '.join(map(str, latencies))}\n\n"
        "Not measured here: through Airflow's cumulus_microbatch DAG, and reads through Spark SQL.\n"
    )
    print(json.dumps({k: v for k, v in row.items() if k != "latencies_s"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
