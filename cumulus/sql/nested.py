"""Nested queries kept incrementally: derived relations (DBToaster's lifts and domain
maintenance, at the granularity of groups).

A nested query becomes a *derived relation*: a grouped view of its own, maintained from
its maps like any view, whose rows the views over it join like a base relation's. When
an epoch changes some of its groups, the engine turns the change into events of the
derived relation (the groups' old rows deleted, their new rows inserted: only the groups
the epoch touched differ) and applies them through the outer view's triggers, after the
base events (cumulus/engine/derived.py; cumulus/sql/derived.py for the interpreter).

What the front end rewrites into derived relations, before binding the outer query:
- WITH: each common table expression is inlined where it is named;
- a subquery in FROM with GROUP BY, aggregates or DISTINCT: the relation of its rows;
- `x CMP (SELECT agg ...)`, a scalar subquery correlated by equalities `inner = outer`
  (or not correlated): the subquery grouped by its inner correlation columns, joined on
  them, its value compared as a column (a group with no rows gives no row: the SQL
  comparison with the NULL of an empty SUM/AVG/MIN/MAX is unknown as well; COUNT, which
  is 0 over nothing, is refused);
- `EXISTS (SELECT ...)` correlated by equalities, and `x IN (SELECT y ...)` (correlated or
  not): the distinct values of the correlation columns (and y), joined on them (a
  semi-join: each outer row once). The view's maps then hold the rows that join alone
  (Q18's 57 orders of 1.5 million at SF 1), not every group with a filter at read time;
- NOT EXISTS and x NOT IN (SELECT y ...), correlated by equalities with columns of one
  outer relation or not: joins with derived relations of signed rows (`signed_join`);
- UNION ALL (a view, or in FROM): a derived relation whose rows are every part's; UNION:
  SELECT DISTINCT * over that.

ALL/ANY and correlations other than equalities are refused here with the construct named
(a view can still be kept by full refresh, cumulus/sql/full.py)."""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from cumulus.errors import UnsupportedSQLError
from cumulus.m3.ast import Var
from cumulus.schema import (
    BOOL,
    DATE,
    DECIMAL,
    DECIMAL_SCALE,
    FLOAT,
    INT,
    STRING,
    Column,
    Relation,
    promote,
)
from cumulus.sql.readtime import Ref, type_of
from cumulus.sql.rewrite import CMP, has_aggregate, ident_stem, inside, merge_from_subqueries, parts

KEY = "__k{}"  # the derived relation's correlation columns
VALUE = "__v"  # a scalar subquery's value
NULL_FLAG = "__n"  # anti-joins: 1 where some outer correlation value (or NOT IN's x) is NULL
X_FLAG = "__x"  # NOT IN: 1 where x is NULL
# Aggregates that are NULL over no rows (a correlated scalar subquery over a group with no
# rows is then unknown in any comparison, as no row of the join is).
_NULL_ON_EMPTY = (exp.Sum, exp.Avg, exp.Min, exp.Max)
_ARITH = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Paren, exp.Literal, exp.Column, exp.Cast)
# Nodes that are NULL when an operand is: a scalar subquery under only these (up to the
# comparison) leaves the comparison unknown over no rows, as a missing join row does.
_PASSES_NULL = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Paren, exp.Cast)


def inline_ctes(select: exp.Select) -> exp.Select:
    """WITH a AS (q) ... : every reference to `a` in FROM replaced by `(q) AS a`."""
    with_ = select.args.get("with")
    if with_ is None:
        return select
    if with_.args.get("recursive"):
        raise UnsupportedSQLError("WITH RECURSIVE has no incremental form (a recursive query)")
    defined: dict[str, tuple[exp.Expression, list]] = {}
    for cte in with_.expressions:
        body = cte.this.copy()
        _replace_tables(body, defined)
        columns = list(cte.args["alias"].columns) if cte.args.get("alias") is not None else []
        defined[cte.alias.lower()] = (body, columns)
    select.set("with", None)
    _replace_tables(select, defined)
    return select


def _replace_tables(node: exp.Expression, defined: dict[str, tuple[exp.Expression, list]]) -> None:
    for table in list(node.find_all(exp.Table)):
        name = table.name.lower()
        if name in defined and not table.args.get("db") and isinstance(table.parent, (exp.From, exp.Join)):
            body, columns = defined[name]
            alias = exp.TableAlias(this=exp.to_identifier((table.alias or table.name).lower()),
                                   columns=[c.copy() for c in columns])
            table.replace(exp.Subquery(this=body.copy(), alias=alias))


def _not_null_on_empty(e: exp.Expression) -> exp.Expression | None:
    """The node that keeps `e` from being NULL over no rows (None: it is NULL then): e must
    be arithmetic over SUM/AVG/MIN/MAX and constants."""
    if isinstance(e, _NULL_ON_EMPTY):
        return None
    if not isinstance(e, _ARITH) or isinstance(e, exp.Column):
        return e
    if isinstance(e, exp.Literal):
        return None
    return next((b for c in e.args.values() if isinstance(c, exp.Expression)
                 and not isinstance(c, exp.DataType) and (b := _not_null_on_empty(c)) is not None), None)


