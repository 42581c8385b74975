"""Where a rebuild from base.* spends its time (the initial load's close, a recompute):
each base relation's deltas evaluated by Spark plans over the whole relation, then the
derived relations' (nested queries), as `recompute.evaluate_from_base` evaluates them,
but each part materialized and timed on its own, with the driver JVM's heap and garbage
collection over it.

It reads a home that a bench left (bench/epoch_vs_recompute.py keeps its homes under
/tmp/cumulus-bench), at a tag of its base tables (`epoch-1`: the initial load), and
writes nothing to it.

    .venv/bin/python bench/epoch_vs_recompute.py --scales 0.1 --epochs 2 --views corpus --memory 10g
    .venv/bin/python bench/rebuild_profile.py --home /tmp/cumulus-bench/home-sf0.1

writes bench/results/rebuild_profile.{md,json} (`--name` for another stem).
`--adaptive false` runs it with Spark's adaptive query execution off.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


class Heap:
    """The driver JVM's heap in use and its collectors' counts and times (Py4J, no job)."""

    def __init__(self, spark) -> None:
        self.jvm = spark._jvm.java.lang.management.ManagementFactory

    def sample(self) -> dict:
        beans = list(self.jvm.getGarbageCollectorMXBeans())
        used = self.jvm.getMemoryMXBean().getHeapMemoryUsage().getUsed()
        old = [b for b in beans if "old" in b.getName().lower() or "marksweep" in b.getName().lower()]
        return {"heap_gb": used / 2**30, "gc_s": sum(b.getCollectionTime() for b in beans) / 1000,
                "full_gcs": sum(b.getCollectionCount() for b in old)}


def profile(home_path: Path, tag: str, adaptive: str | None) -> tuple[list[dict], dict]:
    from pyspark.sql import functions as F

    from cumulus.app import Engine
    from cumulus.engine.derived import derived_deltas
    from cumulus.engine.evaluate import counted, relation_deltas, union_all, without_statistics
    from cumulus.engine.recompute import base_events

    engine = Engine.open(home_path, app_name="rebuild-profile")
    home, plan, spark = engine.home, engine.plan(), engine.spark
    if adaptive is not None:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    heap = Heap(spark)
    nothing = spark.table(home.tables.maps).where(F.lit(False))
    events, sizes = base_events(home, plan, tag)
    rows, parts, state = [], [], nothing
    for rel in plan.order:
        before, started = heap.sample(), time.perf_counter()
        if parts:  # the maps this relation reads, from the relations before it (as evaluate_batch does)
            state = without_statistics(union_all(parts).where(F.col("map").isin(sorted(plan.reads[rel]))))
        deltas, count = counted(relation_deltas(plan, rel, events[rel], state, sizes[rel], per_chain=True))
        parts.append(deltas)
        rows.append(_row(rel, len(plan.statements[rel]), sizes[rel], count, time.perf_counter() - started, before, heap))
        print(_line(rows[-1]), flush=True)
    if plan.derived:
        before, started = heap.sample(), time.perf_counter()
        values = without_statistics(union_all(parts))
        nested = derived_deltas(plan, nothing, nothing.unionByName(values, allowMissingColumns=True),
                                workers=home.settings.table_workers)
        count = counted(nested)[1] if nested is not None else 0
        rows.append(_row(f"derived ({len(plan.derived)})", sum(len(plan.statements[d]) for d in plan.derived),
                         None, count, time.perf_counter() - started, before, heap))
        print(_line(rows[-1]), flush=True)
    conf = {"maps": len(plan.maps), "adaptive": spark.conf.get("spark.sql.adaptive.enabled"),
            "driver_memory": spark.conf.get("spark.driver.memory", "?"), "home": str(home_path), "tag": tag}
    engine.spark.stop()
    return rows, conf


def _row(part: str, statements: int, size: int | None, deltas: int, seconds: float, before: dict, heap: Heap) -> dict:
    after = heap.sample()
    return {"part": part, "statements": statements, "rows": size, "delta_rows": deltas, "s": round(seconds, 1),
            "heap_gb_after": round(after["heap_gb"], 1), "gc_s": round(after["gc_s"] - before["gc_s"], 1),
            "full_gcs": after["full_gcs"] - before["full_gcs"]}


def _line(r: dict) -> str:
    return (f"{r['part']}: {r['statements']} statements over {r['rows'] if r['rows'] is not None else '-'} rows -> "
            f"{r['delta_rows']} delta rows in {r['s']} s (GC {r['gc_s']} s, {r['full_gcs']} full; heap {r['heap_gb_after']} GB)")


def _count(n: int | None) -> str:
    return "" if n is None else f"{n:,}"


def report(rows: list[dict], conf: dict, name: str) -> None:
    total = sum(r["s"] for r in rows)
    lines = [
        "# Where a rebuild from base.* spends its time",
        "",
        f"`bench/rebuild_profile.py` on `{conf['home']}` at `{conf['tag']}`: {conf['maps']} maps; Spark's adaptive "
        f"execution {conf['adaptive']}; driver memory {conf['driver_memory']}. Each part materialized and timed alone "
        "(a rebuild evaluates the last relation and the derived relations lazily, in its commit).",
        "",
        "| part | statements | rows | delta rows | s | share | GC s | full GCs | heap after, GB |",
        "|:--|--:|--:|--:|--:|--:|--:|--:|--:|",
        *(f"| {r['part']} | {r['statements']} | {_count(r['rows'])} | {r['delta_rows']:,} | "
          f"{r['s']} | {r['s'] / total:.0%} | {r['gc_s']} | {r['full_gcs']} | {r['heap_gb_after']} |" for r in rows),
        f"| all | | | | {total:.1f} | | {sum(r['gc_s'] for r in rows):.1f} | {sum(r['full_gcs'] for r in rows)} | |",
        "",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.md").write_text("\n".join(lines))
    (RESULTS / f"{name}.json").write_text(json.dumps({"conf": conf, "parts": rows}, indent=2) + "\n")
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=Path("/tmp/cumulus-bench/home-sf0.1"))
    parser.add_argument("--tag", default="epoch-1", help="the base tables' tag to rebuild from")
    parser.add_argument("--adaptive", choices=("true", "false"), default=None,
                        help="spark.sql.adaptive.enabled for the run (default: the home's)")
    parser.add_argument("--name", default="rebuild_profile", help="report file stem")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    rows, conf = profile(args.home, args.tag, args.adaptive)
    report(rows, conf, args.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
