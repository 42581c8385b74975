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

from collections import Counter
from collections.abc import Iterable

from cumulus.m3.interpreter import Event, Interpreter
from cumulus.sql.views import Compilation, ViewPlan, view_rows


def changes(old: Counter, new: Counter) -> list[tuple[str, tuple]]:
    """The events that turn the rows `old` into `new`: (sign, row), deletes first."""
    out = [("-", row) for row, n in (old - new).items() for _ in range(n)]
    return out + [("+", row) for row, n in (new - old).items() for _ in range(n)]


class Maintainer:
    """The interpreter of a compilation's program, its derived relations kept up to date
    after every event (`process`); `interp` holds the maps."""

    def __init__(self, compilation: Compilation):
        self.compilation = compilation
        self.interp = Interpreter(compilation.checked)
        self.rows: dict[str, Counter] = {name: Counter() for name in compilation.derived}
        self.reads = {name: set(plan.maps) for name, plan in compilation.derived.items()}
        self.settle(force=True)  # a group-less nested aggregate has a row over nothing

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

    def settle(self, force: bool = False) -> None:
        """Bring every derived relation's rows up to date with the maps (those whose maps
        the last events touched, or all when `force`)."""
        for name, plan in self.compilation.derived.items():
            touched = self.interp.journal
            if not force and touched is not None and not any(m in self.reads[name] for m, _ in touched):
                continue
            new = Counter(rows_of(plan, self.interp))
            for sign, row in changes(self.rows[name], new):
                self.interp.process(Event(sign, name, row))
            self.rows[name] = new
        self.interp.journal = None


def rows_of(plan: ViewPlan, interp: Interpreter) -> list[tuple]:
    return view_rows(plan, interp.entries)
