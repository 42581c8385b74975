"""Table maintenance (cumulus/store/maintenance.py) on a small home: after three closed
epochs and an apply in the open one, compaction and snapshot expiry drop the snapshot
count, every epoch-N tag still reads the same view rows, the main branch reads the same,
the open epoch's pinned snapshots survive and its close still gives the right answer.
The applies append delta rows to maps.entries and the folds append layers to base.* (no
automatic compaction here: nothing is rewritten) until maintenance compacts both: the
maps' rows of closed epochs become one row per entry, the open epoch's rows stay; a view
added meanwhile is back-filled from the layers and equals its SQL recomputed over them."""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path

from cumulus.config import load_settings
from cumulus.engine.apply import apply_records, apply_source
from cumulus.engine.close import close_epoch
from cumulus.engine.registry import batch_plan
from cumulus.engine.views import add_view
from cumulus.ingest.job import ingest_files
from cumulus.ingest.sources import add_source
from cumulus.quality.oracle import compare_view, recompute, register_expanded_base
from cumulus.read import At, Reader
from cumulus.schema import load_schema
from cumulus.store.fold import base_rows, layers
from cumulus.store.home import init_home
from cumulus.store.ledger import current_epoch, ledger_rows
from cumulus.store.maintenance import maintain
from cumulus.store.tables import Home

REPO = Path(__file__).resolve().parents[2]
SIMPLE = REPO / "tests" / "fixtures" / "schemas" / "simple.sql"
VIEW = "SELECT r.a, SUM(s.c) AS total, COUNT(*) AS n FROM r, s WHERE r.b = s.b GROUP BY r.a"
VIEW_MIN = "SELECT s.c, COUNT(*) AS n, MIN(r.a) AS lo FROM r, s WHERE r.b = s.b GROUP BY s.c"
_homes = itertools.count(1)


def _batch(folder: Path, epoch: int) -> Path:
    """A few inserts (and, after the first epoch, a delete) of r and s."""
    folder.mkdir(parents=True)
    r = [f"{i}|1|{epoch}|{i % 3}" for i in range(1, 5)]
    s = [f"{i}|1|{i % 3}|{10 * epoch + i}" for i in range(1, 4)]
    if epoch > 1:
        r.append(f"9|0|{epoch - 1}|1")  # delete one row of the previous epoch
    (folder / "r.csv").write_text("\n".join(r) + "\n")
    (folder / "s.csv").write_text("\n".join(s) + "\n")
    return folder


def _snapshots(spark, settings, table: str) -> list[tuple[int, dt.datetime]]:
    rows = spark.sql(f"SELECT snapshot_id, committed_at FROM {settings.catalog}.{table}.snapshots").collect()
    return [(r[0], r[1]) for r in rows]


def _delete_files(spark, settings, table: str) -> int:
    """Position-delete files live in the table's current snapshot."""
    return spark.sql(f"SELECT count(*) FROM {settings.catalog}.{table}.delete_files").first()[0]


def _tag_snapshot(spark, table: str, epoch: int) -> int:
    return spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'epoch-{epoch}'").first()[0]


def _multiset(df) -> dict:
    return {tuple(r[:-1]): r.mult for r in df.collect()}


def _rows_per_entry(spark, settings, table: str, through: int) -> tuple[int, int]:
    """(rows, distinct entries) of the maps' rows of epochs <= `through` on main."""
    df = spark.table(f"{settings.catalog}.{table}").where(f"epoch <= {through}")
    keys = [c for c in df.columns if c not in ("epoch", "source_id", "seq") and not c.startswith("v_")]
    return df.count(), (df.select(*keys).distinct().count() if keys else min(df.count(), 1))


def _rewrites(spark, settings, table: str) -> int:
    """Data files that the table's overwrite commits (MERGEs) removed."""
    return spark.sql(
        f"SELECT coalesce(sum(cast(summary['deleted-data-files'] AS INT)), 0) "
        f"FROM {settings.catalog}.{table}.snapshots WHERE operation = 'overwrite'"
    ).first()[0]


