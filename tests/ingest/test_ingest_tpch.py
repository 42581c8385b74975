"""The acceptance test of ingestion: the DBToaster TPC-H stream with deletes
(shared/data/dbtoaster/tpch/standard_del), split across two sources, replays (and folds)
to exactly the `*_active.csv` rows. The expected multisets come from DuckDB reading the
raw files itself: nothing of Cumulus's parsing is shared with the oracle."""

from __future__ import annotations

import shutil
from collections import Counter

import duckdb
import pytest
from ingestkit import STANDARD_DEL, TPCH, base, events, replay

from cumulus.ingest.job import ingest_files
from cumulus.schema import load_schema
from cumulus.store import ledger
from cumulus.store.fold import fold_epoch
from cumulus.store.tables import Home

SCHEMA = load_schema(TPCH)
# Each source takes every other relation (in schema order).
SPLIT = {"a": SCHEMA.names[0::2], "b": SCHEMA.names[1::2]}


def duck_rows(relation, path, with_event_columns: bool) -> tuple[duckdb.DuckDBPyConnection, str]:
    con = duckdb.connect()
    names = (["ev", "flag"] if with_event_columns else []) + list(relation.column_names)
    columns = ", ".join(f"'{n}': 'VARCHAR'" for n in names)
    casts = ", ".join(
        f"CAST({c.name} AS {c.sql_type.replace('STRING', 'VARCHAR')}) AS {c.name}" for c in relation.columns
    )
    extra = "CAST(ev AS BIGINT) AS ev, flag, " if with_event_columns else ""
    return con, (
        f"SELECT {extra}{casts} FROM read_csv('{path}', delim='|', header=false, quote='', "
        f"escape='', columns={{{columns}}})"
    )


def oracle_net(relation) -> Counter:
    """Net multiplicities of the raw stream file, by DuckDB."""
    con, rows = duck_rows(relation, STANDARD_DEL / f"{relation.name}.csv", True)
    cols = ", ".join(relation.column_names)
    result = con.execute(
        f"SELECT {cols}, SUM(CASE flag WHEN '1' THEN 1 ELSE -1 END) AS n FROM ({rows}) "
        f"GROUP BY ALL HAVING SUM(CASE flag WHEN '1' THEN 1 ELSE -1 END) <> 0"
    ).fetchall()
    return Counter({tuple(r[:-1]): r[-1] for r in result})


def oracle_active(relation) -> Counter:
    con, rows = duck_rows(relation, STANDARD_DEL / f"{relation.name}_active.csv", False)
    return Counter(tuple(r) for r in con.execute(rows).fetchall())


def oracle_stream(relation) -> list[tuple[int, int, tuple]]:
    """(event number, op, tuple) of every line, in line order."""
    con, rows = duck_rows(relation, STANDARD_DEL / f"{relation.name}.csv", True)
    result = con.execute(rows).fetchall()  # read_csv keeps file order
    return [(r[0], 1 if r[1] == "1" else -1, tuple(r[2:])) for r in result]


@pytest.fixture(scope="module")
def landed(tmp_path_factory):
    roots = {}
    for source, relations in SPLIT.items():
        root = tmp_path_factory.mktemp(f"landing-{source}")
        for name in relations:
            shutil.copy(STANDARD_DEL / f"{name}.csv", root)
        roots[source] = root
    return roots


def test_standard_del_across_two_sources(spark, new_home, landed):
    settings = new_home(TPCH)
    home = Home(spark, settings)
    reports = {s: ingest_files(home, s, [landed[s]]) for s in SPLIT}

    lines = {r.name: sum(1 for _ in open(STANDARD_DEL / f"{r.name}.csv")) for r in SCHEMA.relations}
    for source, report in reports.items():
        assert report.committed and report.rejected == 0 and report.epoch == 1
        assert report.accepted == sum(lines[n] for n in SPLIT[source])
    assert sum(r.accepted for r in reports.values()) == 14570

    stream_order: list[tuple[int, int, int, int]] = []  # (source, seq, event number, rank)
    for rank, rel in enumerate(SCHEMA.relations):
        rows = events(spark, settings, rel.name)
        source = next(s for s, names in SPLIT.items() if rel.name in names)
        assert {(r["epoch"], r["source_id"], r["batch_id"]) for r in rows} == {
            (1, 1 if source == "a" else 2, reports[source].batch_id)
        }
        assert all(r["file"].endswith(f"/{rel.name}.csv") for r in rows)
        # In seq order, the rows are the file's lines in line order.
        stream = oracle_stream(rel)
        got = [(r["op"], tuple(r[c] for c in rel.column_names)) for r in sorted(rows, key=lambda r: r["seq"])]
        assert got == [(op, t) for _, op, t in stream]
        for row, (event, _, _) in zip(sorted(rows, key=lambda r: r["seq"]), stream, strict=True):
            stream_order.append((row["source_id"], row["seq"], event, rank))
        # The replay of the events is the stream's net result is the active rows.
        assert replay(spark, settings, rel) == oracle_net(rel) == oracle_active(rel), rel.name

    # seq is unique per source and follows (event-order number, relation rank, line).
    for source_id in (1, 2):
        mine = sorted(o for o in stream_order if o[0] == source_id)
        assert len({o[1] for o in mine}) == len(mine)
        assert [(o[2], o[3]) for o in mine] == sorted((o[2], o[3]) for o in mine)

    ledger.transition(home, 1, ledger.APPLIED)
    assert ledger.current_epoch(spark, settings) == 2
    results = fold_epoch(home, 1)
    assert all(r.folded for r in results.values())
    for rel in SCHEMA.relations:
        assert base(spark, settings, rel) == oracle_active(rel), rel.name
    assert results["lineitem"].tuples_changed == len(oracle_active(SCHEMA.relation("lineitem")))

    again = fold_epoch(home, 1)
    assert not any(r.folded for r in again.values())
    assert base(spark, settings, SCHEMA.relation("orders")) == oracle_active(SCHEMA.relation("orders"))
