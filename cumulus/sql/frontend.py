"""SQL front end: parse a view with sqlglot, merge subqueries in FROM that have no
aggregates, refuse everything outside the supported fragment (naming the construct, its
line and column), and bind the rest against the schema into a `BoundView`: relation
atoms over join-class variables, atom-local filters, a filter factor for conditions over
several relations, group variables, one aggregate per maintained column, and the
read-time layer (cumulus/sql/readtime.py) of the SELECT list, HAVING, ORDER BY, LIMIT.

Supported (docs/compiler.md has the table): SELECT group columns, SUM/COUNT/AVG/MIN/MAX
(also DISTINCT) and expressions over them; FROM a comma list, inner JOIN ... ON or a
subquery without aggregates; WHERE a conjunction of equi-joins, single-relation filters
(comparisons, BETWEEN, IN, NOT IN, IS [NOT] NULL, LIKE, AND/OR/NOT; DATE +/- INTERVAL
constants) and OR/NOT of single-relation conditions across relations; GROUP BY columns
or single-relation expressions (arithmetic, CASE, EXTRACT); HAVING, ORDER BY, LIMIT,
OFFSET; uncorrelated `x IN (subquery)` on a group column and scalar subqueries in SELECT,
HAVING and ORDER BY, each bound as a view of its own (`BoundView.subviews`)."""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from decimal import Decimal

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from cumulus.config import DEFAULT_DIALECT, check_dialect
from cumulus.errors import Position, PositionedError, SQLBindError, UnsupportedSQLError
from cumulus.m3.ast import (
    FUNCTIONS,
    And,
    BinOp,
    Call,
    Cmp,
    Cond,
    Const,
    Expr,
    If,
    IsNull,
    Like,
    Neg,
    Not,
    Or,
    Var,
    variables,
)
from cumulus.schema import (
    BOOL,
    DATE,
    DECIMAL,
    DECIMAL_SCALE,
    FLOAT,
    INT,
    NULL,
    STRING,
    Schema,
    promote,
)
from cumulus.schema import Column as TableColumn
from cumulus.sql.calculus import Atom, Derived, Monomial, one
from cumulus.sql.clauses import expand_group_by_all, unmodelled
from cumulus.sql.items import Output, SelectBinder
from cumulus.sql.nested import NestedBinder
from cumulus.sql.polynomial import ind_and, ind_sum, monomials, neg, product
from cumulus.sql.readtime import Finish
from cumulus.sql.rewrite import (
    AGGREGATES,
    CMP,
    construct,
    expand_stars,
    has_aggregate,
    hoisted,
    ident_stem,
    inside,
    lateral_aliases,
    merge_from_subqueries,
    natural_and_using,
    plain_rows,
)
from cumulus.sql.sqltext import LITERAL_SPELLING, literal_as
from cumulus.sql.subqueries import SubqueryBinder, read_time_subqueries

_EXTRACT = {"YEAR": "YEAR", "MONTH": "MONTH", "DAY": "DAY"}


@dataclass(frozen=True)
class BoundView:
    name: str
    sql: str
    atoms: tuple[Atom, ...]
    aliases: tuple[str, ...]
    derived: tuple[Derived, ...]
    conds: tuple[tuple[int, Cond], ...]
    group: tuple[str, ...]
    outputs: tuple[Output, ...]
    nullable: frozenset[str]  # variables that may hold NULL
    var_names: dict[str, str]  # variable -> alias.column, for comments
    dialect: str = DEFAULT_DIALECT  # the dialect `sql` is written in
    finish: Finish | None = None  # SELECT list, HAVING, ORDER BY, LIMIT, OFFSET at read time
    filter: tuple[Monomial, ...] = ()  # the filter factor of conditions over several relations (() = 1)
    filter_text: tuple[str, ...] = ()  # those conditions as written
    subviews: tuple[tuple[str, BoundView], ...] = ()  # uncorrelated subqueries, views of their own
    bag: bool = False  # a SELECT without aggregates: each group's row occurs its count times
    cross: tuple[Cond, ...] = ()  # comparisons across relations other than equalities (theta joins)
    # Derived relations the view reads (nested queries, cumulus/sql/nested.py), each after
    # those it reads: (name, the nested query bound as a view); `schema` declares them.
    relations: tuple[tuple[str, BoundView], ...] = ()
    schema: Schema | None = None
    nonempty: bool = False  # without GROUP BY: its one row only over at least one row (a derived relation's)
    others: tuple[tuple[int, BoundView], ...] = ()  # a derived relation's other parts, with signs (views.ViewPlan)


