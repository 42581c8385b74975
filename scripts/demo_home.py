"""Create a Cumulus home for a generated TPC-H stream in one Spark session (the demo and
the Airflow tests use it): cumulus.toml (Spark master, [pipeline] settings), init with a
schema, the stream's sources with their landing folders, the views.

    .venv/bin/python scripts/demo_home.py --home H --schema demo/tpch_schema.sql \\
        --stream STREAM_DIR --view revenue=demo/views/revenue_by_nation_brand.sql ... \\
        [--spark-master 'local[2]'] [--pipeline start=2024-01-01T00:00:00+00:00 ...]

The same as `cumulus init`, `cumulus source add` per source and `cumulus view add` per
view, without a JVM start for each. A home that exists already is refused.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def toml_value(text: str) -> str:
    """A [pipeline] value as TOML: integers and booleans bare, the rest quoted."""
    if text.lower() in ("true", "false") or text.lstrip("-").isdigit():
        return text.lower() if text.lower() in ("true", "false") else text
    return json.dumps(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--stream", required=True, help="a folder written by `cumulus generate tpch`")
    parser.add_argument("--view", action="append", default=[], metavar="NAME=FILE")
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument("--pipeline", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)

    from cumulus.config import load_settings
    from cumulus.engine.views import add_view
    from cumulus.ingest.sources import add_source
    from cumulus.ingest.tpch_stream import Manifest
    from cumulus.spark.session import spark_session
    from cumulus.store.home import init_home, load_home_schema
    from cumulus.store.tables import Home

    home = Path(args.home).resolve()
    if (home / "catalog.db").exists():
        print(f"{home} exists already; remove it first", file=sys.stderr)
        return 2
    home.mkdir(parents=True, exist_ok=True)
    lines = [f"spark_master = {json.dumps(args.spark_master)}", "", "[pipeline]"]
    for item in args.pipeline:
        key, _, value = item.partition("=")
        lines.append(f"{key.strip()} = {toml_value(value.strip())}")
    (home / "cumulus.toml").write_text("\n".join(lines) + "\n")

    t = time.perf_counter()
    settings = load_settings(home)
    spark = spark_session(settings, app_name="cumulus-demo-home")
    init_home(Home(spark, settings), args.schema)
    manifest = Manifest.load(args.stream)
    for name, priority in sorted(manifest.sources.items(), key=lambda kv: kv[1]):
        src = add_source(settings, name, priority, manifest.root / name)
        print(f"source {src.name}: priority {src.priority}, landing {src.landing}")
    schema = load_home_schema(settings)
    for item in args.view:
        name, _, path = item.partition("=")
        add_view(Home(spark, settings), schema, name, Path(path).read_text())
        print(f"view {name}: registered ({path})")
    print(f"home {home} ready in {time.perf_counter() - t:.0f} s")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
