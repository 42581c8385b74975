"""Views: compile SQL views into one M3 program (sharing maps), and present a view's
rows from its maps exactly as its SQL would (the view semantics).

Each view keeps a group-count map (COUNT(*) by the group variables): a group exists
exactly while its count is above zero, whatever its sums hold. SUM and AVG keep a sum
map (and a count of non-NULL values when the summed expression can be NULL), COUNT(col)
a count map, MIN/MAX and COUNT/SUM/AVG(DISTINCT) a count map keyed by the group and
the value (READ_MIN/READ_MAX over it stays right under deletes). Conditions over several
relations multiply every map's value by the view's filter factor. A view without GROUP
BY has exactly one row before its HAVING; then the read-time layer (readtime.py) computes
its SELECT expressions, HAVING, ORDER BY, LIMIT and OFFSET."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal

from cumulus.config import DEFAULT_DIALECT
from cumulus.errors import M3ValidationError, Position, UnsupportedSQLError
from cumulus.m3.ast import MapDecl, Program, Trigger
from cumulus.m3.dataflow import dataflow
from cumulus.m3.interpreter import nan_last
from cumulus.m3.printer import format_program
from cumulus.m3.validate import CheckedProgram, validate
from cumulus.output import sort_key
from cumulus.schema import Schema
from cumulus.sql.calculus import Monomial, Query, one
from cumulus.sql.frontend import BoundView, bind_view
from cumulus.sql.polynomial import product
from cumulus.sql.readtime import EXACT, Finish, Ref, apply, type_of, typed, view_key
from cumulus.sql.to_m3 import BatchStatement, DeltaCompiler, MapDef


@dataclass(frozen=True)
class MapUse:
    """A map read by a view, and which view variable each of its keys holds."""

    map: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class ViewColumn:
    name: str
    kind: str  # group | sum | count | avg | min | max | count_distinct | sum_distinct | avg_distinct
    group_index: int | None = None  # group: position in the view's group variables
    values: MapUse | None = None  # sum/avg: sums; count: counts; min/max: value counts
    nonnull: MapUse | None = None  # sum/avg: count of non-NULL summands
    value_var: str | None = None  # min/max/..._distinct: the variable whose values are wanted
    type: str = "int"  # the column's type (sum: the sum map's value type; a missing entry is a zero of it)
    hidden: bool = False  # kept for the read-time layer only (not a SELECT item as it is)


@dataclass(frozen=True)
class ViewPlan:
    name: str
    sql: str
    group: tuple[str, ...]
    count: MapUse
    columns: tuple[ViewColumn, ...]
    dialect: str = DEFAULT_DIALECT  # the dialect `sql` is written in (frontend.SQL_DIALECTS)
    finish: Finish | None = None  # the read-time layer (None: the visible columns as they are)
    filter_text: tuple[str, ...] = ()  # conditions over several relations, kept as a filter factor
    filter_terms: int = 0  # the factor's single-relation terms
    subviews: tuple[ViewPlan, ...] = ()  # uncorrelated subqueries, maintained as views of their own
    bag: bool = False  # a SELECT without aggregates: each group's row occurs its count times (its rows as a bag)
    refresh: str = "incremental"  # or "full": recomputed at each close (cumulus/sql/full.py)
    refresh_reason: str = ""  # why `full`: the construct that has no incremental form here, or "asked"
    # The derived relations the view reads (nested queries, cumulus/sql/nested.py), each
    # after those it reads: their names and plans (maintained like views, not readable).
    relations: tuple[tuple[str, ViewPlan], ...] = ()
    # Without GROUP BY, the one row only over at least one row (a derived relation made
    # from a subquery in WHERE: over no rows, its NULL compares as no row does).
    nonempty: bool = False
    # A derived relation's other parts (cumulus/sql/nested.py): its rows are this plan's
    # and each other view's times its sign (+1: UNION ALL; -1: anti-joins, NOT EXISTS).
    others: tuple[tuple[int, ViewPlan], ...] = ()

    @property
    def column_names(self) -> tuple[str, ...]:
        """The view's columns, in SELECT order."""
        return tuple(n for n, _ in self.final.select)

    @property
    def final(self) -> Finish:
        return self.finish or Finish(tuple((c.name, Ref(c.name)) for c in self.columns if not c.hidden))

    @property
    def plain(self) -> bool:
        """Nothing computed at read time: the view's rows are its maintained columns."""
        return self.final.trivial([c.name for c in self.columns if not c.hidden])

    @property
    def types(self) -> dict[str, str]:
        """Each maintained column's type, and each subquery view's (its one column's)."""
        return {c.name: c.type for c in self.columns} | {view_key(s.name): s.output_types()[0] for s in self.subviews}

    def output_types(self) -> tuple[str, ...]:
        return tuple(type_of(e, self.types) for _, e in self.final.select)

    @property
    def ordered(self) -> bool:
        """The view's rows come in an order of its own (ORDER BY, or LIMIT/OFFSET's cut)."""
        f = self.final
        return bool(f.order) or f.limit is not None or f.offset is not None

    def presented(self, rows: list[tuple]) -> list[tuple]:
        """Rows as readers show them: the view's order, else sorted (NULLs first)."""
        return list(rows) if self.ordered else sorted(rows, key=sort_key)

    def group_positions(self) -> tuple[int, ...]:
        """Positions of the SELECT items that show a group key as it is."""
        kinds = {c.name: c.kind for c in self.columns}
        return tuple(i for i, (_, e) in enumerate(self.final.select) if isinstance(e, Ref) and kinds[e.name] == "group")

    @property
    def uses(self) -> tuple[MapUse, ...]:
        """Its own map uses: the groups' count, and each column's values and non-NULL count."""
        return (self.count, *(u for c in self.columns for u in (c.values, c.nonnull) if u is not None))

    @property
    def read_maps(self) -> tuple[str, ...]:
        """The maps its rows are made from (view_rows, mapsql.view_sql): its own and its
        subqueries' views'. Its derived relations' maps feed those, and are not read."""
        return tuple(dict.fromkeys([u.map for u in self.uses] + [m for s in self.subviews for m in s.read_maps]))

    @property
    def maps(self) -> tuple[str, ...]:
        """The maps the view reads (its subqueries' too), and its derived relations'."""
        nested = [m for s in self.subviews for m in s.maps] + [m for _, d in self.relations for m in d.maps]
        nested += [m for _, other in self.others for m in other.maps]
        return tuple(dict.fromkeys([u.map for u in self.uses] + nested))


