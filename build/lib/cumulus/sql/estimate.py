"""How many entries a compiled view's maps will hold, estimated from the base relations'
statistics before anything is stored: `cumulus explain --stats` / `--home`, and `view
add`, which refuses a view whose state would pass a bound (entries per base row).

A map is `SUM value GROUP BY keys` over a join of atoms. Its entries are at most:
- the product of its keys' distinct values (a variable's: the fewest of its columns');
- the join's size, estimated as usual (the relations' rows over, per variable shared by
  k atoms, its distinct values to the power k - 1);
- the rows of an atom that holds every key (the compiler's guard: one entry per tuple).
The least of the three is the estimate. A filter `column = constant` (also under AND)
keeps 1/distinct of its relation's rows, as if values were uniform (TPC-H Q8's one part
type of 150); other filters are not counted (they only remove); a derived key (EXTRACT(YEAR FROM d), a CASE) has at most its
atom's rows and its columns' distinct values."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cumulus.errors import ConfigError
from cumulus.m3.ast import And, Call, Cmp, Cond, Const, Expr, If, Var, variables
from cumulus.schema import Schema
from cumulus.sql.calculus import Query
from cumulus.sql.views import Compilation


@dataclass(frozen=True)
class Statistics:
    """Rows per relation and distinct values per (relation, column), as of some data."""

    rows: Mapping[str, int]
    distinct: Mapping[tuple[str, str], int] = field(default_factory=dict)
    source: str = ""  # where they come from, for messages

    def ndv(self, relation: str, column: str) -> int:
        return max(1, int(self.distinct.get((relation, column), self.rows.get(relation, 1))))

    @classmethod
    def load(cls, path: str | Path) -> Statistics:
        """A JSON file: {"relation": {"rows": N, "distinct": {"column": N, ...}}, ...}."""
        try:
            data = json.loads(Path(path).read_text())
            rows = {r.lower(): int(v["rows"]) for r, v in data.items()}
            distinct = {(r.lower(), c.lower()): int(n) for r, v in data.items() for c, n in v.get("distinct", {}).items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"cannot read statistics from {path}: {exc}; expected "
                              '{"relation": {"rows": N, "distinct": {"column": N}}}') from None
        return cls(rows, distinct, str(path))

    def to_json(self) -> str:
        out: dict[str, dict] = {r: {"rows": n, "distinct": {}} for r, n in self.rows.items()}
        for (r, c), n in self.distinct.items():
            out.setdefault(r, {"rows": 0, "distinct": {}})["distinct"][c] = n
        return json.dumps(out, indent=1, sort_keys=True) + "\n"


@dataclass(frozen=True)
class MapEstimate:
    name: str
    keys: tuple[str, ...]
    entries: int


@dataclass(frozen=True)
class ViewEstimate:
    view: str
    maps: tuple[MapEstimate, ...]  # every map the view needs, largest first
    base_rows: int  # the rows of the relations the view reads

    @property
    def entries(self) -> int:
        return sum(m.entries for m in self.maps)

    @property
    def per_base_row(self) -> float:
        return self.entries / self.base_rows if self.base_rows else 0.0


def map_entries(q: Query, stats: Statistics, schema: Schema) -> int:
    """The estimate of one map's entries (the module's rule)."""
    columns: dict[str, list[tuple[str, str]]] = {}
    for a in q.atoms:
        for column, var in zip(schema.relation(a.relation).column_names, a.vars, strict=True):
            columns.setdefault(var, []).append((a.relation, column))

    def ndv(var: str) -> float:
        if var in columns:
            return float(min(stats.ndv(r, c) for r, c in columns[var]))
        derived = next(d for d in q.derived if d.var == var)
        rows = float(stats.rows.get(q.atoms[derived.atom].relation, 1))
        return max(1.0, min(rows, math.prod(ndv(v) for v in variables(derived.expr)), _values(derived.expr)))

    rows = [max(1.0, stats.rows.get(a.relation, 0) * math.prod(_kept(c, ndv) for i, c in q.conds if i == n))
            for n, a in enumerate(q.atoms)]
    join = float(math.prod(rows))
    for v in set().union(*(q.atom_vars(i) for i in range(len(q.atoms)))):
        k = sum(v in q.atom_vars(i) for i in range(len(q.atoms)))
        if k > 1:
            join /= ndv(v) ** (k - 1)
    by_keys = math.prod(ndv(k) for k in q.keys)
    guards = [float(rows[i]) for i in range(len(q.atoms)) if set(q.keys) <= q.atom_vars(i)]
    return int(max(0.0, min([join, by_keys, *guards])))


def _kept(c: Cond, ndv) -> float:
    """The share of an atom's rows a filter keeps: 1/distinct for `column = constant`
    (conjuncts multiply), all of them otherwise."""
    if isinstance(c, And):
        return _kept(c.left, ndv) * _kept(c.right, ndv)
    if isinstance(c, Cmp) and c.op == "=":
        var = c.left if isinstance(c.right, Const) else c.right if isinstance(c.left, Const) else None
        if isinstance(var, Var):
            return 1.0 / ndv(var.name)
    return 1.0


def _values(e: Expr) -> float:
    """At most how many values an expression can take whatever its inputs: 12 months,
    31 days, a CASE's branches; unbounded (inf) otherwise."""
    if isinstance(e, Call) and e.func in _CALENDAR:
        return _CALENDAR[e.func]
    if isinstance(e, Const):
        return 1.0
    if isinstance(e, If):
        return _values(e.then) + _values(e.else_)
    return math.inf


_CALENDAR = {"MONTH": 12.0, "DAY": 31.0}


def estimate(compiled: Compilation, stats: Statistics) -> dict[str, ViewEstimate]:
    """Every view's maps estimated (a map shared by several views counts for each). A
    derived relation (a nested query) has as many rows as its group-count map entries
    (both views' for NOT EXISTS), each column as many distinct values."""
    schema = compiled.checked.schema
    for name, plan in compiled.derived.items():
        rows = sum(map_entries(compiled.maps[v.count.map].query, stats, schema)
                   for v in (plan, *(o for _, o in plan.others)))  # (every part's rows)
        stats = Statistics({**stats.rows, name: rows}, {**stats.distinct, **{
            (name, c): rows for c in schema.relation(name).column_names}}, stats.source)
    sizes = {name: map_entries(md.query, stats, schema) for name, md in compiled.maps.items()}
    out = {}
    for view, users in _users(compiled).items():
        relations = {r for m in users for r in compiled.maps[m].query.relations if r not in compiled.derived}
        maps = sorted((MapEstimate(m, compiled.checked.maps[m].key_names, sizes[m]) for m in users),
                      key=lambda e: (-e.entries, e.name))
        out[view] = ViewEstimate(view, tuple(maps), sum(stats.rows.get(r, 0) for r in relations))
    return out


def _users(compiled: Compilation) -> dict[str, list[str]]:
    """Per view, the maps it needs (compiled from SQL: the maps of hand-written programs
    have no definition to estimate)."""
    out: dict[str, list[str]] = {v: [] for v in compiled.views}
    for m, views in compiled.sharing().items():
        if m in compiled.maps:
            for v in views:
                out[v].append(m)
    return out


def describe(e: ViewEstimate, stats: Statistics) -> list[str]:
    """The estimate as lines for `explain`."""
    lines = [f"  state estimate ({stats.source or 'given statistics'}): about {e.entries:,} entries, "
             f"{e.per_base_row:.2f} per row of the relations it reads ({e.base_rows:,})"]
    for m in e.maps:
        lines.append(f"    {m.name}[{', '.join(m.keys)}]: about {m.entries:,}")
    return lines
