"""Issue 47 through Spark: views of random scalar expressions over nullable columns
(tests/exprkit.py, seeded), compiled together, applied by the batch evaluator in
batches of inserts and deletes, give the reference interpreter's maps, and their rows
equal DuckDB's. The interpreter's side (and so the driver apply, which runs it) is
tested by hypothesis in tests/unit/test_null_semantics.py."""

from __future__ import annotations

import random

from exprkit import NULLABLE, stream, view
from oracle import DuckOracle, alive_after, assert_view_equals_sql
from test_evaluate import normalize, run_in_batches

from cumulus.engine.evaluate import plan_from_compilation
from cumulus.m3.interpreter import Interpreter
from cumulus.sql.views import compile_views


def test_random_expressions_through_spark_equal_the_interpreter_and_duckdb(spark) -> None:
    rng = random.Random(47)
    views = [(f"v{n}", view(rng.choice, join=n % 3 == 2)) for n in range(36)]
    compiled = compile_views(NULLABLE, views)
    events = stream(rng.choice, 140)
    plan = plan_from_compilation(compiled.checked, compiled.batch)
    got = run_in_batches(spark, plan, NULLABLE, events, 3)
    want = Interpreter(compiled.checked).run(events)
    for m in compiled.maps:
        assert normalize(got[m]) == normalize(want.entries(m)), (m, compiled.maps[m].sql)
    oracle = DuckOracle(NULLABLE, alive_after(events))
    for name, _ in views:
        assert_view_equals_sql(compiled, name, want, oracle, "the end of the stream")