def _always_one_row(q: exp.Expression) -> bool:
    """Whether a subquery gives exactly one row whatever its FROM holds: a SELECT of
    aggregates without GROUP BY, HAVING, LIMIT or OFFSET (EXISTS of it is true)."""
    q = q.this if isinstance(q, exp.Subquery) else q
    if not isinstance(q, exp.Select) or any(q.args.get(k) for k in ("group", "having", "limit", "offset")):
        return False
    own = [n for e in q.expressions for n in e.walk(prune=lambda n: isinstance(n, exp.Subquery))]
    return not any(isinstance(n, exp.Window) for n in own) and any(isinstance(n, exp.AggFunc) for n in own)


def _unaliased(item: exp.Expression) -> exp.Expression:
    return item.this if isinstance(item, exp.Alias) else item


def _disj(nodes: list[exp.Expression]) -> exp.Expression:
    out = nodes[0]
    for n in nodes[1:]:
        out = exp.Or(this=out, expression=n)
    return out


def _constant(q: exp.Expression | None) -> exp.Expression | None:
    """The value of a subquery without FROM that selects one constant (`(SELECT 3)`)."""
    q = q.this if isinstance(q, exp.Subquery) else q
    if not isinstance(q, exp.Select) or q.args.get("from") or q.args.get("where") or len(q.expressions) != 1:
        return None
    value = _unaliased(q.expressions[0])
    return value if not list(value.find_all(exp.Column)) and not has_aggregate(value) else None


def _constants_inlined(c: exp.Expression) -> exp.Expression:
    """A conjunct with its subqueries without FROM replaced by what they stand for:
    EXISTS (SELECT 3) is TRUE, x IN (SELECT 1) is x IN (1), (SELECT 3) is 3."""
    negated = isinstance(c, exp.Not)
    node = c.this if negated else c
    if isinstance(node, exp.Exists) and _constant(node.this) is not None:
        return exp.Boolean(this=not negated)
    if isinstance(node, exp.In) and (value := _constant(node.args.get("query"))) is not None:
        node = exp.In(this=node.this, expressions=[value.copy()])
        return exp.Not(this=node) if negated else node
    for sub in list(c.find_all(exp.Subquery)):
        if (value := _constant(sub)) is not None:
            sub.replace(value.copy())
    return c


def _not_null(e: exp.Expression) -> exp.Expression:
    return exp.Not(this=exp.Is(this=e.copy(), expression=exp.Null()))


def _any_null(outer: list[exp.Expression]) -> exp.Expression:
    """1 where some of `outer` is NULL, else 0 (0 for none)."""
    if not outer:
        return exp.Literal.number(0)
    return exp.Case(ifs=[exp.If(this=_disj([exp.Is(this=o.copy(), expression=exp.Null()) for o in outer]),
                                true=exp.Literal.number(1))], default=exp.Literal.number(0))


def _without(inner: exp.Select, corr, extra: list[exp.Expression]) -> exp.Select:
    """A copy of `inner` without its correlated conjuncts, with `extra` ones."""
    q = inner.copy()
    dropped = {c.sql() for _, _, c in corr}
    where = q.args.get("where")
    kept = [c for c in parts(where.this, exp.And) if c.sql() not in dropped] if where is not None else []
    kept += [e.copy() for e in extra]
    q.set("where", exp.Where(this=_conj(kept)) if kept else None)
    return q


def _zero(kind: str) -> exp.Expression:
    """A constant of the type (a NULL's stand-in in a key, told apart by a flag)."""
    if kind == STRING:
        return exp.Literal.string("")
    if kind == DATE:
        return exp.Cast(this=exp.Literal.string("1970-01-01"), to=exp.DataType.build("DATE"))
    if kind == BOOL:
        return exp.false()
    return exp.Literal.number(0)


def _conj(nodes: list[exp.Expression]) -> exp.Expression | None:
    out = None
    for n in nodes:
        out = n if out is None else exp.And(this=out, expression=n)
    return out