@dataclass(frozen=True)
class Compilation:
    schema: Schema
    checked: CheckedProgram
    maps: dict[str, MapDef]
    views: dict[str, ViewPlan]
    batch: dict[str, list[BatchStatement]]  # per relation: how the engine applies a batch
    # The derived relations (nested queries) in order, each after those it reads: name ->
    # plan. Their events are the changes of their rows (cumulus/sql/derived.py).
    derived: dict[str, ViewPlan] = field(default_factory=dict)

    @property
    def program(self) -> Program:
        return self.checked.program

    def text(self) -> str:
        """The program as M3 text, each map declared under a comment with its SQL."""
        docs = {}
        for name, d in self.maps.items():
            users = [v.name for v in self.views.values() if name in v.maps]
            docs[name] = d.sql + (f"\nused by view(s): {', '.join(users)}" if users else "")
        return format_program(self.program, docs)

    def sharing(self) -> dict[str, list[str]]:
        """For each map, the views whose results depend on it (directly or through deltas)."""
        flow = dataflow(self.program)
        out: dict[str, list[str]] = {}
        for view in self.views.values():
            todo, seen = list(view.maps), set()
            while todo:
                m = todo.pop()
                if m in seen:
                    continue
                seen.add(m)
                todo.extend(flow.reads(m))
            for m in seen:
                out.setdefault(m, []).append(view.name)
        return out


def _ident(text: str) -> str:
    out = re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")
    return out if out and not out[0].isdigit() else f"c_{out}"


