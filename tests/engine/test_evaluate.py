"""The Spark batch evaluator against the reference interpreter: the same events, cut
into batches of several relations (self-joins included), give the same maps."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import types as T

from cumulus.engine import evaluate
from cumulus.engine.evaluate import evaluate_batch, plan_from_compilation, plan_from_program
from cumulus.ingest.synthetic import generate_events
from cumulus.m3.interpreter import Interpreter
from cumulus.m3.parser import parse_program
from cumulus.m3.validate import validate
from cumulus.schema import load_schema
from cumulus.spark.local import local_frame
from cumulus.sql.views import compile_views
from cumulus.store.maps import delta_columns, key_slots, key_type, value_slot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SHARED = Path(__file__).resolve().parents[3] / "shared"
SIMPLE = load_schema(FIXTURES / "schemas" / "simple.sql")
PAPER = load_schema(FIXTURES / "schemas" / "paper.sql")

SIMPLE_VIEWS = [
    ("chain", "SELECT r.a, SUM(t.d) AS total, COUNT(*) AS n FROM r, s, t WHERE r.b = s.b AND s.c = t.c GROUP BY r.a"),
    ("triangle", "SELECT COUNT(*) AS n FROM r, s, t WHERE r.b = s.b AND s.c = t.c AND t.d = r.a"),
    ("pairs", "SELECT r1.a, COUNT(*) AS n, MAX(r2.b) AS hi FROM r r1, r r2 WHERE r1.b = r2.a GROUP BY r1.a"),
    ("paths3", "SELECT COUNT(*) AS n, SUM(r1.a * r3.b) AS w FROM r r1, r r2, r r3 WHERE r1.b = r2.a AND r2.b = r3.a"),
    ("filtered", "SELECT s.c, COUNT(*) AS n FROM r, s WHERE r.b = s.b AND (r.a > 1 OR r.a IS NULL) AND s.c <> 2 GROUP BY s.c"),
    # issue 43: joins on inequalities and ranges (a self-join's too), rows as a bag, a quotient
    ("theta", "SELECT s.c, SUM(r.a * t.d) AS w, COUNT(*) AS n FROM r, s, t WHERE r.b = s.b AND t.d BETWEEN r.a AND s.c "
              "GROUP BY s.c"),
    ("theta_self", "SELECT r1.b, COUNT(*) AS n FROM r r1, r r2 WHERE r1.a < r2.a GROUP BY r1.b"),
    ("rows", "SELECT r.*, s.c, r.a / 2 AS half FROM r JOIN s USING (b) WHERE r.a > 1"),
]


def run_in_batches(spark, plan, schema, events, n_batches, from_empty: bool = False):
    """Apply events batch by batch; the state is the accumulated deltas."""
    state_rows: dict[str, list] = {m: [] for m in plan.maps}
    columns = delta_columns(plan.maps.values())

    def entries(state):
        """The state as rows shaped as maps.entries' (what the engine reads)."""
        rows = []
        for m, entries_ in state.items():
            info = plan.maps[m]
            for *key, value in entries_:
                row = dict.fromkeys((c for c, _ in columns), None) | {"map": m, value_slot(info.type): value}
                row.update(zip(key_slots(info), key, strict=True))
                rows.append(tuple(row[c] for c, _ in columns))
        return local_frame(spark, rows, T.StructType([T.StructField(c, t) for c, t in columns]))

    size = max(1, len(events) // n_batches)
    for start in range(0, len(events), size):
        chunk = events[start : start + size]
        batch = {}
        for rel in schema.relations:
            rows = [e.values + (1 if e.sign == "+" else -1,) for e in chunk if e.relation == rel.name]
            if rows and rel.name in plan.params:
                fields = [T.StructField(c, key_type(col.type)) for c, col in zip(plan.params[rel.name], rel.columns, strict=True)]
                batch[rel.name] = local_frame(spark, rows, T.StructType(fields + [T.StructField("op", T.IntegerType())]))
        frozen = {m: list(r) for m, r in state_rows.items()}
        # Every other batch with its sizes (an apply's: small levels broadcast), the others without (a rebuild's).
        sizes = {rel: sum(e.relation == rel for e in chunk) for rel in batch} if start // size % 2 else None
        deltas = evaluate_batch(plan, batch, entries(frozen), sizes, from_empty=from_empty)
        if deltas is None:
            continue
        by_map: dict[str, list[dict]] = {}  # one collect, split here (a Spark job per map cost minutes)
        for r in deltas.collect():
            by_map.setdefault(r["map"], []).append(r.asDict())
        for m, info in plan.maps.items():
            rows = [(*(d.get(s) for s in key_slots(info)), d[value_slot(info.type)]) for d in by_map.get(m, [])]
            assert len({tuple(r)[:-1] for r in rows}) == len(rows), f"{m}: deltas not summed per key"
            state_rows[m].extend(tuple(r) for r in rows)
    totals = {}
    for m, rows in state_rows.items():
        acc: dict[tuple, object] = {}
        for *key, value in rows:
            acc[tuple(key)] = acc.get(tuple(key), 0) + value
        totals[m] = {k: v for k, v in acc.items() if v != 0}
    return totals


def normalize(entries):
    return {tuple(k): (Decimal(v).normalize() if isinstance(v, Decimal) else v) for k, v in entries.items()}


@pytest.mark.parametrize(
    "views,n_batches", [(SIMPLE_VIEWS[2:4], 1), (SIMPLE_VIEWS[:2] + SIMPLE_VIEWS[4:5], 2), (SIMPLE_VIEWS[5:], 2)],
    ids=["self-joins", "chain-cycle-filter", "theta-rows"]
)
def test_compiled_views_in_batches_equal_the_interpreter(spark, views, n_batches) -> None:
    compiled = compile_views(SIMPLE, views)
    plan = plan_from_compilation(compiled.checked, compiled.batch)
    events = generate_events(SIMPLE, 90, seed=n_batches, domain=3, delete_ratio=0.3)
    got = run_in_batches(spark, plan, SIMPLE, events, n_batches)
    want = Interpreter(compiled.checked).run(events)
    for m in compiled.maps:
        assert normalize(got[m]) == normalize(want.entries(m)), m


@pytest.mark.parametrize("shared_rows", [evaluate.SHARED_BATCH_ROWS, 0], ids=["shared-joins", "per-chain"])
def test_a_rebuild_from_nothing_equals_the_interpreter(spark, monkeypatch, shared_rows) -> None:
    """A rebuild or back-fill evaluates whole relations from an empty state, each relation
    reading the earlier ones' deltas materialized once: the net tuples as one batch give
    the interpreter's maps. A large batch (above SHARED_BATCH_ROWS: forced here) joins
    every chain on its own, and sums the chains that read no map narrow, per key
    signature (`_narrow_sums`)."""
    monkeypatch.setattr(evaluate, "SHARED_BATCH_ROWS", shared_rows)
    compiled = compile_views(SIMPLE, SIMPLE_VIEWS)
    plan = plan_from_compilation(compiled.checked, compiled.batch)
    events = generate_events(SIMPLE, 120, seed=5, domain=3, delete_ratio=0.3)
    got = run_in_batches(spark, plan, SIMPLE, events, 1, from_empty=True)
    want = Interpreter(compiled.checked).run(events)
    for m in compiled.maps:
        assert normalize(got[m]) == normalize(want.entries(m)), m


@pytest.mark.parametrize("path,schema", [(SHARED / "examples" / "example21.m3", PAPER),
                                         (FIXTURES / "m3" / "good" / "example21_factorized.m3", PAPER),
                                         (FIXTURES / "m3" / "good" / "full_m3.m3", SIMPLE)],
                         ids=["paper", "paper-full-m3", "chain-full-m3"])
def test_hand_written_program_in_batches_equals_the_interpreter(spark, path, schema) -> None:
    """The paper's program, and full M3 ones whose terms join maps on shared loop
    variables (summed over where the target does not name them)."""
    text = path.read_text()
    checked = validate(parse_program(text), schema, text)
    plan = plan_from_program(checked)
    events = generate_events(schema, 150, seed=4, domain=4)
    got = run_in_batches(spark, plan, schema, events, 2)
    want = Interpreter(checked).run(events)
    for m in checked.maps:
        assert normalize(got[m]) == normalize(want.entries(m)), m


def test_constants_and_expressions_as_spark_sql_keep_value_and_type(spark) -> None:
    """The evaluator's SQL text (sqltext.expr_sql, exact): each M3 constant reads back
    from Spark as itself, with its M3 type; a negated negative constant is not a comment."""
    import datetime as dt

    from cumulus.engine.evaluate import sql_of
    from cumulus.m3.ast import BinOp, Call, Const, Neg, Var

    cases = [
        (Const(Decimal("0.05"), "decimal"), Decimal("0.05"), "decimal(3,2)"),
        (Const(Decimal("1E+2"), "decimal"), Decimal("100"), "decimal(3,0)"),
        (Const(Decimal("-12.500"), "decimal"), Decimal("-12.500"), "decimal(5,3)"),
        (Const("it's a \\ path", "string"), "it's a \\ path", "string"),
        (Const(dt.date(1995, 9, 1), "date"), dt.date(1995, 9, 1), "date"),
        (Const(-7, "int"), -7, "bigint"),
        (Const(2.5, "float"), 2.5, "double"),
        (Const(True, "bool"), True, "boolean"),
        (Neg(Const(-5, "int")), 5, "bigint"),
        (BinOp("-", Const(1, "int"), Neg(Const(-5, "int"))), -4, "bigint"),
        (Call("YEAR", (Var("d"),)), 1995, "bigint"),
    ]
    env = {"d": "DATE '1995-09-01'"}.__getitem__
    select = ", ".join(f"{sql_of(e, env)} AS c{i}" for i, (e, _, _) in enumerate(cases))
    df = spark.sql(f"SELECT {select}")
    row = df.first()
    for i, (e, value, type_) in enumerate(cases):
        assert (row[i], df.schema[i].dataType.simpleString()) == (value, type_), e

