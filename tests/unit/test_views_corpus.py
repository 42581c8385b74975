"""The view corpus against an independent engine: every view of tests/fixtures/views is
compiled, its program replayed by the reference interpreter over an event stream with
inserts and deletes, and its rows compared at several points of the stream with DuckDB
running the same SQL over the tuples alive at that point. The corpus is compiled in both
SQL dialects a home may declare (sql_dialect): Spark's (the default; DuckDB runs the
views transpiled by sqlglot) and DuckDB's (run as written: no shared parser in between)."""

from __future__ import annotations

from pathlib import Path

import pytest
from oracle import DuckOracle, assert_view_equals_sql

from cumulus.ingest.dbtoaster import read_events
from cumulus.ingest.synthetic import generate_events
from cumulus.schema import load_schema
from cumulus.sql.derived import Maintainer
from cumulus.sql.views import Compilation, compile_views

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "dbtoaster"


def corpus(kind: str) -> list[tuple[str, str]]:
    return [(p.stem, p.read_text()) for p in sorted((FIXTURES / "views" / kind).glob("*.sql"))]


def replay_and_check(compiled: Compilation | list[Compilation], events, checkpoints: int) -> dict[str, int]:
    """Replay `events` and check every view of each compilation against DuckDB at
    `checkpoints` points; the rows seen per view name. Compilations of one corpus in
    several dialects whose M3 programs are equal share one replay (the interpreter's
    maps are then the same; each dialect's view plans and SQL are checked on them)."""
    compilations = compiled if isinstance(compiled, list) else [compiled]
    replays: list[tuple[Maintainer, list[Compilation]]] = []
    for c in compilations:
        shared = next((group for interp, group in replays if group[0].program == c.program), None)
        if shared is None:
            replays.append((Maintainer(c), [c]))
        else:
            shared.append(c)
    alive: dict[str, list[tuple]] = {}
    marks = {len(events) * k // checkpoints for k in range(1, checkpoints + 1)}
    rows_seen: dict[str, int] = {}
    for i, e in enumerate(events, 1):
        for interp, _ in replays:
            interp.process(e)
        bag = alive.setdefault(e.relation, [])
        if e.sign == "+":
            bag.append(e.values)
        else:
            bag.remove(e.values)
        if i in marks:
            oracle = DuckOracle(compilations[0].schema, alive)
            for interp, group in replays:
                for c in group:
                    for name in c.views:
                        n = assert_view_equals_sql(c, name, interp, oracle, f"event {i}/{len(events)}")
                        rows_seen[name] = rows_seen.get(name, 0) + n
    return rows_seen


DIALECT_NAMES = ("spark", "duckdb")
DIALECTS = pytest.mark.parametrize("dialect", DIALECT_NAMES)


@pytest.mark.slow
def test_tpch_corpus_over_the_dbtoaster_stream_with_deletes() -> None:
    """In both dialects (one replay when their programs are equal, as they should be)."""
    schema = load_schema(FIXTURES / "schemas" / "tpch.sql")
    views = corpus("tpch")
    compiled = [compile_views(schema, views, dialect) for dialect in DIALECT_NAMES]
    events = read_events(DATA / "tpch" / "standard_del", schema)
    assert sum(e.sign == "-" for e in events) > 5000  # the stream really deletes
    rows = replay_and_check(compiled, events, checkpoints=4)
    empty = [n for n, r in rows.items() if r == 0]
    assert not empty, f"views with no rows at any checkpoint test nothing: {empty}"


@DIALECTS
def test_simple_corpus_over_the_tiny_dbtoaster_data(dialect: str) -> None:
    schema = load_schema(FIXTURES / "schemas" / "simple.sql")
    compiled = compile_views(schema, corpus("simple"), dialect)
    events = read_events(DATA / "simple" / "tiny", schema)
    replay_and_check(compiled, events, checkpoints=3)


@pytest.mark.parametrize(("seed", "dialect"), [(1, "spark"), (2, "duckdb"), (3, "spark")])
def test_simple_corpus_over_random_streams_with_deletes_and_nulls(seed: int, dialect: str) -> None:
    schema = load_schema(FIXTURES / "schemas" / "simple.sql")
    compiled = compile_views(schema, corpus("simple"), dialect)
    events = generate_events(schema, 600, seed=seed, domain=4, delete_ratio=0.35)
    replay_and_check(compiled, events, checkpoints=3)


def test_corpus_is_large_and_covers_every_join_shape() -> None:
    names = [n for n, _ in corpus("tpch") + corpus("simple")]
    assert len(names) >= 25
    for shape in ("chain", "star", "self_join", "triangle", "cross_product"):
        assert any(shape in n for n in names), shape


def test_the_dialect_decides_what_quotes_mean() -> None:
    """Spark's dialect (the default) takes backquoted names, as Spark SQL does; DuckDB's
    refuses them, naming where; a double-quoted word is a string in Spark, a name in DuckDB."""
    from cumulus.errors import ConfigError, UnsupportedSQLError

    schema = load_schema(FIXTURES / "schemas" / "simple.sql")
    backquoted = "SELECT `r`.`a`, COUNT(*) AS n FROM r GROUP BY `r`.`a`"
    assert compile_views(schema, [("v", backquoted)]).views["v"].column_names == ("a", "n")
    with pytest.raises(UnsupportedSQLError, match="cannot parse"):
        compile_views(schema, [("v", backquoted)], "duckdb")
    quoted = 'SELECT "a", COUNT(*) AS n FROM r GROUP BY "a"'
    assert compile_views(schema, [("v", quoted)], "duckdb").views["v"].columns[0].kind == "group"
    events = generate_events(schema, 60, seed=5, domain=3, delete_ratio=0.3)
    for dialect in ("spark", "duckdb"):  # Spark: one group, the string 'a'; DuckDB: a group per r.a
        compiled = compile_views(schema, [("v", quoted)], dialect)
        rows = replay_and_check(compiled, events, checkpoints=2)["v"]  # equal to DuckDB at both points
        assert rows == 2 if dialect == "spark" else rows > 2, (dialect, rows)
    with pytest.raises(ConfigError, match="sql_dialect must be one of spark, duckdb"):
        compile_views(schema, [("v", backquoted)], "oracle")
