"""Property-based tests: for random event streams (inserts, deletes of live tuples,
NULLs, repeated tuples), every view's rows equal DuckDB over the surviving tuples, and
replaying the stream's inverse brings every map back to empty."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import DuckOracle, alive_after, assert_view_equals_sql
from streamkit import SIMPLE, step, to_events

from cumulus.m3.interpreter import Event, Interpreter
from cumulus.sql.views import compile_views

VIEWS = [
    ("chain", "SELECT r.a, SUM(t.d) AS total, COUNT(*) AS n FROM r, s, t WHERE r.b = s.b AND s.c = t.c GROUP BY r.a"),
    ("triangle", "SELECT COUNT(*) AS n, SUM(r.a * t.d) AS w FROM r, s, t WHERE r.b = s.b AND s.c = t.c AND t.d = r.a"),
    ("self_join", "SELECT r1.a, COUNT(*) AS n, MIN(r2.b) AS lo FROM r r1, r r2 WHERE r1.b = r2.a GROUP BY r1.a"),
    ("filtered", "SELECT s.c, AVG(r.a) AS m, MAX(r.a) AS hi FROM r JOIN s ON r.b = s.b WHERE (r.a BETWEEN 1 AND 3 OR r.b IS NULL) AND s.c NOT IN (2, 4) GROUP BY s.c"),
    ("cross", "SELECT COUNT(*) AS n, SUM(r.a - t.d) AS diff FROM r, t WHERE NOT (t.c = 2)"),
    # issue 43: joins on inequalities and ranges, rows as a bag, DISTINCT, USING, division
    ("theta", "SELECT r.a, COUNT(*) AS n, SUM(s.c) AS t FROM r, s WHERE r.b < s.b GROUP BY r.a"),
    ("theta_range", "SELECT s.c, SUM(r.a * t.d) AS w FROM r, s, t WHERE r.b = s.b AND t.d BETWEEN r.a AND s.c "
                    "GROUP BY s.c"),
    ("theta_self", "SELECT r1.b, COUNT(*) AS n FROM r r1, r r2 WHERE r1.a < r2.a GROUP BY r1.b"),
    ("rows", "SELECT r.*, s.c FROM r JOIN s USING (b) WHERE r.a > 1"),
    ("distinct", "SELECT DISTINCT s.c FROM r NATURAL JOIN s"),
    ("quotient", "SELECT r.a / 2 AS half, SUM(r.b / 4) AS q FROM r GROUP BY r.a / 2"),
]
COMPILED = compile_views(SIMPLE, VIEWS)



@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=60))
def test_views_equal_duckdb_on_random_streams(steps) -> None:
    events = to_events(steps)
    interp = Interpreter(COMPILED.checked).run(events)
    oracle = DuckOracle(SIMPLE, alive_after(events))
    for name in COMPILED.views:
        assert_view_equals_sql(COMPILED, name, interp, oracle, f"{len(events)} events")


@settings(max_examples=40, deadline=None)
@given(st.lists(step, min_size=1, max_size=40))
def test_undoing_every_event_empties_every_map(steps) -> None:
    events = to_events(steps)
    inverse = [Event("-" if e.sign == "+" else "+", e.relation, e.values) for e in reversed(events)]
    interp = Interpreter(COMPILED.checked).run(events + inverse)
    for m in COMPILED.maps:
        if COMPILED.checked.maps[m].type == "float":  # a double sum cancels to rounding error (1/3 + 2/3 - ...)
            assert all(abs(v) < 1e-9 for v in interp.entries(m).values()), m
        else:
            assert not interp.entries(m), m


@settings(max_examples=40, deadline=None)
@given(st.lists(step, min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_any_serial_order_of_the_same_events_gives_the_same_maps(steps, rnd) -> None:
    """The maps are functions of the surviving tuples (DESIGN.md's contract), so inserts
    may be applied in any order; deletes are kept after the insert they delete."""
    events = [e for e in to_events(steps) if e.sign == "+"]
    shuffled = list(events)
    rnd.shuffle(shuffled)
    a = Interpreter(COMPILED.checked).run(events)
    b = Interpreter(COMPILED.checked).run(shuffled)
    assert all(a.entries(m) == b.entries(m) for m in COMPILED.maps)
