"""An incremental epoch against recomputing the same views from scratch, side by side in
one run, at several TPC-H scale factors.

For each scale factor: `tpchgen-cli` makes the tables and cumulus.ingest.tpch_stream
turns them into a stream (epoch 1 the initial load, later epochs a fixed fraction of
lineitem changed, half inserts and half deletes, from two sources); a fresh home
registers the views and closes epoch 1 (the load, reported but not compared). Then for
each later epoch:

- epoch: `apply` of both sources + `epoch close` (what Cumulus does per epoch), wall
  time, and the bytes its Spark stages read (events, map slices, the map files MERGE
  rewrites) and wrote, from the ledger's metrics;
- compaction: the close appends each epoch's net changes to base.* as a layer and
  rewrites a table compact only once its layers exceed `base_compaction_ratio` (0.1) of
  its rows, about every ratio / fraction = 100 epochs here; the bench compacts every base
  table after each epoch, timed apart, so that the recomputation below reads plain
  tables (one row per tuple, as a system without Cumulus would store them) and the
  report can show the compaction's cost and its share per epoch;
- recompute: every view's SQL run by Spark SQL over base.* (each tuple repeated by its
  multiplicity; the main branch, equal to the new tag's multiset), collected, wall time
  and bytes read;
- duckdb: the same views run by DuckDB over the same base rows held in memory (Arrow
  read from the epoch's tag with PyIceberg before the clock starts, only the columns
  the views name: DuckDB's best case; each tuple repeated by its multiplicity inside
  the timed query);
- the answers are compared (they must be equal: a wrong fast answer is no answer);
- per epoch: the Iceberg commits it made (snapshots added to every table of the home),
  the Spark jobs it ran, and the machine's 1-minute load average at its end.

`--views corpus` runs the whole TPC-H view corpus (tests/fixtures/views/tpch) and the
TPC-H queries as the benchmark writes them (tests/fixtures/views/tpch_queries) instead of
the three bench views.

Ingest is timed apart: both approaches need the events landed.

    .venv/bin/python bench/epoch_vs_recompute.py --scales 0.1 1 --epochs 2 --fraction 0.001

writes bench/results/epoch_vs_recompute.{md,json,png}.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cumulus.progress import command_progress
from cumulus.store.tables import Home

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "demo" / "tpch_schema.sql"
VIEWS = {  # name -> SQL: one scan view per big table and a join view
    "pricing_summary": (REPO / "demo" / "views" / "pricing_summary.sql").read_text(),
    "order_priority_mix": (REPO / "demo" / "views" / "order_priority_mix.sql").read_text(),
    "revenue_by_priority": """
        SELECT o.o_orderpriority AS priority, SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue,
               COUNT(*) AS line_count
        FROM lineitem l, orders o WHERE l.l_orderkey = o.o_orderkey
        GROUP BY o.o_orderpriority""",
}
RESULTS = REPO / "bench" / "results"
CORPUS = [REPO / "tests" / "fixtures" / "views" / kind for kind in ("tpch", "tpch_queries")]
COMPACTION_RATIO = 0.1  # cumulus.config.Settings.base_compaction_ratio, the default the bench runs with
log = logging.getLogger("bench")


@dataclass
class Row:
    scale: float
    epoch: int
    events: int
    lineitem_rows: int
    ingest_s: float
    epoch_s: float
    recompute_s: float
    epoch_bytes_read: int
    recompute_bytes_read: int
    epoch_bytes_written: int
    map_rows: int
    equal: bool
    metrics: dict = field(default_factory=dict)  # the epoch's ledger metrics (cumulus epoch show)
    compact_s: float = 0.0  # compacting every base table after the epoch (O(table), amortized)
    compact_bytes_read: int = 0
    duckdb_s: float = 0.0  # DuckDB over the base rows in memory (Arrow), the same views
    commits: int = 0  # Iceberg snapshots the epoch (apply + close) added, every table of the home
    spark_jobs: int = 0  # Spark jobs the epoch ran
    views: int = 0
    maps: int = 0
    load_avg: float = 0.0  # 1-minute load average at the end of the epoch
    publish_s: float = 0.0  # publishing the epoch once it passed: ledger row, results.<view>, stable branches
    results_touched: int = 0  # results tables the publish updated by the groups the epoch touched
    results_whole: int = 0  # ... and rewrote whole (views without groups, LIMIT, subqueries, or a large share touched)
    results_whole_s: float = 0.0  # every results table rewritten whole again, apart: the other way, measured
    # where the publish's results time went (cumulus.results' log): finding the touched keys,
    # reading their rows and the MERGEs, the tables the publish rewrote whole
    results_keys_s: float = 0.0
    results_merge_s: float = 0.0
    results_whole_part_s: float = 0.0  # of the whole rewrites, those by Spark
    results_driver_s: float = 0.0  # of the whole rewrites, those from the driver (PyIceberg)
    results_collect_s: float = 0.0  # ... and those computed by Spark, written from the driver (summed per table)
    results_s: float = 0.0  # the publish's results tables, all of it (the rest: ledger row, stable branches)
    results_unchanged: int = 0  # of results_touched, the tables none of whose rows changed: tagged as they were

    @property
    def map_bytes_read(self) -> int:
        """Map slices and events the applies read, plus what the map compactions read."""
        return sum(int(self.metrics.get(k, 0)) for k in ("applies_bytes_read", "repair_bytes_read", "compact_maps_bytes_read"))

    @property
    def read_per_written(self) -> float:
        """Bytes the epoch read per byte it wrote (its delta rows: the entries it touched)."""
        return self.epoch_bytes_read / self.epoch_bytes_written if self.epoch_bytes_written else float("inf")

    @property
    def ratio(self) -> float:
        return self.recompute_s / self.epoch_s if self.epoch_s else float("inf")


def bench_views(which: str, only: list[str] | None = None) -> dict[str, str]:
    views = VIEWS if which == "bench" else {p.stem: p.read_text() for folder in CORPUS for p in sorted(folder.glob("*.sql"))}
    if only:
        unknown = sorted(set(only) - set(views))
        if unknown:
            raise SystemExit(f"--only: no such view(s) {', '.join(unknown)} in --views {which}")
        views = {name: views[name] for name in only}
    return views


def commit_count(spark, tables: list[str]) -> int:
    """Snapshots of the tables (their metadata, no Spark job; nothing expires during the bench)."""
    from cumulus.store.commit import table_metadata

    return sum(len(table_metadata(spark, t).get("snapshots", [])) for t in tables)


def jobs_started(spark) -> int:
    """Spark jobs submitted so far in this session (the scheduler's next job id)."""
    next_id = spark.sparkContext._jsc.sc().dagScheduler().nextJobId()  # an AtomicInteger, py4j may unbox it
    return int(next_id if isinstance(next_id, int) else next_id.get())


def duckdb_recompute(reader, schema, views: dict[str, str], epoch: int) -> tuple[dict[str, int], float]:
    """The views run by DuckDB over base.* at the tag, loaded into DuckDB's memory first
    (untimed; streamed from PyIceberg as Arrow record batches: SF 10's lineitem read whole
    into Arrow ran the machine out of memory); returns the row count of each view and the
    seconds DuckDB took. Only the columns the views name are held, as a columnar engine
    reads them."""
    import duckdb
    import sqlglot
    from sqlglot import exp

    named = {c.name.lower() for sql in views.values() for c in sqlglot.parse_one(sql, read="spark").find_all(exp.Column)}
    con = duckdb.connect()
    used = {}
    for rel in schema.relations:
        used[rel.name] = [c for c in rel.column_names if c in named] or list(rel.column_names[:1])
        table = reader.catalog.load_table(f"base.{rel.name}")
        batches = table.scan(
            selected_fields=(*used[rel.name], "mult"), snapshot_id=table.snapshot_by_name(f"epoch-{epoch}").snapshot_id
        ).to_arrow_batch_reader()
        con.register("incoming", batches)
        con.execute(f"CREATE TABLE {rel.name}_stored AS SELECT * FROM incoming")
        con.unregister("incoming")
    # The views are Spark SQL (the default sql_dialect): DuckDB runs them transpiled.
    in_duckdb = {name: sqlglot.transpile(sql, read="spark", write="duckdb")[0] for name, sql in views.items()}
    t = time.perf_counter()
    for rel in schema.relations:
        cols = ", ".join(used[rel.name])
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {rel.name} AS SELECT {cols} FROM "
            f"(SELECT {cols}, CAST(SUM(mult) AS BIGINT) AS m FROM {rel.name}_stored GROUP BY ALL HAVING SUM(mult) > 0), range(m)"
        )
    counts = {name: len(con.execute(sql).fetchall()) for name, sql in in_duckdb.items()}
    seconds = time.perf_counter() - t
    con.close()
    return counts, seconds


