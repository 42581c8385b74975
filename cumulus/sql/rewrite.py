"""Rewrites of a view's sqlglot tree before binding (cumulus/sql/frontend.py): subqueries
in FROM without aggregates merged into the view (TPC-H Q7, Q9), and a conjunct repeated in
every disjunct of an OR hoisted out of it (Q19 repeats its join); sqlglot-level helpers."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from sqlglot import exp

AGGREGATES = (exp.Sum, exp.Count, exp.Avg, exp.Min, exp.Max)
CMP = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


def has_aggregate(e: exp.Expression) -> bool:
    return any(isinstance(n, AGGREGATES) for n in e.walk())


def merge_from_subqueries(select: exp.Select, columns_of=lambda relation: ()) -> exp.Select:
    """FROM (SELECT ... FROM ... WHERE ...) AS alias, a subquery without aggregates,
    GROUP BY, DISTINCT, ORDER BY or LIMIT (TPC-H Q7, Q9), merged into the outer SELECT:
    its relations join the outer FROM, its WHERE the outer WHERE, and every outer
    reference to one of its columns becomes the expression behind it. The subquery's own
    column names are qualified first (by the one relation of its FROM that has them,
    `columns_of(relation)`), so that none becomes ambiguous among the outer relations.
    Other subqueries stay, for clause_refusals to refuse."""
    sources = [select.args["from"]] if select.args.get("from") else []
    sources += list(select.args.get("joins") or [])
    for holder in sources:
        sub = holder.this
        if not isinstance(sub, exp.Subquery) or not isinstance(sub.this, exp.Select) or not _mergeable(sub.this):
            continue
        if sub.args.get("alias") is not None and sub.args["alias"].columns:
            continue  # its columns renamed: kept as a derived relation (cumulus/sql/nested.py)
        inner = _qualified(merge_from_subqueries(sub.this, columns_of), columns_of)
        _renamed_apart(inner, {(t.alias_or_name or "").lower() for t in from_items(select) if t is not sub})
        alias = (sub.alias or "").lower()
        names: dict[str, exp.Expression] = {}
        for item in inner.expressions:
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Star):
                break
            names[(item.alias if isinstance(item, exp.Alias) else item.output_name).lower()] = node
        else:
            own = {i.alias.lower() for i in select.expressions if isinstance(i, exp.Alias)}
            order = select.args.get("order")
            for col in [c for c in select.find_all(exp.Column) if not inside(c, sub)]:
                name, qualifier = col.name.lower(), (col.table or "").lower()
                if not qualifier and name in own and order is not None and inside(col, order):
                    continue  # ORDER BY names the outer SELECT's item first
                if not qualifier and col.find_ancestor(exp.Select) is not select:
                    continue  # an unqualified name in a subquery of the outer SELECT is that subquery's
                if (qualifier == alias or not qualifier) and name in names:
                    replacement = names[name].copy()
                    if col.parent is not None and isinstance(col.parent, exp.Select) and col.arg_key == "expressions":
                        replacement = exp.alias_(replacement, col.name)  # keep the item's name
                    col.replace(replacement)
            conds = [c for c in [inner.args.get("where") and inner.args["where"].this] if c is not None]
            if isinstance(holder, exp.Join) and holder.args.get("on") is not None:
                conds.append(holder.args["on"])
            tables = [exp.Join(this=inner.args["from"].this)] + list(inner.args.get("joins") or [])
            joins = [j for j in select.args.get("joins") or [] if j is not holder]
            if isinstance(holder, exp.From):
                first = tables.pop(0).this
                select.set("from", exp.From(this=first))
            select.set("joins", joins + tables)
            where = select.args.get("where")
            for c in conds:
                where = exp.Where(this=c if where is None else exp.And(this=where.this, expression=c))
            if where is not None:
                select.set("where", where)
    return select


def _renamed_apart(inner: exp.Select, taken: set[str]) -> None:
    """The relations of `inner`'s FROM whose alias the outer FROM already has (a CTE or
    a subquery over the same relation twice: FROM (SELECT .. FROM r) x, (SELECT .. FROM r)
    y) renamed `<alias>_<n>`, with the columns that name them. In place."""
    tables = from_items(inner)
    used = taken | {(t.alias_or_name or "").lower() for t in tables}
    for t in tables:
        old = (t.alias_or_name or "").lower()
        if old not in taken:
            continue
        n = 2
        while f"{old}_{n}" in used:
            n += 1
        new = f"{old}_{n}"
        used.add(new)
        if t.args.get("alias") is not None:
            t.args["alias"].set("this", exp.to_identifier(new))
        else:
            t.set("alias", exp.TableAlias(this=exp.to_identifier(new)))
        for col in list(inner.find_all(exp.Column)):
            if (col.table or "").lower() == old and not _shadowed(col, inner, old):
                col.set("table", exp.to_identifier(new))


def _shadowed(col: exp.Column, top: exp.Select, alias: str) -> bool:
    """Whether a SELECT between `col` and `top` has a relation named `alias` of its own."""
    return any(isinstance(n, exp.Select) and n is not top and alias in {(t.alias_or_name or "").lower() for t in from_items(n)}
               for n in _ancestors(col, top))


def _qualified(inner: exp.Select, columns_of) -> exp.Select:
    """`inner` with each unqualified column name of its own (not of a subquery within)
    qualified by the relation of its FROM that has it: the only one, or the one whose
    columns (`columns_of`) hold the name. A name no relation or several hold stays. In place."""
    rels = relations_in_from(inner)
    for col in list(inner.find_all(exp.Column)):
        if col.table or isinstance(col.this, exp.Star):
            continue
        if any(isinstance(n, (exp.Select, exp.Subquery)) for n in _ancestors(col, inner) if n is not inner):
            continue
        have = [a for a, r in rels if col.name.lower() in columns_of(r)] if len(rels) > 1 else [a for a, _ in rels]
        if len(have) == 1:
            col.set("table", exp.to_identifier(have[0]))
    return inner


def _mergeable(inner: exp.Select) -> bool:
    """A subquery in FROM that merge_from_subqueries can merge: relations, joins and filters only."""
    blocked = ("group", "having", "distinct", "order", "limit", "offset", "with", "qualify")
    return (
        not any(inner.args.get(k) for k in blocked)
        and inner.args.get("from") is not None
        and not any(isinstance(n, (*AGGREGATES, exp.Window)) for i in inner.expressions for n in i.walk())
    )


def inside(node: exp.Expression, ancestor: exp.Expression) -> bool:
    p = node.parent
    while p is not None:
        if p is ancestor:
            return True
        p = p.parent
    return False


def parts(e: exp.Expression, kind: type) -> list[exp.Expression]:
    """The operands of a chain of ANDs (or ORs), parentheses removed."""
    while isinstance(e, exp.Paren):
        e = e.this
    return parts(e.this, kind) + parts(e.expression, kind) if isinstance(e, kind) else [e]


def hoisted(c: exp.Expression) -> list[exp.Expression]:
    """An OR whose every disjunct holds the same conjunct (TPC-H Q19 repeats its join in
    each): that conjunct, then the OR of what is left (the OR itself when nothing is
    common; nothing when a disjunct is all common, the OR being true then)."""
    disjuncts = parts(c, exp.Or)
    if len(disjuncts) < 2:
        return [c]
    conjuncts = [parts(d, exp.And) for d in disjuncts]
    texts = [{p.sql() for p in ps} for ps in conjuncts]
    common = [p for p in conjuncts[0] if all(p.sql() in t for t in texts[1:])]
    if not common:
        return [c]
    done = {p.sql() for p in common}
    rest = [[p for p in ps if p.sql() not in done] for ps in conjuncts]
    if any(not r for r in rest):
        return common
    ors = [functools.reduce(lambda a, b: exp.And(this=a, expression=b), r) for r in rest]
    return common + [functools.reduce(lambda a, b: exp.Or(this=a, expression=b), ors)]


def ident_stem(alias: str) -> str:
    """A variable stem from a SELECT alias: letters, digits and underscores."""
    return re.sub(r"[^a-z0-9_]+", "_", alias.lower()).strip("_") or "x"


def construct(e: exp.Expression) -> str:
    """What a node is, in the user's words: a function's own name (sqlglot calls the
    ones it does not know ANONYMOUS), else the node's kind."""
    return f"the function {e.name.upper()}" if isinstance(e, exp.Anonymous) else e.key.upper()


