"""Random views of scalar expressions over nullable columns of every type, and random
insert/delete streams for them (issue 47's property tests: tests/unit/test_null_semantics.py
through the interpreter, tests/engine/test_null_semantics_spark.py through Spark).

Every choice goes through one `pick(options)` callable, so the same generator runs under
hypothesis (`data.draw(sampled_from(...))`: it shrinks towards the first option, the
simplest) and under a seeded `random.Random` (`rng.choice`). Expressions combine columns
of two relations only through +, -, * and CASE with a one-relation condition, as the
compiler keeps them; everything else the generator writes must be accepted."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from cumulus.m3.interpreter import Event
from cumulus.schema import load_schema

Pick = Callable[[Sequence[Any]], Any]

NULLABLE = load_schema(Path(__file__).resolve().parent / "fixtures" / "schemas" / "nullable.sql")

NUMBERS = {"u": ("i", "j", "d", "f", "k"), "w": ("m", "e")}
CONSTANTS = ("1", "0", "2", "-3", "1.25", "0.5", "2.5e0")
VALUES = {
    "u": (
        (1, 2, None),
        (-2, 0, 1, 3, None),
        (1, 2, None),
        (Decimal("1.25"), Decimal("-0.50"), Decimal("2.00"), None),
        (0.5, -1.5, 2.0, None),
        ("ab", "b", "", "a_c", None),
        (dt.date(2020, 1, 31), dt.date(2020, 3, 1), dt.date(2021, 12, 31), None),
        (True, False, None),
    ),
    "w": ((1, 2, None), (0, 2, -1, None), (Decimal("0.25"), Decimal("3.00"), None)),
}


def number(pick: Pick, rels: tuple[str, ...], depth: int) -> str:
    """A numeric expression over the columns of `rels` (at most `depth` levels deep)."""
    kinds = ["column", "column", "constant"]
    if depth > 0:
        kinds += ["+", "-", "*", "neg", "case", "coalesce", "nullif", "cast", "extract"]
    kind = pick(kinds)
    rel = pick(rels)
    if kind == "column":
        return f"{rel}.{pick(NUMBERS[rel])}"
    if kind == "constant":
        return pick(CONSTANTS)
    if kind in ("+", "-", "*"):
        return f"({number(pick, rels, depth - 1)} {kind} {number(pick, rels, depth - 1)})"
    if kind == "neg":
        return f"(- {number(pick, rels, depth - 1)})"
    if kind == "case":
        when = f"CASE WHEN {condition(pick, rel, depth - 1)} THEN {number(pick, rels, depth - 1)}"
        other = pick(["", f" ELSE {number(pick, rels, depth - 1)}"])
        return f"{when}{other} END"
    if kind == "coalesce":
        return f"COALESCE({number(pick, (rel,), depth - 1)}, {number(pick, (rel,), depth - 1)})"
    if kind == "nullif":
        return f"NULLIF({number(pick, (rel,), depth - 1)}, {number(pick, (rel,), depth - 1)})"
    if kind == "cast":
        whole, exact = ("u.i", "u.d") if rel == "u" else ("w.m", "w.e")
        return pick([f"CAST({number(pick, (rel,), depth - 1)} AS DOUBLE)", f"CAST({whole} AS DECIMAL(21,2))",
                     f"CAST({exact} AS DECIMAL(14,4))", f"CAST({whole} AS BIGINT)"])
    if "u" not in rels:
        return f"{rel}.{pick(NUMBERS[rel])}"
    return f"EXTRACT({pick(['YEAR', 'MONTH', 'DAY'])} FROM u.dt)"


def condition(pick: Pick, rel: str, depth: int) -> str:
    """A condition over one relation's columns."""
    kinds = ["compare", "null", "in"] + (["like", "boolean", "date"] if rel == "u" else [])
    if depth > 0:
        kinds += ["and", "or", "not"]
    kind = pick(kinds)
    if kind == "compare":
        op = pick(["=", "<>", "<", "<=", ">", ">="])
        return f"{number(pick, (rel,), min(depth, 1))} {op} {number(pick, (rel,), 0)}"
    if kind == "null":
        return f"{number(pick, (rel,), min(depth, 1))} IS {pick(['', 'NOT '])}NULL"
    if kind == "in":
        subject = pick([f"{rel}.{NUMBERS[rel][0]}", "u.s"] if rel == "u" else [f"{rel}.m"])
        items = "('ab', 'b')" if subject == "u.s" else "(1, 2)"
        return f"{subject} {pick(['IN', 'NOT IN'])} {items}"
    if kind == "like":
        return f"u.s {pick(['LIKE', 'NOT LIKE'])} '{pick(['a%', '_b', '%', 'a_c', ''])}'"
    if kind == "boolean":
        return pick(["u.b", "NOT u.b", "u.b = TRUE", "u.b = FALSE", "u.b <> TRUE", "u.b IS TRUE", "u.b IS NOT TRUE",
                     "u.b IS FALSE", "u.b IS NOT FALSE"])
    if kind == "date":
        return pick(["u.dt < DATE '2020-03-01'", "u.dt >= DATE '2020-02-01'",
                     "u.dt BETWEEN DATE '2020-01-01' AND DATE '2020-12-31'"])
    if kind == "not":
        return f"NOT ({condition(pick, rel, depth - 1)})"
    return f"({condition(pick, rel, depth - 1)} {kind.upper()} {condition(pick, rel, depth - 1)})"


