"""Calculus -> SQL text: for people (the comment above each compiled map saying which
aggregate query it holds) and, `exact`, for Spark to evaluate (cumulus.engine.evaluate
builds its plans from this text: one call into the JVM per projection, not one per
column)."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

from cumulus.m3.ast import And, BinOp, Call, Cmp, Const, Expr, If, IsNull, Like, Neg, Not, Or, Var
from cumulus.m3.printer import format_const
from cumulus.schema import BOOL, DATE, DECIMAL, FLOAT, INT, STRING, Schema
from cumulus.sql.calculus import Query

SPARK_FUNCTIONS = {"YEAR": "year", "MONTH": "month", "DAY": "dayofmonth"}  # M3 Call -> Spark SQL
# M3's casts -> SQL (TO_DECIMAL takes an int, which DECIMAL(20,0) holds whole).
CASTS = {"TO_FLOAT": "DOUBLE", "TO_DECIMAL": "DECIMAL(20,0)"}


def expr_sql(e: Expr, ref, exact: bool = False) -> str:
    """`e` as SQL; `ref` names a variable. `exact`: Spark SQL whose types are the M3
    types (typed literals, YEAR/MONTH/DAY as BIGINT) and whose every operator is
    parenthesized; else SQL for people to read."""
    def sql(x: Expr) -> str:
        return expr_sql(x, ref, exact)

    if isinstance(e, Var):
        return ref(e.name)
    if isinstance(e, Const):
        if exact:
            return spark_literal(e)
        return "NULL" if e.value is None else format_const(e).replace("e0", "")
    if isinstance(e, BinOp) and e.op == "/" and exact:
        return quotient_sql(sql(e.left), sql(e.right))
    if isinstance(e, BinOp):
        return f"({sql(e.left)} {e.op} {sql(e.right)})"
    if isinstance(e, Neg):
        return f"(-{sql(e.operand)})" if exact else f"-{sql(e.operand)}"
    if isinstance(e, Call):
        if e.func in CASTS:
            return f"CAST({sql(e.args[0])} AS {CASTS[e.func]})"
        if e.func == "SUBSTR":  # (Spark's and DuckDB's alike for a start >= 1)
            return f"substring({', '.join(sql(a) for a in e.args)})"
        if exact:
            return f"CAST({SPARK_FUNCTIONS[e.func]}({sql(e.args[0])}) AS BIGINT)"
        return f"EXTRACT({e.func} FROM {sql(e.args[0])})"
    if isinstance(e, If):
        return f"CASE WHEN {sql(e.cond)} THEN {sql(e.then)} ELSE {sql(e.else_)} END"
    if isinstance(e, Cmp):
        return f"({sql(e.left)} {e.op} {sql(e.right)})" if exact else f"{sql(e.left)} {e.op} {sql(e.right)}"
    if isinstance(e, IsNull):
        text = f"{sql(e.operand)} IS {'NOT ' if e.negated else ''}NULL"
        return f"({text})" if exact else text
    if isinstance(e, Like):
        pattern = spark_literal(Const(e.pattern, STRING)) if exact else "'" + e.pattern.replace("'", "''") + "'"
        text = f"{sql(e.operand)} {'NOT ' if e.negated else ''}LIKE {pattern}"
        return f"({text})" if exact else text
    if isinstance(e, Not):
        return f"(NOT {sql(e.operand)})" if exact else f"NOT ({sql(e.operand)})"
    if isinstance(e, And):
        return f"({sql(e.left)} AND {sql(e.right)})" if exact else f"{sql(e.left)} AND {sql(e.right)}"
    if isinstance(e, Or):
        return f"({sql(e.left)} OR {sql(e.right)})"
    raise TypeError(f"no SQL for {e!r}")


def quotient_sql(a: str, b: str) -> str:
    """M3's `/` in Spark SQL: a double, +-inf for a zero divisor and NaN for 0 / 0 (as
    DuckDB and the interpreter; Spark's own would be NULL)."""
    x, y = f"CAST({a} AS DOUBLE)", f"CAST({b} AS DOUBLE)"
    return (f"(CASE WHEN {y} = 0 THEN CASE WHEN {x} > 0 THEN CAST('Infinity' AS DOUBLE) "
            f"WHEN {x} < 0 THEN CAST('-Infinity' AS DOUBLE) WHEN {x} = 0 OR isnan({x}) THEN CAST('NaN' AS DOUBLE) END "
            f"ELSE {x} / {y} END)")


