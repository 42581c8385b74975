"""The independent oracle of the tests: DuckDB runs a view's SQL over the tuples alive at
a point of the stream. Nothing here shares code with the compiler or the interpreter."""

from __future__ import annotations

import math
from decimal import Decimal

import duckdb
import pyarrow as pa

from cumulus.schema import Schema
from cumulus.sql.views import view_rows

_ARROW = {
    "int": pa.int64(),
    "float": pa.float64(),
    "string": pa.string(),
    "date": pa.date32(),
    "bool": pa.bool_(),
}


def _arrow_type(col) -> pa.DataType:
    if col.type == "decimal":
        return pa.decimal128(col.precision or 38, col.scale if col.scale is not None else 10)
    return _ARROW[col.type]


class DuckOracle:
    """One DuckDB database holding a snapshot of every relation (loaded in bulk)."""

    def __init__(self, schema: Schema, rows: dict[str, list[tuple]]):
        self.con = duckdb.connect()
        for rel in schema.relations:
            data = rows.get(rel.name, [])
            arrays = [
                pa.array([r[i] for r in data], type=_arrow_type(c)) for i, c in enumerate(rel.columns)
            ]
            table = pa.Table.from_arrays(arrays, names=list(rel.column_names))  # noqa: F841
            self.con.register(f"_{rel.name}_arrow", table)
            self.con.execute(f"CREATE TABLE {rel.name} AS SELECT * FROM _{rel.name}_arrow")
            self.con.unregister(f"_{rel.name}_arrow")

    def query(self, sql: str, dialect: str = "spark") -> list[tuple]:
        """Run a view's SQL, written in `dialect` (the compiler's default: Spark's),
        transpiled to DuckDB's by sqlglot unless it is DuckDB's already."""
        if dialect != "duckdb":
            import sqlglot

            (sql,) = sqlglot.transpile(sql, read=dialect, write="duckdb")
        return self.con.execute(sql).fetchall()


def duckdb_result(schema: Schema, rows: dict[str, list[tuple]], sql: str, dialect: str = "spark") -> list[tuple]:
    return DuckOracle(schema, rows).query(sql, dialect)


def same_value(a, b, inexact: bool) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float, Decimal)) and isinstance(b, (int, float, Decimal)):
        if inexact or isinstance(a, float) or isinstance(b, float):
            return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
        return Decimal(a) == Decimal(b)  # exact: sums of decimals must match to the digit
    return a == b


def assert_view_equals_sql(compiled, name: str, interp, oracle: DuckOracle, where: str) -> int:
    """The view's rows from `interp.entries` (any map reader) equal DuckDB's for its SQL."""
    plan = compiled.views[name]
    got = view_rows(plan, interp.entries)
    want = oracle.query(plan.sql, plan.dialect)
    group_cols = [i for i, c in enumerate(plan.columns) if c.kind == "group"]
    inexact = [c.kind == "avg" for c in plan.columns]

    def key(row):
        return tuple(repr(row[i].normalize() if isinstance(row[i], Decimal) else row[i]) for i in group_cols)

    got_by, want_by = sorted(got, key=key), sorted(want, key=key)
    assert len(got_by) == len(want_by), f"{name} at {where}: {len(got_by)} rows, DuckDB has {len(want_by)}"
    for g, w in zip(got_by, want_by, strict=True):
        ok = all(same_value(a, b, inexact[i]) for i, (a, b) in enumerate(zip(g, w, strict=True)))
        assert ok, f"{name} at {where}: cumulus {g} != duckdb {w}"
    return len(got)
