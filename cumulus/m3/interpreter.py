"""The reference interpreter: executes a checked M3 program one event at a time with
in-memory maps and exact arithmetic (int for counts, Decimal for DECIMAL, float only
where a column is floating). It is the executable definition of M3's semantics (see
cumulus/m3/ast.py) and the oracle that the Spark engine is tested against."""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal

from cumulus.errors import InterpreterError
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
    Statement,
    Trigger,
    Var,
    terms,
)
from cumulus.m3.validate import CheckedProgram
from cumulus.schema import DECIMAL, FLOAT, INT


@dataclass(frozen=True)
class Event:
    """`+R(t)` or `-R(t)`: one tuple inserted into or deleted from a relation."""

    sign: str
    relation: str
    values: tuple

    def __str__(self) -> str:
        return f"{self.sign}{self.relation}{self.values}"


# ---------------------------------------------------------------- values


def _num(a, b):
    """Bring two numbers to a common Python type (Decimal and float do not mix)."""
    if isinstance(a, float) and isinstance(b, Decimal):
        return a, float(b)
    if isinstance(a, Decimal) and isinstance(b, float):
        return float(a), b
    return a, b


def arith(op: str, a, b):
    if a is None or b is None:
        return None
    a, b = _num(a, b)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    return a * b


def compare(op: str, a, b) -> bool | None:
    if a is None or b is None:
        return None
    if not isinstance(a, (str, dt.date)):
        a, b = _num(a, b)
    return {
        "=": a == b, "<>": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b,
    }[op]


def coerce(value, type_: str):
    """A value as the map's value type: int, Decimal or float."""
    if type_ == FLOAT:
        return float(value)
    if type_ == DECIMAL:
        return value if isinstance(value, Decimal) else Decimal(value)
    if type_ == INT and isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    return value


