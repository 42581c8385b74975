"""Property tests of nested queries kept incrementally as derived relations (issue 43:
cumulus/sql/nested.py): subqueries in FROM with GROUP BY, aggregates over them, WITH,
correlated and uncorrelated scalar subqueries in WHERE, EXISTS and IN (subquery), nested
two deep, NOT EXISTS and NOT IN (subquery) (NULLs on either side), UNION [ALL], ANY/SOME/
ALL comparisons and constant subqueries. For random streams (inserts, deletes of live
tuples, NULLs, repeated tuples) every view equals DuckDB over the surviving tuples, in
the middle of the stream and at its end, and undoing the stream empties every map (the
derived relations' events cancel as the base events do)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import DuckOracle, alive_after, assert_view_equals_sql
from streamkit import SIMPLE, step, to_events

from cumulus.m3.interpreter import Event
from cumulus.sql.derived import Maintainer
from cumulus.sql.views import compile_views

VIEWS = [
    ("in_subquery", "SELECT r.a, COUNT(*) AS n FROM r WHERE r.b IN (SELECT s.b FROM s WHERE s.c > 1) GROUP BY r.a"),
    ("in_correlated", "SELECT r.a, COUNT(*) AS n FROM r WHERE r.b IN (SELECT s.c FROM s WHERE s.b = r.a) GROUP BY r.a"),
    ("exists", "SELECT r.a, SUM(r.b) AS t FROM r WHERE EXISTS (SELECT * FROM s WHERE s.b = r.b AND s.c < 3) "
               "GROUP BY r.a"),
    ("exists_uncorrelated", "SELECT COUNT(*) AS n, SUM(r.a) AS t FROM r WHERE EXISTS (SELECT * FROM t WHERE t.d > 2)"),
    ("scalar_correlated", "SELECT r.a, COUNT(*) AS n FROM r WHERE r.a < (SELECT AVG(s.c) FROM s WHERE s.b = r.b) "
                          "GROUP BY r.a"),
    ("scalar", "SELECT COUNT(*) AS n, SUM(r.a) AS t FROM r WHERE r.b >= (SELECT MAX(t.d) FROM t) - 1"),
    ("equal_to_average", "SELECT r.a, COUNT(*) AS n FROM r WHERE r.a = (SELECT AVG(t.d) FROM t WHERE t.c = r.b) "
                         "GROUP BY r.a"),
    ("equal_to_max", "SELECT s.c, COUNT(*) AS n FROM s WHERE s.b = (SELECT MAX(r.b) FROM r WHERE r.a = s.c) "
                     "GROUP BY s.c"),
    ("from_grouped", "SELECT x.c_sum, COUNT(*) AS n FROM (SELECT s.c, SUM(s.b) AS c_sum FROM s GROUP BY s.c) x "
                     "GROUP BY x.c_sum"),
    ("aggregate_of_aggregates", "SELECT SUM(x.n) AS total, MAX(x.n) AS most, COUNT(*) AS groups "
                                "FROM (SELECT r.a, COUNT(*) AS n FROM r GROUP BY r.a) x"),
    ("join_grouped", "SELECT r.a, SUM(x.m) AS t FROM r, (SELECT t.c, MIN(t.d) AS m FROM t GROUP BY t.c) x "
                     "WHERE r.b = x.c GROUP BY r.a"),
    ("with_max", "WITH tot AS (SELECT s.b, SUM(s.c) AS total FROM s GROUP BY s.b) "
                 "SELECT r.a, tot.total FROM r, tot WHERE r.b = tot.b AND tot.total = (SELECT MAX(total) FROM tot)"),
    ("in_having", "SELECT r.a, COUNT(*) AS n FROM r WHERE r.b IN (SELECT s.b FROM s GROUP BY s.b "
                  "HAVING SUM(s.c) > 2) GROUP BY r.a"),
    ("rows_exists", "SELECT r.a, r.b FROM r WHERE EXISTS (SELECT s.b FROM s WHERE s.b = r.b)"),
    ("rows_over_average", "SELECT * FROM r WHERE r.a > (SELECT AVG(s.b) FROM s)"),
    ("in_correlated_with_another", "SELECT SUM(r.a * t.d) AS w FROM r, t WHERE r.b IN "
                                   "(SELECT s.b FROM s WHERE s.c = t.c)"),
    ("sum_over_having", "SELECT SUM(x.c) AS total FROM (SELECT r.a, COUNT(*) AS c FROM r GROUP BY r.a "
                        "HAVING COUNT(*) > 1) x"),
    ("filter_over_grouped", "SELECT COUNT(*) AS n FROM (SELECT r.a, SUM(r.b) AS sb FROM r GROUP BY r.a) x "
                            "WHERE x.sb > 2"),
    ("distinct_in", "SELECT DISTINCT r.a FROM r WHERE r.b IN (SELECT t.c FROM t)"),
    ("two_grouped_joined", "SELECT x.a, y.c FROM (SELECT r.a, SUM(r.b) AS s1 FROM r GROUP BY r.a) x, "
                           "(SELECT s.c, SUM(s.b) AS s2 FROM s GROUP BY s.c) y WHERE x.s1 = y.s2"),
    ("nested_in", "SELECT COUNT(*) AS n FROM r WHERE r.a IN (SELECT s.b FROM s WHERE s.c IN "
                  "(SELECT t.c FROM t WHERE t.d > 1) AND s.b > (SELECT SUM(t.d) FROM t WHERE t.c = s.c) / 4)"),
    ("not_exists", "SELECT r.a, SUM(r.b) AS t, COUNT(*) AS n FROM r WHERE NOT EXISTS "
                   "(SELECT * FROM s WHERE s.b = r.b AND s.c > 1) GROUP BY r.a"),
    ("not_exists_two_keys", "SELECT r.b, MIN(r.a) AS lo FROM r WHERE NOT EXISTS "
                            "(SELECT * FROM s WHERE s.b = r.a AND s.c = r.b) GROUP BY r.b"),
    ("not_exists_rows_joined", "SELECT r.a, t.d FROM r, t WHERE r.b = t.c AND NOT EXISTS "
                               "(SELECT s.c FROM s WHERE s.c = t.d)"),
    ("not_exists_and_exists", "SELECT COUNT(*) AS n FROM s WHERE EXISTS (SELECT * FROM r WHERE r.a = s.b) "
                              "AND NOT EXISTS (SELECT * FROM t WHERE t.c = s.c AND t.d > 1)"),
    ("not_exists_self", "SELECT COUNT(DISTINCT r.b) AS n FROM r WHERE NOT EXISTS "
                        "(SELECT * FROM r r2 WHERE r2.a = r.b)"),
    ("not_exists_uncorrelated", "SELECT r.a, COUNT(*) AS n FROM r WHERE NOT EXISTS (SELECT * FROM t WHERE t.d > 2) "
                                "GROUP BY r.a"),
    ("not_in", "SELECT r.a, COUNT(*) AS n FROM r WHERE r.b NOT IN (SELECT s.c FROM s WHERE s.b > 1) GROUP BY r.a"),
    ("not_in_correlated", "SELECT r.a, SUM(r.b) AS t FROM r WHERE r.b NOT IN (SELECT s.c FROM s WHERE s.b = r.a) "
                          "GROUP BY r.a"),
    ("not_in_rows", "SELECT t.c, t.d FROM t WHERE t.d NOT IN (SELECT r.a FROM r)"),
    ("union_all_rows", "SELECT a, b FROM r UNION ALL SELECT c, d FROM t"),
    ("union_all_grouped", "SELECT k, SUM(x) AS t, COUNT(*) AS n FROM (SELECT a AS k, b AS x FROM r "
                          "UNION ALL SELECT c, d FROM t) u GROUP BY k"),
    ("union_distinct", "SELECT a FROM r UNION SELECT d FROM t"),
    ("union_joined", "SELECT s.c, COUNT(*) AS n FROM s, (SELECT a AS k FROM r WHERE b > 1 UNION ALL "
                     "SELECT d FROM t) u WHERE s.b = u.k GROUP BY s.c"),
    ("greater_than_any", "SELECT r.a, COUNT(*) AS n FROM r WHERE r.b > ANY (SELECT s.c FROM s WHERE s.b = r.a) "
                         "GROUP BY r.a"),
    ("at_most_some", "SELECT * FROM r WHERE r.b <= SOME (SELECT t.d FROM t)"),
    ("equal_any", "SELECT COUNT(*) AS n FROM r WHERE r.a = ANY (SELECT t.c FROM t WHERE t.d > 1)"),
    ("below_all_averages", "SELECT * FROM r WHERE r.a < ALL (SELECT AVG(s.c) FROM s WHERE s.b = r.b)"),
    ("constant_subqueries", "SELECT r.a, r.b FROM r WHERE r.a = (SELECT 3) AND EXISTS (SELECT 1) "
                            "AND r.b IN (SELECT 2)"),
    ("union_of_aggregates", "SELECT k, MAX(n) AS most FROM (SELECT r.a AS k, COUNT(*) AS n FROM r GROUP BY r.a "
                            "UNION ALL SELECT t.c, SUM(t.d) FROM t GROUP BY t.c) u GROUP BY k"),
]
COMPILED = compile_views(SIMPLE, VIEWS)
EXAMPLES = int(os.environ.get("CUMULUS_PROPERTY_EXAMPLES", "60"))  # more for a soak, e.g. 3000


def test_every_view_is_incremental() -> None:
    assert all(v.refresh == "incremental" for v in COMPILED.views.values())
    assert len(COMPILED.derived) >= len(VIEWS)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=60))
def test_nested_views_equal_duckdb_on_random_streams(steps) -> None:
    events = to_events(steps)
    half = len(events) // 2
    kept = Maintainer(COMPILED).run(events[:half])
    for upto in (half, len(events)):
        kept.run(events[half:upto] if upto == len(events) else [])
        oracle = DuckOracle(SIMPLE, alive_after(events[:upto]))
        for name in COMPILED.views:
            assert_view_equals_sql(COMPILED, name, kept, oracle, f"{upto} events")


@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(st.lists(step, min_size=1, max_size=40))
def test_undoing_every_event_empties_every_map(steps) -> None:
    events = to_events(steps)
    inverse = [Event("-" if e.sign == "+" else "+", e.relation, e.values) for e in reversed(events)]
    kept = Maintainer(COMPILED).run(events + inverse)
    for m in COMPILED.maps:
        values = kept.entries(m).values()
        if COMPILED.checked.maps[m].type == "float":
            assert all(abs(v) < 1e-9 for v in values), m
        else:
            assert not kept.entries(m), m


def test_the_derived_rounds_put_each_relation_after_what_it_reads() -> None:
    """The close evaluates the derived relations of a round at once (engine/derived.py:
    rounds): a relation reading a map that an earlier relation's triggers write must be in
    a later round, and each round keeps the plan's order. Over TPC-H's nested queries."""
    from pathlib import Path

    from cumulus.engine.derived import rounds
    from cumulus.engine.registry import batch_plan
    from cumulus.schema import load_schema

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    queries = [(f"q{n:02d}", (fixtures / "views" / "tpch_queries" / f"q{n:02d}.sql").read_text())
               for n in (2, 4, 15, 16, 17, 20, 22)]
    plan = batch_plan(compile_views(load_schema(fixtures / "schemas" / "tpch.sql"), queries))
    found = rounds(plan)
    order = [n for n in plan.derived if plan.statements.get(n)]
    assert sorted(n for r in found for n in r) == sorted(order) and all(r == sorted(r, key=order.index) for r in found)
    where = {n: i for i, r in enumerate(found) for n in r}
    writes = {n: {bs.statement.target.name for bs in plan.statements[n]} for n in order}
    reads = {n: {*plan.derived[n].maps, *plan.reads.get(n, ())} for n in order}
    dependent = [(a, b) for i, a in enumerate(order) for b in order[i + 1:] if writes[a] & reads[b]]
    assert dependent and all(where[a] < where[b] for a, b in dependent), found
    assert len(found) < len(order)  # some relations do share a round
