"""Binding a view's SELECT list, HAVING, ORDER BY, LIMIT and OFFSET (a mixin of the
front end's binder, cumulus/sql/frontend.py): every aggregate becomes a maintained column
(`Output`; hidden when only a read-time expression, HAVING or ORDER BY uses it), every
expression over them a read-time expression (cumulus/sql/readtime.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from sqlglot import exp

from cumulus.errors import Position
from cumulus.m3.ast import Const
from cumulus.schema import NULL
from cumulus.sql.calculus import Monomial
from cumulus.sql.readtime import (
    Arith,
    Case,
    Compare,
    Finish,
    Lit,
    Logic,
    Minus,
    Negation,
    NullTest,
    Order,
    Ref,
    RExpr,
    SubValue,
    ToDouble,
)
from cumulus.sql.rewrite import AGGREGATES, CMP, construct, has_aggregate


@dataclass(frozen=True)
class Output:
    """One SELECT item. kind: group | sum | count | avg | min | max | count_distinct |
    sum_distinct | avg_distinct."""

    name: str
    kind: str
    var: str | None = None  # group: the group variable; min/max/..._distinct: the value variable
    value: tuple[Monomial, ...] = ()  # sum/avg: the summed polynomial; count: the counted one
    nonnull: tuple[Monomial, ...] | None = None  # sum/avg: count of non-NULL values, when nullable
    hidden: bool = False  # kept for a read-time expression, HAVING or ORDER BY, not selected as it is


class SelectBinder:
    """The SELECT side of `_Binder`: uses its aggregate, find_group_var, group_var, scalar,
    bind_subview, refuse, refuse_kw, bind_error, pos_of, text_of and _is_column."""

    def bind_select(self, select: exp.Select) -> list[Output]:
        """The maintained columns (SELECT's group columns and aggregates, then the hidden
        ones that read-time expressions, HAVING and ORDER BY need) and `self.finish`."""
        self.outputs: list[Output] = []
        self.agg_names: dict[str, str] = {}  # an aggregate's SQL -> the output keeping it
        self.group_names: dict[str, str] = {}  # group variable -> the output showing it
        items: list[tuple[str, exp.Expression]] = []
        names: set[str] = set()
        for item in select.expressions:
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Star):
                raise self.refuse("SELECT * is not supported in an aggregate view", item, "*")
            name = (item.alias if isinstance(item, exp.Alias) else self.default_name(node)).lower()
            if name in names:
                raise self.bind_error(f"two SELECT items are named {name}; give them distinct aliases", item)
            names.add(name)
            items.append((name, node))
        self.names = set(names)
        exprs: dict[str, RExpr] = {}
        for name, node in items:  # plain columns first: they keep the maps' names as before
            while isinstance(node, exp.Paren):
                node = node.this
            if isinstance(node, AGGREGATES):
                self.outputs.append(self.aggregate(name, node))
                self.agg_names.setdefault(self.agg_key(node), name)
                exprs[name] = Ref(name)
            elif not has_aggregate(node) and self.find_group_var(node) is not None:
                var = self.find_group_var(node)
                self.outputs.append(Output(name, "group", var=var))
                self.group_names.setdefault(var, name)  # type: ignore[arg-type]
                exprs[name] = Ref(name)
        for name, node in items:
            if name not in exprs:
                exprs[name] = self.post(node, name)
        chosen = tuple((name, exprs[name]) for name, _ in items)
        aliases = dict(chosen)
        having = select.args.get("having")
        having_expr = self.post(having.this, "having", aliases, columns_first=True) if having else None
        order = []
        for o in (select.args.get("order").expressions if select.args.get("order") else []):
            node = o.this
            if isinstance(node, exp.Literal) and not node.is_string:
                idx = int(node.this)
                if not 1 <= idx <= len(chosen):
                    raise self.bind_error(f"ORDER BY {idx}: the SELECT list has {len(chosen)} items", node)
                expr = chosen[idx - 1][1]
            else:
                # DuckDB reads a name inside an ORDER BY expression as FROM's column before
                # an item's alias (ORDER BY -a, a both), and a bare name as the alias; Spark
                # reads the alias either way.
                inside = self.dialect == "duckdb" and not isinstance(node, exp.Column)
                expr = self.post(node, "order", aliases, columns_first=inside)
            order.append(Order(expr, bool(o.args.get("desc")), bool(o.args.get("nulls_first"))))
        self.finish = Finish(chosen, having_expr, tuple(order), self.count_clause(select, "limit"),
                             self.count_clause(select, "offset"))
        return self.outputs

    def count_clause(self, select: exp.Select, key: str) -> int | None:
        """LIMIT's or OFFSET's number: a non-negative integer constant."""
        clause = select.args.get(key)
        if clause is None:
            return None
        word = key.upper()
        value = clause.args.get("expression") if isinstance(clause, (exp.Limit, exp.Offset)) else None
        if not isinstance(value, exp.Literal) or value.is_string or not re.fullmatch(r"\d+", value.this):
            raise self.refuse_kw(f"{word} takes a non-negative integer constant, got {self.text_of(clause)}", word)
        return int(value.this)

    def agg_key(self, node: exp.Expression) -> str:
        return node.sql(dialect=self.dialect)

    def post(self, e: exp.Expression, stem: str, aliases: dict[str, RExpr] | None = None,
             columns_first: bool = False) -> RExpr:
        """A SELECT item, HAVING or ORDER BY expression as a read-time expression over the
        maintained columns: each aggregate becomes one (hidden unless selected as it is),
        each group expression the group's column."""
        if isinstance(e, exp.Paren):
            return self.post(e.this, stem, aliases, columns_first)
        if isinstance(e, exp.Subquery):
            return SubValue(self.bind_subview(e))
        if isinstance(e, AGGREGATES):
            key = self.agg_key(e)
            if key not in self.agg_names:
                name = self.hidden_name(stem)
                self.outputs.append(replace(self.aggregate(name, e), hidden=True))
                self.agg_names[key] = name
            return Ref(self.agg_names[key])
        alias = e.name.lower() if isinstance(e, exp.Column) and not e.table else None
        if aliases and alias in aliases and not (columns_first and self._is_column(e)):
            return aliases[alias]
        if not has_aggregate(e) and any(isinstance(n, exp.Column) for n in e.walk()):
            var = self.find_group_var(e)
            if var is not None:
                if var not in self.group_names:
                    name = self.hidden_name(f"g_{var}")
                    self.outputs.append(Output(name, "group", var=var, hidden=True))
                    self.group_names[var] = name
                return Ref(self.group_names[var])
            if isinstance(e, exp.Column):
                self.group_var(e)  # raises: neither an aggregate nor in GROUP BY
        def sub(x: exp.Expression) -> RExpr:
            return self.post(x, stem, aliases, columns_first)

        if isinstance(e, exp.Cast) and has_aggregate(e.this):
            if e.to.this != exp.DataType.Type.DOUBLE:
                raise self.refuse(f"{self.text_of(e)}: over aggregates only CAST(... AS DOUBLE) is supported "
                                  "(engines round or truncate other casts differently)", e)
            return ToDouble(sub(e.this), *self.at(e))
        if isinstance(e, (exp.Literal, exp.Null, exp.Cast, exp.Boolean)) or (
            isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal)
        ):
            value = self.scalar(e)
            if isinstance(value, Const):
                return Lit(value.value, value.type)
        if isinstance(e, exp.Neg):
            return Minus(sub(e.this), *self.at(e))
        if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
            op = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}[type(e)]
            if op == "*" and _aggregated_sum(e.this) and _aggregated_sum(e.expression):
                raise self.refuse(
                    f"the product of two aggregates ({self.text_of(e)}) is not supported: its exact decimal "
                    "digits could exceed 38; select them and multiply when reading", e)
            return Arith(op, sub(e.this), sub(e.expression), *self.at(e))
        if isinstance(e, exp.Nullif):
            x = sub(e.this)
            return Case(((Compare("=", x, sub(e.expression), *self.at(e)), Lit(None, NULL)),), x, *self.at(e))
        if isinstance(e, exp.Coalesce):
            args = [sub(e.this), *(sub(a) for a in e.expressions)]
            return Case(tuple((NullTest(a, negated=True), a) for a in args[:-1]), args[-1], *self.at(e))
        if isinstance(e, exp.Case) and e.this is None:
            default = e.args.get("default")
            whens = tuple((sub(b.this), sub(b.args["true"])) for b in e.args["ifs"])
            return Case(whens, sub(default) if default is not None else Lit(None, NULL), *self.at(e))
        if isinstance(e, tuple(CMP)):
            return Compare(CMP[type(e)], sub(e.this), sub(e.expression), *self.at(e))
        if isinstance(e, (exp.And, exp.Or)):
            return Logic("AND" if isinstance(e, exp.And) else "OR", sub(e.this), sub(e.expression))
        if isinstance(e, exp.Not):
            return Negation(sub(e.this))
        if isinstance(e, exp.Is) and isinstance(e.expression, exp.Null):
            return NullTest(sub(e.this))
        if isinstance(e, exp.Between):
            x = sub(e.this)
            return Logic("AND", Compare(">=", x, sub(e.args["low"]), *self.at(e)),
                         Compare("<=", x, sub(e.args["high"]), *self.at(e)))
        if isinstance(e, exp.In) and e.expressions and not e.args.get("query"):
            x, out = sub(e.this), None
            for v in e.expressions:
                item = Compare("=", x, sub(v), *self.at(e))
                out = item if out is None else Logic("OR", out, item)
            return out  # type: ignore[return-value]
        raise self.refuse(
            f"{self.text_of(e)} ({construct(e)}) is not supported over aggregates (read time: arithmetic, "
            "CASE, NULLIF, COALESCE, comparisons, AND/OR/NOT)", e)

    def at(self, node: exp.Expression) -> tuple[Position | None, str]:
        """Where a comparison is, and its text: for readtime.typed's errors."""
        return self.pos_of(node), self.text_of(node)

    def hidden_name(self, stem: str) -> str:
        n = 1
        while f"{stem}_{n}" in self.names:
            n += 1
        self.names.add(f"{stem}_{n}")
        return f"{stem}_{n}"

    def default_name(self, node: exp.Expression) -> str:
        if isinstance(node, exp.Column):
            return node.name
        return node.sql(dialect="duckdb").lower()


def _aggregated_sum(e: exp.Expression) -> bool:
    """An expression over aggregates other than COUNT (whose values may be decimals)."""
    return any(isinstance(n, AGGREGATES) and not isinstance(n, exp.Count) for n in e.walk())
