"""view_sql over the whole view corpus, without a JVM: the maps' entries come from the
reference interpreter replaying event streams (random ones with NULLs and deletes over
the simple schema, and the tiny DBToaster TPC-H stream), each entry is stored as two delta
rows (as main holds them before a close), the Spark SQL is transpiled to DuckDB by
sqlglot and run there; its rows must equal view_rows (the view semantics in Python).
Covers what the TPC-H home cannot: NULL group keys, SUM/AVG over nullable expressions
(non-NULL count maps), MIN/MAX of nullable columns."""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import sqlglot

from cumulus.ingest.dbtoaster import read_events
from cumulus.ingest.synthetic import generate_events
from cumulus.m3.interpreter import Interpreter
from cumulus.output import sort_key
from cumulus.schema import load_schema
from cumulus.sql.mapsql import view_sql
from cumulus.sql.views import Compilation, compile_views, view_rows
from cumulus.store.maps import VALUE_TYPES, key_slots, value_slot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "dbtoaster"
DUCK_TYPES = {"int": "BIGINT", "float": "DOUBLE", "decimal": "DECIMAL(38,6)", "string": "VARCHAR",
              "date": "DATE", "bool": "BOOLEAN"}

ARROW_TYPES = {"int": pa.int64(), "float": pa.float64(), "decimal": pa.decimal128(38, 6), "string": pa.string(),
               "date": pa.date32(), "bool": pa.bool_()}


def corpus(kind: str) -> list[tuple[str, str]]:
    return [(p.stem, p.read_text()) for p in sorted((FIXTURES / "views" / kind).glob("*.sql"))]


def load_maps(con: duckdb.DuckDBPyConnection, compiled: Compilation, interp: Interpreter) -> None:
    """The maps as the table `maps.entries` of delta rows, laid out as the engine writes it
    (cumulus/store/maps.py: key and value slots by type): every entry split in two rows."""
    con.execute("CREATE SCHEMA IF NOT EXISTS maps")
    infos = compiled.checked.maps.values()
    slots = sorted({(slot, t) for info in infos for slot, t in zip(key_slots(info), info.key_types, strict=True)})
    columns = [("map", "string"), *((value_slot(t), t) for t in VALUE_TYPES), *slots]
    con.execute(f"CREATE OR REPLACE TABLE maps.entries ({', '.join(f'{c} {DUCK_TYPES[t]}' for c, t in columns)})")
    for name, info in compiled.checked.maps.items():
        rows = []
        for key, value in interp.entries(name).items():
            if info.type == "float":
                rows.append((*key, value))
            else:
                rows += [(*key, value + 3), (*key, -3)]
        if rows:
            at = {slot: i for i, slot in enumerate(key_slots(info))} | {value_slot(info.type): info.arity}
            data = {"map": [name] * len(rows)} | {c: [r[at[c]] if c in at else None for r in rows] for c, _ in columns[1:]}
            batch = pa.table({c: pa.array(data[c], type=ARROW_TYPES[t]) for c, t in columns})  # noqa: F841 (read by DuckDB)
            con.execute("INSERT INTO maps.entries SELECT * FROM batch")


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return False
        if math.isnan(float(a)) or math.isnan(float(b)):  # a zero divided by zero, in both
            return math.isnan(float(a)) and math.isnan(float(b))
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return a is not None and b is not None and Decimal(a) == Decimal(b)
    return a == b


def check(compiled: Compilation, interp: Interpreter) -> int:
    con = duckdb.connect()
    load_maps(con, compiled, interp)
    checked = 0
    for name, plan in compiled.views.items():
        sql = sqlglot.transpile(view_sql(compiled, name), read="spark", write="duckdb")[0]
        got = sorted((tuple(r) for r in con.execute(sql).fetchall()), key=sort_key)
        want = sorted(view_rows(plan, interp.entries), key=sort_key)
        if plan.ordered:  # ORDER BY, LIMIT, OFFSET: the same rows in the same order
            got = [tuple(r) for r in con.execute(sql).fetchall()]
            want = view_rows(plan, interp.entries)
        assert len(got) == len(want), (name, got, want)
        for g, w in zip(got, want, strict=True):
            assert all(same(x, y) for x, y in zip(g, w, strict=True)), (name, g, w)
        checked += len(want)
    return checked


def replay(compiled: Compilation, events, checkpoints: int) -> int:
    interp = Interpreter(compiled.checked)
    marks = {len(events) * k // checkpoints for k in range(1, checkpoints + 1)}
    rows = 0
    for i, event in enumerate(events, 1):
        interp.process(event)
        if i in marks:
            rows += check(compiled, interp)
    return rows


# Aggregates of nullable columns, grouped by a nullable column, and without GROUP BY.
NULLABLE_VIEWS = [
    ("nullable_r", "SELECT r.a, AVG(r.b) AS avg_b, SUM(r.b) AS sum_b, COUNT(r.b) AS n_b, "
                   "MIN(r.b) AS lo_b, MAX(r.b) AS hi_b, COUNT(*) AS n FROM r GROUP BY r.a"),
    ("nullable_t", "SELECT AVG(t.d) AS avg_d, SUM(t.d) AS sum_d, MIN(t.c) AS lo_c, MAX(t.d) AS hi_d, "
                   "COUNT(t.d) AS n_d FROM t"),
]


def with_nulls(events):
    """Every value 1 becomes NULL, in inserts and deletes alike (deletes still match)."""
    return [replace(e, values=tuple(None if v == 1 else v for v in e.values)) for e in events]


@pytest.mark.parametrize("seed", [4, 5])
def test_simple_corpus_with_nulls_and_deletes(seed: int) -> None:
    schema = load_schema(FIXTURES / "schemas" / "simple.sql")
    compiled = compile_views(schema, corpus("simple") + NULLABLE_VIEWS)
    assert any(c.nonnull for p in compiled.views.values() for c in p.columns)  # nullable sums exist
    events = with_nulls(generate_events(schema, 500, seed=seed, domain=4, delete_ratio=0.35))
    assert replay(compiled, events, checkpoints=3) > 0


def test_tpch_corpus_over_the_dbtoaster_stream() -> None:
    schema = load_schema(FIXTURES / "schemas" / "tpch.sql")
    compiled = compile_views(schema, corpus("tpch") + corpus("constructs") + corpus("tpch_queries"))
    kinds = {c.kind for p in compiled.views.values() for c in p.columns}
    assert {"sum", "avg", "count", "min", "max"} <= kinds and any(not p.group for p in compiled.views.values())
    events = read_events(DATA / "tpch" / "tiny", schema)
    assert replay(compiled, events, checkpoints=1) > 0
