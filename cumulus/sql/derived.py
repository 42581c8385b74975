"""Derived relations in the reference interpreter: after each event, the groups of every
derived relation (a nested query, cumulus/sql/nested.py) whose rows changed become its
events (old rows deleted, new rows inserted), processed through the program like any
relation's, each derived relation after those it reads. The engine does the same per
epoch, in Spark (cumulus/engine/derived.py); `cumulus interpret` and the tests use this.

Why it is exact: a view over a derived relation D is a query over base relations and D;
the base events are applied with D as it was, then D's change with the base relations
as they are now, which is the serial result of both (the delta of a join, one side at a
time). A derived relation's rows are a set of groups (each row once), so its change is a
few deletes and inserts per touched group."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping

from cumulus.m3.interpreter import Event, Interpreter
from cumulus.sql.views import Compilation, ViewPlan, view_rows


def changes(old: Counter, new: Counter) -> list[tuple[str, tuple]]:
    """The events that turn the rows `old` into `new` (signed multiplicities): (sign,
    row), deletes first."""
    delta = Counter(new)
    delta.subtract(old)
    out = [("-", row) for row, n in delta.items() if n < 0 for _ in range(-n)]
    return out + [("+", row) for row, n in delta.items() if n > 0 for _ in range(n)]


def signed_rows(plan: ViewPlan, read) -> Counter:
    """A derived relation's rows with their multiplicities: its view's rows, and those
    of each of `plan.others` times its sign (UNION ALL; anti-joins: NOT EXISTS, NOT IN)."""
    rows = Counter(view_rows(plan, read))
    for sign, other in plan.others:
        for row in view_rows(other, read):
            rows[row] += sign
    return Counter({row: n for row, n in rows.items() if n})


class Maintainer:
    """The interpreter of a compilation's program, its derived relations kept up to date
    after every event (`process`); `interp` holds the maps. Only the groups the event
    touched are read again: every map of a derived relation's view is keyed by its group
    variables (and a value, for MIN/MAX), so a touched entry names its group."""

    def __init__(self, compilation: Compilation):
        self.compilation = compilation
        self.interp = Interpreter(compilation.checked)
        self.rows: dict[str, dict[tuple, Counter]] = {name: {} for name in compilation.derived}
        self.uses = {name: _group_positions(plan) for name, plan in compilation.derived.items()}

    @property
    def checked(self):
        return self.compilation.checked

    def entries(self, name: str) -> dict[tuple, object]:
        return self.interp.entries(name)

    def process(self, event: Event) -> None:
        if not self.rows:
            self.interp.process(event)
            return
        self.interp.journal = {}
        self.interp.process(event)
        self.settle()

    def run(self, events: Iterable[Event]) -> Maintainer:
        for e in events:
            self.process(e)
        return self

    def settle(self) -> None:
        """Bring the derived relations' groups the last events touched up to date."""
        settle(self.interp, self.compilation.derived, self.rows, self.uses)
        self.interp.journal = None


def settle(interp: Interpreter, derived: Mapping[str, ViewPlan], rows: dict[str, dict[tuple, Counter]],
           uses: Mapping[str, dict[str, tuple[int, ...]]] | None = None, touched: Iterable[tuple[str, tuple]] = (),
           before: Interpreter | None = None) -> None:
    """Bring the groups of the `derived` relations (in order: each after those it reads)
    that the entries in the interpreter's journal, or `touched` ((map, key) pairs), name
    up to date: their change, as events, processed through the program. Its own events
    touch the groups of the next relations (the journal grows). `rows`: each relation's
    rows per group as last settled (updated); a group not in it had its rows over
    `before`'s maps (none without it: an empty state). `uses`: _group_positions per
    relation."""
    journal = interp.journal if interp.journal is not None else {}  # (the same dict: it grows)
    touched = list(touched)
    for name, plan in derived.items():
        mine = uses[name] if uses is not None else _group_positions(plan)
        groups = {tuple(key[p] for p in mine[m]) for m, key in itertools.chain(journal, touched) if m in mine}
        for group in groups:
            old = rows[name].get(group)
            if old is None:
                old = Counter() if before is None else _group_rows(before, plan, mine, group)
            new = _group_rows(interp, plan, mine, group)
            for sign, row in changes(old, new):
                interp.process(Event(sign, name, row))
            if new:
                rows[name][group] = new
            else:
                rows[name].pop(group, None)


def settles_by_group(plan: ViewPlan) -> bool:
    """Whether `settle` can find the derived relation's change group by group: every map
    its view (and each signed part) reads is keyed by the group variables (a nested query
    has no LIMIT and no subqueries of its own: sql/nested.py refuses them)."""
    try:
        _group_positions(plan)
    except ValueError:  # a map over fewer variables than the group
        return False
    return True


def _group_rows(interp: Interpreter, plan: ViewPlan, uses: Mapping[str, tuple[int, ...]], group: tuple) -> Counter:
    """A derived relation's rows of one group (`signed_rows`) over the interpreter's maps."""
    def read(m: str) -> dict[tuple, object]:
        return dict(interp.state[m].matching(uses[m], group)) if m in uses else {}

    return signed_rows(plan, read)


def _group_positions(plan: ViewPlan) -> dict[str, tuple[int, ...]]:
    """Per map the view reads, the positions of the group variables in its keys. A signed
    relation's groups are the group columns its two views share (its correlation keys)."""
    if not plan.others:
        return _positions(plan, plan.group)
    parts = (plan, *(other for _, other in plan.others))
    grouped = [{c.name for c in p.columns if c.kind == "group"} for p in parts]
    shared = sorted(set.intersection(*grouped))
    out: dict[str, tuple[int, ...]] = {}
    for p in parts:
        out |= _positions(p, _vars(p, shared))
    return out


def _vars(plan: ViewPlan, columns: list[str]) -> tuple[str, ...]:
    kinds = {c.name: c for c in plan.columns if c.kind == "group"}
    return tuple(plan.group[kinds[n].group_index] for n in columns)  # type: ignore[index]


def _positions(plan: ViewPlan, group: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    return {u.map: tuple(u.keys.index(g) for g in group) for u in plan.uses}