def run_scale(
    scale: float, epochs: int, fraction: float, work: Path, master: str, seed: int, memory: str,
    views: dict[str, str], on_epoch=None,
) -> tuple[list[Row], dict]:
    from cumulus.config import load_settings
    from cumulus.engine.apply import apply_source
    from cumulus.engine.close import close_epoch
    from cumulus.engine.metrics import StageMeter
    from cumulus.engine.registry import batch_plan
    from cumulus.engine.results import results_updates
    from cumulus.engine.views import add_view
    from cumulus.ingest.job import ingest_files
    from cumulus.ingest.sources import add_source
    from cumulus.ingest.tpch_stream import generate
    from cumulus.quality.oracle import compare_view, recompute, register_expanded_base
    from cumulus.read import Reader
    from cumulus.schema import load_schema
    from cumulus.spark.session import spark_session
    from cumulus.store.fold import compact_base
    from cumulus.store.home import init_home
    from cumulus.store.ledger import ledger_row
    from cumulus.store.lock import catalog_lock
    from cumulus.store.maintenance import existing_tables

    t = time.perf_counter()
    manifest = generate(scale, 1 + epochs, fraction, work / f"stream-sf{scale}", seed)
    log.info("SF %s: stream generated in %.0f s", scale, time.perf_counter() - t)
    home = work / f"home-sf{scale}"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    (home / "cumulus.toml").write_text(
        f'catalog = "bench"\nspark_master = "{master}"\nbase_compaction_ratio = {COMPACTION_RATIO}\n\n'
        f'[spark]\n"driver.memory" = "{memory}"\n'
    )
    settings = load_settings(home)
    spark = spark_session(settings, app_name=f"bench sf{scale}")
    schema = load_schema(SCHEMA)
    init_home(Home(spark, settings), SCHEMA)
    for name, priority in manifest.sources.items():
        add_source(settings, name, priority)
    for name, sql in views.items():
        compiled = add_view(Home(spark, settings), schema, name, sql)
    plan = batch_plan(compiled)
    reader = Reader(settings)

    class ResultsSeconds(logging.Handler):
        """Keeps the last publish's breakdown of its results time (write_results' log)."""
        last: dict = {}

        def emit(self, record: logging.LogRecord) -> None:
            if hasattr(record, "results_seconds"):
                ResultsSeconds.last = record.results_seconds

    logging.getLogger("cumulus.results").addHandler(ResultsSeconds())

    def publish(epoch: int) -> float:
        """Publish the closed epoch as a passing validation does (write-audit-publish:
        cumulus/engine/publish.py): its ledger row, results.<view> of every view, the
        stable branches; the seconds it took. The validation's own checks are not in it."""
        from cumulus.engine.publish import publish_ready
        from cumulus.store.ledger import CLOSED, transition

        t0 = time.perf_counter()
        transition(Home(spark, settings), epoch, CLOSED, validation="passed")
        assert publish_ready(Home(spark, settings)).epoch == epoch
        return time.perf_counter() - t0

    def rewrite_results(epoch: int) -> float:
        """Every results table rewritten whole at the epoch (what the publish would cost
        without touched-group updates); it leaves the same rows."""
        from cumulus.engine.results import write_results

        t0 = time.perf_counter()
        write_results(Home(spark, settings), epoch, mode="whole")
        return time.perf_counter() - t0

    def ingest(epoch: int) -> tuple[int, float]:
        t0, events = time.perf_counter(), 0
        for source in manifest.sources:  # priority order: sales (1) before catalog (2)
            batch = manifest.batch(source, epoch)
            events += batch.rows
            ingest_files(Home(spark, settings), source, [manifest.folder(source, epoch)], fmt="dbtoaster")
        return events, time.perf_counter() - t0

    events, ingest_s = ingest(1)
    t = time.perf_counter()
    load_metrics = close_epoch(Home(spark, settings), plan, 1)
    publish(1)  # (the load's publication is not timed)
    load = {"scale": scale, "events": events, "ingest_s": round(ingest_s, 1), "close_s": round(time.perf_counter() - t, 1),
            "mode": load_metrics["mode"], "recompute_s": load_metrics.get("recompute_s")}
    log.info("SF %s: initial load of %d rows: ingest %.0f s, close %.0f s (%s)", scale, events, ingest_s,
             load["close_s"], load["mode"])

    rows: list[Row] = []
    for epoch in range(2, epochs + 2):
        events, ingest_s = ingest(epoch)
        tables = existing_tables(Home(spark, settings))
        commits, jobs = commit_count(spark, tables), jobs_started(spark)
        t = time.perf_counter()
        for priority in sorted(manifest.sources.values()):  # source id = priority
            apply_source(Home(spark, settings), plan, epoch, priority)
        close_epoch(Home(spark, settings), plan, epoch)
        epoch_s = time.perf_counter() - t
        commits, jobs = commit_count(spark, tables) - commits, jobs_started(spark) - jobs
        publish_s = publish(epoch)
        parts = dict(ResultsSeconds.last)
        updates = list(results_updates(Home(spark, settings), epoch).values())
        whole_s = rewrite_results(epoch)
        load_avg = os.getloadavg()[0]
        m = ledger_row(spark, settings, epoch).metrics
        # Every apply of the epoch (applies_*), then the close's own steps after its apply.
        steps = ("repair", "derived", "refresh", "fold", "compact_maps", "tag")
        epoch_read = m["applies_bytes_read"] + sum(m.get(f"{s}_bytes_read", 0) for s in steps)
        epoch_written = m["applies_bytes_written"] + sum(m.get(f"{s}_bytes_written", 0) for s in steps)

        t, meter = time.perf_counter(), StageMeter(spark)
        with catalog_lock(settings, "bench compaction"):
            for rel in schema.relations:
                compact_base(Home(spark, settings), rel)
        compact_s, compact_read = time.perf_counter() - t, meter.read().bytes_read

        t, meter = time.perf_counter(), StageMeter(spark)
        names = register_expanded_base(Home(spark, settings), schema, epoch, at_tag=False)
        recomputed = {v: recompute(spark, compiled.views[v], schema, epoch) for v in views}
        recompute_s = time.perf_counter() - t
        recompute_read = meter.read().bytes_read
        for name in names:
            spark.catalog.dropTempView(name)

        at = reader.stable(epoch)
        engine = {v: reader.read_view(v, at) for v in views}
        equal = all(compare_view(compiled.views[v], engine[v], recomputed[v]).equal for v in views)
        duck_counts, duckdb_s = duckdb_recompute(reader, schema, views, epoch)
        equal = equal and duck_counts == {v: len(engine[v]) for v in views}
        lineitem = spark.sql(f"SELECT SUM(mult) FROM {settings.catalog}.base.lineitem VERSION AS OF 'epoch-{epoch}'").first()[0]
        rows.append(Row(scale, epoch, events, int(lineitem), round(ingest_s, 2), round(epoch_s, 2), round(recompute_s, 2),
                        int(epoch_read), int(recompute_read), int(epoch_written), int(m["deltas"]), equal, dict(m),
                        round(compact_s, 2), int(compact_read), round(duckdb_s, 3), commits, jobs,
                        len(views), len(compiled.checked.maps), round(load_avg, 2), round(publish_s, 2),
                        updates.count("touched") + updates.count("unchanged"), updates.count("whole"),
                        round(whole_s, 2), round(parts.get("keys", 0), 2), round(parts.get("merge", 0), 2),
                        round(parts.get("whole", 0), 2), round(parts.get("driver", 0), 2),
                        round(parts.get("collect", 0), 2), round(parts.get("total", 0), 2),
                        results_unchanged=updates.count("unchanged")))
        log.info("SF %s epoch %d: %d events; epoch %.1f s (%s read, %d commits, %d Spark jobs) vs recompute "
                 "%.1f s (%s read) vs DuckDB %.2f s; equal: %s", scale, epoch, events, epoch_s, _mib(epoch_read),
                 commits, jobs, recompute_s, _mib(recompute_read), duckdb_s, equal)
        if on_epoch is not None:  # saved after every epoch: a run that dies later keeps them
            on_epoch(rows, load)
    spark.stop()
    return rows, load


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def render(rows: list[Row], loads: list[dict], args, command: str) -> str:
    which = (f"views: {', '.join(VIEWS)} (demo/views and a lineitem-orders join)" if args.views == "bench"
             else f"views: the whole TPC-H view corpus ({rows[0].views if rows else '?'} views, "
             f"{rows[0].maps if rows else '?'} maps)")
    if getattr(args, "only", None):
        which = f"views: {', '.join(args.only)} of the {args.views} set ({rows[0].maps if rows else '?'} maps)"
    lines = [
        "# Incremental epoch vs. recomputation",
        "",
        f"`{command}`, Spark `{args.master}`, {which}. Each later epoch changes "
        f"{args.fraction:.2%} of lineitem (half inserts, half deletes, with their orders) from two sources.",
        "",
        "Medians per scale factor (spread: min-max over the epochs):",
        "",
        "| SF | epochs | views | maps | epoch s | Spark SQL recompute s | DuckDB s | epoch / Spark | epoch / DuckDB "
        "| commits | Spark jobs | bytes read / written | load avg |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for scale in sorted({r.scale for r in rows}):
        rs = [r for r in rows if r.scale == scale]

        def cell(f, fmt="{:.2f}", rs=rs) -> str:
            xs = [f(r) for r in rs]
            return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"

        lines.append(
            f"| {scale} | {len(rs)} | {rs[0].views} | {rs[0].maps} | {cell(lambda r: r.epoch_s)} | "
            f"{cell(lambda r: r.recompute_s)} | {cell(lambda r: r.duckdb_s)} | "
            f"{cell(lambda r: r.epoch_s / r.recompute_s)} | {cell(lambda r: r.epoch_s / max(r.duckdb_s, 1e-9))} | "
            f"{cell(lambda r: r.commits, '{:.0f}')} | {cell(lambda r: r.spark_jobs, '{:.0f}')} | "
            f"{cell(lambda r: r.read_per_written, '{:.1f}')} | {cell(lambda r: r.load_avg)} |"
        )
    lines += [
        "",
        "Every epoch:",
        "",
        "| SF | epoch | events | lineitem rows | epoch (apply+close) s | recompute s | DuckDB s | recompute / epoch "
        "| commits | Spark jobs | epoch bytes read | recompute bytes read | epoch bytes written | delta rows | equal "
        "| base compaction s (apart) | its share per epoch s | publish s (apart) | publish / epoch "
        "| results s | results by touched groups (none changed) / whole | of which keys / rows+MERGE / whole by Spark / "
        "Spark's rows from the driver / the driver's own rows (whole, and touched groups') s "
        "| results all whole s (apart) | all whole / epoch |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:--:|---:|---:|---:|---:|---:|:--:|:--:|---:|---:|",
    ]
    every = COMPACTION_RATIO / args.fraction
    for r in rows:
        lines.append(
            f"| {r.scale} | {r.epoch} | {r.events:,} | {r.lineitem_rows:,} | {r.epoch_s:.1f} | {r.recompute_s:.1f} | "
            f"{r.duckdb_s:.2f} | {r.ratio:.2f} | {r.commits} | {r.spark_jobs} | {_mib(r.epoch_bytes_read)} | {_mib(r.recompute_bytes_read)} | "
            f"{_mib(r.epoch_bytes_written)} | {r.map_rows:,} | {'yes' if r.equal else 'NO'} | "
            f"{r.compact_s:.1f} | {r.compact_s / every:.2f} | {r.publish_s:.2f} | {r.publish_s / r.epoch_s:.2f} | "
            f"{r.results_s:.2f} | {r.results_touched} ({r.results_unchanged}) / {r.results_whole} | "
            f"{r.results_keys_s:.1f} / {r.results_merge_s:.1f} / {r.results_whole_part_s:.1f} / "
            f"{r.results_collect_s:.1f} / {r.results_driver_s:.1f} | "
            f"{r.results_whole_s:.2f} | {r.results_whole_s / r.epoch_s:.2f} |"
        )
    lines += ["", f"Base compaction: the close appends each epoch's net changes to base.* and compacts a "
              f"table once its layers exceed {COMPACTION_RATIO:g} of its rows, about every "
              f"{COMPACTION_RATIO:g} / {args.fraction:g} = {every:.0f} epochs at this rate of change; the bench "
              "compacts after every epoch (apart from both timings) so that the recomputation reads plain "
              "tables, and its share column is that cost spread over the epochs between compactions. "
              "Publish (apart): what a passing validation then does to publish the epoch (write-audit-publish): "
              "its ledger row, every view's rows into results.<view> with the tag epoch-N (each table "
              "updated by the groups the epoch touched where it can be, else rewritten whole: "
              "cumulus/engine/results.py), the stable branches; the validation's checks are not in it. "
              "Results all whole (apart): the same tables rewritten whole at the same epoch, the other way "
              "measured."]
    steps = ("applies", "derived", "refresh", "compact_maps", "fold")
    lines += ["", "Where an epoch's time and bytes go (ledger metrics; applies = every apply of the epoch, "
              "derived = the nested queries' derived relations (cumulus/engine/derived.py), refresh = the views "
              "kept by full refresh, "
              "compact_maps = the maps' compactions past the ratio, fold = the base.* layer appends; other = the "
              "epoch's seconds outside the timed steps: ledger rows, the close's own lookups, stable branches):", "",
              "| SF | epoch | " + " | ".join(f"{x} s | {x} read | {x} written" for x in steps)
              + " | repair s | tag s | other s | map bytes read |",
              "|---:|---:|" + "---:|" * (3 * len(steps) + 4)]
    for r in rows:
        m = r.metrics
        cells = [f"{m.get(f'{x}_s', 0):.1f} | {_mib(m.get(f'{x}_bytes_read', 0))} | {_mib(m.get(f'{x}_bytes_written', 0))}"
                 for x in steps]
        timed = sum(m.get(f"{x}_s", 0) for x in (*steps, "repair", "tag"))
        lines.append(f"| {r.scale} | {r.epoch} | " + " | ".join(cells) + f" | {m.get('repair_s', 0):.1f} | "
                     f"{m.get('tag_s', 0):.1f} | {r.epoch_s - timed:.1f} | {_mib(r.map_bytes_read)} |")
    lines += ["", "Initial load (epoch 1, not compared; mode: how the close brought the maps up to date, "
              "chosen from measured costs, cumulus/engine/recompute.py):", "",
              "| SF | rows | ingest s | close s | mode | recompute s |", "|---:|---:|---:|---:|:--|---:|"]
    lines += [f"| {x['scale']} | {x['events']:,} | {x['ingest_s']} | {x['close_s']} | {x.get('mode', '')} | "
              f"{x.get('recompute_s', '')} |" for x in loads]
    lines += ["", f"![epoch vs recompute]({args.name}.png)", ""]
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scales = sorted({r.scale for r in rows})

    def med(attr: str, s: float) -> float:
        return statistics.median(getattr(r, attr) for r in rows if r.scale == s)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.plot(scales, [med("epoch_s", s) for s in scales], "o-", label="epoch (apply + close)")
    ax1.plot(scales, [med("recompute_s", s) for s in scales], "s-", label="recompute (Spark SQL)")
    ax1.plot(scales, [med("duckdb_s", s) for s in scales], "d-", label="recompute (DuckDB, in memory)")
    ax1.plot(scales, [med("compact_s", s) for s in scales], "x:", label="base compaction (apart, ~every 100 epochs)")
    ax1.set(xscale="log", xlabel="TPC-H scale factor", ylabel="seconds (median over epochs)", title="Wall time")
    ax1.legend()
    ax2.plot(scales, [med("epoch_bytes_read", s) / 2**20 for s in scales], "o-", label="epoch")
    ax2.plot(scales, [med("recompute_bytes_read", s) / 2**20 for s in scales], "s-", label="recompute")
    ax2.plot(scales, [med("map_bytes_read", s) / 2**20 for s in scales], "^--", label="epoch: maps (apply, compact)")
    ax2.set(xscale="log", yscale="log", xlabel="TPC-H scale factor", ylabel="MiB read", title="Bytes read")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[0.1, 1.0], help="TPC-H scale factors")
    parser.add_argument("--epochs", type=int, default=2, help="incremental epochs measured per scale")
    parser.add_argument("--fraction", type=float, default=0.001, help="share of lineitem changed per epoch")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--work", type=Path, default=Path("/tmp/cumulus-bench"), help="scratch folder")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the report goes")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--memory", default="4g", help="Spark driver memory (local mode: executors too)")
    parser.add_argument("--views", choices=("bench", "corpus"), default="bench",
                        help="the three bench views, or the whole TPC-H view corpus")
    parser.add_argument("--only", nargs="+", metavar="VIEW", help="these views of the set alone (by file stem)")
    parser.add_argument("--name", default=None, help="report file stem (default: epoch_vs_recompute[_corpus])")
    parser.add_argument("--report-only", action="store_true", help="re-render the report from the saved JSON")
    args = parser.parse_args(argv)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    with command_progress(logging.INFO):  # a live status line on a terminal, log lines elsewhere
        return run(args, argv)


