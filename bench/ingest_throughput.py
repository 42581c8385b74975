"""Ingest throughput on TPC-H data from `tpchgen-cli`: rows per second from landing files
to committed events.* rows (parse, validate, version, quarantine check, Iceberg commits,
manifest), per landing format.

    .venv/bin/python bench/ingest_throughput.py [--scale 0.1] [--parts 4]
        [--formats tbl,csv,parquet] [--master local[2]] [--out bench/results/ingest.md]

`jsonl` is converted from the Parquet files. Each format gets a fresh home (init is not timed) and one source; the data is all eight
TPC-H tables, each split into --parts files so the parse tasks run in parallel. A small
warm-up batch runs first in its own home, so the figures are for a warm JVM, as in a
long-running job server; the first batch of a cold `cumulus ingest` process pays about
20 s more. The report is written as a markdown table and printed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cumulus.store.tables import Home

REPO = Path(__file__).resolve().parents[1]
TPCH_SCHEMA = REPO / "tests" / "fixtures" / "schemas" / "tpch.sql"
TPCHGEN = Path(sys.executable).parent / "tpchgen-cli"
GENERATE = {"tbl": ["tbl"], "csv": ["csv"], "parquet": ["parquet"]}
FORMAT = {"tbl": "dbtoaster", "csv": "csv", "parquet": "parquet", "jsonl": "jsonl"}


def generate(kind: str, scale: float, parts: int, out: Path) -> Path:
    target = out / kind
    if kind == "jsonl" and not target.exists():  # flat JSON Lines from the Parquet files
        import json

        import pyarrow.parquet as pq

        for path in sorted(generate("parquet", scale, parts, out).rglob("*.parquet")):
            dest = target / path.parent.name / path.with_suffix(".jsonl").name
            dest.parent.mkdir(parents=True, exist_ok=True)
            with dest.open("w") as fh:
                for batch in pq.ParquetFile(path).iter_batches():
                    for row in batch.to_pylist():
                        fh.write(json.dumps(row, default=str) + "\n")
        return target
    if not target.exists():
        subprocess.run(
            [str(TPCHGEN), *GENERATE[kind], "-s", str(scale), "--parts", str(parts), "-o", str(target)],
            check=True,
            capture_output=True,
        )
    return target


def count_rows(kind: str, folder: Path) -> int:
    if kind == "parquet":
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(p).metadata.num_rows for p in folder.rglob("*.parquet"))
    header = 1 if kind == "csv" else 0
    total = 0
    for path in folder.rglob(f"*.{kind}"):
        with path.open("rb") as fh:
            total += sum(1 for _ in fh) - header
    return total


def make_home(spark, root: Path, name: str, landing: Path):
    from cumulus.config import load_settings
    from cumulus.ingest.sources import add_source
    from cumulus.store.home import init_home

    home = root / name
    home.mkdir(parents=True)
    (home / "cumulus.toml").write_text(f'catalog = "{name}"\n')
    settings = load_settings(home)
    init_home(Home(spark, settings), TPCH_SCHEMA)
    add_source(settings, "tpch", 1, landing=landing)
    return settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.1, help="TPC-H scale factor (default 0.1)")
    parser.add_argument("--parts", type=int, default=4, help="files per table (default 4)")
    parser.add_argument(
        "--formats", default="tbl,csv,parquet,jsonl", help="comma-separated: tbl, csv, parquet, jsonl"
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "ingest.md"))
    parser.add_argument("--keep", help="keep the generated data and homes in this folder")
    args = parser.parse_args(argv)
    args.load = os.getloadavg()[0]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    from cumulus.config import Settings
    from cumulus.ingest.job import ingest_files
    from cumulus.spark.session import spark_session

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="cumulus-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    kinds = [k.strip() for k in args.formats.split(",") if k.strip()]
    results = []
    try:
        started = time.perf_counter()
        data = {k: generate(k, args.scale, args.parts, root / "data") for k in kinds}
        print(f"generated {', '.join(kinds)} at scale {args.scale} in {time.perf_counter() - started:.1f} s")
        session_home = Settings(home=root / "session", spark_master=args.master)
        spark = spark_session(session_home, app_name="cumulus-bench-ingest")

        warm_land = root / "warmup-landing"
        warm_land.mkdir()
        for table in ("nation", "region"):
            shutil.copy(next((data[kinds[0]] / table).iterdir()), warm_land)
        ingest_files(Home(spark, make_home(spark, root, "warmup", warm_land)), "tpch", fmt=FORMAT[kinds[0]])

        for kind in kinds:
            rows = count_rows(kind, data[kind])
            size = sum(p.stat().st_size for p in data[kind].rglob("*") if p.is_file())
            settings = make_home(spark, root, f"bench_{kind}", data[kind])
            t0 = time.perf_counter()
            report = ingest_files(Home(spark, settings), "tpch", fmt=FORMAT[kind])
            seconds = time.perf_counter() - t0
            assert report.accepted == rows and report.rejected == 0, (report.accepted, rows)
            files = sum(1 for f in report.files if f.status == "ingested")
            results.append((kind, files, rows, size / 1e6, seconds, rows / seconds))
            print(f"{kind}: {rows} rows in {seconds:.1f} s = {rows / seconds:,.0f} rows/s")
        spark.stop()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    table = render(args, results)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table)
    print(table)
    return 0


def render(args, results) -> str:
    lines = [
        "# Ingest throughput",
        "",
        f"`bench/ingest_throughput.py --scale {args.scale} --parts {args.parts} --master {args.master}`, "
        f"{dt.date.today().isoformat()}, {platform.machine()} with {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; load average {args.load:.1f} when it started "
        "(other jobs share the machine when it is above 0).",
        "",
        "TPC-H data from `tpchgen-cli` (all eight tables), one batch per format into a fresh "
        "home: parse + validate + version + Iceberg appends (one per table) + manifest, "
        "on a warm Spark session. `tbl` is read as DBToaster static rows. tbl, csv and parquet "
        "files of valid inserts take the vectorized Arrow path; `jsonl` (flat, converted from "
        "the Parquet files) is always validated row by row, as every file with deletes or "
        "errors is.",
        "",
        "| format | files | rows | MB | seconds | rows/s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind, files, rows, mb, seconds, rate in results:
        lines.append(f"| {kind} | {files} | {rows:,} | {mb:.1f} | {seconds:.1f} | {rate:,.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