class NestedBinder:
    """Rewrites nested queries into derived relations. Uses the binder's schema, sql, name,
    dialect, tokens, refuse, text_of, m3_type and bind; sets `relations` (the derived
    relations, each after those it reads) and extends `schema` with them."""

    def bind_nested(self, select: exp.Select) -> exp.Select:
        self.relations: list[tuple[str, object]] = []
        self.derived_count = 0
        self.joined: set[str] = set()  # derived relations standing for a subquery of WHERE (not in `*`)
        select = merge_from_subqueries(inline_ctes(select), self.columns_of)
        self.outer_select = select
        for holder in [select.args.get("from"), *(select.args.get("joins") or [])]:
            sub = holder.this if holder is not None else None
            if isinstance(sub, exp.Subquery) and isinstance(sub.this, (exp.Select, exp.Union)):
                alias = (sub.alias or "").lower()
                if not alias:
                    raise self.refuse("a subquery in FROM needs an alias", sub)
                columns = [c.name.lower() for c in sub.args["alias"].columns] if sub.args["alias"].columns else None
                if isinstance(sub.this, exp.Union):
                    name = self.derive_union(sub.this, sub, columns)
                else:
                    name = self.derive(sub.this, sub, columns)
                holder.set("this", exp.Table(this=exp.to_identifier(name), alias=exp.TableAlias(this=exp.to_identifier(alias))))
        where = select.args.get("where")
        if where is not None:
            kept = [n for c in parts(where.this, exp.And) for n in self.unnest(c)]
            select.set("where", exp.Where(this=_conj(kept)) if kept else None)
        return select

    # -- conjuncts of WHERE
    def unnest(self, c: exp.Expression) -> list[exp.Expression]:
        """A WHERE conjunct with its subquery replaced by a join with a derived relation:
        the conjuncts that stand for it."""
        c = _constants_inlined(c)
        if isinstance(c, exp.Boolean) and c.this:
            return []
        if isinstance(c, tuple(CMP)) and isinstance(c.expression, (exp.All, exp.Any)):
            c = self.quantified(c)
            if isinstance(c, exp.In):
                return self.semijoin(c.args["query"], [c.this], c)
            return self.compared(c)
        if isinstance(c, exp.Not) and isinstance(c.this, exp.Exists):
            if _always_one_row(c.this.this):  # NOT EXISTS (SELECT COUNT(*) ...): never true
                return [exp.false()]
            return self.antijoin(c.this.this, c)
        if isinstance(c, exp.Not) and isinstance(c.this, exp.In) and c.this.args.get("query") is not None:
            return self.anti_in(c)
        if isinstance(c, exp.Exists):
            if _always_one_row(c.this):  # EXISTS (SELECT MAX(x) ...): always true
                return []
            return self.semijoin(c.this, [], c)
        if isinstance(c, exp.In) and isinstance(c.args.get("query"), exp.Subquery):
            inner = c.args["query"].this
            if not isinstance(inner, exp.Select) or len(inner.expressions) != 1:
                raise self.refuse("IN (subquery) must be one SELECT of one column", c)
            return self.semijoin(c.args["query"], [c.this], c)
        if isinstance(c, tuple(CMP)) and any(isinstance(n, exp.Subquery) for n in c.walk()):
            return self.compared(c)
        return [c]

    def quantified(self, c: exp.Expression) -> exp.Expression:
        """x CMP ALL/ANY/SOME (subquery) as a comparison with a scalar subquery (or IN):
        over an aggregate without GROUP BY (one row) ALL and ANY are the comparison itself;
        x > ANY (SELECT y ...) is x > (SELECT MIN(y) ...) (MIN skips NULLs and is NULL over
        none, when ANY is not true either), x < ANY is x < MAX, x = ANY is IN."""
        q = c.expression
        word = "ALL" if isinstance(q, exp.All) else "ANY"
        inner = q.this.this if isinstance(q.this, exp.Subquery) else q.this
        if not isinstance(inner, exp.Select) or len(inner.expressions) != 1:
            raise self.refuse(f"{word} (subquery) must be one SELECT of one column", c)
        value = _unaliased(inner.expressions[0])
        if has_aggregate(value) and not inner.args.get("group"):
            return type(c)(this=c.this, expression=exp.Subquery(this=inner))
        if word == "ANY" and isinstance(c, exp.EQ):
            return exp.In(this=c.this, query=exp.Subquery(this=inner))
        pick = exp.Min if isinstance(c, (exp.GT, exp.GTE)) else exp.Max if isinstance(c, (exp.LT, exp.LTE)) else None
        if word == "ALL" or pick is None or has_aggregate(value) or inner.args.get("group"):
            raise self.refuse(f"{self.text_of(c)[:60]}: {word} over a subquery's rows has no incremental form here "
                              "(ANY with <, <=, >, >= and ALL over an aggregate have)", c)
        inner = inner.copy()
        inner.set("expressions", [pick(this=value.copy())])
        return type(c)(this=c.this, expression=exp.Subquery(this=inner))

    def compared(self, c: exp.Expression) -> list[exp.Expression]:
        """`x CMP (SELECT agg ...)` (the subquery anywhere in either side): the comparison
        with the derived relation's value column, and the correlation's equalities."""
        subs = [n for n in c.walk() if isinstance(n, exp.Subquery)
                and not any(inside(n, o) for o in c.walk() if isinstance(o, exp.Subquery) and o is not n)]
        if len(subs) != 1:
            raise self.refuse("a comparison with two subqueries is not supported", c)
        (sub,) = subs
        node = sub.parent
        while node is not None and node is not c:
            if not isinstance(node, _PASSES_NULL):
                # COALESCE((SELECT MAX(x) ...), 0): over no rows the subquery is NULL and
                # the comparison may still hold, but a join with its derived relation has
                # no row then.
                raise self.refuse(f"a scalar subquery inside {self.text_of(node)[:60]} has no incremental form here "
                                  f"({node.key.upper()} does not pass on its NULL over no rows)", node,
                                  node.key.upper())
            node = node.parent
        inner = sub.this
        if not isinstance(inner, exp.Select) or len(inner.expressions) != 1:
            raise self.refuse("a scalar subquery must be one SELECT of one column", sub)
        if inner.args.get("group"):
            raise self.refuse("a scalar subquery must not have GROUP BY: it gives one row", sub, "GROUP")
        value = _unaliased(inner.expressions[0])
        if not has_aggregate(value):
            raise self.refuse("a scalar subquery without an aggregate (one row only by chance) is not supported", sub)
        bad = _not_null_on_empty(value)
        if bad is not None:
            raise self.refuse(
                f"a scalar subquery whose value is not NULL over no rows ({self.text_of(value)}: "
                f"{bad.key.upper()}) has no incremental form here", sub)
        corr = self.correlations(inner)
        alias = self.join_derived(self.decorrelated(inner, corr, [exp.alias_(value.copy(), VALUE)]), sub)
        other = c.expression if c.this is sub else c.this if c.expression is sub else None
        sub.replace(exp.column(VALUE, alias))
        if isinstance(c, exp.EQ) and not (isinstance(other, exp.Column) and self.same_type(other, alias)):
            # not a join on one value of one type (x = 2 * (SELECT ...), an INT = an AVG):
            # the comparison as a range of width zero, tested across the join
            x, v = c.this, c.expression
            return [exp.GTE(this=x.copy(), expression=v.copy()), exp.LTE(this=x.copy(), expression=v.copy()),
                    *self.key_equalities(corr, alias)]
        return [c, *self.key_equalities(corr, alias)]

    def same_type(self, col: exp.Column, alias: str) -> bool:
        """Whether an outer column has the type of the derived relation's value (so that
        `col = value` can be a join: one key type)."""
        value = self.schema.relation(alias).column(VALUE)
        owners = []
        for holder in [self.outer_select.args.get("from"), *(self.outer_select.args.get("joins") or [])]:
            t = holder.this if holder is not None else None
            if isinstance(t, exp.Table) and t.name.lower() in self.schema:
                rel = self.schema.relation(t.name.lower())
                if (col.table and col.table.lower() == (t.alias_or_name or "").lower()) or \
                        (not col.table and col.name.lower() in rel.column_names):
                    owners.append(rel)
        if len(owners) != 1 or col.name.lower() not in owners[0].column_names:
            return False
        return owners[0].column(col.name).type == value.type

    def semijoin(self, sub: exp.Expression, lhs: list[exp.Expression], node: exp.Expression) -> list[exp.Expression]:
        """EXISTS (sub) or lhs IN (sub): a join with the distinct correlation values of
        sub (and its one column, for IN)."""
        inner = sub.this if isinstance(sub, exp.Subquery) else sub
        if not isinstance(inner, exp.Select):
            raise self.refuse("a subquery must be a SELECT here", node)
        corr = self.correlations(inner)
        group = inner.args.get("group")
        if group is not None and (not lhs or len(group.expressions) != 1
                                  or group.expressions[0].sql() != _unaliased(inner.expressions[0]).sql()):
            raise self.refuse("EXISTS or IN over a subquery with GROUP BY is supported only as IN (SELECT g ... "
                              "GROUP BY g): its rows must be distinct values", node, "GROUP")
        if lhs:
            item = inner.expressions[0]
            value = item.this if isinstance(item, exp.Alias) else item
            if has_aggregate(value) and not inner.args.get("group"):
                if corr:
                    raise self.refuse("IN of a correlated aggregate (one value per outer row) is not supported", node)
                if (bad := _not_null_on_empty(value)) is not None:  # x IN (SELECT COUNT(*) ...): 0 over no rows
                    raise self.refuse(f"IN of an aggregate whose value is not NULL over no rows ({self.text_of(value)}: "
                                      f"{bad.key.upper()}) has no incremental form here", node)
            items = [exp.alias_(value.copy(), KEY.format(0))]
        elif not corr:  # EXISTS, not correlated: whether the subquery has a row at all
            rest = self.decorrelated(inner, [], [exp.alias_(exp.Count(this=exp.Star()), VALUE)], group=False)
            alias = self.join_derived(rest, node)
            return [exp.GT(this=exp.column(VALUE, alias), expression=exp.Literal.number(0))]
        else:
            items = []
        rest = self.decorrelated(inner, corr, items, group=True)
        alias = self.join_derived(rest, node)
        out = [exp.EQ(this=x.copy(), expression=exp.column(KEY.format(0), alias)) for x in lhs]
        return out + self.key_equalities(corr, alias)

    def antijoin(self, sub: exp.Expression, node: exp.Expression) -> list[exp.Expression]:
        """NOT EXISTS (sub), sub correlated by equalities `inner = outer` with columns of one
        outer relation R (or not correlated): a join with a derived relation of signed rows
        (`signed_join`), R's distinct correlation values less those the subquery has rows
        for. A NULL outer value matches no inner row: its rows pass."""
        inner = self.anti_inner(sub, node, "NOT EXISTS")
        corr = self.correlations(inner)
        outer = [o for _, o, _ in corr]
        owner = self.owner_of(outer, node, "NOT EXISTS")
        nonnull = [_not_null(i) for i, _, _ in corr]
        return self.signed_join(node, owner, outer, {NULL_FLAG: _any_null(outer)},
                                [(_without(inner, corr, nonnull), [i for i, _, _ in corr], {NULL_FLAG: 0})])

    def anti_in(self, c: exp.Not) -> list[exp.Expression]:
        """x NOT IN (SELECT y ...), correlated by equalities or not: true where the
        subquery has no row (x NULL or not), else where x is not NULL, no y is NULL and
        none equals x (SQL's three-valued logic: else unknown or false). Two joins with
        derived relations of signed rows: N1 keyed by the correlation values and x (R's
        values less the subquery's non-NULL (values, y)), weight [x not in Y]; N2 keyed by
        the correlation values and whether x is NULL, weight [no NULL y] where x is not
        NULL and [no row at all] where it is."""
        node = c.this
        sub = node.args["query"]
        inner = self.anti_inner(sub, c, "NOT IN (subquery)")
        if len(inner.expressions) != 1:
            raise self.refuse("NOT IN (subquery) must select one column", c, "NOT")
        x, y = node.this, _unaliased(inner.expressions[0])
        corr = self.correlations(inner)
        outer = [o for _, o, _ in corr]
        owner = self.owner_of([*outer, x], c, "NOT IN (subquery)")
        keys = [i for i, _, _ in corr]
        nonnull = [_not_null(i) for i in keys]
        not_in = self.signed_join(c, owner, [*outer, x], {NULL_FLAG: _any_null([*outer, x])},
                                  [(_without(inner, corr, [*nonnull, _not_null(y)]), [*keys, y], {NULL_FLAG: 0})])
        flags = {NULL_FLAG: _any_null(outer), X_FLAG: _any_null([x])}
        no_null = self.signed_join(c, owner, outer, flags, [
            (_without(inner, corr, [*nonnull, exp.Is(this=y.copy(), expression=exp.Null())]), keys,
             {NULL_FLAG: 0, X_FLAG: 0}),  # a NULL y: no x that is not NULL passes
            (_without(inner, corr, nonnull), keys, {NULL_FLAG: 0, X_FLAG: 1}),  # any row: no NULL x passes
        ])
        return not_in + no_null

    def anti_inner(self, sub: exp.Expression, node: exp.Expression, word: str) -> exp.Select:
        inner = sub.this if isinstance(sub, exp.Subquery) else sub
        if not isinstance(inner, exp.Select):
            raise self.refuse(f"{word} needs a SELECT", node, "NOT")
        if inner.args.get("group") or inner.args.get("having") or any(has_aggregate(i) for i in inner.expressions):
            raise self.refuse(f"{word} over a subquery with GROUP BY or aggregates is not supported", node, "NOT")
        if any(inner.args.get(k) for k in ("order", "limit", "offset")):
            raise self.refuse("ORDER BY, LIMIT or OFFSET in a nested query is not supported (its rows are a set)", node)
        return inner

    def owner_of(self, outer: list[exp.Expression], node: exp.Expression, word: str) -> tuple[str, str]:
        """(alias, relation) of the one outer relation whose columns `outer` are (the first
        in FROM when there are none)."""
        owners = set()
        for o in outer:
            if not isinstance(o, exp.Column):
                raise self.refuse(f"{word} correlated with an expression ({self.text_of(o)}) is not supported; "
                                  "correlate it with a column", node, "NOT")
            found = self.outer_relation(o)
            if found is None:
                raise self.refuse(f"{word} correlated with {self.text_of(o)}, not a column of one outer relation",
                                  node, "NOT")
            owners.add(found)
        if len(owners) > 1:
            raise self.refuse(f"{word} must be correlated with the columns of one outer relation "
                              f"({', '.join(sorted(a for a, _ in owners))})", node, "NOT")
        if owners:
            return owners.pop()
        first = self.outer_select.args["from"].this
        if not isinstance(first, exp.Table):
            raise self.refuse(f"{word} needs a relation in FROM", node, "NOT")
        return (first.alias_or_name or "").lower(), first.name.lower()

    def signed_join(self, node: exp.Expression, owner: tuple[str, str], outer: list[exp.Expression],
                    flags: dict[str, exp.Expression],
                    parts: list[tuple[exp.Select, list[exp.Expression], dict[str, int]]]) -> list[exp.Expression]:
        """Join the outer query with a derived relation of signed rows: each distinct
        (COALESCE(outer_i, a constant), flags) of the outer relation `owner` once (every
        outer row's values are among them), less each part's distinct (inner keys, constant
        flags). A NULL outer value is kept apart by a flag (an inner key is never NULL),
        since a join cannot match NULL. The conditions joining it."""
        alias, relation = owner
        table = exp.Table(this=exp.to_identifier(relation), alias=exp.TableAlias(this=exp.to_identifier(alias)))
        keys = [exp.Coalesce(this=o.copy(), expressions=[_zero(self.schema.relation(relation).column(o.name).type)])
                for o in outer]
        domain = exp.select(*(exp.alias_(k.copy(), KEY.format(n + 1)) for n, k in enumerate(keys)),
                            *(exp.alias_(f.copy(), name) for name, f in flags.items())).from_(table).distinct()
        minus = []
        for q, inner_keys, values in parts:
            q.set("expressions", [*(exp.alias_(i.copy(), KEY.format(n + 1)) for n, i in enumerate(inner_keys)),
                                  *(exp.alias_(exp.Literal.number(values[name]), name) for name in flags)])
            q.set("distinct", exp.Distinct())
            minus.append(q)
        name = self.derive(domain, node, nonempty=True, others=[(-1, q) for q in minus])  # (no key: a row over rows)
        self.joined.add(name)
        self.outer_select.append("joins", exp.Join(this=exp.Table(this=exp.to_identifier(name),
                                                                   alias=exp.TableAlias(this=exp.to_identifier(name)))))
        return [*(exp.EQ(this=k, expression=exp.column(KEY.format(n + 1), name)) for n, k in enumerate(keys)),
                *(exp.EQ(this=f.copy(), expression=exp.column(n, name)) for n, f in flags.items())]

    def outer_relation(self, col: exp.Column) -> tuple[str, str] | None:
        """(alias, relation) of the outer query's one relation that has column `col`."""
        found = []
        for holder in [self.outer_select.args.get("from"), *(self.outer_select.args.get("joins") or [])]:
            t = holder.this if holder is not None else None
            if isinstance(t, exp.Table) and t.name.lower() in self.schema:
                alias, rel = (t.alias_or_name or "").lower(), t.name.lower()
                named = col.table.lower() == alias if col.table else True
                if named and col.name.lower() in self.schema.relation(rel).column_names:
                    found.append((alias, rel))
        return found[0] if len(found) == 1 else None

    # -- correlation
    def scope_columns(self, q: exp.Select) -> tuple[set[str], set[str]]:
        """(aliases, column names) of the relations in q's FROM."""
        aliases, columns = set(), set()
        for holder in [q.args.get("from"), *(q.args.get("joins") or [])]:
            t = holder.this if holder is not None else None
            if isinstance(t, exp.Table):
                aliases.add((t.alias_or_name or "").lower())
                name = t.name.lower()
                if name in self.schema:
                    columns.update(self.schema.relation(name).column_names)
            elif isinstance(t, exp.Subquery):
                aliases.add((t.alias or "").lower())
                if t.args.get("alias") is not None and t.args["alias"].columns:
                    columns.update(c.name.lower() for c in t.args["alias"].columns)
                elif isinstance(t.this, exp.Select):
                    columns.update(i.alias_or_name.lower() for i in t.this.expressions)
        return aliases, columns

    def is_outer(self, col: exp.Column, scope: tuple[set[str], set[str]]) -> bool:
        aliases, columns = scope
        return (col.table.lower() not in aliases) if col.table else (col.name.lower() not in columns)

    def correlations(self, q: exp.Select) -> list[tuple[exp.Expression, exp.Expression, exp.Expression]]:
        """q's correlated conjuncts of WHERE as (inner side, outer side, conjunct): each an
        equality of an expression over q's relations with one over the outer query's.
        Refuses a correlation of any other form, or outside WHERE."""
        scope = self.scope_columns(q)

        def outer_cols(node: exp.Expression) -> list[exp.Column]:
            return [c for c in node.find_all(exp.Column) if self.is_outer(c, scope)
                    and not any(inside(c, s) for s in node.find_all(exp.Subquery, exp.Exists) if s is not node)]

        where = q.args.get("where")
        found = []
        for c in parts(where.this, exp.And) if where is not None else []:
            if not outer_cols(c):
                continue
            if isinstance(c, exp.EQ):
                (a, b) = (c.this, c.expression)
                a_out, b_out = bool(outer_cols(a)), bool(outer_cols(b))
                a_in = any(not self.is_outer(x, scope) for x in a.find_all(exp.Column))
                b_in = any(not self.is_outer(x, scope) for x in b.find_all(exp.Column))
                if a_out and not a_in and b_in and not b_out:
                    found.append((b, a, c))
                    continue
                if b_out and not b_in and a_in and not a_out:
                    found.append((a, b, c))
                    continue
            raise self.refuse(f"a correlated condition other than inner = outer ({self.text_of(c)}) has no "
                              "incremental form here", c)
        for nested in q.find_all(exp.Select):  # a subquery of q naming a column of neither q nor itself
            if nested is q:
                continue
            own = self.scope_columns(nested)
            for col in nested.find_all(exp.Column):
                if self.is_outer(col, own) and self.is_outer(col, scope) and not any(
                        inside(col, s) for s in nested.find_all(exp.Select) if s is not nested):
                    raise self.refuse(f"a subquery correlated with a query two levels out ({self.text_of(col)}) has "
                                      "no incremental form here", col)
        for key in ("expressions", "having", "group", "joins"):
            value = q.args.get(key)
            for node in (value if isinstance(value, list) else [value] if value is not None else []):
                if outer_cols(node):
                    raise self.refuse(f"a subquery correlated outside its WHERE ({self.text_of(node)}) has no "
                                      "incremental form here", node)
        return found

    def decorrelated(self, inner: exp.Select, corr, items: list[exp.Expression], group: bool = True) -> exp.Select:
        """inner without its correlated conjuncts, selecting the inner side of each as a
        key (grouped by them) and then `items`."""
        q = _without(inner, corr, [])
        keys = [exp.alias_(i.copy(), KEY.format(n + 1)) for n, (i, _, _) in enumerate(corr)]
        q.set("expressions", keys + items)
        q.set("distinct", None)
        if group and not q.args.get("group") and not any(has_aggregate(i) for i in items):
            q.set("group", exp.Group(expressions=[i.this.copy() for i in keys + items]) if keys + items else None)
        elif keys:
            existing = list(q.args["group"].expressions) if q.args.get("group") else []
            q.set("group", exp.Group(expressions=existing + [i.copy() for i, _, _ in corr]))
        return q

    def key_equalities(self, corr, alias: str) -> list[exp.Expression]:
        return [exp.EQ(this=o.copy(), expression=exp.column(KEY.format(n + 1), alias)) for n, (_, o, _) in enumerate(corr)]

    def join_derived(self, q: exp.Select, node: exp.Expression) -> str:
        """Bind q as a derived relation, join it to the outer query; its alias there.
        Without GROUP BY, its row exists only over rows (`nonempty`): it stands for a
        comparison with NULL (or EXISTS over nothing), which holds for no outer row."""
        name = self.derive(q, node, nonempty=True)
        self.joined.add(name)
        alias = name
        select = self.outer_select
        select.append("joins", exp.Join(this=exp.Table(this=exp.to_identifier(name),
                                                       alias=exp.TableAlias(this=exp.to_identifier(alias)))))
        return alias

    def derive_union(self, union: exp.Union, node: exp.Expression, columns: list[str] | None) -> str:
        """A UNION [ALL] in FROM: a derived relation whose rows are every part's (a UNION
        is SELECT DISTINCT * over its UNION ALL). The parts' columns take the first
        part's names, so that their groups line up."""
        first, *rest = self.union_parts(union)
        if rest:
            names = [i.alias_or_name.lower() for i in first.expressions]
            for q in rest:
                if len(q.expressions) != len(names):
                    raise self.refuse(f"UNION's parts select {len(names)} and {len(q.expressions)} columns", node)
                if not any(isinstance(i, exp.Star) or (isinstance(i, exp.Column) and isinstance(i.this, exp.Star))
                           for i in q.expressions):
                    q.set("expressions", [exp.alias_(_unaliased(i).copy(), n) for i, n in zip(q.expressions, names,
                                                                                              strict=True)])
        return self.derive(first, node, columns, others=[(1, q) for q in rest])

    def union_parts(self, u: exp.Expression) -> list[exp.Select]:
        if isinstance(u, exp.Subquery):
            return self.union_parts(u.this)
        if isinstance(u, exp.Union):
            if u.args.get("distinct"):
                every = u.copy()
                every.set("distinct", False)
                self.derived_count += 1
                alias = exp.TableAlias(this=exp.to_identifier(f"__union{self.derived_count}"))
                first = every
                while not isinstance(first, exp.Select) and isinstance(first, (exp.Union, exp.Subquery)):
                    first = first.this
                names = [i.alias_or_name for i in first.expressions] if isinstance(first, exp.Select) else []
                # its columns by name (a `*` would count as one beside the other parts' lists)
                items = [exp.column(n, alias.name) for n in names] \
                    if names and all(names) and not any(isinstance(i, exp.Star) for i in first.expressions) else ["*"]
                return [exp.select(*items).distinct().from_(exp.Subquery(this=every, alias=alias))]
            return self.union_parts(u.this) + self.union_parts(u.expression)
        if isinstance(u, exp.Select):
            return [u]
        word = {exp.Intersect: "INTERSECT", exp.Except: "EXCEPT"}.get(type(u), u.key.upper())
        raise self.refuse(f"{word} has no incremental form here (UNION and UNION ALL have)", u)

    # -- binding a derived relation
    def derive(self, inner: exp.Select, node: exp.Expression, columns: list[str] | None = None,
               nonempty: bool = False, others: list[tuple[int, exp.Select]] = ()) -> str:  # type: ignore[assignment]
        """Bind `inner` as a derived relation (a view of its own); its name. With `others`,
        its rows are inner's and each other query's times its sign (UNION ALL: +1; an
        anti-join's: -1)."""
        if any(inner.args.get(k) for k in ("order", "limit", "offset")):  # (before binding: it may group the rows)
            raise self.refuse("ORDER BY, LIMIT or OFFSET in a nested query is not supported (its rows are a set)", node)
        self.derived_count += 1
        name = f"{self.stem}__d{self.derived_count}"
        binder = self.child(name)
        bound = self.check_part(binder.bind(inner), node, nonempty)
        names, types = binder.output_types(bound)
        schema, parts = binder.schema, []
        for n, (sign, q) in enumerate(others, start=1):
            part = f"{name}_{'part' if sign > 0 else 'less'}{n}"
            other = self.child(part)
            bound_other = self.check_part(other.bind(q), node, nonempty)
            got = other.output_types(bound_other)[1]
            if [t for t, _ in got] != [t for t, _ in types]:
                word = "UNION ALL's parts have" if sign > 0 else "an anti-join compares"
                raise self.refuse(f"{word} columns of other types ({', '.join(t for t, _ in got)} and "
                                  f"{', '.join(t for t, _ in types)}); cast them to one type", node)
            types = [(t, max(a, b)) for (t, a), (_, b) in zip(types, got, strict=True)]  # (every digit kept)
            self.relations.extend(other.relations)
            for r in other.schema.relations:
                schema = schema if r.name in schema else schema.with_relation(r)
            parts.append((sign, replace(bound_other, name=part, nonempty=nonempty)))
        bound = replace(bound, others=tuple(parts))
        if columns is not None:
            if len(columns) != len(names):
                raise self.refuse(f"the alias names {len(columns)} columns; the subquery has {len(names)}", node)
            names = columns
        cols = []
        for n, (t, scale) in zip(names, types, strict=True):
            col = ident_stem(n) if not n.startswith("__") else n
            if any(c.name == col for c in cols):
                raise self.refuse(f"the nested query has two columns named {col}; name them apart with AS", node)
            cols.append(Column(col, t, True, 38 if t == DECIMAL else None, scale if t == DECIMAL else None))
        self.relations.extend(binder.relations)
        self.relations.append((name, replace(bound, name=name, nonempty=nonempty)))
        self.schema = schema.with_relation(Relation(name, tuple(cols), derived=True))
        return name

    def check_part(self, bound, node: exp.Expression, nonempty: bool):
        """A bound nested query, if a derived relation can be made of it."""
        f = bound.finish
        if f is not None and (f.order or f.limit is not None or f.offset):
            raise self.refuse("ORDER BY, LIMIT or OFFSET in a nested query is not supported (its rows are a set)", node)
        if bound.subviews:
            raise self.refuse("a nested query with subqueries of its own at read time is not supported", node)
        if not bound.group and not bound.bag and not nonempty:
            raise self.refuse("a subquery in FROM or a UNION part with aggregates and no GROUP BY (its one row "
                              "exists even over no rows) has no incremental form here", node)
        return bound

    def output_types(self, bound) -> tuple[list[str], list[tuple[str, int]]]:
        """The bound view's output columns: names and (type, digits after the point)."""
        kinds: dict[str, tuple[str, int]] = {}
        for o in bound.outputs:
            if o.kind == "group" or o.kind in ("min", "max", "sum_distinct"):
                kind, scale = self.m3_type(Var(o.var))
                kinds[o.name] = (kind or INT, scale)
            elif o.kind in ("count", "count_distinct"):
                kinds[o.name] = (INT, 0)
            elif o.kind in ("avg", "avg_distinct"):
                kinds[o.name] = (FLOAT, 0)
            else:  # sum: the summed polynomial's type
                kind = INT
                for m in o.value:
                    for x in [m.coef, *(e for _, e in m.factors)]:
                        k, _ = self.m3_type(x)
                        if k in (INT, DECIMAL, FLOAT):
                            kind = promote(kind, k)
                kinds[o.name] = (kind, DECIMAL_SCALE if kind == DECIMAL else 0)
        if bound.finish is None:
            visible = [o.name for o in bound.outputs if not o.hidden]
            return visible, [kinds[n] for n in visible]
        plain = {n: k for n, (k, _) in kinds.items()}
        out = []
        for n, e in bound.finish.select:
            t = type_of(e, plain)
            if t not in (INT, DECIMAL, FLOAT, STRING, DATE, BOOL):
                raise self.refuse(f"the nested query's column {n} has no type (a NULL constant)")
            scale = kinds[e.name][1] if isinstance(e, Ref) and e.name in kinds else (DECIMAL_SCALE if t == DECIMAL else 0)
            out.append((t, scale))
        return [n for n, _ in bound.finish.select], out