class _Binder(SelectBinder, SubqueryBinder, NestedBinder):
    def __init__(self, sql: str, schema: Schema, name: str, dialect: str):
        self.sql = sql
        self.schema = schema
        self.name = name
        self.dialect = check_dialect(dialect)
        try:
            self.tokens = sqlglot.tokenize(sql, read=self.dialect)
        except (TokenError, ValueError):
            self.tokens = []

    # -- errors with positions
    def pos_of(self, node: exp.Expression | None, keyword: str | None = None) -> Position | None:
        """Where a construct is: the keyword token nearest to the node's first identifier
        (sqlglot keeps offsets on identifiers only), else that identifier."""
        starts = [
            n.meta["start"] for n in (node.walk() if node is not None else ()) if "start" in (getattr(n, "meta", None) or {})
        ]
        span = self.span(node) if node is not None else None
        anchor = span[0] if span else (min(starts) if starts else None)
        if anchor is None and node is not None and node.parent is not None and keyword is None:
            return self.pos_of(node.parent)  # a constant (TRUE, 1, NULL) has no offset: where its parent is
        if keyword:
            hits = self.keyword_offsets(keyword)
            if hits:
                best = hits[0] if anchor is None else min(hits, key=lambda h: abs(h - anchor))
                return self.position(best)
        return self.position(anchor) if anchor is not None else None

    def keyword_offsets(self, keyword: str) -> list[int]:
        """Offsets of a keyword (one token, or several such as ORDER BY)."""
        words = keyword.upper().split()
        hits = []
        for i, tok in enumerate(self.tokens):
            if " ".join(tok.text.upper().split()) == " ".join(words):
                hits.append(tok.start)
            elif [t.text.upper() for t in self.tokens[i : i + len(words)]] == words:
                hits.append(tok.start)
        return hits

    def span(self, node: exp.Expression) -> tuple[int, int] | None:
        """The offsets of a node's original text (sqlglot keeps offsets on identifiers
        only): operators span their operands; calls, CASE and NOT are widened left over
        their opening words and parentheses and right over the closing parentheses."""
        if isinstance(node, exp.Binary):
            left, right = self.span(node.left), self.span(node.right)
            if left and right:
                return left[0], right[1]
            return left or right
        spans = [(n.meta["start"], n.meta["end"]) for n in node.walk() if "start" in (getattr(n, "meta", None) or {})]
        if not spans or not self.tokens:
            return None
        start, end = min(s for s, _ in spans), max(e for _, e in spans)
        if isinstance(node, (exp.Column, exp.Identifier, exp.Table)):
            return start, end
        idx = next(i for i, t in enumerate(self.tokens) if t.start >= start)
        opened = 0
        while idx > 0:
            word = self.tokens[idx - 1].text.upper()
            if word == "(":
                opened += 1
            elif word in ("CASE", "WHEN", "NOT", "-", "DISTINCT", "FROM", "YEAR", "MONTH", "DAY"):
                pass
            elif self.tokens[idx].text == "(" and word.replace("_", "").isalnum():
                idx -= 1  # the function's name
                break
            else:
                break
            idx -= 1
        j = next((i for i, t in enumerate(self.tokens) if t.start > end), len(self.tokens))
        while j < len(self.tokens) and (opened or self.tokens[j].text.upper() == "END") and self.tokens[j].text in (")", "END", "end"):
            opened -= self.tokens[j].text == ")"
            end, j = self.tokens[j].end, j + 1
        return self.tokens[idx].start, end

    def text_of(self, node: exp.Expression) -> str:
        """A node as SQL text, for messages."""
        return node.sql(dialect=self.dialect)

    def position(self, offset: int) -> Position:
        line = self.sql.count("\n", 0, offset) + 1
        col = offset - (self.sql.rfind("\n", 0, offset) + 1) + 1
        return Position(line, col, self.name)

    def refuse(self, what: str, node: exp.Expression | None = None, keyword: str | None = None) -> UnsupportedSQLError:
        pos = self.pos_of(node, keyword)
        width = len(keyword) if keyword else 1
        return UnsupportedSQLError(what, pos, self.sql, width)

    def bind_error(self, what: str, node: exp.Expression | None = None) -> SQLBindError:
        return SQLBindError(what, self.pos_of(node), self.sql)

    def keyword_pos(self, keyword: str, nth: int = 0) -> Position | None:
        hits = self.keyword_offsets(keyword)
        return self.position(hits[nth]) if len(hits) > nth else None

    @property
    def stem(self) -> str:
        """What the names of this query's maps and nested views start with."""
        return getattr(self, "view_stem", ident_stem(self.name))

    def child(self, stem: str) -> _Binder:
        """A binder for a nested query of this one (a subquery's view, a derived relation):
        the same text and tokens (positions stay the view's), the schema so far, its
        names under `stem`."""
        binder = _Binder(self.sql, self.schema, self.name, self.dialect)
        binder.tokens = self.tokens
        binder.view_stem = stem
        return binder

    def refuse_kw(self, what: str, keyword: str, nth: int = 0) -> UnsupportedSQLError:
        return UnsupportedSQLError(what, self.keyword_pos(keyword, nth), self.sql, len(keyword))

    # -- top level
    def parse(self) -> exp.Select:
        """The view's one SELECT; UnsupportedSQLError when it is not one."""
        try:
            statements = sqlglot.parse(self.sql, read=self.dialect)
        except (ParseError, TokenError) as exc:
            errors = getattr(exc, "errors", None) or [{}]
            err = errors[0]
            pos = Position(err["line"], err["col"], self.name) if "line" in err else None
            raise UnsupportedSQLError(f"cannot parse the view's SQL: {err.get('description', exc)}", pos, self.sql) from None
        statements = [s for s in statements if s is not None]
        if len(statements) != 1:
            raise UnsupportedSQLError(f"a view is one SELECT statement; found {len(statements)} statements")
        select = statements[0]
        if isinstance(select, (exp.Intersect, exp.Except)):
            word = {exp.Intersect: "INTERSECT", exp.Except: "EXCEPT"}[type(select)]
            raise self.refuse_kw(f"{word} has no incremental form here (UNION and UNION ALL have)", word)
        if isinstance(select, exp.Union):  # its rows: SELECT * over it, ORDER BY and LIMIT applied there
            outer = exp.select("*").from_(exp.Subquery(this=select, alias=exp.TableAlias(
                this=exp.to_identifier("__union"))))
            for key in ("order", "limit", "offset"):
                if select.args.get(key) is not None:
                    outer.set(key, select.args[key])
                    select.set(key, None)
            select = outer
        if not isinstance(select, exp.Select):
            raise UnsupportedSQLError(f"a view must be a SELECT, got {select.key.upper()}")
        if (why := expand_group_by_all(select)) is not None:
            raise self.refuse_kw(why, "ALL")
        for what, node, spellings in unmodelled(select):  # a clause dropped would be a wrong answer
            raise self.refuse(what, node, next((k for k in spellings if self.keyword_offsets(k)), spellings[0]))
        return merge_from_subqueries(select, self.columns_of)

    def bind(self, select: exp.Select | None = None) -> BoundView:
        """The view (or, given, a subquery of it: positions stay the view's)."""
        select = self.bind_nested(self.parse() if select is None else select)

        def columns_of(relation: str | None) -> tuple[str, ...]:  # (`*` leaves out a subquery's join)
            return () if relation in self.joined else self.columns_of(relation)

        self.merged = natural_and_using(select, columns_of)
        expand_stars(select, columns_of, self.merged)
        lateral_aliases(select, columns_of)
        self.bag = plain_rows(select)
        self.subviews: list[tuple[str, BoundView]] = []
        for refusal in self.clause_refusals(select):
            raise refusal
        self.bind_from(select)
        conjuncts = self.conjuncts(select)
        self.bind_joins(conjuncts)
        self.bind_filters(conjuncts)
        self.bind_group(select)
        outputs = tuple(self.bind_select(select))
        self.check_key_scales(select, outputs)
        return BoundView(
            self.name,
            self.sql,
            tuple(Atom(rel, tuple(self.var_of[(a, c.name)] for c in self.schema.relation(rel).columns)) for a, rel in self.from_),
            tuple(a for a, _ in self.from_),
            tuple(self.derived),
            tuple(self.conds),
            tuple(self.group),
            outputs,
            frozenset(self.nullable_vars()),
            dict(self.var_label),
            self.dialect,
            self.finish,
            tuple(self.filter) if self.filter != [Monomial(one(), ())] else (),
            tuple(self.filter_text),
            tuple(self.subviews),
            self.bag,
            tuple(self.cross),
            tuple(self.relations),  # type: ignore[arg-type]
            self.schema,
        )

    def clause_refusals(self, select: exp.Select) -> Iterator[UnsupportedSQLError]:
        """Every clause of the SELECT outside the supported SQL, in the order of the checks
        (the first is what binding refuses; `explain` lists them all)."""
        found: set[str] = set()
        if not select.args.get("group") and not getattr(self, "bag", False):
            subs = [n for i in select.expressions for n in i.find_all(exp.Subquery)]
            outside = [n for i in select.expressions for n in i.find_all(*AGGREGATES)
                       if not any(inside(n, q) for q in subs)]
            if subs and not outside:  # rows, each with a subquery's value
                found.add("subquery")
                yield self.refuse("a subquery in the SELECT list of a view without aggregates (a value per row) is "
                                  "not supported", subs[0], "SELECT")
        kept = read_time_subqueries(select)
        for node in select.walk():
            if any(node is k or inside(node, k) for k in kept):
                continue  # bound as views of their own (bind_subview), refused there if need be
            if isinstance(node, exp.Subquery) and isinstance(node.parent, (exp.From, exp.Join)) \
                    and "subquery" not in found:
                found.add("subquery")
                yield self.refuse_kw(
                    "a subquery in FROM is supported only without GROUP BY, aggregates, DISTINCT, ORDER BY or LIMIT "
                    "(it is merged into the view); this one is not", "SELECT", 1)
            if (isinstance(node, exp.Subquery) or (isinstance(node, exp.Select) and node is not select)) \
                    and "subquery" not in found:
                found.add("subquery")
                yield self.refuse_kw(
                    "a subquery here is not supported (uncorrelated IN (subquery) conjuncts of WHERE and scalar "
                    "subqueries in SELECT, HAVING and ORDER BY are, each kept as a view of its own)", "SELECT", 1)
            if isinstance(node, exp.Window) and "window" not in found:
                found.add("window")
                yield self.refuse("window functions (OVER) are not supported", node, "OVER")
            if isinstance(node, exp.Exists) and "exists" not in found:
                found.add("exists")
                yield self.refuse_kw("EXISTS subqueries are not supported", "EXISTS")
        if select.args.get("distinct"):
            yield self.refuse_kw("SELECT DISTINCT is not supported", "DISTINCT")
        if select.args.get("qualify"):
            yield self.refuse_kw("QUALIFY is not supported", "QUALIFY")
        if not select.args.get("from"):
            yield self.refuse_kw("a view needs a FROM clause naming its relations", "SELECT")

    def check_key_scales(self, select: exp.Select, outputs: tuple[Output, ...]) -> None:
        """Refuse a decimal with more digits after the point than the maps keep where it
        can become a map key (a group key, a join column, a column compared across
        relations, a MIN/MAX or DISTINCT value): the key would be rounded, and two values
        equal to 6 digits would be one group or join."""
        columns = Counter(self.var_of.values())  # a variable of two columns is a join's
        keys = [v for v, n in columns.items() if n > 1] + list(self.group) + [o.var for o in outputs if o.var]
        keys += [v for c in self.cross for v in sorted(variables(c))]
        for var in dict.fromkeys(keys):
            kind, scale = self.m3_type(Var(var))
            if kind == DECIMAL and scale > DECIMAL_SCALE:
                label = self.var_label.get(var)
                node = next((c for c in select.find_all(exp.Column) if self.var_of.get(self._resolved(c)) == var), None) \
                    or next((n for n in select.walk() if self.text_of(n) == label), None)  # a derived key
                raise self.refuse(f"{label or (self.text_of(node) if node else var)} has {scale} "
                                  f"digits after the point and would be a map key; maps keep {DECIMAL_SCALE} "
                                  f"(DECIMAL(38,{DECIMAL_SCALE})): cast it to DOUBLE", node)

    def _resolved(self, col: exp.Column) -> tuple[str, str] | None:
        try:
            return self.column(col)
        except SQLBindError:
            return None

    def columns_of(self, relation: str | None) -> tuple[str, ...]:
        return self.schema.relation(relation).column_names if relation and relation in self.schema else ()

    # -- FROM and joins
    def bind_from(self, select: exp.Select) -> None:
        self.from_: list[tuple[str, str]] = []  # (alias, relation)
        self.on_conds: list[exp.Expression] = []
        tables = [select.args["from"].this]
        for join in select.args.get("joins") or []:
            side, kind = (join.side or "").upper(), (join.kind or "").upper()
            if kind in ("SEMI", "ANTI", "ASOF") or join.args.get("method"):  # LEFT SEMI JOIN: a semi-join
                word = kind or join.args["method"].upper()
                raise self.refuse(f"{' '.join(filter(None, (side, word)))} JOIN is not supported (only inner "
                                  "equi-joins; EXISTS and IN (subquery) are kept)", join, word)
            if side in ("LEFT", "RIGHT", "FULL") or kind == "OUTER":
                word = side or "OUTER"
                raise self.refuse(f"{word} OUTER JOIN is not supported (only inner equi-joins)", join, word)
            if join.args.get("using"):
                raise self.refuse("JOIN ... USING is not supported; write JOIN ... ON a.x = b.x", join, "USING")
            if join.args.get("on"):
                self.on_conds.append(join.args["on"])
            tables.append(join.this)
        for t in tables:
            if not isinstance(t, exp.Table) or not t.name:
                raise self.refuse("only relations of the schema may stand in FROM (no subqueries or functions)", t)
            rel = t.name.lower()
            if rel not in self.schema:
                raise self.bind_error(f"unknown relation {t.name} (the schema declares: {', '.join(self.schema.names)})", t)
            alias = (t.alias_or_name or rel).lower()
            if any(a == alias for a, _ in self.from_):
                raise self.bind_error(f"alias {alias} is used twice in FROM; give each relation its own alias", t)
            self.from_.append((alias, rel))
        # Every column starts as its own variable; equi-joins merge them (union-find).
        self.parent: dict[tuple[str, str], tuple[str, str]] = {}
        for alias, rel in self.from_:
            for c in self.schema.relation(rel).columns:
                self.parent[(alias, c.name)] = (alias, c.name)
        self.derived: list[Derived] = []
        self.conds: list[tuple[int, Cond]] = []

    def conjuncts(self, select: exp.Select) -> list[exp.Expression]:
        out: list[exp.Expression] = []

        def split(e: exp.Expression) -> None:
            while isinstance(e, exp.Paren):
                e = e.this
            if isinstance(e, exp.And):
                split(e.this)
                split(e.expression)
            else:
                out.append(e)

        for c in self.on_conds:
            split(c)
        where = select.args.get("where")
        if where is not None:
            split(where.this)
        return [h for c in out for h in hoisted(c)]

    def column(self, col: exp.Column) -> tuple[str, str]:
        """(alias, column) of a column reference; unqualified names must be unambiguous."""
        name = col.name.lower()
        qualifier = col.table.lower() if col.table else None
        if qualifier:
            for alias, rel in self.from_:
                if alias == qualifier:
                    if name not in self.schema.relation(rel).column_names:
                        raise self.bind_error(f"relation {rel} (alias {alias}) has no column {name}", col)
                    return alias, name
            raise self.bind_error(f"unknown alias {qualifier} in {self.text_of(col)}", col)
        owners = [a for a, rel in self.from_ if name in self.schema.relation(rel).column_names]
        if not owners:
            raise self.bind_error(f"no relation in FROM has a column {name}", col)
        if len(owners) > 1 and name not in getattr(self, "merged", ()):  # NATURAL / USING merged it
            raise self.bind_error(f"column {name} is ambiguous (in {', '.join(owners)}); qualify it", col)
        return owners[0], name

    def find(self, key: tuple[str, str]) -> tuple[str, str]:
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def aliases_in(self, e: exp.Expression) -> set[str]:
        return {self.column(c)[0] for c in e.find_all(exp.Column)}

    def bind_joins(self, conjuncts: list[exp.Expression]) -> None:
        """Merge variables of columns equated across relations; `expr = expr` over two
        different relations becomes a shared derived variable."""
        self.pending_derived_joins: list[tuple[exp.Expression, exp.Expression]] = []
        self.join_conjuncts: set[int] = set()
        for c in conjuncts:
            if not isinstance(c, exp.EQ):
                continue
            left, right = c.this, c.expression
            la, ra = self.aliases_in(left), self.aliases_in(right)
            if len(la) == 1 and len(ra) == 1 and la != ra:
                if isinstance(left, exp.Column) and isinstance(right, exp.Column):
                    types = self.column_type(left), self.column_type(right)
                    if types[0] != types[1]:  # compared in the wider type, as SQL does: a derived join
                        self.pending_derived_joins.append(self.promoted(c, left, right, *types))
                        self.join_conjuncts.add(id(c))
                        continue
                    a, b = self.find(self.column(left)), self.find(self.column(right))
                    if a != b:
                        self.parent[b] = a
                else:
                    self.pending_derived_joins.append((left, right))
                self.join_conjuncts.add(id(c))
        self.name_vars()
        for left, right in self.pending_derived_joins:
            var = self.fresh("j")
            for side in (left, right):
                self.define(side, var)

    def column_type(self, col: exp.Column) -> str:
        alias, name = self.column(col)
        return self.schema.relation(dict(self.from_)[alias]).column(name).type

    def promoted(self, c: exp.EQ, left: exp.Column, right: exp.Column, lt: str, rt: str
                 ) -> tuple[exp.Expression, exp.Expression]:
        """The two sides of `left = right` over columns of two numeric types, each cast to
        the wider (an INT = a DECIMAL compares as DECIMALs, either with a DOUBLE as DOUBLEs,
        as Spark and DuckDB compare them); columns of other types are refused."""
        if not {lt, rt} <= {INT, DECIMAL, FLOAT}:
            raise self.refuse(f"{self.text_of(c)} compares a {lt.upper()} with a {rt.upper()}: cast one side to the "
                              "other's type", c)
        wide = promote(lt, rt)
        to = exp.DataType.build("DOUBLE" if wide == FLOAT else f"DECIMAL(38,{DECIMAL_SCALE})")
        return tuple(side if t == wide else exp.Cast(this=side.copy(), to=to) for side, t in ((left, lt), (right, rt)))

    def name_vars(self) -> None:
        """Readable variable names: the column name, or alias_column when it clashes."""
        self.var_of: dict[tuple[str, str], str] = {}
        self.var_label: dict[str, str] = {}
        taken: set[str] = set()
        roots: dict[tuple[str, str], str] = {}
        for key in self.parent:
            root = self.find(key)
            if root not in roots:
                alias, col = root
                name = col if col not in taken else f"{alias}_{col}"
                n = 2
                while name in taken:
                    name, n = f"{alias}_{col}_{n}", n + 1
                taken.add(name)
                roots[root] = name
                self.var_label[name] = f"{alias}.{col}"
            self.var_of[key] = roots[root]
        self.taken = taken

    def fresh(self, stem: str) -> str:
        if stem not in ("x", "j") and stem not in self.taken:
            self.taken.add(stem)
            return stem
        n = 1
        while f"{stem}{n}" in self.taken:
            n += 1
        self.taken.add(f"{stem}{n}")
        return f"{stem}{n}"

    def atom_index(self, alias: str) -> int:
        return [a for a, _ in self.from_].index(alias)

    def define(self, e: exp.Expression, var: str | None = None, hint: str | None = None) -> str:
        """The variable standing for a single-relation scalar expression: the column's own
        variable, or a derived one (reused when the same expression is defined twice)."""
        if isinstance(e, exp.Paren):
            return self.define(e.this, var)
        if isinstance(e, exp.Column) and var is None:
            return self.var_of[self.column(e)]
        aliases = self.aliases_in(e)
        if len(aliases) > 1:
            raise self.refuse(
                f"the expression {self.text_of(e)} uses columns of several relations ({', '.join(sorted(aliases))}); "
                "keys and joins may use one relation's columns only", e
            )
        expr = self.scalar(e)
        atom = self.atom_index(next(iter(aliases))) if aliases else 0
        for d in self.derived:
            if d.atom == atom and d.expr == expr and var is None:
                return d.var
        var = var or self.fresh(hint or "x")
        self.var_label.setdefault(var, self.text_of(e))
        self.derived.append(Derived(var, atom, expr))
        return var

    # -- filters
    def bind_filters(self, conjuncts: list[exp.Expression]) -> None:
        """Single-relation conjuncts filter their atom; a conjunct over several relations
        (OR / NOT of single-relation conditions) becomes a filter factor: a polynomial of
        single-relation indicators multiplied into every maintained value (DBToaster's
        treatment of a condition it cannot push into one relation)."""
        self.filter: list[Monomial] = [Monomial(one(), ())]
        self.filter_text: list[str] = []
        self.cross: list[Cond] = []
        for c in conjuncts:
            if id(c) in self.join_conjuncts:
                continue
            aliases = self.aliases_in(c)
            if len(aliases) > 1:
                if isinstance(c, _tuple(CMP) + (exp.Between,)) and not isinstance(c, exp.EQ):
                    # a join on an inequality or a range (r.a < s.b): tested by each delta's
                    # statement over the event's values and the keys of the maps it reads
                    self.cross.append(self.condition(c))
                    continue
                self.filter = product(self.filter, monomials(self.cond_poly(self.condition(c), c)))
                self.filter_text.append(self.text_of(c))
                continue
            atom = self.atom_index(next(iter(aliases))) if aliases else 0
            self.conds.append((atom, self.condition(c)))

    def cond_poly(self, c: Cond, node: exp.Expression, negated: bool = False) -> list[tuple[int, dict[int, Cond]]]:
        """[c] (1 where c is true, else 0; `negated`: [NOT c]) as a sum of products of
        single-relation indicators: terms (coefficient, {atom: condition}), atom -1 for a
        condition without columns. AND multiplies, A OR B is [A] + [B] - [A][B], NOT goes
        down to single-relation conditions by De Morgan (exact in SQL's three-valued logic)."""
        owner = self.owner(c)
        if owner is None or owner >= 0:
            return [(1, {-1 if owner is None else owner: Not(c) if negated else c})]
        if isinstance(c, Not):
            return self.cond_poly(c.operand, node, not negated)
        if isinstance(c, (And, Or)):
            left, right = self.cond_poly(c.left, node, negated), self.cond_poly(c.right, node, negated)
            both = ind_and(left, right)
            if isinstance(c, And) != negated:
                return both
            out = ind_sum(left + right + [(-k, d) for k, d in both])
            if len(out) > 64:
                raise self.refuse(f"the condition {self.text_of(node)} expands to {len(out)} terms (at most 64)", node)
            return out
        raise self.refuse(
            f"the condition {self.text_of(node)} relates several relations ({', '.join(sorted(self.aliases_in(node)))}) "
            "but is not an equality of columns; only equi-joins can relate relations (AND, OR and NOT may combine "
            "conditions on one relation each)", node
        )

    def condition(self, e: exp.Expression) -> Cond:
        if isinstance(e, exp.Paren):
            return self.condition(e.this)
        if isinstance(e, exp.And):
            return And(self.condition(e.this), self.condition(e.expression))
        if isinstance(e, exp.Or):
            return Or(self.condition(e.this), self.condition(e.expression))
        if isinstance(e, exp.Not):
            inner = self.condition(e.this)
            return replace(inner, negated=not inner.negated) if isinstance(inner, Like) else Not(inner)
        if isinstance(e, tuple(CMP)):
            if isinstance(e.expression, exp.Null) or isinstance(e.this, exp.Null):
                raise self.refuse(f"comparison with NULL ({self.text_of(e)}) is never true; use IS [NOT] NULL", e)
            return self.compare(CMP[type(e)], self.scalar(e.this), self.scalar(e.expression), e)
        if isinstance(e, exp.Between):
            x = self.scalar(e.this)
            return And(self.compare(">=", x, self.scalar(e.args["low"]), e),
                       self.compare("<=", x, self.scalar(e.args["high"]), e))
        if isinstance(e, exp.In):
            if e.args.get("query") or e.args.get("unnest") or not e.expressions:
                raise self.refuse_kw("IN (subquery) is not supported", "SELECT", 1)
            x = self.scalar(e.this)
            items = [self.compare("=", x, self.constant(v), e) for v in e.expressions]
            out: Cond = items[0]
            for item in items[1:]:
                out = Or(out, item)
            return out
        if isinstance(e, exp.Is) and isinstance(e.expression, exp.Null):
            return IsNull(self.scalar(e.this))
        if isinstance(e, exp.Is) and isinstance(e.expression, exp.Boolean):
            # x IS TRUE / IS FALSE: never unknown (false where x is NULL), so that
            # NOT (x IS TRUE) holds for a NULL x.
            x = self.boolean(e.this)
            return And(IsNull(x, negated=True), Cmp("=", x, Const(bool(e.expression.this), BOOL)))
        if isinstance(e, exp.Boolean):  # WHERE TRUE / FALSE
            return Cmp("=", Const(True, BOOL), Const(bool(e.this), BOOL))
        if isinstance(e, exp.Column):  # a BOOLEAN column as a condition: col = TRUE
            return Cmp("=", self.boolean(e), Const(True, BOOL))
        if isinstance(e, exp.Like):
            pattern = e.expression
            if not isinstance(pattern, exp.Literal) or not pattern.is_string:
                raise self.refuse(f"LIKE takes a constant string pattern ({self.text_of(e)})", e, "LIKE")
            if "\\" in pattern.this:
                raise self.refuse(f"a LIKE pattern with a backslash is not supported ({self.text_of(e)}): "
                                  "Spark reads it as an escape, DuckDB does not", e, "LIKE")
            operand = self.scalar(e.this)
            if self.m3_type(operand)[0] not in (STRING, None):
                raise self.bind_error(f"LIKE needs a string operand; {self.text_of(e.this)} is "
                                      f"{self.m3_type(operand)[0].upper()}", e)  # type: ignore[union-attr]
            return Like(operand, pattern.this)
        if isinstance(e, (exp.ILike, exp.Escape, exp.SimilarTo, exp.RegexpLike)):
            raise self.refuse(f"{self.text_of(e)} ({e.key.upper()}) is not supported; LIKE is", e)
        raise self.refuse(f"unsupported condition {self.text_of(e)} ({construct(e)})", e)

    def compare(self, op: str, left: Expr, right: Expr, node: exp.Expression) -> Cmp:
        """left op right, type-checked here so that a mistake names the view, line and column."""
        lt, rt = self.m3_type(left)[0], self.m3_type(right)[0]
        left, right = self.literal_as(left, rt, node), self.literal_as(right, lt, node)
        lt, rt = self.m3_type(left)[0], self.m3_type(right)[0]
        numbers = (INT, DECIMAL, FLOAT)
        if lt and rt and lt != rt and not (lt in numbers and rt in numbers):
            raise self.bind_error(f"cannot compare {lt.upper()} with {rt.upper()} in {self.text_of(node)}", node)
        if BOOL in (lt, rt) and op not in ("=", "<>"):
            raise self.bind_error(f"booleans can only be compared with = and <> ({self.text_of(node)})", node)
        return Cmp(op, left, right)

    def literal_as(self, x: Expr, other: str | None, node: exp.Expression) -> Expr:
        """A string constant compared with a DATE or an INT is read as one (sqltext.literal_as);
        a spelling the engines could read differently is refused by name."""
        if not (isinstance(x, Const) and x.type == STRING and other in (DATE, INT)):
            return x
        value = literal_as(x.value, other)  # type: ignore[arg-type]
        if value is None:
            raise self.bind_error(f"cannot compare {other.upper()} with the string '{x.value}' in "  # type: ignore[union-attr]
                                  f"{self.text_of(node)}: {LITERAL_SPELLING[other]}", node)  # type: ignore[index]
        return Const(value, other)  # type: ignore[arg-type]

    def boolean(self, e: exp.Expression) -> Expr:
        """A BOOLEAN operand (a column or a constant) of IS TRUE / a bare condition."""
        x = self.scalar(e)
        if self.m3_type(x)[0] not in (BOOL, None):
            raise self.bind_error(f"{self.text_of(e)} is not a BOOLEAN; compare it (= <> < ...) to make a condition", e)
        return x

    def constant(self, e: exp.Expression) -> Const:
        value = self.scalar(e)
        if isinstance(value, Neg) and isinstance(value.operand, Const):
            return Const(-value.operand.value, value.operand.type)  # type: ignore[operator]
        if not isinstance(value, Const):
            raise self.refuse(f"IN lists may hold constants only, got {self.text_of(e)}", e)
        return value

    # -- scalar expressions
    def scalar(self, e: exp.Expression) -> Expr:
        if isinstance(e, exp.Paren):
            return self.scalar(e.this)
        if isinstance(e, exp.Column):
            return Var(self.var_of[self.column(e)])
        if isinstance(e, exp.Literal):
            if e.is_string:
                return Const(e.this, STRING)
            text = e.this
            if re.fullmatch(r"\d+", text):
                return Const(int(text), INT)
            if "e" in text.lower():
                return Const(float(text), FLOAT)
            return Const(Decimal(text), DECIMAL)
        if isinstance(e, exp.Null):
            return Const(None, NULL)
        if isinstance(e, exp.Boolean):
            return Const(bool(e.this), BOOL)
        if isinstance(e, exp.Coalesce):  # the first operand that is not NULL
            operands = [self.scalar(x) for x in [e.this, *e.expressions]]
            out = operands[-1]
            for x in reversed(operands[:-1]):
                out = If(IsNull(x, negated=True), x, out)
            return out
        if isinstance(e, exp.Nullif):
            x = self.scalar(e.this)
            return If(Cmp("=", x, self.scalar(e.expression)), Const(None, NULL), x)
        if isinstance(e, exp.Cast) and isinstance(e.this, exp.Literal) and e.to.this == exp.DataType.Type.DATE:
            try:
                return Const(dt.date.fromisoformat(e.this.this), DATE)
            except ValueError:
                raise self.bind_error(f"invalid date {self.text_of(e.this)}: expected 'yyyy-mm-dd'", e) from None
        if isinstance(e, exp.Neg):
            inner = self.scalar(e.this)
            if isinstance(inner, Const) and inner.type in (INT, DECIMAL, FLOAT):
                return Const(-inner.value, inner.type)  # type: ignore[operator]
            return Neg(inner)
        if isinstance(e, (exp.Add, exp.Sub)) and isinstance(e.expression, exp.Interval):
            return self.shifted_date(e)
        if isinstance(e, (exp.Add, exp.Sub, exp.Mul)):
            op = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}[type(e)]
            left, right = self.scalar(e.this), self.scalar(e.expression)
            numbers = (INT, DECIMAL, FLOAT)
            for side, x in ((e.this, left), (e.expression, right)):
                if self.m3_type(x)[0] not in numbers + (None,):
                    raise self.bind_error(f"'{op}' needs numbers; {self.text_of(side)} is "
                                          f"{self.m3_type(x)[0].upper()}", e)  # type: ignore[union-attr]
            if isinstance(left, Const) and isinstance(right, Const) and left.type in numbers and right.type in numbers:
                return _folded(op, left, right)  # .06 - 0.01 is the constant 0.05, as in DuckDB
            return BinOp(op, left, right)
        if isinstance(e, exp.Div):  # a double, as in DuckDB (x / 0 is +-inf, 0 / 0 NaN)
            left, right = self.scalar(e.this), self.scalar(e.expression)
            for side, x in ((e.this, left), (e.expression, right)):
                if self.m3_type(x)[0] not in (INT, DECIMAL, FLOAT, None):
                    raise self.bind_error(f"'/' needs numbers; {self.text_of(side)} is "
                                          f"{self.m3_type(x)[0].upper()}", e)  # type: ignore[union-attr]
            if not (isinstance(right, Const) and right.type in (INT, DECIMAL, FLOAT) and Decimal(str(right.value)) != 0):
                # x / 0 is +-inf and 0 / 0 NaN: summed, neither is taken back out by a
                # delete (inf - inf is NaN), and NaN is no key; over aggregates, at read
                # time, a quotient is computed afresh at each read
                raise self.refuse(f"a division by an expression ({self.text_of(e)}) is kept incrementally only "
                                  "over aggregates (SUM(x) / SUM(y)) or by a non-zero constant: a zero divisor's "
                                  "inf or NaN could not be taken back out of the maps", e)
            return BinOp("/", left, right)
        if isinstance(e, (exp.IntDiv, exp.Mod)):
            raise self.refuse(
                f"{'DIV' if isinstance(e, exp.IntDiv) else 'modulo'} is not supported ({self.text_of(e)}): engines "
                "round its negative operands differently; divide with '/' (a double)", e)
        if isinstance(e, exp.Cast):
            return self.cast(e)
        if isinstance(e, exp.Extract):
            part = e.this.name.upper()
            if part not in _EXTRACT:
                raise self.refuse(f"EXTRACT({part} ...) is not supported (YEAR, MONTH, DAY are)", e)
            return Call(_EXTRACT[part], (self.scalar(e.expression),))
        if isinstance(e, (exp.Year, exp.Month, exp.Day)):
            arg = e.this
            if isinstance(arg, exp.TsOrDsToDate) and not arg.args.get("format") and not arg.args.get("safe"):
                inner = self.scalar(arg.this)  # Spark's YEAR(d) parses as YEAR(TO_DATE(d)): d itself over a DATE
                if self.m3_type(inner)[0] != DATE:
                    raise self.refuse(f"{self.text_of(e)} over a {str(self.m3_type(inner)[0]).upper()} is not "
                                      "supported (over a DATE it is)", e)
                return Call(type(e).__name__.upper(), (inner,))
            return Call(type(e).__name__.upper(), (self.scalar(arg),))
        if isinstance(e, exp.Case):  # CASE x WHEN v THEN ... is CASE WHEN x = v THEN ...
            subject = self.scalar(e.this) if e.this is not None else None
            default = e.args.get("default")
            out: Expr = self.scalar(default) if default is not None else Const(None, NULL)
            for branch in reversed(e.args["ifs"]):
                test = self.condition(branch.this) if subject is None else \
                    self.compare("=", subject, self.scalar(branch.this), branch)
                out = If(test, self.scalar(branch.args["true"]), out)
            return out
        if isinstance(e, (exp.Greatest, exp.Least)):  # NULLs are skipped (Spark, DuckDB, PostgreSQL)
            op = ">=" if isinstance(e, exp.Greatest) else "<="
            items = [self.scalar(x) for x in [e.this, *e.expressions]]
            out = items[0]
            for x in items[1:]:
                out = If(IsNull(out), x, If(IsNull(x), out, If(self.compare(op, out, x, e), out, x)))
            return out
        if isinstance(e, exp.Substring):
            return self.substring(e)
        if isinstance(e, exp.Anonymous) and e.name.lower() in ("date_part", "datepart") and len(e.expressions) == 2:
            part = e.expressions[0]
            unit = part.name.upper() if isinstance(part, (exp.Literal, exp.Var, exp.Column)) else ""
            if unit not in _EXTRACT:
                raise self.refuse(f"DATE_PART({self.text_of(part)}, ...) is not supported (year, month, day are)", e)
            return Call(_EXTRACT[unit], (self.scalar(e.expressions[1]),))
        if isinstance(e, exp.Anonymous):
            raise self.refuse(f"the function {e.name.upper()} is not supported ({self.text_of(e)})", e)
        if isinstance(e, AGGREGATES):
            raise self.refuse(f"an aggregate cannot stand inside another expression here ({self.text_of(e)})", e)
        if isinstance(e, exp.Interval):
            raise self.refuse(f"INTERVAL arithmetic is not supported ({self.text_of(e)})", e, "INTERVAL")
        raise self.refuse(f"unsupported expression {self.text_of(e)} ({construct(e)})", e)

    def substring(self, e: exp.Substring) -> Expr:
        """SUBSTRING(s FROM start [FOR length]) with whole-number constants, start >= 1
        (engines read a start below 1 differently)."""
        bounds = []
        for key in ("start", "length"):
            node = e.args.get(key)
            if node is None:
                bounds.append(Const(2**31 - 1, INT))  # to the end of the string
                continue
            value = node.this if isinstance(node, exp.Literal) and not node.is_string else None
            if value is None or not value.isdigit() or (key == "start" and int(value) < 1):
                raise self.refuse(f"SUBSTRING's {key} must be a whole number{' from 1' if key == 'start' else ''} "
                                  f"({self.text_of(e)})", e)
            bounds.append(Const(int(value), INT))
        return Call("SUBSTR", (self.scalar(e.this), *bounds))

    def cast(self, e: exp.Cast) -> Expr:
        """CAST(x AS t) where every engine gives the same value: to DOUBLE, to an integer
        type from an integer, to DECIMAL(p, s) from an integer or a decimal of at most s
        digits after the point (no rounding). Other casts round or truncate differently in
        Spark and DuckDB, and are refused."""
        x = self.scalar(e.this)
        kind, scale = self.m3_type(x)
        to = e.to.this
        T = exp.DataType.Type
        if to in (T.DOUBLE,) and kind in (INT, DECIMAL, FLOAT, None):
            return x if kind == FLOAT else Call("TO_FLOAT", (x,))
        if to in (T.BIGINT, T.INT) and kind in (INT, None):
            return x
        if to == T.DECIMAL and kind in (INT, DECIMAL, None):
            params = [p.this for p in e.to.expressions if isinstance(p, exp.DataTypeParam)]
            if not params:  # the dialect's default: Spark's DECIMAL(10,0), DuckDB's DECIMAL(18,3)
                precision, target = (18, 3) if self.dialect == "duckdb" else (10, 0)
            else:
                precision, target = int(params[0].this), int(params[1].this) if len(params) > 1 else 0
            if kind == DECIMAL and scale > target:
                raise self.refuse(f"{self.text_of(e)} would round {scale} digits after the point to {target} "
                                  "(engines round differently); cast to DOUBLE or to a wider scale", e)
            if kind is not None and (digits := self.int_digits(x)) > precision - target:
                raise self.refuse(f"{self.text_of(e)} may overflow: its value has up to {digits} digits before the "
                                  f"point, DECIMAL({precision},{target}) holds {precision - target} (Spark gives NULL, "
                                  "DuckDB an error); cast to a wider DECIMAL", e)
            return Call("TO_DECIMAL", (x,)) if kind == INT else x
        raise self.refuse(f"{self.text_of(e)} is not supported (casts to DOUBLE, to BIGINT/INT from an integer and "
                          "to DECIMAL without rounding are: engines round or truncate other casts differently)", e)

    def var_source(self, name: str) -> Expr | TableColumn | None:
        """What a variable stands for: a derived variable's expression, or the column of a
        relation (None: neither)."""
        for d in self.derived:
            if d.var == name:
                return d.expr
        for (alias, col), var in self.var_of.items():
            if var == name:
                return self.schema.relation(dict(self.from_)[alias]).column(col)
        return None

    def int_digits(self, x: Expr) -> int:
        """The most digits before the point a numeric expression's values can have (an INT
        is a BIGINT: 19; a DECIMAL column its precision less its scale; when unknown, the
        most a value of the maps' DECIMAL(38,6) has: 32)."""
        most = 38 - DECIMAL_SCALE
        if isinstance(x, Const):
            if x.type == NULL:
                return 0
            whole = abs(int(Decimal(str(x.value)))) if x.type in (INT, DECIMAL) else None
            return most if whole is None else len(str(whole)) if whole else 0
        if isinstance(x, Var):
            source = self.var_source(x.name)
            if isinstance(source, TableColumn):
                if source.type == DECIMAL:
                    return min(most, (source.precision or 38) - (source.scale or 0))
                return 19 if source.type == INT else most
            return most if source is None else self.int_digits(source)
        if isinstance(x, Call) and x.func == "TO_DECIMAL":
            return self.int_digits(x.args[0])
        if isinstance(x, Neg):
            return self.int_digits(x.operand)
        if isinstance(x, If):
            return max(self.int_digits(x.then), self.int_digits(x.else_))
        if isinstance(x, BinOp) and x.op in ("+", "-", "*"):
            left, right = self.int_digits(x.left), self.int_digits(x.right)
            return min(most, left + right if x.op == "*" else max(left, right) + 1)
        return most

    def m3_type(self, x: Expr) -> tuple[str | None, int]:
        """An expression's M3 type (None for NULL) and, for a decimal, the most digits after
        the point its values can have."""
        if isinstance(x, Const):
            if x.type == DECIMAL:
                return DECIMAL, max(0, -Decimal(x.value).as_tuple().exponent)  # type: ignore[arg-type, operator]
            return (None if x.type == NULL else x.type), 0
        if isinstance(x, Var):
            source = self.var_source(x.name)
            if isinstance(source, TableColumn):
                return source.type, source.scale or 0
            return (None, 0) if source is None else self.m3_type(source)
        if isinstance(x, Call):
            return FUNCTIONS[x.func][1], 0
        if isinstance(x, BinOp) and x.op == "/":
            return FLOAT, 0
        parts = [self.m3_type(c) for c in ((x.then, x.else_) if isinstance(x, If) else x.children())]
        kinds = [k for k, _ in parts if k is not None]
        kind = kinds[0] if kinds else None
        for k in kinds[1:]:
            kind = promote(kind, k) if {kind, k} <= {INT, DECIMAL, FLOAT} else kind
        scales = [s for _, s in parts]
        scale = sum(scales) if isinstance(x, BinOp) and x.op == "*" else max(scales, default=0)
        return kind, scale

    def shifted_date(self, e: exp.Expression) -> Const:
        """DATE '1994-01-01' + INTERVAL '3' MONTH (or - ...): a date constant. Months and
        years keep the day, clamped to the month's last (as DuckDB and Spark do)."""
        interval = e.expression
        base = self.scalar(e.this)
        unit = interval.args.get("unit")
        word = (unit.name.upper() if isinstance(unit, exp.Var) else "").rstrip("S")
        amount = interval.this.this if isinstance(interval.this, exp.Literal) else None
        if not isinstance(base, Const) or base.type != DATE or word not in ("YEAR", "MONTH", "DAY") \
                or amount is None or not re.fullmatch(r"-?\d+", str(amount).strip()):
            raise self.refuse(
                f"INTERVAL arithmetic is supported on DATE constants with a whole number of YEAR, MONTH or DAY "
                f"({self.text_of(e)}); a column plus an interval is not", e, "INTERVAL")
        n = int(str(amount).strip()) * (-1 if isinstance(e, exp.Sub) else 1)
        day: dt.date = base.value  # type: ignore[assignment]
        if word == "DAY":
            return Const(day + dt.timedelta(days=n), DATE)
        months = day.year * 12 + day.month - 1 + (n * 12 if word == "YEAR" else n)
        year, month = divmod(months, 12)
        last = calendar.monthrange(year, month + 1)[1]
        return Const(dt.date(year, month + 1, min(day.day, last)), DATE)

    # -- GROUP BY and SELECT
    def bind_group(self, select: exp.Select) -> None:
        self.group: list[str] = []
        self.group_exprs: list[tuple[exp.Expression, str]] = []
        group = select.args.get("group")
        aliases = {s.alias.lower(): s.this for s in select.expressions if isinstance(s, exp.Alias)}
        for g in group.expressions if group else []:
            if isinstance(g, exp.Literal) and not g.is_string:
                idx = int(g.this)
                if not 1 <= idx <= len(select.expressions):
                    raise self.bind_error(f"GROUP BY {idx}: the SELECT list has {len(select.expressions)} items", g)
                item = select.expressions[idx - 1]
                g = item.this if isinstance(item, exp.Alias) else item
            elif isinstance(g, exp.Column) and not g.table and g.name.lower() in aliases and not self._is_column(g):
                g = aliases[g.name.lower()]
            while isinstance(g, exp.Paren):  # GROUP BY (a + 1) is GROUP BY a + 1
                g = g.this
            if any(isinstance(n, AGGREGATES) for n in g.walk()):
                raise self.refuse(f"GROUP BY cannot hold an aggregate ({self.text_of(g)})", g)
            hint = next(
                (ident_stem(s.alias) for s in select.expressions if isinstance(s, exp.Alias) and s.this == g), None
            )
            var = self.define(g, hint=hint)
            if var not in self.group:
                self.group.append(var)
            self.group_exprs.append((g, var))

    def _is_column(self, col: exp.Column) -> bool:
        return any(col.name.lower() in self.schema.relation(rel).column_names for _, rel in self.from_)

    def find_group_var(self, node: exp.Expression) -> str | None:
        """The group variable `node` stands for (a GROUP BY expression, or a column joined
        to a grouped one), else None."""
        while isinstance(node, exp.Paren):
            node = node.this
        for g, var in self.group_exprs:
            if g == node or (isinstance(node, exp.Column) and isinstance(g, exp.Column) and self.column(g) == self.column(node)):
                return var
        if isinstance(node, exp.Column):
            var = self.var_of[self.column(node)]
            if var in self.group:  # joined column equal to a grouped one
                return var
        return None

    def group_var(self, node: exp.Expression) -> str:
        var = self.find_group_var(node)
        if var is not None:
            return var
        raise self.bind_error(
            f"{self.text_of(node)} is neither an aggregate nor in GROUP BY; add it to GROUP BY or aggregate it", node
        )

    def aggregate(self, name: str, node: exp.Expression) -> Output:
        arg = node.this
        if isinstance(arg, exp.Distinct):
            values = arg.expressions
            if len(values) != 1:
                raise self.refuse(f"{node.key.upper()}(DISTINCT ...) of {len(values)} expressions is not supported "
                                  "(one is)", node, "DISTINCT")
            if has_aggregate(values[0]):
                raise self.refuse(f"nested aggregates are not supported ({self.text_of(node)})", node)
            if isinstance(node, (exp.Min, exp.Max)):  # the same as without DISTINCT
                return Output(name, node.key, var=self.define(values[0]))
            # Kept as a count per group and value (shared with MIN/MAX of the same value),
            # answered at read time from the values whose count is positive.
            return Output(name, f"{node.key}_distinct", var=self.define(values[0]))
        if node.args.get("distinct"):
            raise self.refuse(f"{node.key.upper()}(DISTINCT ...) is not supported", node, "DISTINCT")
        if isinstance(node, exp.Count):
            if isinstance(arg, exp.Star) or arg is None:
                return Output(name, "count", value=(Monomial(one(), ()),))
            return Output(name, "count", value=self.nonnull_factors(arg) or (Monomial(one(), ()),))
        if arg is None or isinstance(arg, exp.Star):
            raise self.refuse(f"{node.key.upper()}(*) is not supported", node)
        if any(isinstance(n, AGGREGATES) for n in arg.walk()):
            raise self.refuse(f"nested aggregates are not supported ({self.text_of(node)})", node)
        if isinstance(node, (exp.Min, exp.Max)):
            return Output(name, node.key, var=self.define(arg))
        kind, scale = self.m3_type(self.scalar(arg))
        if kind == DECIMAL and scale > DECIMAL_SCALE:
            raise self.refuse(f"{self.text_of(node)} sums decimals with {scale} digits after the point; maps keep "
                              f"{DECIMAL_SCALE} (DECIMAL(38,{DECIMAL_SCALE})): cast the argument to DOUBLE", node)
        value = self.polynomial(arg)
        nonnull = self.nonnull_factors(arg)
        return Output(name, "sum" if isinstance(node, exp.Sum) else "avg", value=value, nonnull=nonnull)

    # -- polynomials: SUM's argument as a sum of products of one-relation factors
    def owner(self, e: Expr) -> int | None:
        """The atom that defines every variable of `e` (None for constants)."""
        vs = variables(e)
        if not vs:
            return None
        for i in range(len(self.from_)):
            if vs <= self.defined_by(i):
                return i
        return -1

    def defined_by(self, i: int) -> set[str]:
        alias, rel = self.from_[i]
        out = {self.var_of[(alias, c)] for c in self.schema.relation(rel).column_names}
        out.update(d.var for d in self.derived if d.atom == i)
        return out

    def polynomial(self, e: exp.Expression) -> tuple[Monomial, ...]:
        return tuple(self.expand(self.scalar(e), e))

    def expand(self, x: Expr, node: exp.Expression) -> list[Monomial]:
        owner = self.owner(x)
        if owner is None:
            return [Monomial(x, ())]
        if owner >= 0:
            return [Monomial(one(), ((owner, x),))]
        if isinstance(x, Neg):
            return [Monomial(neg(m.coef), m.factors) for m in self.expand(x.operand, node)]
        if isinstance(x, BinOp) and x.op in "+-":
            left, right = self.expand(x.left, node), self.expand(x.right, node)
            if x.op == "-":
                right = [Monomial(neg(m.coef), m.factors) for m in right]
            # SQL: a + b is NULL when either is; each side's terms keep the other's guard.
            return product(left, self.nonnull(x.right)) + product(right, self.nonnull(x.left))
        if isinstance(x, BinOp) and x.op == "*":
            return product(self.expand(x.left, node), self.expand(x.right, node))
        if isinstance(x, If):
            # CASE WHEN c THEN a ELSE b over several relations, c over one relation:
            # [c] * a + [not c] * b, where [c] is 1 exactly when c is true.
            taken, other = self.indicators(x.cond, node)
            return product(taken, self.expand(x.then, node)) + product(other, self.expand(x.else_, node))
        raise self.refuse(
            f"the expression {self.text_of(node)} mixes columns of several relations inside "
            f"{type(x).__name__.upper()}; only +, -, * and CASE may combine relations", node
        )

    def indicators(self, cond: Cond, node: exp.Expression) -> tuple[list[Monomial], list[Monomial]]:
        """[cond] and 1 - [cond] (CASE's ELSE is taken where cond is false or unknown)."""
        owner = self.owner(cond)
        if owner is not None and owner < 0:
            taken = monomials(self.cond_poly(cond, node))
            return taken, [Monomial(one(), ())] + [Monomial(neg(m.coef), m.factors) for m in taken]
        yes = If(cond, one(), Const(0, INT))
        no = If(cond, Const(0, INT), one())
        if owner is None:
            return [Monomial(yes, ())], [Monomial(no, ())]
        return [Monomial(one(), ((owner, yes),))], [Monomial(one(), ((owner, no),))]

    def nonnull(self, x: Expr) -> list[Monomial]:
        """A polynomial that is 1 for rows where `x` is not NULL and 0 where it is."""
        owner = self.owner(x)
        if owner is None:  # a constant expression (NULLIF(2, 2) is NULL, NULLIF(1, 2) is not)
            if not self.may_be_null(x):
                return [Monomial(one(), ())]
            return [Monomial(If(IsNull(x, negated=True), one(), Const(0, INT)), ())]
        if owner >= 0:
            if not self.may_be_null(x):
                return [Monomial(one(), ())]
            return [Monomial(one(), ((owner, If(IsNull(x, negated=True), one(), Const(0, INT))),))]
        if isinstance(x, If):
            taken, other = self.indicators(x.cond, exp.Null())
            return product(taken, self.nonnull(x.then)) + product(other, self.nonnull(x.else_))
        out = [Monomial(one(), ())]
        for child in x.children():
            out = product(out, self.nonnull(child))
        return out

    def nonnull_factors(self, e: exp.Expression) -> tuple[Monomial, ...] | None:
        """COUNT(e)'s polynomial, or None when e is never NULL."""
        poly = self.nonnull(self.scalar(e))
        return None if poly == [Monomial(one(), ())] else tuple(poly)

    def may_be_null(self, x: Expr) -> bool:
        if isinstance(x, Const):
            return x.value is None
        if isinstance(x, Var):
            return x.name in self.nullable_vars()
        if isinstance(x, If):
            return self.may_be_null(x.then) or self.may_be_null(x.else_)
        return any(self.may_be_null(c) for c in x.children() if not isinstance(c, Cond))

    def nullable_vars(self) -> set[str]:
        """Variables that can be NULL in a joined row: columns declared nullable that join
        nothing (a NULL join value never matches), and derived variables over them."""
        counts: dict[str, int] = {}
        for key in self.parent:
            counts[self.var_of[key]] = counts.get(self.var_of[key], 0) + 1
        out = set()
        for alias, rel in self.from_:
            for c in self.schema.relation(rel).columns:
                var = self.var_of[(alias, c.name)]
                if c.nullable and counts[var] == 1 and not any(d.var == var for d in self.derived):
                    out.add(var)
        for d in self.derived:
            if self.may_be_null_raw(d.expr, out):
                out.add(d.var)
        return out

    def may_be_null_raw(self, x: Expr, nullable: set[str]) -> bool:
        if isinstance(x, Const):
            return x.value is None
        if isinstance(x, Var):
            return x.name in nullable
        if isinstance(x, If):
            return self.may_be_null_raw(x.then, nullable) or self.may_be_null_raw(x.else_, nullable)
        return any(self.may_be_null_raw(c, nullable) for c in x.children() if not isinstance(c, Cond))


