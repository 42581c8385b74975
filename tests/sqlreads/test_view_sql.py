"""`view_sql` over the map tables gives exactly the rows of `Reader.read_view` (the view
semantics in Python, over PyIceberg): at the closed epoch's tag and on main (where the
maps still hold delta rows), for grouped views with SUM, AVG, COUNT, MIN/MAX and a view
without GROUP BY."""

from __future__ import annotations

import pytest
from sqlreadskit import SCALAR_VIEW

from cumulus.errors import NotFoundError, ViewSQLError
from cumulus.output import sort_key
from cumulus.read import At, Reader
from cumulus.sql.mapsql import tag_of, view_sql

# The slow tier: they share the tiny TPC-H home (sqlreadskit), built once per run.
pytestmark = pytest.mark.slow

VIEWS = ["revenue_by_nation_brand", "order_priority_mix", "pricing_summary", SCALAR_VIEW[0]]


def spark_rows(spark, sql: str) -> list[tuple]:
    return sorted((tuple(r) for r in spark.sql(sql).collect()), key=sort_key)


@pytest.mark.parametrize("epoch", [1, None], ids=["tag", "main"])
def test_view_sql_equals_read_view(spark, tpch_home, epoch) -> None:
    reader = Reader(tpch_home)
    at = At(epoch)
    for name in VIEWS:
        sql = view_sql(reader.compilation, name, epoch, catalog=tpch_home.catalog)
        df = spark.sql(sql)
        assert tuple(df.columns) == reader.view_columns(name), name
        expected = reader.read_view(name, at)
        assert expected, name
        assert spark_rows(spark, sql) == expected, name


def test_tag_and_main_differ_and_scalar_has_one_row(spark, tpch_home) -> None:
    """The deletes applied after the close show on main only (so the tag is really read)."""
    reader = Reader(tpch_home)
    name = SCALAR_VIEW[0]
    at_tag = spark_rows(spark, view_sql(reader.compilation, name, 1, catalog=tpch_home.catalog))
    on_main = spark_rows(spark, view_sql(reader.compilation, name, catalog=tpch_home.catalog))
    assert len(at_tag) == len(on_main) == 1
    assert at_tag[0][0] == 1500 and on_main[0][0] < 1500


def test_view_sql_refuses_unknown_views_and_bad_versions(tpch_home) -> None:
    reader = Reader(tpch_home)
    with pytest.raises(NotFoundError, match="unknown view nope"):
        view_sql(reader.compilation, "nope")
    for bad in (0, "it's", ""):
        with pytest.raises(ViewSQLError):
            tag_of(bad)
    assert tag_of(3) == "epoch-3" and tag_of("{{ cumulus_tag() }}") == "{{ cumulus_tag() }}"


@pytest.mark.parametrize("epoch", [1, None], ids=["tag", "main"])
def test_one_scan_of_every_map_reads_each_view_alike(tpch_home, epoch) -> None:
    reader = Reader(tpch_home)
    entries = reader.all_entries(At(epoch))
    for name in reader.compilation.views:
        assert reader.read_view(name, At(epoch), entries=entries) == reader.read_view(name, At(epoch)), name


def test_the_ledger_page_status_is_read_once_per_table_version(tpch_home, monkeypatch) -> None:
    """pipeline_status (the plugin page): the views' rows at the stable epoch as read_view
    gives them; asked again with no commit in between, it reads no table again."""
    from cumulus.pipeline import status
    from cumulus.store import ledger

    status._MEMO.clear()
    first = status.pipeline_status(tpch_home)
    reader = Reader(tpch_home)
    stable = reader.latest_epoch()
    assert {v["name"]: v["stable_rows"] for v in first["views"]} == {
        name: len(reader.read_view(name, At(stable))) for name in reader.compilation.views}
    assert [e["epoch"] for e in first["epochs"]] == [r.epoch for r in ledger.ledger_rows(reader.catalog, tpch_home)]
    reads = []
    monkeypatch.setattr(Reader, "all_entries", lambda *a, **k: reads.append("maps"))
    monkeypatch.setattr(status, "ledger_rows", lambda *a, **k: reads.append("ledger"))  # (as status calls it)
    again = status.pipeline_status(tpch_home)
    assert reads == [] and again["epochs"] == first["epochs"]
    assert [v["stable_rows"] for v in again["views"]] == [v["stable_rows"] for v in first["views"]]
