"""The reference interpreter: executes a checked M3 program one event at a time with
in-memory maps and exact arithmetic (int for counts, Decimal for DECIMAL, float only
where a column is floating). It is the executable definition of M3's semantics (see
cumulus/m3/ast.py) and the oracle that the Spark engine is tested against."""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal

from cumulus.errors import InterpreterError
from cumulus.m3.ast import (
    And,
    BinOp,
    Call,
    Cmp,
    Const,
    Expr,
    If,
    IsNull,
    Like,
    MapRef,
    Neg,
    Not,
    Or,
    Trigger,
    Var,
    loop_order,
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


# Exact decimal arithmetic: maps hold DECIMAL(38,6) values, and a product of two may have
# twice the digits; Python's default context keeps 28 significant digits and would round.
EXACT = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_EVEN)


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


def _quick(op: str, fn: Callable):
    """arith(op, a, b), quicker where both have one type or one is an int (the
    interpreter's hot path; only a Decimal and a float need _num)."""
    def quick(a, b):
        if a is None or b is None:
            return None
        return fn(a, b) if type(a) is type(b) or int in (type(a), type(b)) else arith(op, a, b)
    return quick


def divide(a, b):
    """M3's `/`: a double quotient, as DuckDB's (x / 0 is +-inf, 0 / 0 NaN); NULL in, NULL out."""
    if a is None or b is None:
        return None
    a, b = float(a), float(b)
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)
    return a / b


_ARITH = {op: _quick(op, fn) for op, fn in (("+", operator.add), ("-", operator.sub), ("*", operator.mul))}
_ARITH["/"] = divide
_add, _mul = _ARITH["+"], _ARITH["*"]


