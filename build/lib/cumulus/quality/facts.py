"""What the compiled program says about each map, for the `maps` suite: whether the map
counts rows (so it is never negative at a closed epoch) and which of its key columns can
never be NULL. Read from each map's defining query (`Compilation.maps[m].query`, the SUM
over a join of relation atoms that the map materializes), not from the engine.

A map *counts* when every monomial of its value is a positive constant times 0/1
indicators (COUNT(*), or COUNT of the non-NULL values of an expression): a sum over the
join of products of multiplicities, each >= 0 at a closed epoch. A key *cannot be NULL*
when its variable is a NOT NULL column, is shared by two column positions (an equi-join
never matches NULL), is compared directly in a filter (a comparison with NULL is never
true), or is derived from such variables by arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

from cumulus.m3.ast import And, Cmp, Const, Expr, If, IsNull, Var
from cumulus.m3.validate import MapInfo
from cumulus.schema import Schema
from cumulus.sql.calculus import Query
from cumulus.sql.views import Compilation

COUNT, VALUE = "count", "value"


@dataclass(frozen=True)
class MapFacts:
    name: str
    keys: tuple[str, ...]  # the table's key columns, in order
    value_type: str  # int | decimal | float
    kind: str  # COUNT or VALUE
    not_null_keys: tuple[str, ...]  # key columns that can never hold NULL
    info: MapInfo  # the map's names and types, to read its slice of maps.entries


def map_facts(compilation: Compilation) -> dict[str, MapFacts]:
    """Facts for every map of the compiled program, by name."""
    out = {}
    for name, definition in compilation.maps.items():
        info = compilation.checked.maps[name]
        query = definition.query
        nonnull = not_null_vars(query, compilation.checked.schema)  # (derived relations too)
        keys = tuple(info.key_names)
        required = tuple(k for k, var in zip(keys, query.keys, strict=True) if var in nonnull)
        out[name] = MapFacts(name, keys, info.type, COUNT if counts_rows(query) else VALUE, required, info)
    return out


def counts_rows(query: Query) -> bool:
    """True when the query's value is a count of joined rows (never negative)."""
    if not query.value:
        return False
    for mono in query.value:
        if not (isinstance(mono.coef, Const) and isinstance(mono.coef.value, int) and mono.coef.value > 0):
            return False
        if not all(_indicator(expr) for _, expr in mono.factors):
            return False
    return True


def _indicator(e: Expr) -> bool:
    """IF c THEN 1 ELSE 0 (or THEN 0 ELSE 1): 0 or 1 for every row."""
    if not isinstance(e, If):
        return False
    values = {c.value for c in (e.then, e.else_) if isinstance(c, Const) and c.type == "int"}
    return values == {0, 1}


def not_null_vars(query: Query, schema: Schema) -> set[str]:
    """The variables of the query that are never NULL in a row of its join."""
    positions: dict[str, int] = {}
    declared_not_null: set[str] = set()
    for atom in query.atoms:
        relation = schema.relation(atom.relation)
        for var, column in zip(atom.vars, relation.columns, strict=True):
            positions[var] = positions.get(var, 0) + 1
            if not column.nullable:
                declared_not_null.add(var)
    out = {v for v, n in positions.items() if n > 1} | declared_not_null
    for _, cond in query.conds:
        out |= _null_rejected(cond)
    changed = True
    while changed:  # derived variables over non-NULL variables, by arithmetic
        changed = False
        for d in query.derived:
            if d.var not in out and not _may_be_null(d.expr, out):
                out.add(d.var)
                changed = True
    return out


def _null_rejected(cond) -> set[str]:
    """Variables that a filter proves non-NULL (only what is certain; OR and NOT prove nothing)."""
    if isinstance(cond, And):
        return _null_rejected(cond.left) | _null_rejected(cond.right)
    if isinstance(cond, Cmp):
        return {side.name for side in (cond.left, cond.right) if isinstance(side, Var)}
    if isinstance(cond, IsNull) and cond.negated and isinstance(cond.operand, Var):
        return {cond.operand.name}
    return set()


def _may_be_null(e: Expr, nonnull: set[str]) -> bool:
    if isinstance(e, Const):
        return e.value is None
    if isinstance(e, Var):
        return e.name not in nonnull
    if isinstance(e, If):
        return _may_be_null(e.then, nonnull) or _may_be_null(e.else_, nonnull)
    children = e.children()
    return any(_may_be_null(c, nonnull) for c in children) if children else True
