"""Home init and the ledger: tables typed from the DDL, init idempotent, another schema
refused, epochs moving through their states (read back with Spark and PyIceberg), fold
refusing an open epoch and folding later epochs on top of base.* (appended layers, read
summed, compacted past the ratio and on demand)."""

from __future__ import annotations

from collections import Counter

import pytest
from ingestkit import SHOP, base, write, write_home

from cumulus.cli import main
from cumulus.config import with_overrides
from cumulus.errors import EpochOrderError, SchemaError, StoreError
from cumulus.ingest.job import ingest_files
from cumulus.schema import load_schema
from cumulus.store import ledger
from cumulus.store.catalog import pyiceberg_catalog
from cumulus.store.fold import Layers, base_rows, compact_base, fold_epoch, folded_through, layers
from cumulus.store.home import init_home, load_home_schema
from cumulus.store.tables import NAMESPACES, Home


def test_init_creates_typed_tables_and_is_idempotent(spark, new_home, tmp_path):
    settings = new_home()
    home = Home(spark, settings)
    cat = settings.catalog
    assert {r.namespace for r in spark.sql(f"SHOW NAMESPACES IN {cat}").collect()} >= set(NAMESPACES)
    columns = {r.col_name: r.data_type for r in spark.sql(f"DESCRIBE TABLE {cat}.events.orders").collect()}
    assert list(columns)[:12] == [
        "o_id", "o_cust", "o_total", "o_date", "o_note",
        "op", "epoch", "source_id", "seq", "ingested_at", "file", "batch_id",
    ]
    assert (columns["o_id"], columns["o_total"], columns["o_date"], columns["op"]) == (
        "bigint", "decimal(10,2)", "date", "int",
    )
    assert "epoch" in {r.col_name for r in spark.sql(f"DESCRIBE TABLE {cat}.events.orders").collect()[12:]}
    base_cols = [r.col_name for r in spark.sql(f"DESCRIBE TABLE {cat}.base.items").collect()]
    assert base_cols[:5] == ["i_order", "i_qty", "i_price", "i_gift", "mult"]
    for name in ("files", "quarantine", "ledger"):
        spark.table(f"{cat}.cumulus.{name}")
    assert (settings.home / "schema.sql").read_text() == SHOP.read_text()
    assert load_home_schema(settings) == load_schema(SHOP)

    again = init_home(home, SHOP)
    assert not again.created and again.epoch == 1
    assert [r.epoch for r in ledger.ledger_rows(spark, settings)] == [1]

    other = write(tmp_path / "other.sql", "CREATE TABLE orders (o_id INT);\n")
    with pytest.raises(StoreError, match=r"initialized with another schema.*missing relations items; relation\(s\) orders differ"):
        init_home(home, other)
    reserved = write(tmp_path / "reserved.sql", "CREATE TABLE t (seq INT);\n")
    with pytest.raises(SchemaError, match="t.seq uses a name Cumulus reserves"):
        init_home(Home(spark, write_home(tmp_path / "h2", "ingr")), reserved)


def test_cli_init(spark, tmp_path, capsys):
    settings = write_home(tmp_path / "cli-home", "ingcli")
    try:
        assert main(["--home", str(settings.home), "init", "--schema", str(SHOP)]) == 0
        assert "initialized" in capsys.readouterr().out
        assert main(["--home", str(settings.home), "init", "--schema", str(SHOP)]) == 0
        assert "same schema" in capsys.readouterr().out
        other = write(tmp_path / "other.sql", "CREATE TABLE x (a INT);\n")
        assert main(["--home", str(settings.home), "init", "--schema", str(other)]) == 2
        assert "another schema" in capsys.readouterr().err
    finally:
        spark.conf.set("spark.sql.defaultCatalog", "cumulus")


def test_ledger_transitions(spark, new_home):
    settings = new_home()
    home = Home(spark, settings)
    assert ledger.current_epoch(spark, settings) == 1
    with pytest.raises(StoreError, match="epoch 1 is open; it cannot become published"):
        ledger.transition(home, 1, ledger.PUBLISHED)
    with pytest.raises(StoreError, match="not ledger fields: colour"):
        ledger.transition(home, 1, ledger.APPLIED, colour="red")
    ledger.transition(home, 1, ledger.APPLIED, events=3)
    assert ledger.current_epoch(spark, settings) == 2
    assert ledger.epoch_to_close(pyiceberg_catalog(settings), settings)[0] == 1  # the interrupted close first
    for state in (ledger.APPLIED, ledger.CLOSED):
        with pytest.raises(EpochOrderError, match="epoch 2 cannot be .*: epoch 1 is sealed but not closed"):
            ledger.transition(home, 2, state)
    closed = ledger.transition(
        home, 1, ledger.CLOSED, snapshots={"base.orders": 12}, metrics={"seconds": 1.5}
    )
    assert closed.closed_at is not None and closed.events == 3
    ledger.transition(home, 1, ledger.FAILED, validation="failed", validation_detail="q1 differs")
    ledger.transition(home, 1, ledger.PUBLISHED, validation="passed")
    for reader in (spark, pyiceberg_catalog(settings)):
        rows = ledger.ledger_rows(reader, settings)
        assert [(r.epoch, r.state) for r in rows] == [(1, ledger.PUBLISHED), (2, ledger.OPEN)]
        assert rows[0].snapshots == {"base.orders": 12} and rows[0].metrics == {"seconds": 1.5}
        assert rows[0].validation == "passed" and rows[0].published_at is not None
        assert ledger.current_epoch(reader, settings) == 2