_COMPARE = {"=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
NAN = math.nan  # the one NaN object of keys: a dict finds a key by identity or equality, and NaN != NaN


def is_nan(v) -> bool:
    return isinstance(v, float) and v != v


def canonical(v):
    """A value as a key holds it: every NaN the one NaN object (Spark and DuckDB group
    NaNs together)."""
    return NAN if is_nan(v) else v


def nan_last(v) -> tuple:
    """A sort key for numbers that puts NaN above every one, as Spark and DuckDB order it."""
    return (1, 0.0) if is_nan(v) else (0, v)


def compare_values(op: str, a, b) -> bool | None:
    """SQL's comparison of two non-NULL values (a float and a Decimal compare as floats),
    with Spark's and DuckDB's NaN: equal to itself and above every number."""
    if type(a) is not type(b) and not isinstance(a, (str, dt.date)):
        a, b = _num(a, b)
    if is_nan(a) or is_nan(b):
        a, b = nan_last(a), nan_last(b)
    return _COMPARE[op](a, b)


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
    "TO_FLOAT": float,
    "TO_DECIMAL": Decimal,  # of an int: exact
    "SUBSTR": lambda s, start, length: s[max(start, 1) - 1:max(start, 1) - 1 + max(length, 0)],  # (start >= 1)
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

    def matching(self, bound: tuple[int, ...], probe: tuple) -> list[tuple[tuple, object]]:
        """The entries whose keys hold `probe` at the positions `bound` (not all of them)."""
        if not bound:
            return list(self.entries.items())
        index = self._indexes.get(bound)
        if index is None:
            index = {}
            for key in self.entries:
                index.setdefault(tuple(key[i] for i in bound), set()).add(key)
            self._indexes[bound] = index
        keys = index.get(probe)
        return [(key, self.entries[key]) for key in keys] if keys else []

    def add(self, key: tuple, delta) -> None:
        old = self.entries.get(key)
        new = delta if old is None else _add(old, delta)
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


Code = Callable[[dict], object]  # an expression or condition, compiled: env -> its value


@dataclass(frozen=True)
class _Loop:
    """A map factor with loop variables: its index among the term's factors, its map,
    the positions of its bound arguments and their code, and the variable (or None) at
    each position."""

    factor: int
    store: MapStore
    bound: tuple[int, ...]
    probe: tuple[Code, ...]
    binds: tuple[str | None, ...]

    @functools.cached_property
    def binds_at(self) -> tuple[tuple[int, str], ...]:
        """(position, variable) of each position that binds one."""
        return tuple((i, name) for i, name in enumerate(self.binds) if name is not None)


@dataclass(frozen=True)
class _Term:
    sign: int
    factors: tuple[Code, ...]
    loops: tuple[_Loop, ...]

    @functools.cached_property
    def loop_at(self) -> dict[int, int]:
        """The factors that are loops: factor index -> loop index."""
        return {loop.factor: j for j, loop in enumerate(self.loops)}


@dataclass(frozen=True)
class _Statement:
    target: str
    key: tuple[Code, ...]
    terms: tuple[_Term, ...]


class Interpreter:
    """Runs a checked program. `state[name]` is a MapStore; `process` applies one event
    (and sums its updates into `journal`, when that is a dict).

    Each trigger is compiled once: its expressions into Python functions of the
    environment (`code`: a closure per node) and each term's map factors with loop
    variables into index probes, so an event costs its statements' evaluation, not a
    walk of their syntax trees."""

    def __init__(self, checked: CheckedProgram):
        self.checked = checked
        self.state = {name: MapStore(info.arity) for name, info in checked.maps.items()}
        self.events_processed = 0
        # When a dict: every update is also summed here, per (map, key): the deltas of
        # the events processed (zero sums stay), for a caller that writes them elsewhere.
        self.journal: dict[tuple[str, tuple], object] | None = None
        self._arity = {r.name: r.arity for r in checked.schema.relations}
        self._types = {name: info.type for name, info in checked.maps.items()}
        self._triggers: dict[str, tuple[_Statement, ...]] = {}  # by event, e.g. +orders

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
        with decimal.localcontext(EXACT):
            self._process(trigger, event)

    def _process(self, trigger, event: Event) -> None:
        env = dict(zip(trigger.params, map(canonical, event.values), strict=True))
        # Every statement reads the state before the event; updates land together.
        updates: list[tuple[str, tuple, object]] = []
        for stmt in self._compiled(trigger):
            self._statement(stmt, env, updates)
        for name, key, delta in updates:
            delta = coerce(delta, self._types[name])
            self.state[name].add(key, delta)
            if self.journal is not None:
                old = self.journal.get((name, key))
                self.journal[name, key] = delta if old is None else _add(old, delta)

    def run(self, events: Iterable[Event]) -> Interpreter:
        for e in events:
            self.process(e)
        return self

    def entries(self, name: str) -> dict[tuple, object]:
        return dict(self.state[name].entries)

    # -- evaluation
    def _compiled(self, trigger: Trigger) -> tuple[_Statement, ...]:
        """A trigger's statements, compiled once: each term's factors, and its map
        factors whose arguments have variables the trigger does not bind (the loops),
        nested in `loop_order`'s order: a loop variable two maps share is bound by the
        first and probed in the second (full M3: a join of the maps' slices)."""
        done = self._triggers.get(trigger.event)
        if done is not None:
            return done
        params = set(trigger.params)
        out = []
        for stmt in trigger.statements:
            compiled = []
            for sign, factors in terms(stmt.expr):
                loops = []
                bound_vars = set(params)
                for n in loop_order(factors, params):
                    f = factors[n]
                    assert isinstance(f, MapRef)
                    binds = tuple(a.name if isinstance(a, Var) and a.name not in bound_vars else None for a in f.args)
                    bound = tuple(i for i, b in enumerate(binds) if b is None)
                    loops.append(_Loop(n, self.state[f.name], bound, tuple(self.code(f.args[i]) for i in bound), binds))
                    bound_vars.update(b for b in binds if b is not None)
                compiled.append(_Term(sign, tuple(self.code(f) for f in factors), tuple(loops)))
            out.append(_Statement(stmt.target.name, tuple(self.code(a) for a in stmt.target.args), tuple(compiled)))
        done = self._triggers[trigger.event] = tuple(out)
        return done

    def _statement(self, stmt: _Statement, env: dict, updates: list) -> None:
        """Append the statement's updates in `env` to `updates`: per term, every
        combination of the entries its loops match, times the other factors."""
        for term in stmt.terms:
            if not term.loops:  # (most terms) the factors in `env`
                value = term.sign
                for f in term.factors:
                    value = _mul(value, f(env))
                    if value is None or value == 0:
                        break
                else:
                    updates.append((stmt.target, tuple([a(env) for a in stmt.key]), value))
                continue
            self._nested(stmt, term, 0, env, [], updates)

    def _nested(self, stmt: _Statement, term: _Term, depth: int, env: dict, values: list, updates: list) -> None:
        """The term's loops from `depth` on, nested: each probes its map with the values
        the trigger and the outer loops bound (NULL matches nothing) and binds its loop
        variables; innermost, the product of the factors (`values`: the loops' entries)."""
        if depth == len(term.loops):
            value = term.sign
            for n, f in enumerate(term.factors):
                loop_n = term.loop_at.get(n)
                value = _mul(value, f(env) if loop_n is None else values[loop_n])
                if value is None or value == 0:
                    return
            updates.append((stmt.target, tuple([a(env) for a in stmt.key]), value))
            return
        loop = term.loops[depth]
        probe = tuple([code(env) for code in loop.probe])
        if None in probe:
            return
        for key, value in loop.store.matching(loop.bound, probe):
            local = env.copy()
            for i, name in loop.binds_at:
                local[name] = key[i]
            self._nested(stmt, term, depth + 1, local, values + [value], updates)

    def code(self, e: Expr) -> Code:
        """`e` as a function of the environment: a number (or NULL) for an expression,
        True, False or None (unknown, as in SQL) for a condition."""
        if isinstance(e, Const):
            value = e.value
            return lambda env: value
        if isinstance(e, Var):
            name = e.name

            def var(env):
                try:
                    return env[name]
                except KeyError:
                    raise InterpreterError(f"variable {name.upper()} is unbound") from None
            return var
        if isinstance(e, MapRef):
            store, args = self.state[e.name], tuple(self.code(a) for a in e.args)

            def lookup(env):
                key = tuple(a(env) for a in args)
                return 0 if None in key else store.get(key)
            return lookup
        if isinstance(e, BinOp):
            op, left, right = _ARITH[e.op], self.code(e.left), self.code(e.right)
            return lambda env: op(left(env), right(env))
        if isinstance(e, Neg):
            operand = self.code(e.operand)

            def neg(env):
                v = operand(env)
                return None if v is None else -v
            return neg
        if isinstance(e, Call):
            func, args = _FUNCS[e.func], tuple(self.code(a) for a in e.args)

            def call(env):
                values = [a(env) for a in args]
                return None if None in values else func(*values)
            return call
        if isinstance(e, If):
            cond, then, else_ = self.code(e.cond), self.code(e.then), self.code(e.else_)
            return lambda env: then(env) if cond(env) is True else else_(env)
        if isinstance(e, Cmp):
            op, left, right = e.op, self.code(e.left), self.code(e.right)

            def cmp(env):  # NULL if either side is
                a, b = left(env), right(env)
                if a is None or b is None:
                    return None
                return compare_values(op, a, b)
            return cmp
        if isinstance(e, IsNull):
            operand, negated = self.code(e.operand), e.negated
            return lambda env: (operand(env) is None) != negated
        if isinstance(e, Like):
            operand, regex, negated = self.code(e.operand), like_regex(e.pattern), e.negated

            def like(env):
                v = operand(env)
                return None if v is None else (regex.fullmatch(v) is not None) != negated
            return like
        if isinstance(e, Not):
            operand = self.code(e.operand)

            def not_(env):
                v = operand(env)
                return None if v is None else not v
            return not_
        if isinstance(e, (And, Or)):
            # Three-valued: the side that decides (False for AND, True for OR) wins even
            # over unknown; otherwise unknown if either side is.
            decides, left, right = isinstance(e, Or), self.code(e.left), self.code(e.right)

            def junction(env):
                a = left(env)
                if a is decides:
                    return decides
                b = right(env)
                if b is decides:
                    return decides
                return None if a is None or b is None else not decides
            return junction
        raise InterpreterError(f"cannot evaluate {type(e).__name__}")