class _ViewBuilder:
    def __init__(self, compiler: DeltaCompiler, bound: BoundView):
        self.c = compiler
        self.v = bound
        self.stem = f"{_ident(bound.name)}_m"

    def query(self, keys: tuple[str, ...], value: tuple[Monomial, ...]) -> Query:
        v = self.v
        names = tuple(v.var_names.items())
        if v.filter:  # conditions over several relations: every value times the filter factor
            value = tuple(product(list(v.filter), list(value)))
        return Query(v.atoms, v.derived, v.conds, keys, value, names, v.cross)

    def use(self, keys: tuple[str, ...], value: tuple[Monomial, ...], hint: str) -> MapUse:
        name = f"{_ident(self.v.name)}_{hint}"
        if name in self.c.maps:
            name = None  # an equal definition may exist under it; otherwise a numbered one
        q = self.query(keys, value)
        got, order = self.c.materialize(q, name=name, stem=self.stem)
        return MapUse(got, order)

    def build(self) -> ViewPlan:
        v = self.v
        if v.schema is not None:  # the derived relations first: the view's maps join them
            known = self.c.schema
            self.c.schema = type(known)(known.relations + tuple(r for r in v.schema.relations if r.name not in known))
        relations = []
        for name, sub in v.relations:
            if name not in self.c.derived:
                self.c.derived[name] = _ViewBuilder(self.c, sub).build()
            relations.append((name, self.c.derived[name]))
        count = self.use(v.group, (Monomial(one(), ()),), "count")
        columns = []
        for out in v.outputs:
            hint = _ident(out.name)
            if out.kind == "group":
                col = ViewColumn(out.name, "group", group_index=v.group.index(out.var))
            elif out.kind == "count":
                col = ViewColumn(out.name, "count", values=self.use(v.group, out.value, hint))
            elif out.kind in ("sum", "avg"):
                values = self.use(v.group, out.value, hint)
                nonnull = self.use(v.group, out.nonnull, f"{hint}_nonnull") if out.nonnull else None
                col = ViewColumn(out.name, out.kind, values=values, nonnull=nonnull)
            elif out.var in v.group:  # min / max / ..._distinct of a group key
                col = ViewColumn(out.name, out.kind, group_index=v.group.index(out.var))
            else:  # min / max / ..._distinct: a count per group and value
                values = self.use(v.group + (out.var,), (Monomial(one(), ()),), f"{hint}_values")
                col = ViewColumn(out.name, out.kind, values=values, value_var=out.var)
            columns.append(replace(col, hidden=out.hidden))
        subviews = tuple(_ViewBuilder(self.c, sub).build() for _, sub in v.subviews)
        plan = ViewPlan(v.name, v.sql, v.group, count, tuple(columns), v.dialect,
                        filter_text=v.filter_text, filter_terms=len(v.filter), subviews=subviews, bag=v.bag,
                        relations=tuple(relations), nonempty=v.nonempty,
                        others=tuple((sign, _ViewBuilder(self.c, o).build()) for sign, o in v.others))
        finish = v.finish
        if finish is not None and not finish.trivial([c.name for c in columns if not c.hidden]):
            plan = replace(plan, finish=finish)
        return plan


def compile_views(schema: Schema, views: list[tuple[str, str]], dialect: str = DEFAULT_DIALECT) -> Compilation:
    """Compile views (name, SQL in `dialect`) together, in order; equal maps are shared.
    Names are deterministic for the same views in the same order.

    Compiling is pure, so the last few results are kept (`_Compiled`): the same views
    again cost a copy, and the views of a kept result plus more (`view add`: the
    registered views and a new one) build only the new ones."""
    views = [(name, sql) for name, sql in views]
    seen: set[str] = set()
    for name, _ in views:
        if name in seen:
            raise ValueError(f"view {name} is given twice")
        seen.add(name)
    key = (schema, dialect, tuple(views))
    with _LOCK:
        kept = _COMPILED.get(key)
        if kept is not None:
            _COMPILED.move_to_end(key)
            return kept.copy()
        prefixes = [_COMPILED.get((schema, dialect, tuple(views[:n]))) for n in range(len(views) - 1, 0, -1)]
    compiler, plans = DeltaCompiler(schema), {}
    for prefix in prefixes:  # the longest kept prefix
        if prefix is not None:
            compiler, plans = prefix.compiler.fork(), dict(prefix.plans)
            break
    built = len(plans)
    for name, sql in views[built:]:
        plans[name] = _ViewBuilder(compiler, bind_view(sql, schema, name, dialect)).build()
    try:
        checked = _program(compiler)
    except M3ValidationError as exc:
        raise _no_valid_program(schema, views, built, dialect, exc) from None
    with_types = {name: _typed_plan(checked, plan) for name, plan in plans.items()}
    derived = {name: _typed_plan(checked, plan) for name, plan in compiler.derived.items()}
    compiled = Compilation(schema, checked, dict(compiler.maps), with_types, {r: list(b) for r, b in compiler.batch.items()},
                           derived)
    kept = _Compiled(compiler, plans, compiled)
    with _LOCK:
        _COMPILED[key] = kept
        while len(_COMPILED) > _KEEP:
            _COMPILED.popitem(last=False)
    return kept.copy()