@functools.lru_cache(maxsize=256)
def like_regex(pattern: str) -> re.Pattern:
    """SQL LIKE as a regular expression: `%` any run, `_` one character (newlines too)."""
    parts = (".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.compile("".join(parts), re.DOTALL)


_FUNCS = {
    "YEAR": lambda d: d.year,
    "MONTH": lambda d: d.month,
    "DAY": lambda d: d.day,
}


# ---------------------------------------------------------------- maps


class MapStore:
    """One map: key tuple -> non-zero value, with secondary indexes on bound key
    positions, built on first use and kept up to date."""

    def __init__(self, arity: int):
        self.arity = arity
        self.entries: dict[tuple, object] = {}
        self._indexes: dict[tuple[int, ...], dict[tuple, set[tuple]]] = {}

    def get(self, key: tuple):
        return self.entries.get(key, 0)

    def slice(self, pattern: tuple, bound: tuple[int, ...]) -> Iterator[tuple[tuple, object]]:
        """Entries whose keys equal `pattern` at the positions in `bound`."""
        if len(bound) == self.arity:
            key = tuple(pattern)
            if key in self.entries:
                yield key, self.entries[key]
            return
        if not bound:
            yield from list(self.entries.items())
            return
        index = self._indexes.get(bound)
        if index is None:
            index = {}
            for key in self.entries:
                index.setdefault(tuple(key[i] for i in bound), set()).add(key)
            self._indexes[bound] = index
        probe = tuple(pattern[i] for i in bound)
        for key in list(index.get(probe, ())):
            yield key, self.entries[key]

    def add(self, key: tuple, delta) -> None:
        old = self.entries.get(key)
        new = delta if old is None else arith("+", old, delta)
        if new == 0:
            if old is not None:
                del self.entries[key]
                for positions, index in self._indexes.items():
                    index[tuple(key[i] for i in positions)].discard(key)
            return
        if old is None:
            for positions, index in self._indexes.items():
                index.setdefault(tuple(key[i] for i in positions), set()).add(key)
        self.entries[key] = new


# ---------------------------------------------------------------- interpreter


@dataclass(frozen=True)
class _Term:
    sign: int
    factors: tuple[Expr, ...]
    loops: tuple[tuple[MapRef, tuple[int, ...]], ...]  # map factors with loop keys, bound positions


class Interpreter:
    """Runs a checked program. `state[name]` is a MapStore; `process` applies one event."""

    def __init__(self, checked: CheckedProgram):
        self.checked = checked
        self.state = {name: MapStore(info.arity) for name, info in checked.maps.items()}
        self.events_processed = 0
        self._arity = {r.name: r.arity for r in checked.schema.relations}
        self._plans: dict[int, tuple[Statement, list[_Term]]] = {}

    # -- public
    def process(self, event: Event) -> None:
        relation = event.relation.lower()
        if relation not in self._arity:
            raise InterpreterError(f"event {event} names an unknown relation {event.relation!r}")
        if len(event.values) != self._arity[relation]:
            raise InterpreterError(
                f"event {event} has {len(event.values)} values; {relation} has {self._arity[relation]} columns"
            )
        trigger = self.checked.program.trigger(event.sign, relation)
        self.events_processed += 1
        if trigger is None:
            return
        env = dict(zip(trigger.params, event.values, strict=True))
        # Every statement reads the state before the event; updates land together.
        updates = [u for s in trigger.statements for u in self._statement(trigger, s, env)]
        for name, key, delta in updates:
            self.state[name].add(key, coerce(delta, self.checked.maps[name].type))

    def run(self, events: Iterable[Event]) -> Interpreter:
        for e in events:
            self.process(e)
        return self

    def entries(self, name: str) -> dict[tuple, object]:
        return dict(self.state[name].entries)

    # -- evaluation
    def _plan(self, trigger: Trigger, stmt: Statement) -> list[_Term]:
        """How to evaluate a statement's terms, worked out once per statement."""
        key = id(stmt)
        plan = self._plans.get(key)
        if plan is None:
            params = set(trigger.params)
            plan = []
            for sign, factors in terms(stmt.expr):
                loops = []
                for f in factors:
                    if isinstance(f, MapRef):
                        free = [isinstance(a, Var) and a.name not in params for a in f.args]
                        if any(free):
                            bound = tuple(i for i, is_free in enumerate(free) if not is_free)
                            loops.append((f, bound))
                plan.append(_Term(sign, tuple(factors), tuple(loops)))
            self._plans[key] = (stmt, plan)  # keep stmt alive so its id stays unique
            return plan
        return plan[1]

    def _statement(self, trigger: Trigger, stmt: Statement, env: dict) -> Iterator[tuple[str, tuple, object]]:
        for term in self._plan(trigger, stmt):
            choices = []
            for ref, bound in term.loops:
                pattern = [None] * len(ref.args)
                for i in bound:
                    pattern[i] = self.eval(ref.args[i], env)
                if any(pattern[i] is None for i in bound):
                    choices = None  # a NULL join key matches nothing
                    break
                matches = list(self.state[ref.name].slice(tuple(pattern), bound))
                if not matches:
                    choices = None
                    break
                choices.append([(ref, k, v) for k, v in matches])
            if choices is None:
                continue
            for combo in itertools.product(*choices):
                local = env
                fixed: dict[int, object] = {}
                if combo:
                    local = dict(env)
                    for ref, key, value in combo:
                        for a, k in zip(ref.args, key, strict=True):
                            if isinstance(a, Var) and a.name not in env:
                                local[a.name] = k
                        fixed[id(ref)] = value
                value = term.sign
                for f in term.factors:
                    v = fixed[id(f)] if id(f) in fixed else self.eval(f, local)
                    value = arith("*", value, v)
                    if value is None or value == 0:
                        break
                if value is None or value == 0:
                    continue
                key = tuple(self.eval(a, local) for a in stmt.target.args)
                yield stmt.target.name, key, value

    def eval(self, e: Expr, env: dict):
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Var):
            try:
                return env[e.name]
            except KeyError:
                raise InterpreterError(f"variable {e.name.upper()} is unbound") from None
        if isinstance(e, MapRef):
            key = tuple(self.eval(a, env) for a in e.args)
            if any(k is None for k in key):
                return 0
            return self.state[e.name].get(key)
        if isinstance(e, BinOp):
            return arith(e.op, self.eval(e.left, env), self.eval(e.right, env))
        if isinstance(e, Neg):
            v = self.eval(e.operand, env)
            return None if v is None else -v
        if isinstance(e, Call):
            args = [self.eval(a, env) for a in e.args]
            return None if any(a is None for a in args) else _FUNCS[e.func](*args)
        if isinstance(e, If):
            return self.eval(e.then, env) if self.test(e.cond, env) is True else self.eval(e.else_, env)
        raise InterpreterError(f"cannot evaluate {type(e).__name__} as a number")

    def test(self, c: Cond, env: dict) -> bool | None:
        """Three-valued: True, False or None (unknown), as SQL."""
        if isinstance(c, Cmp):
            return compare(c.op, self.eval(c.left, env), self.eval(c.right, env))
        if isinstance(c, IsNull):
            return (self.eval(c.operand, env) is None) != c.negated
        if isinstance(c, Like):
            v = self.eval(c.operand, env)
            return None if v is None else (like_regex(c.pattern).fullmatch(v) is not None) != c.negated
        if isinstance(c, Not):
            v = self.test(c.operand, env)
            return None if v is None else not v
        if isinstance(c, And):
            a, b = self.test(c.left, env), self.test(c.right, env)
            if a is False or b is False:
                return False
            return None if a is None or b is None else True
        if isinstance(c, Or):
            a, b = self.test(c.left, env), self.test(c.right, env)
            if a is True or b is True:
                return True
            return None if a is None or b is None else False
        raise InterpreterError(f"cannot evaluate {type(c).__name__} as a condition")
