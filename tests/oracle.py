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


def alive_after(events, alive: dict[str, list[tuple]] | None = None) -> dict[str, list[tuple]]:
    """The tuples alive after the events (a bag per relation), from `alive` on: what the
    oracle runs a view over."""
    alive = {} if alive is None else alive
    for e in events:
        bag = alive.setdefault(e.relation, [])
        bag.append(e.values) if e.sign == "+" else bag.remove(e.values)
    return alive


def duckdb_result(schema: Schema, rows: dict[str, list[tuple]], sql: str, dialect: str = "spark") -> list[tuple]:
    return DuckOracle(schema, rows).query(sql, dialect)


def same_value(a, b, inexact: bool) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float, Decimal)) and isinstance(b, (int, float, Decimal)):
        if inexact or isinstance(a, float) or isinstance(b, float):
            if math.isnan(float(a)) or math.isnan(float(b)):
                return math.isnan(float(a)) and math.isnan(float(b))
            return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
        return Decimal(a) == Decimal(b)  # exact: sums of decimals must match to the digit
    return a == b


def _canon(v):
    """A value as a hashable key that equal answers share (floats to 9 digits, decimals normalized)."""
    if isinstance(v, float):
        return ("n", "nan") if math.isnan(v) else ("n", f"{v:.9g}")
    if isinstance(v, (int, Decimal)) and not isinstance(v, bool):
        return ("n", f"{float(v):.9g}") if abs(v) > 10**15 else ("n", format(Decimal(v).normalize(), "f"))
    return ("v", v)


def ordered_sql(sql: str, dialect: str) -> tuple[str, str, int, int] | None:
    """For a view with ORDER BY, LIMIT or OFFSET: DuckDB SQL giving every row of the view
    without LIMIT/OFFSET, each followed by its ORDER BY keys, in order; the plain query; and
    the number of ORDER BY keys; the OFFSET. None for a view without those clauses."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read=dialect)
    if not (tree.args.get("order") or tree.args.get("limit") or tree.args.get("offset")):
        return None
    items = list(tree.expressions)
    aliases = {i.alias.lower(): i.this for i in items if isinstance(i, exp.Alias)}
    keys = []
    for o in tree.args["order"].expressions if tree.args.get("order") else []:
        node = o.this
        if isinstance(node, exp.Literal) and not node.is_string:
            item = items[int(node.this) - 1]
            node = item.this if isinstance(item, exp.Alias) else item
        elif isinstance(node, exp.Column) and not node.table and node.name.lower() in aliases:
            node = aliases[node.name.lower()]
        keys.append(node.copy())
    full = tree.copy()
    full.set("limit", None)
    full.set("offset", None)
    for i, k in enumerate(keys):
        full.expressions.append(exp.alias_(k, f"__order_key{i}"))
    duck = sqlglot.transpile(full.sql(dialect=dialect), read=dialect, write="duckdb")[0]
    offset = tree.args.get("offset")
    skip = int(offset.expression.this) if offset is not None else 0
    return duck, sqlglot.transpile(sql, read=dialect, write="duckdb")[0], len(keys), skip


def assert_view_equals_sql(compiled, name: str, interp, oracle: DuckOracle, where: str) -> int:
    """The view's rows from `interp.entries` (any map reader) equal DuckDB's for its SQL.
    With ORDER BY / LIMIT / OFFSET: the rows come in DuckDB's order of the ORDER BY keys,
    and rows tied on every key may be any of DuckDB's rows with those keys."""
    plan = compiled.views[name]
    got = view_rows(plan, interp.entries)
    ordered = ordered_sql(plan.sql, plan.dialect)
    if ordered is not None:
        return _assert_ordered(name, got, oracle, ordered, where)
    want = oracle.query(plan.sql, plan.dialect)
    group_cols = list(plan.group_positions())
    types = plan.output_types()
    inexact = [t == "float" for t in types]

    def key(row):
        return tuple(repr(row[i].normalize() if isinstance(row[i], Decimal) else row[i]) for i in group_cols)

    if len(group_cols) < max(len(plan.group), len({c.name for c in plan.columns if c.kind == "group"})):
        key = _canon_row  # noqa: F811 (a group key is not selected as it is: match whole rows)
    got_by, want_by = sorted(got, key=key), sorted(want, key=key)
    assert len(got_by) == len(want_by), f"{name} at {where}: {len(got_by)} rows, DuckDB has {len(want_by)}"
    for g, w in zip(got_by, want_by, strict=True):
        ok = all(same_value(a, b, inexact[i]) for i, (a, b) in enumerate(zip(g, w, strict=True)))
        assert ok, f"{name} at {where}: cumulus {g} != duckdb {w}"
    return len(got)


def _canon_row(row) -> tuple:
    return tuple(repr(_canon(v)) for v in row)


def _assert_ordered(name: str, got: list[tuple], oracle: DuckOracle, ordered, where: str) -> int:
    full_sql, plain_sql, nkeys, skip = ordered
    want = oracle.con.execute(plain_sql).fetchall()
    assert len(got) == len(want), f"{name} at {where}: {len(got)} rows, DuckDB has {len(want)}"
    full = oracle.con.execute(full_sql).fetchall()
    width = len(full[0]) - nkeys if full else 0
    pool: dict[tuple, list[tuple]] = {}
    for row in full:
        pool.setdefault(_canon_row(row[:width]), []).append(tuple(_canon(v) for v in row[width:]))
    keys_got = []
    for row in got:
        candidates = pool.get(_canon_row(row))
        assert candidates, f"{name} at {where}: cumulus row {row} is not a row of DuckDB's answer"
        keys_got.append(candidates.pop(0))
    keys_full = [tuple(_canon(v) for v in r[width:]) for r in full][skip:skip + len(want)]
    assert keys_got == keys_full, f"{name} at {where}: order keys {keys_got[:5]}... are not DuckDB's {keys_full[:5]}..."
    for w, r in zip(want, got, strict=True):
        assert len(w) == len(r), f"{name} at {where}: {len(r)} columns, DuckDB has {len(w)}"
    return len(got)