@dataclass(frozen=True)
class _Compiled:
    """A kept compile: the compiler's state after the views (never changed again: a
    longer list forks it), their untyped plans, and the result."""

    compiler: DeltaCompiler
    plans: dict[str, ViewPlan]
    result: Compilation

    def copy(self) -> Compilation:
        r = self.result
        return replace(r, checked=replace(r.checked, maps=dict(r.checked.maps)), maps=dict(r.maps),
                       views=dict(r.views), batch={k: list(b) for k, b in r.batch.items()}, derived=dict(r.derived))


_KEEP = 8
_COMPILED: OrderedDict[tuple, _Compiled] = OrderedDict()
_LOCK = threading.Lock()  # the warm engine's requests run in threads


def _no_valid_program(schema: Schema, views: list[tuple[str, str]], built: int, dialect: str,
                      exc: M3ValidationError) -> UnsupportedSQLError:
    """The refusal of the first view (after the `built` ones, which compiled) whose
    program M3 refuses: a construct the front end let through without an M3 form (a key
    of no type, CAST(NULL AS INT) as a group column, say). Unsupported SQL, so that `view
    add` keeps the view by full refresh rather than failing."""
    culprit = views[-1][0]
    for n in range(built + 1, len(views)):
        compiler = DeltaCompiler(schema)
        for name, sql in views[:n]:
            _ViewBuilder(compiler, bind_view(sql, schema, name, dialect)).build()
        try:
            _program(compiler)
        except M3ValidationError:
            culprit = views[n - 1][0]
            break
    return UnsupportedSQLError(f"view {culprit} has no incremental form here: its compiled program is not valid M3 "
                               f"({exc.what})", Position(1, 1, culprit))


def _typed_plan(checked: CheckedProgram, plan: ViewPlan) -> ViewPlan:
    """The plan with its columns' types, and its read-time comparisons checked against them."""
    plan = replace(plan, columns=tuple(_typed(checked, plan, c) for c in plan.columns),
                   subviews=tuple(_typed_plan(checked, s) for s in plan.subviews),
                   relations=tuple((n, _typed_plan(checked, d)) for n, d in plan.relations),
                   others=tuple((sign, _typed_plan(checked, o)) for sign, o in plan.others))
    return replace(plan, finish=plan.finish and typed(plan.finish, plan.types, plan.sql))


def _typed(checked: CheckedProgram, plan: ViewPlan, c: ViewColumn) -> ViewColumn:
    """A column with its type: the sum map's value type, the group key's or the value's."""
    count = checked.maps[plan.count.map]
    if c.kind in ("sum", "avg"):
        return replace(c, type=checked.maps[c.values.map].type if c.kind == "sum" else "float")  # type: ignore[union-attr]
    if c.kind in ("count", "count_distinct"):
        return replace(c, type="int")
    if c.kind == "avg_distinct":
        return replace(c, type="float")
    if c.group_index is not None:
        var = plan.group[c.group_index]
        return replace(c, type=count.key_types[plan.count.keys.index(var)])
    info = checked.maps[c.values.map]  # type: ignore[union-attr]
    return replace(c, type=info.key_types[c.values.keys.index(c.value_var)])  # type: ignore[union-attr, arg-type]


def _program(compiler: DeltaCompiler) -> CheckedProgram:
    schema = compiler.schema
    triggers = []
    for rel in schema.relations:
        for sign in ("+", "-"):
            stmts = compiler.statements.get((sign, rel.name))
            if stmts:
                triggers.append(Trigger(sign, rel.name, rel.column_names, tuple(stmts)))
    bare = Program((), tuple(triggers))
    inferred = validate(bare, schema)
    decls = tuple(
        MapDecl(name, tuple(zip(d.query.keys, inferred.maps[name].key_types, strict=True)), inferred.maps[name].type)
        for name, d in compiler.maps.items()
    )
    return validate(Program(decls, bare.triggers), schema)


# ---------------------------------------------------------------- view semantics