def literal_as(value: str, type_: str):
    """A string constant compared with a DATE or an INT, read as Spark and DuckDB both
    cast it ('1998-09-02' a date, '7' an int), or None where the two could differ: only
    'yyyy-mm-dd' and at most nine digits are taken."""
    if type_ == DATE and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            return None
    if type_ == INT and re.fullmatch(r"-?\d{1,9}", value):
        return int(value)
    return None


LITERAL_SPELLING = {DATE: "expected 'yyyy-mm-dd'", INT: "expected at most nine digits"}


def spark_literal(c: Const) -> str:
    """A constant as a Spark SQL literal of its M3 type: BIGINT, DOUBLE, DECIMAL(p,s) with
    the constant's own digits (so products keep their exact scale), STRING, DATE, BOOLEAN."""
    v = c.value
    if v is None:
        return "NULL"
    if c.type == DECIMAL:
        text = format(Decimal(v), "f")
        whole, _, fraction = text.lstrip("-").partition(".")
        scale = len(fraction)
        precision = min(38, max(scale + 1, len(whole.lstrip("0")) + scale))
        return f"CAST('{text}' AS DECIMAL({precision},{scale}))"
    if c.type == INT:
        return f"CAST({int(v)} AS BIGINT)"  # type: ignore[call-overload]
    if c.type == FLOAT:
        return f"CAST('{float(v)!r}' AS DOUBLE)"  # type: ignore[arg-type]
    if c.type == STRING:
        return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"
    if c.type == DATE:
        return f"DATE '{v.isoformat()}'"  # type: ignore[attr-defined]
    if c.type == BOOL:
        return "TRUE" if v else "FALSE"
    raise TypeError(f"no Spark literal for a constant of type {c.type}")


def query_sql(q: Query, schema: Schema) -> str:
    """`SELECT keys, SUM(value) FROM ... WHERE ... GROUP BY keys` for a map's query."""
    seen: dict[str, int] = {}
    aliases = []
    for a in q.atoms:
        seen[a.relation] = seen.get(a.relation, 0) + 1
        aliases.append(a.relation if seen[a.relation] == 1 else f"{a.relation}{seen[a.relation]}")
    columns: dict[str, list[str]] = {}
    for alias, a in zip(aliases, q.atoms, strict=True):
        for col, var in zip(schema.relation(a.relation).column_names, a.vars, strict=True):
            columns.setdefault(var, []).append(f"{alias}.{col}")
    derived = {d.var: d for d in q.derived}

    def ref(var: str) -> str:
        if var in columns:
            return columns[var][0]
        return expr_sql(derived[var].expr, ref)

    where = [f"{cols[0]} = {c}" for cols in columns.values() for c in cols[1:]]
    where += [f"{expr_sql(d.expr, ref)} = {columns[d.var][0]}" for d in q.derived if d.var in columns]
    where += [expr_sql(c, ref) for _, c in q.conds]
    where += [expr_sql(c, ref) for c in q.cross]
    terms = []
    for m in q.value:
        parts = ([] if m.coef == Const(1, "int") else [expr_sql(m.coef, ref)]) + [expr_sql(f, ref) for _, f in m.factors]
        terms.append(" * ".join(parts) or "1")
    agg = "COUNT(*)" if terms == ["1"] else f"SUM({' + '.join(terms)})"
    keys = [ref(k) for k in q.keys]
    from_ = ", ".join(a.relation if a.relation == alias else f"{a.relation} {alias}" for a, alias in zip(q.atoms, aliases, strict=True))
    sql = f"SELECT {', '.join(keys + [agg])} FROM {from_}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    if keys:
        sql += " GROUP BY " + ", ".join(keys)
    return sql