def run(args: argparse.Namespace, argv: list[str] | None) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    args.name = args.name or ("epoch_vs_recompute" if args.views == "bench" else "epoch_vs_recompute_corpus")
    data = args.out / f"{args.name}.json"
    command = " ".join(["bench/epoch_vs_recompute.py"] + (argv if argv is not None else sys.argv[1:]))
    if args.report_only:
        saved = json.loads(data.read_text())
        rows = [Row(**{k: v for k, v in r.items() if k not in ("ratio", "read_per_written")}) for r in saved["rows"]]
        loads, command = saved["loads"], saved.get("command", command)
    else:
        rows, loads = [], []

        def save(more: list[Row], load: dict) -> None:
            data.write_text(json.dumps({"command": command, "rows": [
                asdict(x) | {"ratio": x.ratio, "read_per_written": x.read_per_written} for x in rows + more],
                                        "loads": [*loads, load]}, indent=1) + "\n")

        for scale in args.scales:
            r, load = run_scale(scale, args.epochs, args.fraction, args.work, args.master, args.seed, args.memory,
                                bench_views(args.views, args.only), on_epoch=save)
            rows += r
            loads.append(load)
    plot(rows, args.out / f"{args.name}.png")
    report = render(rows, loads, args, command)
    (args.out / f"{args.name}.md").write_text(report)
    print(report)
    return 0 if all(r.equal for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