def from_items(select: exp.Select) -> list[exp.Expression]:
    """The FROM clause's items (tables and subqueries) and its joins', in order."""
    holders = ([select.args["from"]] if select.args.get("from") else []) + list(select.args.get("joins") or [])
    return [h.this for h in holders]


def relations_in_from(select: exp.Select) -> list[tuple[str, str]]:
    """(alias, relation name) of the FROM clause's tables, in order (subqueries skipped)."""
    return [((t.alias_or_name or t.name).lower(), t.name.lower())
            for t in from_items(select) if isinstance(t, exp.Table) and t.name]


def expand_stars(select: exp.Select, columns_of, merged: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    """`*` and `alias.*` in the SELECT list as the columns they stand for, each named by
    its column (a name taken twice gets a suffix: b, b_2, as a result needs distinct
    names; a column NATURAL JOIN or USING merged (`merged`) comes once, from its first
    relation). `columns_of(relation)`: its column names. In place."""
    sources = relations_in_from(select)
    items: list[exp.Expression] = []
    for item in select.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Star):
            seen: set[str] = set()
            for alias, rel in sources:
                for c in columns_of(rel):
                    if c in merged and c in seen:
                        continue
                    seen.add(c)
                    items.append(exp.column(c, table=alias))
        elif isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
            alias = node.table.lower()
            rel = next((r for a, r in sources if a == alias), None)
            items += [exp.column(c, table=alias) for c in columns_of(rel)] if rel else [item]
        else:
            items.append(item)
    if len(items) == len(select.expressions) and all(a is b for a, b in zip(items, select.expressions, strict=True)):
        return
    taken: dict[str, int] = {}
    named = []
    for item in items:
        name = (item.alias if isinstance(item, exp.Alias) else item.output_name).lower()
        taken[name] = taken.get(name, 0) + 1
        if taken[name] > 1 and not isinstance(item, exp.Alias):
            item = exp.alias_(item, f"{name}_{taken[name]}")
        named.append(item)
    select.set("expressions", named)


