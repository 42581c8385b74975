"""The compiler's middle representation: an aggregate query as a sum over a join of
relation atoms (DBToaster's calculus, restricted to what the SQL front end produces).

A `Query` is  SUM_{atoms joined on shared variables, filtered} value  GROUP BY keys.
Variables name join classes: two atoms sharing a variable are equi-joined on it. A
`Derived` variable is a scalar expression of one atom's columns (EXTRACT(YEAR FROM d),
a CASE, ...) used as a key or join value. The value is a polynomial whose monomials are
products of atom-local factors, so that the delta for one relation factorizes.

Queries are values; `canonical()` renames variables and orders atoms so that two maps
with equal definitions compare equal, which is how views share maps."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from cumulus.m3.ast import (
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
    MapRef,
    Neg,
    Not,
    Or,
    Var,
)
from cumulus.m3.printer import format_cond, format_expr


@dataclass(frozen=True)
class Atom:
    relation: str
    vars: tuple[str, ...]  # one variable per column, in column order


@dataclass(frozen=True)
class Derived:
    """Variable `var` is `expr`, an expression over the column variables of atom `atom`."""

    var: str
    atom: int
    expr: Expr


@dataclass(frozen=True)
class Monomial:
    coef: Expr  # a constant factor (Const or a product of constants)
    factors: tuple[tuple[int, Expr], ...]  # (atom index, expression over that atom's vars)


@dataclass(frozen=True)
class Query:
    atoms: tuple[Atom, ...]
    derived: tuple[Derived, ...]
    conds: tuple[tuple[int, Cond], ...]  # (atom index, filter over that atom's vars)
    keys: tuple[str, ...]
    value: tuple[Monomial, ...]
    names: tuple[tuple[str, str], ...] = field(default=(), compare=False)  # var -> readable name
    # Conditions over the columns of several atoms other than equalities (r.a < s.b): the
    # value counts only where they hold. A delta tests them in its statement, over the
    # event's values and the keys of the maps it reads (to_m3.DeltaCompiler).
    cross: tuple[Cond, ...] = ()

    def atom_vars(self, i: int) -> set[str]:
        """Every variable atom i defines: its columns and its derived variables."""
        out = set(self.atoms[i].vars)
        out.update(d.var for d in self.derived if d.atom == i)
        return out

    @property
    def relations(self) -> tuple[str, ...]:
        return tuple(a.relation for a in self.atoms)


def rename(e: Expr, mapping: dict[str, Expr]) -> Expr:
    """Substitute variables in an expression or condition (a fresh tree)."""
    if isinstance(e, Var):
        return mapping.get(e.name, e)
    if isinstance(e, Const):
        return e
    if isinstance(e, MapRef):
        return MapRef(e.name, tuple(rename(a, mapping) for a in e.args))
    if isinstance(e, BinOp):
        return BinOp(e.op, rename(e.left, mapping), rename(e.right, mapping))
    if isinstance(e, Neg):
        return Neg(rename(e.operand, mapping))
    if isinstance(e, Call):
        return Call(e.func, tuple(rename(a, mapping) for a in e.args))
    if isinstance(e, If):
        return If(rename(e.cond, mapping), rename(e.then, mapping), rename(e.else_, mapping))  # type: ignore[arg-type]
    if isinstance(e, Cmp):
        return Cmp(e.op, rename(e.left, mapping), rename(e.right, mapping))
    if isinstance(e, IsNull):
        return IsNull(rename(e.operand, mapping), e.negated)
    if isinstance(e, Like):
        return Like(rename(e.operand, mapping), e.pattern, e.negated)
    if isinstance(e, Not):
        return Not(rename(e.operand, mapping))  # type: ignore[arg-type]
    if isinstance(e, And):
        return And(rename(e.left, mapping), rename(e.right, mapping))  # type: ignore[arg-type]
    if isinstance(e, Or):
        return Or(rename(e.left, mapping), rename(e.right, mapping))  # type: ignore[arg-type]
    raise TypeError(f"cannot rename in {e!r}")


def _text(e: Expr) -> str:
    return format_cond(e) if isinstance(e, Cond) else format_expr(e)


def _signature(q: Query, order: tuple[int, ...]) -> tuple[str, tuple[str, ...]]:
    """The definition as text with atoms in `order` and variables renamed v0, v1, ... in
    order of appearance; keys are listed sorted, so key order does not matter. Returns
    the text and the keys (original names) in that sorted order."""
    names: dict[str, str] = {}

    def name(v: str) -> str:
        if v not in names:
            names[v] = f"v{len(names)}"
        return names[v]

    pos = {old: new for new, old in enumerate(order)}
    parts = []
    for i in order:
        parts.append(f"{q.atoms[i].relation}({','.join(name(v) for v in q.atoms[i].vars)})")
    for d in sorted(q.derived, key=lambda d: (pos[d.atom], _text(rename(d.expr, {v: Var(names[v]) for v in names})))):
        text = _text(rename(d.expr, {v: Var(names[v]) for v in names}))
        parts.append(f"{name(d.var)}:={pos[d.atom]}:{text}")
    mapping = {v: Var(n) for v, n in names.items()}
    parts.append("where " + " & ".join(sorted(f"{pos[i]}:{_text(rename(c, mapping))}" for i, c in q.conds)))
    keys = tuple(sorted(q.keys, key=lambda k: int(names[k][1:])))
    parts.append("keys " + ",".join(names[k] for k in keys))
    monos = sorted(
        _text(rename(m.coef, mapping)) + "*" + "*".join(sorted(f"{pos[i]}:{_text(rename(f, mapping))}" for i, f in m.factors))
        for m in q.value
    )
    parts.append("value " + " + ".join(monos))
    if q.cross:
        parts.append("cross " + " & ".join(sorted(_text(rename(c, mapping)) for c in q.cross)))
    return " ; ".join(parts), keys


def canonical(q: Query) -> tuple[str, tuple[str, ...]]:
    """A text equal for queries that differ only in variable names, atom order and key
    order, and the query's keys in the canonical order that goes with it."""
    # Atoms of the same relation can be permuted; try every arrangement (queries are
    # small) and keep the smallest text.
    groups: dict[str, list[int]] = {}
    for i, a in enumerate(q.atoms):
        groups.setdefault(a.relation, []).append(i)
    best: tuple[str, tuple[str, ...]] | None = None
    for perms in itertools.product(*(itertools.permutations(groups[r]) for r in sorted(groups))):
        candidate = _signature(q, tuple(i for p in perms for i in p))
        if best is None or candidate[0] < best[0]:
            best = candidate
    assert best is not None
    return best


def restrict(q: Query, atoms: list[int], keys: tuple[str, ...], value: tuple[Monomial, ...]) -> Query:
    """The sub-query over a subset of the atoms (indexes renumbered), without the cross
    conditions (a delta tests those in its statement)."""
    index = {old: new for new, old in enumerate(atoms)}
    return replace(
        q,
        cross=(),
        atoms=tuple(q.atoms[i] for i in atoms),
        derived=tuple(replace(d, atom=index[d.atom]) for d in q.derived if d.atom in index),
        conds=tuple((index[i], c) for i, c in q.conds if i in index),
        keys=keys,
        value=tuple(
            Monomial(m.coef, tuple((index[i], f) for i, f in m.factors if i in index)) for m in value
        ),
    )


def one() -> Expr:
    return Const(1, "int")
