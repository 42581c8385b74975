"""`cumulus explain`: how each view is maintained, in words. For a view the compiler
accepts: its groups, the conditions kept as a filter factor after the join, how each
column is kept (a map updated per event) or computed at read time (AVG from a sum and a
count, MIN/MAX and COUNT/SUM/AVG(DISTINCT) from a count per value, expressions over
aggregates, HAVING, ORDER BY, LIMIT/OFFSET), the aggregates kept only for that, the maps
it reads and the maps kept for it through deltas, shared ones marked with the views they
serve. For a refused view: every clause that blocks it (WITH, subqueries, EXISTS, window
functions, SELECT DISTINCT, QUALIFY) with its position, or else the expression the
compiler refused first; nothing of it is maintained."""

from __future__ import annotations

from collections.abc import Sequence

from cumulus.config import DEFAULT_DIALECT
from cumulus.errors import PositionedError, UnsupportedSQLError
from cumulus.schema import Schema
from cumulus.sql import readtime
from cumulus.sql.estimate import Statistics, describe, estimate
from cumulus.sql.frontend import clause_refusals
from cumulus.sql.readtime import Ref
from cumulus.sql.views import Compilation, ViewColumn, ViewPlan, compile_views

KINDS = {"sum": "SUM", "count": "COUNT", "avg": "AVG", "min": "MIN", "max": "MAX", "count_distinct": "COUNT(DISTINCT)",
         "sum_distinct": "SUM(DISTINCT)", "avg_distinct": "AVG(DISTINCT)"}


def explain(schema: Schema, views: Sequence[tuple[str, str]], dialect: str = DEFAULT_DIALECT,
            stats: Statistics | None = None) -> str:
    """The explanation of every view (name, SQL); the accepted ones compiled together, in
    order, so sharing is as a home that registers them in that order would have it.
    `stats`: the base relations' statistics, for each map's estimated entries."""
    refused: dict[str, list[PositionedError]] = {}
    for name, sql in views:
        try:
            compile_views(schema, [(name, sql)], dialect)
        except PositionedError as exc:
            refused[name] = clause_refusals(sql, schema, name, dialect) or [exc]
    accepted = [(n, s) for n, s in views if n not in refused]
    compiled = compile_views(schema, accepted, dialect) if accepted else None
    sizes = estimate(compiled, stats) if compiled is not None and stats is not None else {}
    parts = []
    for name, _ in views:
        if name in refused:
            blocks = "".join(f"  {_indent(str(e))}\n" for e in refused[name])
            if all(isinstance(e, UnsupportedSQLError) for e in refused[name]):
                parts.append(f"view {name}: not incremental ({len(refused[name])} construct(s) outside the incremental "
                             "SQL); `view add` keeps it by full refresh (recomputed over base.* at each close) unless "
                             f"full_refresh = \"refuse\"\n{blocks}")
            else:
                parts.append(f"view {name}: refused ({len(refused[name])} error(s)), nothing is maintained\n{blocks}")
        else:
            assert compiled is not None
            text = _explain_view(compiled, compiled.views[name])
            if name in sizes:
                text += "\n".join(describe(sizes[name], stats)) + "\n"  # type: ignore[arg-type]
            parts.append(text)
    return "\n".join(parts)


def _explain_view(compiled: Compilation, plan: ViewPlan) -> str:
    sharing = compiled.sharing()
    needed = sorted(m for m, users in sharing.items() if plan.name in users)
    lines = [f"view {plan.name}: maintained incrementally ({len(needed)} maps, updated by each event's deltas)"]
    lines += _described(plan)
    nested = {m for _, d in plan.relations for m in d.maps}
    read = [m for m in plan.maps if m not in nested]
    lines.append(f"  reads at query time: {', '.join(read)}")
    through = [m for m in needed if m not in read and m not in nested]
    if nested:
        lines.append(f"  read at each close for its nested queries: {', '.join(m for m in plan.maps if m in nested)}")
    if through:
        lines.append(f"  kept for it through deltas: {', '.join(through)}")
    shared = [f"{m} (with {', '.join(u for u in sharing[m] if u != plan.name)})" for m in needed if len(sharing[m]) > 1]
    lines.append(f"  shared with other views: {', '.join(shared)}" if shared else "  shared with other views: none")
    return "\n".join(lines) + "\n"