def lateral_aliases(select: exp.Select, columns_of) -> None:
    """A SELECT item may name an earlier item's alias, as Spark 3.4+ and DuckDB allow
    (SUM(b) AS s, s * 2 AS t): each such name, unqualified and no FROM relation's column
    (a column comes first, as in both engines), becomes a copy of that item's expression.
    A name inside an aggregate or a subquery is left as it is (Spark refuses the first).
    In place; nothing is done when FROM holds anything but relations."""
    holders = ([select.args["from"]] if select.args.get("from") else []) + list(select.args.get("joins") or [])
    if not holders or not all(isinstance(h.this, exp.Table) for h in holders):
        return
    known = {c.lower() for _, rel in relations_in_from(select) for c in columns_of(rel)}
    earlier: dict[str, exp.Expression] = {}
    for item in select.expressions:
        for col in list(item.find_all(exp.Column)):
            name = col.name.lower()
            if col.table or name in known or name not in earlier or isinstance(col.this, exp.Star):
                continue
            if any(isinstance(n, (exp.AggFunc, exp.Select, exp.Subquery)) for n in _ancestors(col, item)):
                continue
            copy = earlier[name].copy()
            if col is item:  # the item is the name alone: it keeps the name
                item = exp.alias_(copy, name)
                col.replace(item)
            else:
                col.replace(copy)
        if isinstance(item, exp.Alias):
            earlier[item.alias.lower()] = item.this


def _ancestors(node: exp.Expression, top: exp.Expression) -> Iterator[exp.Expression]:
    """The nodes from `node`'s parent up to `top`, `top` included."""
    while node is not top and node.parent is not None:
        node = node.parent
        yield node


def plain_rows(select: exp.Select) -> bool:
    """A SELECT without aggregates or GROUP BY keeps rows, not groups: its items become its
    GROUP BY, and a group's count says how many times its row occurs (a bag), unless
    DISTINCT asks for each row once. Returns whether the view is such a bag; rewrites
    the tree in place (GROUP BY added, DISTINCT taken off)."""
    clauses = [select.args.get(k) for k in ("having", "order")]
    if select.args.get("group") or any(has_aggregate(e) for e in [*select.expressions, *filter(None, clauses)]):
        return False
    if any(isinstance(n, (exp.Subquery, exp.Select)) and n is not select for i in select.expressions for n in i.walk()):
        return False  # a scalar subquery in SELECT: refused (or kept) as before
    keys = [(i.this if isinstance(i, exp.Alias) else i).copy() for i in select.expressions]
    keys = [k for k in keys if not (isinstance(k, exp.Literal) or isinstance(k, exp.Null))]
    bag = not select.args.get("distinct")
    select.set("distinct", None)
    if keys:
        select.set("group", exp.Group(expressions=keys))
    return bag


def natural_and_using(select: exp.Select, columns_of) -> set[str]:
    """NATURAL JOIN and JOIN ... USING (c, ...) as JOIN ... ON equalities of those columns
    (NATURAL: every column the joined relation shares with one before it). Returns the
    names so merged: an unqualified reference to one is no longer ambiguous. In place."""
    merged: set[str] = set()
    before = relations_in_from(select)[:1]
    for join in select.args.get("joins") or []:
        if not isinstance(join.this, exp.Table):
            continue
        alias, rel = (join.this.alias_or_name or join.this.name).lower(), join.this.name.lower()
        method = (join.args.get("method") or "").upper()
        names: list[str] = []
        if join.args.get("using"):
            names = [i.name.lower() for i in join.args["using"]]
            join.set("using", None)
        elif method == "NATURAL":
            names = [c for c in columns_of(rel) if any(c in columns_of(r) for _, r in before)]
            join.set("method", None)
        eqs = []
        for name in names:
            left = next((a for a, r in before if name in columns_of(r)), None)
            if left is not None:
                eqs.append(exp.EQ(this=exp.column(name, table=left), expression=exp.column(name, table=alias)))
        if eqs:
            cond = functools.reduce(lambda a, b: exp.And(this=a, expression=b), eqs)
            on = join.args.get("on")
            join.set("on", cond if on is None else exp.And(this=on, expression=cond))
            merged.update(names)
        before.append((alias, rel))
    return merged
