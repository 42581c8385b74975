"""The engine end to end on the embedded default: init, view add, several epochs of
ingest from two sources (the lower priority one after the other) and epoch close over
the DBToaster TPC-H stream with deletes; after every close each view read at its tag
equals DuckDB over the rows alive then, and the reference interpreter, whether or not the
close compacted its maps (some closes must have); the views read by name in the catalog
(views.*, views_stable.*) give the same rows."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from enginekit import write_epoch_files
from oracle import DuckOracle, alive_after, assert_view_equals_sql

from cumulus.cli import main as cli_main
from cumulus.config import load_settings, with_overrides
from cumulus.engine import derived
from cumulus.engine.close import close_epoch
from cumulus.engine.publish import view_names
from cumulus.engine.registry import batch_plan
from cumulus.engine.results import COLLECTED, DRIVER, WRITER, results_updates
from cumulus.engine.results_rows import BAG, KEYED, TOP, touchable
from cumulus.engine.views import add_view
from cumulus.ingest.dbtoaster import read_stream
from cumulus.ingest.job import ingest_files
from cumulus.ingest.sources import add_source
from cumulus.output import sort_key
from cumulus.read import Reader
from cumulus.schema import load_schema
from cumulus.sql.derived import Maintainer
from cumulus.store.commit import ancestors, table_metadata
from cumulus.store.home import init_home
from cumulus.store.ledger import ledger_row
from cumulus.store.tables import Home, tables_of

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
STREAM = REPO.parent / "shared" / "data" / "dbtoaster" / "tpch" / "standard_del"
TPCH = FIXTURES / "schemas" / "tpch.sql"
VIEWS = ["revenue_by_nation_part", "customer_order_extremes", "orders_overall", "same_nation_customers"]
SOURCE_A = {"orders", "customer", "nation", "region"}  # priority 1; the rest goes to source b
_homes = itertools.count(1)


def new_home(root: Path, catalog: str, results: bool = False):
    root.mkdir(parents=True, exist_ok=True)
    # map_compaction_min_rows = 1: these maps are small, so the closes compact them only
    # because of it (the ratio alone decides): the path is exercised, and must be exact.
    # The ratio is low enough for an applied epoch after a recomputed one to compact.
    (root / "cumulus.toml").write_text(
        f'catalog = "{catalog}"\nspark_master = "local[2]"\nmap_compaction_min_rows = 1\n'
        "map_compaction_ratio = 0.2\npublish = \"closed\"\n"  # no validation here: stable moves at the close
        # (results: every table of a view with groups by its touched groups, however many: more than it
        # holds when most are new)
        f"results_tables = {str(results).lower()}\nresults_touched_share = 1000.0\nresults_touched_min_rows = 0\n"
    )
    return load_settings(root)


def tag_summary(spark, table, epoch: int) -> dict:
    """The commit summary of a table's snapshot tagged epoch-N."""
    meta = table_metadata(spark, table)
    _, summary = next(ancestors(meta, meta["refs"][f"epoch-{epoch}"]["snapshot-id"]))
    return dict(summary)


