"""Calculus -> SQL text, for people: the comment above each compiled map saying which
aggregate query it holds. Not used for evaluation."""

from __future__ import annotations

from cumulus.m3.ast import And, BinOp, Call, Cmp, Const, Expr, If, IsNull, Neg, Not, Or, Var
from cumulus.m3.printer import format_const
from cumulus.schema import Schema
from cumulus.sql.calculus import Query


def expr_sql(e: Expr, ref) -> str:
    if isinstance(e, Var):
        return ref(e.name)
    if isinstance(e, Const):
        return "NULL" if e.value is None else format_const(e).replace("e0", "")
    if isinstance(e, BinOp):
        return f"({expr_sql(e.left, ref)} {e.op} {expr_sql(e.right, ref)})"
    if isinstance(e, Neg):
        return f"-{expr_sql(e.operand, ref)}"
    if isinstance(e, Call):
        return f"EXTRACT({e.func} FROM {expr_sql(e.args[0], ref)})"
    if isinstance(e, If):
        return f"CASE WHEN {expr_sql(e.cond, ref)} THEN {expr_sql(e.then, ref)} ELSE {expr_sql(e.else_, ref)} END"
    if isinstance(e, Cmp):
        return f"{expr_sql(e.left, ref)} {e.op} {expr_sql(e.right, ref)}"
    if isinstance(e, IsNull):
        return f"{expr_sql(e.operand, ref)} IS {'NOT ' if e.negated else ''}NULL"
    if isinstance(e, Not):
        return f"NOT ({expr_sql(e.operand, ref)})"
    if isinstance(e, And):
        return f"{expr_sql(e.left, ref)} AND {expr_sql(e.right, ref)}"
    if isinstance(e, Or):
        return f"({expr_sql(e.left, ref)} OR {expr_sql(e.right, ref)})"
    raise TypeError(f"no SQL for {e!r}")


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
