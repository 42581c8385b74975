"""Calculus -> M3: DBToaster-style recursive delta compilation.

For a map defined by a query Q and an event +R(t) (or -R(t)), the delta of Q is the sum,
over every non-empty set S of Q's R-atoms, of Q with the atoms in S bound to t (times
the event's sign to the power |S|: the delta-join-delta terms of a self-join). Binding
fixes some variables; the remaining atoms fall apart into connected components (atoms
that still share an unbound variable), and each component is itself an aggregate
query keyed by the bound variables it touches and the group variables it holds. Each
component is materialized as a map (shared when an equal one exists) and compiled the
same way, until a delta needs no map at all. Every statement is a product of event
values, 0/1 filter indicators and map lookups, so it is restricted M3 by construction.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from cumulus.m3.ast import (
    And,
    Cmp,
    Cond,
    Const,
    Expr,
    If,
    IsNull,
    MapRef,
    Statement,
    Var,
    product,
    variables,
)
from cumulus.schema import INT, Schema
from cumulus.sql.calculus import Monomial, Query, canonical, one, rename, restrict
from cumulus.sql.sqltext import query_sql


@dataclass(frozen=True)
class MapDef:
    """A materialized map: its name, its defining query (keys in the map's key order),
    and the SQL it stands for (printed as a comment above its declaration)."""

    name: str
    query: Query
    sql: str


@dataclass(frozen=True)
class BatchStatement:
    """A delta statement as the Spark engine evaluates it over a batch of events of one
    relation (signed by each event's op). `copies` is how many atoms of the relation it
    binds: 1 for the ordinary trigger statements (the trigger's variables as columns);
    k > 1 for the delta-join-delta terms of a self-join, which join k copies of the
    batch, copy j's columns named `<column>__<j>`, on the column pairs in `joins`."""

    relation: str
    copies: int
    statement: Statement
    joins: tuple[tuple[str, str], ...] = ()
    sign: str | None = None  # None: every event, times its op; "+"/"-": only those events


@dataclass
class DeltaCompiler:
    """Holds the maps compiled so far (by canonical definition, for sharing) and the
    statements of every trigger. `materialize` adds a map and, recursively, every map
    its deltas need."""

    schema: Schema
    maps: dict[str, MapDef] = field(default_factory=dict)
    by_definition: dict[str, str] = field(default_factory=dict)
    statements: dict[tuple[str, str], list[Statement]] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    batch: dict[str, list[BatchStatement]] = field(default_factory=dict)
    # The derived relations compiled so far (cumulus/sql/nested.py), in order: name -> the
    # nested query's view plan (cumulus/sql/views.py); `schema` declares them.
    derived: dict[str, Any] = field(default_factory=dict)

    def fork(self) -> DeltaCompiler:
        """A copy to compile more views into, leaving this one as it is (its maps,
        statements and batch statements are immutable; only the containers are copied)."""
        return DeltaCompiler(self.schema, dict(self.maps), dict(self.by_definition),
                             {k: list(v) for k, v in self.statements.items()}, dict(self.counters),
                             {k: list(v) for k, v in self.batch.items()}, dict(self.derived))

    def params(self, relation: str) -> tuple[str, ...]:
        return self.schema.relation(relation).column_names

    def materialize(self, query: Query, name: str | None = None, stem: str = "m") -> tuple[str, tuple[str, ...]]:
        """The map for `query` (an existing equal one, or a new one named `name` or
        `<stem><n>`), and the query's key variables in the map's key order."""
        text, keys = canonical(query)
        existing = self.by_definition.get(text)
        if existing is not None:
            return existing, keys
        if name is None:
            n = self.counters.get(stem, 0) + 1
            while f"{stem}{n}" in self.maps:
                n += 1
            self.counters[stem] = n
            name = f"{stem}{n}"
        if name in self.maps:
            raise ValueError(f"map name {name} is already taken by another definition")
        ordered = replace(query, keys=keys)
        self.maps[name] = MapDef(name, ordered, query_sql(ordered, self.schema))
        self.by_definition[text] = name
        for relation in dict.fromkeys(ordered.relations):
            for sign in ("+", "-"):
                self.compile_delta(name, ordered, relation, sign, stem)
        return name, keys

    def compile_delta(self, name: str, q: Query, relation: str, sign: str, stem: str) -> None:
        params = self.params(relation)
        occurrences = [i for i, a in enumerate(q.atoms) if a.relation == relation]
        out = self.statements.setdefault((sign, relation), [])
        batch = self.batch.setdefault(relation, [])
        for size in range(1, len(occurrences) + 1):
            for chosen in itertools.combinations(occurrences, size):
                coef = -1 if sign == "-" and size % 2 else 1
                stmts, _ = self.delta_statements(name, q, chosen, params, coef, stem, copies=False)
                out.extend(stmts)
                if sign == "+":  # the batch form is signed by the events' ops instead
                    if size == 1:
                        batch.extend(BatchStatement(relation, 1, st) for st in stmts)
                    else:
                        stmts, joins = self.delta_statements(name, q, chosen, params, 1, stem, copies=True)
                        batch.extend(BatchStatement(relation, size, st, joins) for st in stmts)

    def delta_statements(
        self, name: str, q: Query, chosen: tuple[int, ...], params: tuple[str, ...], coef: int, stem: str,
        copies: bool,
    ) -> tuple[list[Statement], tuple[tuple[str, str], ...]]:
        """The statements for the delta of `q` with the atoms `chosen` bound to events.
        One event binds them all (a trigger), or, with `copies`, atom j of `chosen` binds
        to copy j of the batch and variables shared between copies become join columns."""
        binding: dict[str, Expr] = {}
        tests: list[Cond] = []
        joins: list[tuple[str, str]] = []

        def bind(var: str, value: Expr) -> None:
            if var not in binding:
                binding[var] = value
            elif binding[var] == value:
                # One event binds both sides of an equi-join (a self-join on a column):
                # SQL's x = x holds for a non-NULL x only.
                if not copies and (test := IsNull(value, negated=True)) not in tests:
                    tests.append(test)
            else:
                old = binding[var]
                if copies and isinstance(old, Var) and isinstance(value, Var) and old.name.split("__")[1] != value.name.split("__")[1]:
                    joins.append((old.name, value.name))
                else:
                    tests.append(_eq(old, value))  # a variable bound twice: an equality test

        names = params
        for j, i in enumerate(chosen):
            cols = tuple(f"{p}__{j}" for p in params) if copies else params
            if copies:
                names = names + cols
            for param, var in zip(cols, q.atoms[i].vars, strict=True):
                bind(var, Var(param))
        bound_atoms = set(chosen)
        for d in q.derived:
            if d.atom in bound_atoms:
                bind(d.var, rename(d.expr, binding))
        tests.extend(rename(c, binding) for i, c in q.conds if i in bound_atoms)  # type: ignore[misc]
        # A cross condition over bound variables only is a test of the event; any other is
        # tested in the statement, its unbound variables keys of the maps holding them.
        tests.extend(rename(c, binding) for c in q.cross if variables(c) <= set(binding))  # type: ignore[misc]
        open_cross = [c for c in q.cross if not variables(c) <= set(binding)]
        extra = set().union(*(variables(c) for c in open_cross)) - set(binding)

        rest = [i for i in range(len(q.atoms)) if i not in bound_atoms]
        pieces, cut = factorize(q, rest, set(binding), extra)
        loop = _loop_names(q, names, binding, cut)
        statements = []
        for mono in q.value:
            factors: list[Expr] = []
            if tests:
                factors.append(If(_conjunction(tests), one(), Const(0, INT)))
            if coef != 1:
                factors.append(Const(coef, INT))
            if mono.coef != one():
                factors.append(mono.coef)
            factors.extend(rename(f, binding) for i, f in mono.factors if i in bound_atoms)
            lookups = []
            for comp in pieces:
                comp_vars = set().union(*(q.atom_vars(i) for i in comp))
                bound_keys = [v for v in _ordered_vars(q, comp) if v in binding]
                free_keys = [k for k in q.keys if k in comp_vars and k not in binding]
                shared = [v for v in _ordered_vars(q, comp) if v in cut and v not in free_keys]
                value = (Monomial(one(), tuple((i, f) for i, f in mono.factors if i in comp)),)
                sub = restrict(q, comp, tuple(bound_keys + free_keys + shared), value)
                sub_name, order = self.materialize(sub, stem=stem)
                lookups.append((MapRef(sub_name, tuple(binding[k] if k in binding else Var(loop[k]) for k in order)),
                                order))
            factors.extend(_join_order(q, lookups, set(binding)))
            env = {v: (binding[v] if v in binding else Var(loop[v])) for c in open_cross for v in variables(c)}
            factors.extend(If(rename(c, env), one(), Const(0, INT)) for c in open_cross)
            target = MapRef(name, tuple(binding[k] if k in binding else Var(loop[k]) for k in q.keys))
            statements.append(Statement(target, product(factors)))
        return statements, tuple(joins)


def _eq(a: Expr, b: Expr) -> Cond:
    return Cmp("=", a, b)


def _conjunction(conds: list[Cond]) -> Cond:
    out = conds[0]
    for c in conds[1:]:
        out = And(out, c)
    return out


def _ordered_vars(q: Query, atoms: list[int]) -> list[str]:
    """Variables of some atoms in order of appearance (columns, then derived)."""
    out: list[str] = []
    for i in atoms:
        out.extend(q.atoms[i].vars)
    out.extend(d.var for d in q.derived if d.atom in atoms)
    return list(dict.fromkeys(out))


def factorize(q: Query, atoms: list[int], bound: set[str], extra: set[str] = frozenset()) -> tuple[list[list[int]], set[str]]:  # type: ignore[assignment]
    """The atoms a delta leaves (`bound`: the variables the event binds) as the pieces to
    materialize, each a map, and the variables cut between pieces (loop variables the
    statement sums over, keys of every piece that holds them).

    First the connected components through unbound variables, as DBToaster's graph
    decomposition. A piece is kept whole when its keys (the bound, group and cut
    variables it holds) are all variables of one of its atoms: the map then has at most
    one entry per tuple of that atom's relation, so its size is linear in the data.
    Otherwise it is split at the shared variable that leaves the fewest pieces not so
    guarded (then the most pieces), recursively: Q5's delta for an order keeps
    customer[c, N], lineitem[o, S], supplier[S, N] and nation-region[N, name] and sums
    over N and S, where one map of the component would pair every customer with every
    line item of its nation. A cycle that no one variable cuts (a triangle) is split into
    its atoms. DBToaster reaches Q5's linear maps only by declaring NATION and REGION
    static tables (its `_T_` decomposition); this rule needs no declaration. `extra`:
    variables that must be keys of the pieces holding them (a cross condition's, tested
    in the statement), cut from the start."""
    cut: set[str] = set(extra)

    def keys(piece: list[int]) -> set[str]:
        return set().union(*(q.atom_vars(i) for i in piece)) & (bound | set(q.keys) | cut)

    def guarded(piece: list[int], extra: set[str] = frozenset()) -> bool:  # type: ignore[assignment]
        wanted = keys(piece) | (extra & set().union(*(q.atom_vars(i) for i in piece)))
        return any(wanted <= q.atom_vars(i) for i in piece)

    def split(piece: list[int]) -> list[list[int]]:
        if len(piece) == 1:
            return [piece]
        if guarded(piece):
            return redundant(piece)
        counts: dict[str, int] = {}
        for i in piece:
            for v in q.atom_vars(i) - bound - cut:
                counts[v] = counts.get(v, 0) + 1
        best: tuple[tuple, str, list[list[int]]] | None = None
        for v in sorted(v for v, n in counts.items() if n > 1):
            parts = _components(q, piece, bound | cut | {v})
            if len(parts) < 2:
                continue
            score = (sum(not guarded(p, {v}) for p in parts), -len(parts), v)
            if best is None or score < best[0]:
                best = (score, v, parts)
        if best is None:  # a cycle: every shared variable is cut
            cut.update(v for v, n in counts.items() if n > 1)
            return [[i] for i in piece]
        cut.add(best[1])
        return [p for part in best[2] for p in split(part)]

    def redundant(piece: list[int]) -> list[list[int]]:
        """A guarded piece whose guard atom shares only key variables with the others
        holds no more than the guard's own map times lookups of the others by those
        keys (lineitem joined with partsupp on both of partsupp's keys, keyed by
        lineitem's columns): it is split there, so that the single-relation maps are
        shared instead of a copy of lineitem's per join."""
        here = keys(piece)
        for a in piece:
            others = [i for i in piece if i != a]
            shared = q.atom_vars(a) & set().union(*(q.atom_vars(i) for i in others))
            if here <= q.atom_vars(a) and shared <= here:
                cut.update(shared - bound)
                return [[a]] + [p for part in _components(q, others, bound | cut) for p in split(part)]
        return [piece]

    pieces = [p for comp in _components(q, atoms, bound) for p in split(comp)]
    return sorted(pieces), cut


def _join_order(q: Query, lookups: list[tuple[MapRef, tuple[str, ...]]], bound: set[str]) -> list[MapRef]:
    """A term's map factors in the order to join them (the interpreter's loops nest so,
    the Spark plan joins so): next, the one with the most keys bound so far (by the
    event or the factors before it), then the fewest left free, then the one probed by
    the variable of fewest atoms of the query (a variable many relations share, such as
    a nation key, tends to have few values: probing by it matches many entries)."""
    degree = {v: sum(v in q.atom_vars(i) for i in range(len(q.atoms))) for v in set().union(*(o for _, o in lookups))}
    known, pending, out = set(bound), list(range(len(lookups))), []
    while pending:
        def score(n: int) -> tuple[int, int, int, int]:
            keys = lookups[n][1]
            hit = [v for v in keys if v in known]
            return (-len(hit), len(keys) - len(hit), min((degree[v] for v in hit), default=len(q.atoms) + 1), n)
        best = min(pending, key=score)
        pending.remove(best)
        out.append(lookups[best][0])
        known.update(lookups[best][1])
    return out


def _components(q: Query, atoms: list[int], bound: set[str]) -> list[list[int]]:
    """Atoms grouped by connectivity through unbound variables."""
    comps: list[list[int]] = []
    for i in atoms:
        mine = q.atom_vars(i) - bound
        touching = [c for c in comps if any(mine & (q.atom_vars(j) - bound) for j in c)]
        merged = [i] + [j for c in touching for j in c]
        comps = [c for c in comps if c not in touching] + [sorted(merged)]
    return sorted(comps)


def _loop_names(q: Query, params: tuple[str, ...], binding: dict[str, Expr], cut: set[str]) -> dict[str, str]:
    """Names for the unbound key variables and the cut variables that do not clash with
    the trigger's."""
    taken = set(params)
    out = {}
    for k in [*q.keys, *sorted(cut - set(q.keys))]:
        if k in binding:
            continue
        name = k
        while name in taken:
            name = f"{name}_"
        taken.add(name)
        out[k] = name
    return out

