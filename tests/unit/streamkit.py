"""Random event streams for the property-based tests (hypothesis) over the simple r/s/t
schema: inserts, deletes of live tuples, NULLs, repeated tuples."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

from cumulus.m3.interpreter import Event
from cumulus.schema import load_schema

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SIMPLE = load_schema(FIXTURES / "schemas" / "simple.sql")

value = st.one_of(st.none(), st.integers(min_value=1, max_value=4))
# (relation, x, y, delete?, which live tuple): deletes are drawn as often as inserts, so
# values are often deleted down to nothing.
step = st.tuples(st.sampled_from(["r", "s", "t"]), value, value, st.booleans(), st.integers(min_value=0, max_value=50))


def to_events(steps) -> list[Event]:
    """Turn drawn steps into a valid stream: a 'delete' removes some live tuple."""
    alive: dict[str, list[tuple]] = {"r": [], "s": [], "t": []}
    events = []
    for rel, x, y, delete, pick in steps:
        if delete and alive[rel]:
            events.append(Event("-", rel, alive[rel].pop(pick % len(alive[rel]))))
        else:
            alive[rel].append((x, y))
            events.append(Event("+", rel, (x, y)))
    return events
