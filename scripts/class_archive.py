"""Build the driver JVM's class-data archive (CDS, docs/STACK.md "A cold JVM"): run the
pipeline once on a throwaway home (a tiny generated TPC-H stream, three views: init,
sources, views, an epoch of ingest, apply and close, maintenance, a Spark SQL read) in a
JVM that writes every class it loaded to the archive when it exits. Every later driver
JVM maps those classes instead of loading and verifying them from Spark's jars: a cold
start (a CLI command, a spark-submitted step) takes seconds less. scripts/setup.sh runs
this when the archive for the installed pyspark, Java and jars is missing (about 65 s on
2 cores).

    .venv/bin/python scripts/class_archive.py [--out PATH | --where]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


# Two demo views and a two-way join: the classes of grouping, every aggregate, decimals,
# dates and joins, without the demo's five-way join, whose 16 maps doubled the run for
# the same archive (181,178,368 bytes either way; 94 s instead of 119 s on 2 cores).
VIEWS = {
    "order_priority_mix": (REPO / "demo" / "views" / "order_priority_mix.sql").read_text(),
    "pricing_summary": (REPO / "demo" / "views" / "pricing_summary.sql").read_text(),
    "priority_quantity": "SELECT o.o_orderpriority AS priority, SUM(l.l_quantity) AS quantity, COUNT(*) AS lines "
                         "FROM orders o, lineitem l WHERE l.l_orderkey = o.o_orderkey GROUP BY o.o_orderpriority",
}


def workload(home: Path) -> None:
    """The pipeline, in this process (its JVM writes the archive when it exits)."""
    from cumulus.app import Engine
    from cumulus.config import load_settings
    from cumulus.ingest.sources import add_source
    from cumulus.ingest.tpch_stream import generate
    from cumulus.store.home import init_home

    manifest = generate(0.001, 2, 0.01, home.parent / "stream", 7)
    home.mkdir(parents=True)
    (home / "cumulus.toml").write_text('spark_master = "local[2]"\n')
    engine = Engine(load_settings(home), app_name="cumulus-class-archive")
    init_home(engine.home, REPO / "demo" / "tpch_schema.sql")
    for name, priority in sorted(manifest.sources.items(), key=lambda kv: kv[1]):
        add_source(engine.settings, name, priority, manifest.root / name)
    for name, sql in VIEWS.items():
        engine.add_view(name, sql, "sql")
    # One epoch: a second loaded 11 more classes of 15,629 (a LIMIT's, which the read below
    # loads) for 10 s more of setup on 2 cores (63 s instead of 73 s).
    for name in manifest.sources:
        engine.ingest(name, [str(manifest.root / name / "epoch-1")])
        engine.apply(name, 1)
    engine.close(1)
    engine.maintain(retain_last=1)
    engine.spark.sql("SELECT * FROM views.order_priority_mix LIMIT 10").collect()


def default_out() -> Path | None:
    """The archive of the workload's class path (an embedded home: SQLite catalog, local
    master), which every such home's driver JVM then maps."""
    from cumulus.config import Settings
    from cumulus.spark.jars import class_archive
    from cumulus.spark.session import driver_class_path

    return class_archive(driver_class_path(Settings(home=Path(tempfile.gettempdir()) / "cumulus-class-archive")))


def main(argv: list[str] | None = None) -> int:
    from cumulus.spark.session import DUMP_ARCHIVE, JVM_OPTIONS, QUICK_JIT

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where to write it (default: the path --where prints)")
    parser.add_argument("--where", action="store_true", help="print where the archive goes, and stop")
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)  # the workload's run
    args = parser.parse_args(argv)
    if args.home:
        workload(args.home)
        return 0
    args.out = args.out or default_out()
    if args.where:
        print(args.out)
        return 0
    if args.out is None:
        print("class_archive: the Java version is unknown (no `release` file beside `java`); no archive",
              file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_name(args.out.name + ".partial")
    partial.unlink(missing_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cumulus-class-archive-") as tmp:
        # The throwaway home's own settings only: a CUMULUS_* variable of this shell (a
        # deployment's catalog, warehouse or master) must not point the workload at it.
        env = {k: v for k, v in os.environ.items() if not k.startswith("CUMULUS_") or k == "CUMULUS_JARS_DIR"}
        env[DUMP_ARCHIVE] = str(partial)
        # C1 only: the workload is many tiny jobs, where C2's compilations cost more CPU
        # than they save (the classes it loads, all the archive holds, are the same).
        env[JVM_OPTIONS] = QUICK_JIT
        done = subprocess.run([sys.executable, __file__, "--home", str(Path(tmp) / "home")], env=env,
                              capture_output=True, text=True)
    if done.returncode != 0 or not partial.is_file():
        print(f"class_archive: the workload failed ({done.returncode}); no archive:\n{done.stderr[-3000:]}",
              file=sys.stderr)
        partial.unlink(missing_ok=True)
        return 1
    partial.replace(args.out)
    print(f"class_archive: {args.out} ({args.out.stat().st_size // 2**20} MiB) in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