def _folded(op: str, a: Const, b: Const) -> Const:
    """Constant arithmetic, exact: the wider type of the two (int < decimal < float)."""
    kind = FLOAT if FLOAT in (a.type, b.type) else DECIMAL if DECIMAL in (a.type, b.type) else INT
    x, y = a.value, b.value
    if kind == FLOAT:
        x, y = float(x), float(y)  # type: ignore[arg-type]
    elif kind == DECIMAL:
        x, y = Decimal(x), Decimal(y)  # type: ignore[arg-type]
    value = x + y if op == "+" else x - y if op == "-" else x * y  # type: ignore[operator]
    return Const(value, kind)


def _tuple(d: dict) -> tuple:
    return tuple(d)


def bind_view(sql: str, schema: Schema, name: str = "view", dialect: str = DEFAULT_DIALECT) -> BoundView:
    """Parse (in `dialect`, SQL_DIALECTS) and bind one view; raises UnsupportedSQLError or
    SQLBindError."""
    return _Binder(sql, schema, name, dialect).bind()


def clause_refusals(sql: str, schema: Schema, name: str = "view", dialect: str = DEFAULT_DIALECT) -> list[PositionedError]:
    """Every clause of a view outside the supported SQL, each with its position (WITH,
    subqueries, window functions, DISTINCT, HAVING, ORDER BY, LIMIT, ...), or the parse
    error; [] when its clauses pass (binding may still refuse an expression)."""
    binder = _Binder(sql, schema, name, dialect)
    try:
        return list(binder.clause_refusals(binder.bind_nested(binder.parse())))
    except PositionedError as exc:
        return [exc]