def _described(plan: ViewPlan, indent: str = "  ") -> list[str]:
    """Its groups, filter factor, columns (kept or computed at read time), HAVING, ORDER
    BY, LIMIT/OFFSET, and the views kept for its subqueries, each line indented."""
    out: list[str] = []
    groups = [c.name for c in plan.columns if c.kind == "group"]
    if plan.bag:
        out.append(f"  rows (a SELECT without aggregates, as a bag): each ({', '.join(groups)}) as many times as its "
                   f"count in {plan.count.map}")
    else:
        out.append(f"  groups: {', '.join(groups)}; a group is a row while its count in {plan.count.map} is not zero"
                   if groups else f"  one row (no GROUP BY); its count is {plan.count.map}")
    for text in plan.filter_text:
        out.append(f"  after the join: {text}, as a filter factor ({plan.filter_terms} products of "
                     "single-relation conditions) in every map's value")
    by_name = {c.name: c for c in plan.columns}
    for name, e in plan.final.select:
        if isinstance(e, Ref) and by_name[e.name].kind == "group":
            continue
        if isinstance(e, Ref):
            out.append(f"  {name}: {_column(by_name[e.name], plan.count.map)}")
        else:
            out.append(f"  {name}: at read time: {readtime.text(e)}")
    for c in plan.columns:
        if c.hidden and c.kind != "group":
            out.append(f"  {c.name} (not selected; for read-time work): {_column(c, plan.count.map)}")
    f = plan.final
    if f.having is not None:
        out.append(f"  HAVING at read time: keeps the groups where {readtime.text(f.having)}")
    if f.order:
        keys = ", ".join(f"{readtime.text(o.expr)} {'DESC' if o.desc else 'ASC'} NULLS {'FIRST' if o.nulls_first else 'LAST'}"
                         for o in f.order)
        out.append(f"  ORDER BY at read time: {keys} (ties by the group key)")
    if f.limit is not None or f.offset:
        out.append(f"  at read time: {'LIMIT ' + str(f.limit) if f.limit is not None else ''}"
                     f"{' OFFSET ' + str(f.offset) if f.offset else ''}".replace(":  ", ": "))
    for sub in plan.subviews:
        out.append(f"  subquery {sub.name}: maintained as a view of its own, its rows read at read time")
        out += ["  " + line for line in _described(sub)]
    for name, d in plan.relations:
        columns = ", ".join(n for n, _ in d.final.select)
        out.append(f"  nested query {name}({columns}): a derived relation joined like a relation, maintained as a "
                   "view of its own; the groups an epoch changed are its events at the close")
        out += ["  " + line for line in _described(d)]
        for sign, other in d.others:
            out.append(f"  and the rows of {other.name} (UNION ALL)" if sign > 0 else
                       f"  less the rows of {other.name} (an anti-join: each outer value once, less those the "
                       "subquery rules out)")
            out += ["  " + line for line in _described(other)]
    return [indent + line[2:] for line in out]


def _column(c: ViewColumn, count: str) -> str:
    kind = KINDS[c.kind]
    if c.values is None:
        return f"{kind} of a group key, at read time from the group's key"
    if c.kind == "count":
        return f"COUNT, kept in {c.values.map}"
    if c.kind == "sum":
        nonnull = f"; NULL while its non-NULL count in {c.nonnull.map} is zero" if c.nonnull else ""
        return f"SUM, kept in {c.values.map} ({c.type}){nonnull}"
    if c.kind == "avg":
        counted = f"the non-NULL count in {c.nonnull.map}" if c.nonnull else f"the group's count in {count}"
        return f"AVG, at read time: the sum in {c.values.map} / {counted}"
    if c.kind.endswith("_distinct"):
        what = {"count_distinct": "the number", "sum_distinct": "the sum", "avg_distinct": "the mean"}[c.kind]
        return (f"{kind}, at read time: {what} of the values with a non-zero count in {c.values.map} "
                "(a count per value, exact under deletes)")
    return (f"{kind}, at read time: the {'least' if c.kind == 'min' else 'greatest'} value with a non-zero count "
            f"in {c.values.map} (a count per value, exact under deletes)")


def _indent(text: str) -> str:
    return text.replace("\n", "\n  ")