def test_expire_and_compact_keep_tags_and_results(spark, tmp_path):
    root = tmp_path / "home"
    root.mkdir()
    catalog = f"maint{next(_homes)}"
    (root / "cumulus.toml").write_text(
        f'catalog = "{catalog}"\nspark_master = "local[2]"\nbase_compaction_ratio = 1000.0\n'
        "map_compaction_ratio = 1000.0\n"
    )
    settings = load_settings(root)
    home = Home(spark, settings)
    default_catalog = spark.conf.get("spark.sql.defaultCatalog")
    try:
        init_home(home, SIMPLE)
        add_source(settings, "a", 1)
        plan = batch_plan(add_view(home, load_schema(SIMPLE), "totals", VIEW))
        for epoch in (1, 2, 3):
            ingest_files(home, "a", [_batch(tmp_path / f"in-{epoch}", epoch)])
            apply_source(home, plan, epoch, 1)
            close_epoch(home, plan, epoch)
        # A view added now is back-filled from base.* at epoch 3, which holds fold layers
        # (deletes among them): it equals its SQL recomputed over the layers summed.
        schema = load_schema(SIMPLE)
        compiled = add_view(home, schema, "by_c", VIEW_MIN)
        plan = batch_plan(compiled)
        assert layers(spark, f"{catalog}.base.r", _tag_snapshot(spark, f"{catalog}.base.r", 3)).rows > 0
        names = register_expanded_base(home, schema, 3)
        recomputed = recompute(spark, compiled.views["by_c"], schema, 3)
        assert len(recomputed) > 1
        assert compare_view(compiled.views["by_c"], Reader(settings).read_view("by_c", At(3)), recomputed).equal
        for name in names:
            spark.catalog.dropTempView(name)
        # Epoch 4 is open with two applied batches: the second pinned the (untagged)
        # maps snapshot the first wrote; the close repairs against pinned snapshots.
        ingest_files(home, "a", [_batch(tmp_path / "in-4", 4)])
        apply_source(home, plan, 4, 1)
        more = tmp_path / "in-4b"
        more.mkdir()
        (more / "r.csv").write_text("1|1|7|2\n")
        ingest_files(home, "a", [more])
        apply_source(home, plan, 4, 1)
        assert current_epoch(spark, settings) == 4
        pinned = {r.read_snapshot for r in apply_records(home.spark, home.settings, 4) if r.read_snapshot}

        reader = Reader(settings)
        before = {n: reader.read_view("totals", At(n)) for n in (1, 2, 3)}
        main_before = reader.read_view("totals", At())
        maps = ["maps.entries"]
        counts = {t: len(_snapshots(spark, settings, t)) for t in maps + ["base.r", "events.r"]}

        # Lazy Cleanup: the closes rewrote no map or base data file; the maps hold delta
        # rows (several per entry), the folds appended layers to base.* (epoch 1 into an
        # empty table is compact).
        rowlevel = maps + ["base.r", "base.s"]
        assert {t: _rewrites(spark, settings, t) for t in rowlevel} == dict.fromkeys(rowlevel, 0)
        assert sum(_rows_per_entry(spark, settings, t, 3)[0] for t in maps) > sum(
            _rows_per_entry(spark, settings, t, 3)[1] for t in maps)
        open_rows = {t: spark.table(f"{settings.catalog}.{t}").where("epoch = 4").count() for t in maps}
        assert sum(open_rows.values()) > 0
        bases = {t: f"{settings.catalog}.{t}" for t in ("base.r", "base.s")}
        assert {t: layers(spark, q).rows > 0 for t, q in bases.items()} == dict.fromkeys(bases, True)
        cols = {"base.r": ["a", "b"], "base.s": ["b", "c"]}
        stored = {(t, n): _multiset(base_rows(spark, q, cols[t], f"epoch-{n}")) for t, q in bases.items() for n in (1, 2, 3)}

        ledger_before = ledger_rows(spark, settings)
        reports = maintain(home, retain_last=1, retain_for=dt.timedelta(0), compact=True)
        # the ledger log keeps each epoch's latest revision only, and reads the same
        assert by_table_of(reports)["cumulus.ledger_log"].log_rows_compacted > 0
        assert ledger_rows(spark, settings) == ledger_before
        assert spark.table(f"{settings.catalog}.cumulus.ledger_log").count() == len(ledger_before)
        assert spark.table(f"{settings.catalog}.cumulus.ledger").count() == len(ledger_before)
        assert {t: _delete_files(spark, settings, t) for t in rowlevel} == dict.fromkeys(rowlevel, 0)
        by_table = by_table_of(reports)
        assert sum(by_table[t].delta_rows_compacted for t in maps) > 0
        for t in maps:  # closed epochs: one row per entry; the open epoch's rows as they were
            rows, entries = _rows_per_entry(spark, settings, t, 3)
            assert rows == entries, t
            assert spark.table(f"{settings.catalog}.{t}").where("epoch = 4").count() == open_rows[t], t
        for t, q in bases.items():  # compacted: one row per live tuple, every tag reads the same
            assert by_table[t].layer_rows_compacted > 0 and layers(spark, q).rows == 0
            assert spark.table(q).count() == len(_multiset(spark.table(q)))
            for n in (1, 2, 3):
                assert _multiset(base_rows(spark, q, cols[t], f"epoch-{n}")) == stored[t, n]
        assert set(maps) <= set(by_table)
        dropped = sum(counts[t] - by_table[t].snapshots_after for t in counts)
        assert dropped > 0, counts
        for t in counts:  # each compaction commits one snapshot of its own
            own = (bool(by_table[t].files_rewritten) + bool(by_table[t].delete_files_removed)
                   + bool(by_table[t].layer_rows_compacted) + bool(by_table[t].delta_rows_compacted)
                   + bool(by_table[t].log_rows_compacted))
            assert by_table[t].snapshots_after <= counts[t] + own, by_table[t]
        assert by_table["maps.entries"].tags == 3  # epoch-1..3 (epoch-3 moved onto the later view's back-fill)
        kept = {s for s, _ in _snapshots(spark, settings, "maps.entries")}
        assert pinned and pinned <= kept  # the open epoch's pinned snapshots survive

        reader = Reader(settings)
        assert {n: reader.read_view("totals", At(n)) for n in (1, 2, 3)} == before
        assert reader.read_view("totals", At()) == main_before

        close_epoch(home, plan, 4)  # the open epoch closes after maintenance
        after = Reader(settings).read_view("totals", At(4))
        assert after == main_before
    finally:
        spark.conf.set("spark.sql.defaultCatalog", default_catalog)


def by_table_of(reports) -> dict:
    return {r.table: r for r in reports}
