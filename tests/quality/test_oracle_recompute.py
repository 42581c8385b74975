"""The oracle's recomputation checked against an independent one: views of the TPC-H
corpus recomputed by Spark SQL over multisets (tuples with `mult`, some above 1, NULLs
from the generator) as validation does it (expand, rewrite the SQL, compare) equal
DuckDB over the same tuples written out one row per copy (tests/oracle.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from oracle import DuckOracle, alive_after

from cumulus.ingest.synthetic import generate_events
from cumulus.quality.oracle import compare_view, expand, spark_sql, temp_view_name
from cumulus.schema import load_schema
from cumulus.sql.views import compile_views
from cumulus.store.tables import base_columns, ddl_type

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# AVG over decimals, MIN/MAX of dates, no GROUP BY, a self-join, COUNT(col) over NULLs
# (a few views: each is a Spark job or two).
VIEWS = ["q01_pricing_summary", "orders_overall", "lineitem_pairs_per_flag", "order_status_counts"]


def test_spark_recomputation_over_multisets_equals_duckdb(spark) -> None:
    schema = load_schema(FIXTURES / "schemas" / "tpch.sql")
    views = [(v, (FIXTURES / "views" / "tpch" / f"{v}.sql").read_text()) for v in VIEWS]
    compiled = compile_views(schema, views)
    alive = alive_after(generate_events(schema, 500, seed=11, domain=3, delete_ratio=0.2))
    for rows in alive.values():
        rows.extend(rows[: max(1, len(rows) // 3)])  # copies: tuples with mult 2 and more
    temp = []
    for rel in schema.relations:
        counts = Counter(alive.get(rel.name, []))
        assert rel.name not in alive or max(counts.values()) > 1
        frame = spark.createDataFrame([(*t, n) for t, n in counts.items()], ddl_type(base_columns(rel)))
        expand(frame, rel.column_names).createOrReplaceTempView(temp_view_name(rel.name, 1))
        temp.append(temp_view_name(rel.name, 1))
    duck = DuckOracle(schema, alive)
    try:
        for name, sql in views:
            recomputed = [tuple(r) for r in spark.sql(spark_sql(sql, schema, 1)).collect()]
            comparison = compare_view(compiled.views[name], recomputed, duck.query(sql))
            assert comparison.equal, (name, comparison.differences[:3])
            assert comparison.engine_rows > 0, name
    finally:
        for view in temp:
            spark.catalog.dropTempView(view)


@pytest.mark.parametrize("name", ["orders_overall"])
def test_a_view_without_group_by_has_one_row_over_nothing(spark, name) -> None:
    schema = load_schema(FIXTURES / "schemas" / "tpch.sql")
    sql = (FIXTURES / "views" / "tpch" / f"{name}.sql").read_text()
    rel = schema.relation("orders")
    empty = spark.createDataFrame([], ddl_type(base_columns(rel)))
    expand(empty, rel.column_names).createOrReplaceTempView(temp_view_name("orders", 2))
    try:
        (row,) = spark.sql(spark_sql(sql, schema, 2)).collect()
    finally:
        spark.catalog.dropTempView(temp_view_name("orders", 2))
    assert tuple(row) == (0, None, None, None, None)  # as the engine presents it (view semantics)
