"""Property-based tests for the aggregates answered at read time from a count per value:
COUNT/SUM/AVG(DISTINCT) and MIN/MAX, under random streams of inserts and deletes of
live tuples (repeated tuples, NULLs, values deleted down to nothing and inserted again),
alone, over joins, inside read-time arithmetic, HAVING, ORDER BY and LIMIT. Every view
equals DuckDB over the alive tuples at several points of each stream."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import DuckOracle, alive_after, assert_view_equals_sql
from streamkit import SIMPLE, step, to_events

from cumulus.m3.interpreter import Event, Interpreter
from cumulus.sql.views import compile_views

VIEWS = [
    ("distinct_r", "SELECT r.a, COUNT(DISTINCT r.b) AS nb, SUM(DISTINCT r.b) AS sb, AVG(DISTINCT r.b) AS ab, "
                   "MIN(r.b) AS lo, MAX(r.b) AS hi, COUNT(*) AS n FROM r GROUP BY r.a"),
    ("distinct_all", "SELECT COUNT(DISTINCT t.d) AS nd, SUM(DISTINCT t.c) AS sc, MIN(t.d) AS lo, MAX(t.c) AS hi FROM t"),
    ("distinct_join", "SELECT s.c, COUNT(DISTINCT r.a) AS na, MAX(r.a) - MIN(r.a) AS spread, "
                      "COUNT(*) - COUNT(DISTINCT r.b) AS repeats FROM r, s WHERE r.b = s.b GROUP BY s.c"),
    ("distinct_ranked", "SELECT t.c, COUNT(DISTINCT t.d) AS nd, MIN(t.d) AS lo FROM t GROUP BY t.c "
                        "HAVING MAX(t.d) IS NOT NULL OR COUNT(DISTINCT t.d) = 0 ORDER BY nd DESC, lo LIMIT 2"),
    ("extremes_case", "SELECT r.b, MIN(CASE WHEN r.a > 2 THEN r.a END) AS lo_big, MAX(r.a + r.b) AS hi_sum, "
                      "SUM(DISTINCT r.a) / COUNT(DISTINCT r.a) AS mean_distinct FROM r GROUP BY r.b"),
]
COMPILED = compile_views(SIMPLE, VIEWS)



@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=80))
def test_distinct_and_extremes_equal_duckdb_under_inserts_and_deletes(steps) -> None:
    events = to_events(steps)
    interp = Interpreter(COMPILED.checked)
    alive: dict[str, list[tuple]] = {}
    points = {len(events) // 3, 2 * len(events) // 3, len(events)}
    for i, e in enumerate(events, 1):
        interp.process(e)
        alive_after([e], alive)
        if i in points:
            oracle = DuckOracle(SIMPLE, alive)
            for name in COMPILED.views:
                assert_view_equals_sql(COMPILED, name, interp, oracle, f"event {i} of {len(events)}")


@settings(max_examples=30, deadline=None)
@given(st.lists(step, min_size=1, max_size=60))
def test_deleting_everything_leaves_every_distinct_and_extreme_empty(steps) -> None:
    """Inserting a stream and then deleting what is alive empties every map: no value
    lingers in a count per value (a MIN or a COUNT(DISTINCT) would see it)."""
    events = to_events(steps)
    undo = [Event("-", rel, t) for rel, bag in alive_after(events).items() for t in reversed(bag)]
    interp = Interpreter(COMPILED.checked).run(events + undo)
    assert all(not interp.entries(m) for m in COMPILED.checked.maps)
    oracle = DuckOracle(SIMPLE, {})
    for name in COMPILED.views:
        assert_view_equals_sql(COMPILED, name, interp, oracle, "after deleting everything")