def aggregate(pick: Pick, rels: tuple[str, ...], depth: int) -> str:
    func = pick(["SUM", "AVG", "COUNT", "MIN", "MAX", "COUNT_DISTINCT", "SUM", "AVG", "OTHER"])
    if func == "OTHER":  # over strings and dates (MIN/MAX and the counts keep any type)
        return pick(["MIN(u.s)", "MAX(COALESCE(u.s, 'zz'))", "MIN(u.dt)", "COUNT(DISTINCT u.s)", "MAX(u.dt)",
                     "COUNT(u.b)", "MIN(CASE WHEN u.b THEN u.s END)"])
    if func in ("MIN", "MAX", "COUNT_DISTINCT"):  # kept per value: of one relation's columns
        rels = (pick(rels),)
    arg = number(pick, rels, depth)
    return f"COUNT(DISTINCT {arg})" if func == "COUNT_DISTINCT" else f"{func}({arg})"


def item(pick: Pick, rels: tuple[str, ...], depth: int) -> str:
    """A SELECT item: an aggregate, or arithmetic, COALESCE or CASE over aggregates (the
    read-time layer)."""
    kind = pick(["aggregate", "aggregate", "constant", "pair", "coalesce", "case"])
    first = aggregate(pick, rels, depth)
    if kind == "aggregate":
        return first
    func = pick(["SUM", "AVG", "MAX", "COUNT"])
    numeric = f"{func}({number(pick, (pick(rels),) if func == 'MAX' else rels, depth)})"
    if kind == "constant":
        return f"{numeric} {pick(['+', '-', '*'])} {pick(CONSTANTS[:5])}"
    if kind == "pair":
        return f"{numeric} {pick(['+', '-', '/'])} COUNT({number(pick, rels, depth)})"
    if kind == "coalesce":
        return f"COALESCE({numeric}, 0)"
    return f"CASE WHEN {numeric} > 1 THEN {numeric} ELSE -1 END"


def view(pick: Pick, join: bool, depth: int = 2) -> str:
    """A view: an optional group column, one to three items over random expressions."""
    rels = ("u", "w") if join else ("u",)
    group = pick(["", "u.k", "u.b", "u.s"])
    items = [f"{item(pick, rels, depth)} AS c{n}" for n in range(pick([1, 2, 3]))]
    select = ", ".join(([group] if group else []) + items)
    sql = f"SELECT {select} FROM u" + (" JOIN w ON u.k = w.k" if join else "")
    return sql + (f" GROUP BY {group}" if group else "")


def stream(pick: Pick, length: int) -> list[Event]:
    """Inserts of tuples from small domains (so duplicates are common) and deletes of live
    tuples, on both relations."""
    alive: dict[str, list[tuple]] = {"u": [], "w": []}
    events = []
    for _ in range(length):
        rel = pick(["u", "u", "w"])
        if alive[rel] and pick([False, False, True]):
            live = alive[rel]
            events.append(Event("-", rel, live.pop(pick(range(len(live))))))
        else:
            values = tuple(pick(domain) for domain in VALUES[rel])
            alive[rel].append(values)
            events.append(Event("+", rel, values))
    return events


def inverse(events: list[Event]) -> list[Event]:
    """The events that undo `events`, last first."""
    return [Event("-" if e.sign == "+" else "+", e.relation, e.values) for e in reversed(events)]