_ZERO = {"int": 0, "decimal": Decimal(0), "float": 0.0}


def _average(total, count) -> float:
    """AVG as a double, as DuckDB and most engines give it; its sum and count stay exact."""
    return float(total) / count


VALUE_KINDS = ("min", "max", "count_distinct", "sum_distinct", "avg_distinct")


def _of_values(kind: str, values: list):
    """MIN, MAX, COUNT/SUM/AVG(DISTINCT) of a group's distinct non-NULL values."""
    if kind == "count_distinct":
        return len(values)
    if not values:
        return None
    if kind in ("min", "max"):
        return (min if kind == "min" else max)(values, key=nan_last)  # (NaN above every number)
    total = values[0]
    for v in values[1:]:
        total = EXACT.add(total, v) if isinstance(total, Decimal) else total + v
    return total if kind == "sum_distinct" else float(total) / len(values)


def view_rows(plan: ViewPlan, read_map: Callable[[str], Mapping[tuple, object]]) -> list[tuple]:
    """The view's rows (columns in SELECT order) from its maps' entries; `read_map(name)`
    returns a map's entries as {key tuple: value}."""
    cache: dict[str, Mapping[tuple, object]] = {}

    def entries(name: str) -> Mapping[tuple, object]:
        if name not in cache:
            cache[name] = read_map(name)
        return cache[name]

    def lookup(use: MapUse, group: dict[str, object]):
        return entries(use.map).get(tuple(group[k] for k in use.keys), 0)

    counts = entries(plan.count.map)
    groups: list[dict[str, object]] = []
    for key, n in counts.items():
        if n and n > 0:
            groups.append(dict(zip(plan.count.keys, key, strict=True)))
    if not plan.group and not groups and not plan.bag and not plan.nonempty:
        groups = [{}]  # an aggregate without GROUP BY has one row, even over nothing

    extremes: dict[tuple[str, str], dict[tuple, list]] = {}
    for col in plan.columns:
        if col.value_var is not None and col.values is not None:
            per_group: dict[tuple, list] = {}
            for key, n in entries(col.values.map).items():
                row = dict(zip(col.values.keys, key, strict=True))
                value = row[col.value_var]
                if n and n > 0 and value is not None:
                    per_group.setdefault(tuple(row[g] for g in plan.group), []).append(value)
            extremes[(col.name, col.kind)] = per_group

    rows = []
    for g in groups:
        row: list = []
        group_count = lookup(plan.count, g)
        for col in plan.columns:
            if col.kind == "group":
                row.append(g[plan.group[col.group_index]])
            elif col.kind in VALUE_KINDS and col.values is None:  # of a group key
                row.append(_of_values(col.kind, [] if g[plan.group[col.group_index]] is None
                                      else [g[plan.group[col.group_index]]]))
            elif col.kind in VALUE_KINDS:
                row.append(_of_values(col.kind, extremes[(col.name, col.kind)].get(tuple(g[k] for k in plan.group), [])))
            elif col.kind == "count":
                row.append(lookup(col.values, g))
            else:
                n = lookup(col.nonnull, g) if col.nonnull else group_count
                total = entries(col.values.map).get(tuple(g[k] for k in col.values.keys), _ZERO[col.type])
                if not n:
                    row.append(None)
                elif col.kind == "sum":
                    row.append(total)
                else:
                    row.append(_average(total, n))
        rows.append(tuple(row))
    if plan.bag:  # each row as many times as it occurs
        repeats = [int(lookup(plan.count, g)) for g in groups]
        rows = [r for r, n in zip(rows, repeats, strict=True) for _ in range(n)]
        groups = [g for g, n in zip(groups, repeats, strict=True) for _ in range(n)]
    if plan.finish is None:
        return [tuple(v for v, c in zip(r, plan.columns, strict=True) if not c.hidden) for r in rows]
    names = [c.name for c in plan.columns]
    subqueries = {view_key(s.name): tuple(r[0] for r in view_rows(s, entries)) for s in plan.subviews}
    keyed = [dict(zip(names, r, strict=True)) | {f"__group{i}": g[k] for i, k in enumerate(plan.group)} | subqueries
             for r, g in zip(rows, groups, strict=True)]
    return apply(plan.finish, keyed, [f"__group{i}" for i in range(len(plan.group))])