def test_fold_across_epochs(spark, new_home, tmp_path):
    settings = new_home()
    home = Home(spark, settings)
    items = load_schema(SHOP).relation("items")

    def batch(name, lines):
        return ingest_files(home, "a", [write(tmp_path / f"{name}.csv", "op,i_order,i_qty,i_price,i_gift\n" + lines)], relation="items")

    batch("e1", "+,1,1,1.0,true\n+,1,1,1.0,true\n+,2,\\N,2.0,\\N\n+,3,1,1.0,false\n")
    with pytest.raises(StoreError, match="epoch 1 is still open"):
        fold_epoch(home, 1)
    ledger.transition(home, 1, ledger.APPLIED)
    fold_epoch(home, 1)
    ledger.transition(home, 1, ledger.CLOSED)  # epochs close in order: the close's row, by hand here
    assert base(spark, settings, items) == Counter({(1, 1, 1.0, True): 2, (2, None, 2.0, None): 1, (3, 1, 1.0, False): 1})
    # Epoch 2: one copy of 1 deleted, 2 (with NULLs) deleted, 3 deleted and inserted again, 4 new.
    batch("e2", "-,1,1,1.0,true\n-,2,\\N,2.0,\\N\n-,3,1,1.0,false\n+,3,1,1.0,false\n+,4,1,1.0,true\n")
    ledger.transition(home, 2, ledger.APPLIED)
    ledger.transition(home, 2, ledger.CLOSED)  # closed without its fold, as a crashed close could not be
    # Epoch 3 stays empty; folding it catches up epoch 2 as well.
    ledger.transition(home, 3, ledger.APPLIED)
    results = fold_epoch(home, 3)
    assert (results["items"].from_epoch, results["items"].epoch) == (2, 3)
    assert base(spark, settings, items) == Counter({(1, 1, 1.0, True): 1, (3, 1, 1.0, False): 1, (4, 1, 1.0, True): 1})
    assert folded_through(home, "items") == 3
    assert not fold_epoch(home, 2)["items"].folded  # already folded


def test_fold_layers_are_read_summed_and_compacted(spark, new_home, tmp_path):
    settings = with_overrides(new_home(), base_compaction_ratio=1000.0)  # no automatic compaction
    home = Home(spark, settings)
    items = load_schema(SHOP).relation("items")
    table = f"{settings.catalog}.base.items"
    cols = list(items.column_names)

    def epoch(n, lines):
        ingest_files(home, "a", [write(tmp_path / f"l{n}.csv", "op,i_order,i_qty,i_price,i_gift\n" + lines)], relation="items")
        ledger.transition(home, n, ledger.APPLIED)
        result = fold_epoch(home, n)["items"]
        ledger.transition(home, n, ledger.CLOSED)  # epochs close in order: the close's row, by hand
        return result

    def stored(df) -> Counter:
        return Counter({tuple(r[:-1]): r.mult for r in df.collect()})

    assert not epoch(1, "+,1,1,1.0,true\n+,1,1,1.0,true\n+,2,\\N,2.0,\\N\n").compacted
    assert layers(spark, table).rows == 0  # a first fold of inserts into an empty table is compact
    assert stored(spark.table(table)) == Counter({(1, 1, 1.0, True): 2, (2, None, 2.0, None): 1})
    # Epoch 2 appends a layer: -1 for tuple 1, -1 for tuple 2 (gone), +1 for the new tuple 3.
    assert not epoch(2, "-,1,1,1.0,true\n-,2,\\N,2.0,\\N\n+,3,1,1.0,false\n").compacted
    after = Counter({(1, 1, 1.0, True): 1, (3, 1, 1.0, False): 1})
    assert layers(spark, table).rows == 3 and spark.table(table).count() == 5
    assert stored(base_rows(spark, table, cols)) == after == base(spark, settings, items)
    assert stored(base_rows(spark, table, cols, live=False)) == after
    ledger.transition(home, 3, ledger.APPLIED)  # the pipeline's tag, by hand here
    spark.sql(f"ALTER TABLE {table} CREATE TAG `epoch-2`")
    ledger.transition(home, 3, ledger.CLOSED)
    assert compact_base(home, items)  # what maintenance does
    assert not compact_base(home, items)  # nothing left to compact
    assert layers(spark, table) == Layers(0, 2) and spark.table(table).count() == 2
    assert stored(spark.table(table)) == after  # one row per live tuple
    assert stored(base_rows(spark, table, cols, "epoch-2")) == after  # the tag still reads the layers, summed
    assert layers(spark, table, spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'epoch-2'").first()[0]).rows == 3
    assert folded_through(home, "items") == 2  # the compaction keeps the mark
    # Past the ratio, the fold compacts at once.
    settings = with_overrides(settings, base_compaction_ratio=0.1)
    home = Home(spark, settings)
    assert epoch(4, "+,4,1,1.0,true\n").compacted
    assert layers(spark, table).rows == 0 and spark.table(table).count() == 3
