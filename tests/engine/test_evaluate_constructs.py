"""Issue 14's constructs through Spark, against the reference interpreter: a
representative subset of the new views (LIKE in a CASE, an OR of conjunctions across two
relations as a filter factor, a merged subquery in FROM with a self-join of nation,
COUNT(DISTINCT), read-time arithmetic, HAVING, ORDER BY, LIMIT) applied by the batch
evaluator give the interpreter's maps, and their Spark SQL view over those maps (what
the catalog views and dbt read) gives view_rows' rows in view_rows' order."""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path

from pyspark.sql import types as T
from test_evaluate import normalize, run_in_batches

from cumulus.engine.evaluate import plan_from_compilation
from cumulus.ingest.dbtoaster import read_events
from cumulus.m3.interpreter import Interpreter
from cumulus.schema import load_schema
from cumulus.spark.local import local_frame
from cumulus.sql.mapsql import view_sql
from cumulus.sql.views import compile_views, view_rows
from cumulus.store.maps import delta_columns, key_slots, value_slot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "dbtoaster"
TPCH = load_schema(FIXTURES / "schemas" / "tpch.sql")
VIEWS = [("tpch_queries", "q14"), ("tpch_queries", "q07_peru_canada"),
         ("constructs", "distinct_aggregates_by_nation"), ("constructs", "like_patterns_in_case"),
         ("constructs", "revenue_share_by_mode"), ("constructs", "or_of_conjunctions_across_relations"),
         ("constructs", "having_null_semantics"), ("constructs", "cast_double_ratio"), ("constructs", "zero_divisors"),
         ("constructs", "in_grouped_subquery"), ("constructs", "share_of_total_subquery")]
def views() -> list[tuple[str, str]]:
    return [(name, (FIXTURES / "views" / kind / f"{name}.sql").read_text()) for kind, name in VIEWS]


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        x, y = float(a), float(b)
        return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return a is not None and b is not None and Decimal(a) == Decimal(b)
    return a == b


def test_new_constructs_through_spark_equal_the_interpreter_and_view_rows(spark) -> None:
    compiled = compile_views(TPCH, views())
    events = read_events(DATA / "tpch" / "standard_del", TPCH)
    events = events[: len(events) // 6]
    plan = plan_from_compilation(compiled.checked, compiled.batch)
    got = run_in_batches(spark, plan, TPCH, events, 2)
    want = Interpreter(compiled.checked).run(events)
    for m in compiled.maps:
        assert normalize(got[m]) == normalize(want.entries(m)), m

    # The maps as maps.entries rows, and each view's Spark SQL over them.
    columns = delta_columns(compiled.checked.maps.values())
    rows = []
    for m, info in compiled.checked.maps.items():
        for key, value in want.entries(m).items():
            row = dict.fromkeys((c for c, _ in columns), None) | {"map": m, value_slot(info.type): value}
            row.update(zip(key_slots(info), key, strict=True))
            rows.append(tuple(row[c] for c, _ in columns))
    local_frame(spark, rows, T.StructType([T.StructField(c, t) for c, t in columns])).createOrReplaceTempView(
        "issue14_entries")
    for name, plan_ in compiled.views.items():
        mine = view_rows(plan_, want.entries)
        theirs = [tuple(r) for r in spark.sql(view_sql(compiled, name, table="issue14_entries")).collect()]
        if not plan_.ordered:
            from cumulus.output import sort_key

            mine, theirs = sorted(mine, key=sort_key), sorted(theirs, key=sort_key)
        assert len(mine) == len(theirs), (name, mine, theirs)
        for a, b in zip(mine, theirs, strict=True):
            assert all(same(x, y) for x, y in zip(a, b, strict=True)), (name, a, b)