def cli_json(capsys, *argv: str) -> list[dict]:
    """Run the CLI in this process; its JSON-lines output, parsed."""
    capsys.readouterr()
    assert cli_main(list(argv)) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def run_epochs(spark, tmp_path: Path, capsys, views: list[str], epochs: int,
               modes: tuple[str, ...] = (), local_events: int | None = None, results: bool = False) -> None:
    """init, view add (the views and the hand-written program), then `epochs` epochs of
    the stream from two sources (b, the lower priority, ingested after a) and close;
    after each close every view at its tag == DuckDB over the alive rows, and every map
    (the views' and the program's) == the interpreter. `modes[k]`: epoch_mode of epoch
    k + 1 ("auto" beyond). With nothing measured, auto recomputes epoch 1 (base.* is
    empty) and applies epoch 2 (then the applies of epoch 2 give the first measure).
    `local_events`: the home's apply_local_events (0: every apply by a Spark plan, and
    every rebuild too: rebuild_local_rows = 0).
    `results`: the close writes results.<view> too, and each equals its view at the tag."""
    settings = new_home(tmp_path / "home", f"eng{next(_homes)}", results)
    home = Home(spark, settings)
    if local_events is not None:
        settings = with_overrides(settings, apply_local_events=local_events,
                                  **({"rebuild_local_rows": 0} if local_events == 0 else {}))
        home = Home(spark, settings)
    init_home(home, TPCH)
    add_source(settings, "a", 1)
    add_source(settings, "b", 2)
    schema = load_schema(TPCH)
    for path in views:  # a view of tests/fixtures/views/tpch by name, or kind/name
        folder, _, name = path.rpartition("/")
        compiled = add_view(home, schema, name, (FIXTURES / "views" / (folder or "tpch") / f"{name}.sql").read_text())
    views = [v.rpartition("/")[2] for v in views]
    program = FIXTURES / "programs" / "tpch_customer_revenue.m3"  # a hand-written M3 program beside them
    compiled = add_view(home, schema, "customer_revenue", program.read_text(), kind="m3")
    assert {"hw_customer_revenue", "hw_order_price"} <= set(compiled.checked.maps)
    plan = batch_plan(compiled)

    def reads(view: str) -> set[str]:  # the relations a view's maps read
        return {a.relation for m in compiled.views[view].maps for a in compiled.maps[m].query.atoms}

    interp = Maintainer(compiled)  # (nested queries: their derived relations after each event)
    stream = read_stream(STREAM, schema)
    cuts = [len(stream) * k // (epochs + 1) for k in range(epochs)] + [len(stream)]  # the last epoch is the largest
    alive: dict[str, list[tuple]] = {}
    reader = Reader(settings)
    compacted = 0
    updates: dict[int, dict[str, str]] = {k: {} for k in range(1, epochs + 1)}  # epoch -> view -> how its table was written
    writers: dict[int, dict[str, str]] = {}  # epoch -> view -> who wrote its table's tagged snapshot
    deleted: dict[int, set[str]] = {}  # epoch -> views whose tagged snapshot deleted rows by position
    rows_read: dict[str, list[tuple]] = {}  # view -> its rows at the last epoch's tag
    map_rows: dict[str, int] = {}  # view -> the entries its maps hold at the last epoch's tag
    changed: dict[int, set[str]] = {}  # epoch -> the relations its events change
    for epoch, (lo, hi) in enumerate(itertools.pairwise(cuts), start=1):
        rows = stream[lo:hi]
        changed[epoch] = {r.event.relation for r in rows}
        folder = tmp_path / f"epoch{epoch}"
        ingest_files(home, "a", [write_epoch_files(rows, folder / "a", SOURCE_A)], fmt="dbtoaster")
        others = {r.name for r in schema.relations} - SOURCE_A
        ingest_files(home, "b", [write_epoch_files(rows, folder / "b", others)], fmt="dbtoaster")
        mode = modes[epoch - 1] if epoch <= len(modes) else "auto"
        overrides = {"epoch_mode": mode}
        if results and epoch == 2:  # of the views with a row per group that the epoch's relations reach, a
            # bag's and a top-k's from the driver (its rows of the touched groups and the table's others: no
            # MERGE can update them), the larger tables by the driver's row deltas, but the one whose maps hold
            # the most rows, by a MERGE; none rewritten whole from the driver's own
            shapes = {v: t.shape for v in views if changed[2] & reads(v)
                      and (t := touchable(compiled.views[v], compiled.checked.maps))}
            assert {KEYED, BAG, TOP} <= set(shapes.values()), shapes
            overrides["results_collect_rows"] = max(len(rows_read[v]) for v, s in shapes.items() if s != KEYED)
            overrides["results_driver_rows"] = 0
            largest = max((v for v, s in shapes.items() if s == KEYED), key=lambda v: map_rows[v])
            overrides["results_driver_touched_rows"] = max(map_rows[v] for v in shapes if v != largest)
            assert map_rows[largest] > overrides["results_driver_touched_rows"], map_rows
            assert any(len(rows_read[v]) > overrides["results_collect_rows"] for v, s in shapes.items()
                       if s == KEYED and v != largest), (shapes, rows_read)
        if results and epoch == 3:  # through the driver, views whose maps hold as many rows as those of the
            # views the epoch leaves alone (theirs stay as they are); a view whose maps hold more is computed
            # by Spark, its rows written from the driver
            overrides["results_driver_rows"] = max(map_rows[v] for v in views if not changed[3] & reads(v))
            # (and no more, with the maps of values of a MIN/MAX without GROUP BY, which Arrow cuts first)
            overrides["results_driver_touched_rows"] = overrides["results_driver_rows"]
        metrics = close_epoch(Home(spark, with_overrides(settings, **overrides)), plan, epoch)
        assert ledger_row(spark, settings, epoch).state == "closed"
        assert metrics["events"] == sum(r.event.relation in plan.order for r in rows)
        if mode == "auto":
            assert metrics["mode"] == ("recompute" if epoch == 1 else "incremental"), metrics["mode_reason"]
        else:
            assert metrics["mode"] == mode
        if metrics["mode"] == "incremental":
            assert metrics["applies_bytes_read"] > 0 and metrics["applies_bytes_written"] > 0
            if plan.derived:  # nested queries: their change by Spark where every apply is, else in the driver
                assert metrics["derived_evaluated"] == ("by Spark" if local_events == 0 else "in the driver")
        else:
            assert metrics["recompute_rows"] > 0 and metrics["repaired_batches"] == 0
            # rebuilt by Spark plans where every apply is (local_events = 0), else in the driver
            assert metrics["recompute_evaluated"] == ("by Spark" if local_events == 0 else "in the driver")
        compacted += metrics["compacted_map_rows"]
        shown = cli_json(capsys, "--home", str(settings.home), "epoch", "show", str(epoch), "--format", "json")
        assert {"field": "state", "value": "closed"} in shown
        assert {"field": "metrics.deltas", "value": metrics["deltas"]} in shown
        assert {"field": "metrics.mode", "value": metrics["mode"]} in shown  # which, and why:
        assert {"field": "metrics.mode_reason", "value": metrics["mode_reason"]} in shown
        for r in rows:
            interp.process(r.event)
        oracle = DuckOracle(schema, alive_after([r.event for r in rows], alive))
        at = reader.stable(epoch)
        # Every map at the tag from one scan (a scan per map took 0.08 s: 50 s an epoch
        # for the corpus's 347 maps); the first three views also by read_view's own scan.
        at_tag = SimpleNamespace(entries=reader.all_entries(at))
        map_rows = {v: sum(len(at_tag.entries(m)) for m in compiled.views[v].maps) for v in views}
        rows_read = {}
        for name in views:
            rows_read[name] = reader.read_view(name, at, entries=at_tag.entries)
            assert_view_equals_sql(compiled, name, at_tag, oracle, f"epoch {epoch}")
            assert len(rows_read[name]) == len(oracle.query(compiled.views[name].sql))
        for name in views[:3]:  # by name in the catalog: views_stable.* at the stable branch, views.* on main
            fresh, stable = view_names(settings, name)
            want = sorted(reader.read_view(name, at), key=sort_key)
            assert want == sorted(rows_read[name], key=sort_key), name
            assert sorted(map(tuple, spark.sql(f"SELECT * FROM {stable}").collect()), key=sort_key) == want, name
            assert sorted(map(tuple, spark.sql(f"SELECT * FROM {fresh}").collect()), key=sort_key) == want, name
        for m in compiled.checked.maps:  # the views' maps and the hand-written program's
            assert at_tag.entries(m) == {k: v for k, v in interp.entries(m).items()}, m
        if results:  # results.<view> at the tag: the view's rows, however they were written
            for name in views:
                table = tables_of(settings).results(name)
                got = spark.sql(f"SELECT * FROM {table} VERSION AS OF 'epoch-{epoch}'").collect()
                assert sorted(map(tuple, got), key=sort_key) == sorted(rows_read[name], key=sort_key), (name, epoch)
            updates[epoch] = results_updates(home, epoch)
            summaries = {name: tag_summary(spark, tables_of(settings).results(name), epoch) for name in views}
            writers[epoch] = {name: summary.get(WRITER, "spark") for name, summary in summaries.items()}
            deleted[epoch] = {name for name, summary in summaries.items()  # by position (a MERGE, a row delta)
                              if int(summary.get("added-position-deletes", 0))}
    assert compacted > 0, "no close compacted a map: the compaction path went untested"
    if results:  # both ways were taken: by the groups an applied epoch touched, and whole
        # (epoch 3 rebuilt the maps: no delta row need show what changed, so every table is rewritten)
        assert set(updates[1].values()) == set(updates[3].values()) == {"whole"}, updates
        assert "touched" in updates[2].values() and "whole" in updates[2].values(), updates
        # a view reading none of the relations epoch 2 changed is tagged as it was, whatever its shape (a
        # nested one too): none of its maps has a delta row of the epoch
        untouched = {v for v in views if not changed[2] & reads(v)}
        assert untouched and {updates[2][v] for v in untouched} == {"unchanged"}, (untouched, updates[2])
        # new tables are made empty (their columns from Spark's analysis) and written from the driver, as any
        # other rewritten whole; epoch 2's touched groups are written from the driver (its own rows of them,
        # from their maps' entries, and the table's others) or by a MERGE; rewritten whole, tables come from
        # the driver (its own rows, or Spark's query's where the maps hold more rows than it takes), but for
        # those a MERGE left delete files in
        assert set(writers[1].values()) == {DRIVER}, writers
        touched = {v: writers[2][v] for v, how in updates[2].items() if how == "touched"}
        assert set(touched.values()) == {DRIVER, "spark"}, touched
        assert {v for v, w in touched.items() if w == DRIVER} & deleted[2], (touched, deleted[2])  # row deltas
        assert {v for v, w in touched.items() if w == DRIVER} - deleted[2], (touched, deleted[2])  # copies
        assert {updates[2][v] for v, s in shapes.items() if s != KEYED} == {"touched"}, (shapes, updates[2])
        merged = deleted[2] & set(touched)  # their tables have delete files
        assert {v for v, w in writers[3].items() if w == "spark"} <= merged, writers
        assert {DRIVER, COLLECTED} <= set(writers[3].values()), writers


@pytest.mark.e2e
def test_epochs_over_the_tpch_stream_equal_duckdb_and_the_interpreter(spark, tmp_path, capsys, monkeypatch) -> None:
    """Epoch 1 recomputed (auto, base.* empty), 2 applied (auto) by Spark plans (the
    corpus test below applies in the driver), 3 recomputed (forced) over a state that is
    not empty. Epoch 2's derived step reads the maps where it uses them, as at scale (a
    test home's state is small enough to be materialized once: test_full_refresh.py)."""
    monkeypatch.setattr(derived, "MATERIALIZED_STATE_ROWS", 0)
    # derived relations (issue 43), of signed rows and parts too (NOT IN's two anti-joins,
    # UNION ALL and UNION): rebuilt, applied, rebuilt (NOT EXISTS and a UNION ALL of rows
    # go through the engine in test_full_refresh.py's Q22 and the interpreter's corpus)
    nested = ["tpch_queries/q17_jumbo_pack", "tpch_queries/q16_slyly", "constructs/union_all_parties"]
    # results tables of a bag of rows and of a top-k, updated by touched groups from the driver
    nested += ["constructs/large_order_kinds", "constructs/limit_without_order"]
    run_epochs(spark, tmp_path, capsys, VIEWS + nested, epochs=3, modes=("auto", "auto", "recompute"), local_events=0,
               results=True)


@pytest.mark.e2e
@pytest.mark.corpus
def test_the_whole_tpch_view_corpus_and_the_constructs_over_two_epochs(spark, tmp_path, capsys) -> None:
    """The TPC-H views of the compiler's corpus (tests/fixtures/views/tpch: 18 of its 24
    views), the hand-written program, TPC-H queries as written and construct views
    (ORDER BY/LIMIT, LIKE, a ratio at read time, a merged FROM subquery with an OR across
    nations, COUNT(DISTINCT), HAVING over NULL sums), registered together, through ingest,
    apply/recompute, close and the catalog views over two epochs."""
    corpus = sorted(p.stem for p in (FIXTURES / "views" / "tpch").glob("*.sql"))
    assert len(corpus) >= 24
    # TPC-H's queries as written go through the engine in test_full_refresh.py: the
    # corpus's own forms of Q1, Q3, Q5, Q6, Q10 and Q12 (the same SQL) are left to it here
    # and to the interpreter's replay (tests/unit/test_views_constructs.py).
    written = ("q01_", "q03_", "q05_", "q06_", "q10_", "q12_")
    corpus = [v for v in corpus if not v.startswith(written)]
    constructs = ["tpch_queries/q07_peru_canada", "constructs/distinct_aggregates_by_nation",
                  "constructs/having_null_semantics"]
    run_epochs(spark, tmp_path, capsys, constructs + corpus, epochs=2)  # (the first three read by name too)
