"""`view drop`: the dropped view's catalog views go, the rows of the maps no other view
needs leave the fresh state, shared maps stay (under their names, which come from the
dropped view), the remaining views stay equal to DuckDB through later epochs, old tags
keep what they held, the name stays reserved, and a retry finishes the job."""

from __future__ import annotations

import pytest
from enginekit import CHAIN, REPO, SIMPLE, SOURCES, write_events
from oracle import DuckOracle, alive_after

from cumulus.app import Engine
from cumulus.engine.apply import apply_source
from cumulus.engine.close import close_epoch
from cumulus.errors import NotFoundError, ViewError
from cumulus.ingest.job import ingest_files
from cumulus.output import sort_key
from cumulus.read import Reader
from cumulus.schema import load_schema
from cumulus.store.registry import registered_views
from cumulus.store.tables import Home, tables_of

pytestmark = pytest.mark.e2e

VIEWS = {name: (REPO / "tests" / "fixtures" / "views" / "simple" / f"{name}.sql").read_text()
         for name in ("star_s", "self_join_r")}
# Nested two deep (derived relations, issue 43), added after epoch 1: back-filled from its tag.
NESTED = ("SELECT r.a, COUNT(*) AS n FROM r WHERE r.b IN (SELECT s.b FROM s WHERE s.c >= "
          "(SELECT AVG(t.d) FROM t WHERE t.c = s.c)) GROUP BY r.a")


def run_epoch(spark, settings, events, folder, epoch: int) -> None:
    home = Home(spark, settings)
    engine = Engine(settings, spark)
    for name, (relations, priority) in SOURCES.items():
        ingest_files(home, name, [write_events(events, folder / name, relations)], fmt="dbtoaster")
        apply_source(home, engine.plan(), epoch, priority)
    close_epoch(home, engine.plan(), epoch)


def map_names_on(spark, settings, version: str | None = None) -> set[str]:
    at = f" VERSION AS OF '{version}'" if version else ""
    return {r["map"] for r in spark.sql(f"SELECT DISTINCT map FROM {tables_of(settings).maps}{at}").collect()}


def test_drop_removes_what_only_the_view_needed_and_the_rest_stays_exact(spark, simple_home, tmp_path) -> None:
    settings, _, _, events = simple_home  # the chain view registered first: it names the maps it shares
    schema = load_schema(SIMPLE)
    engine = Engine(settings, spark)
    for name, sql in VIEWS.items():
        engine.add_view(name, sql, "sql")
    half = len(events) // 2
    run_epoch(spark, settings, events[:half], tmp_path / "in1", 1)
    before = map_names_on(spark, settings)

    dropped = engine.drop_view("chain")
    assert dropped.was_registered and dropped.removed and dropped.shared, dropped  # private and shared maps both
    assert all(m.startswith("chain_") for m in dropped.removed + dropped.shared)
    fresh = map_names_on(spark, settings)
    assert fresh == before - set(dropped.removed) and set(dropped.shared) <= fresh
    assert set(dropped.removed) <= map_names_on(spark, settings, "epoch-1")  # the tag keeps what it held
    assert [v.name for v in registered_views(spark, settings)] == list(VIEWS)  # (nested is added below)
    for ns in ("views", "views_stable"):
        names = {r["viewName"] for r in spark.sql(f"SHOW VIEWS IN {settings.catalog}.{ns}").collect()}
        assert "chain" not in names and set(VIEWS) <= names, (ns, names)

    compiled = engine.add_view("nested", NESTED, "sql")
    assert compiled.views["nested"].refresh == "incremental" and len(compiled.derived) == 2
    reader = Reader(settings)
    assert sorted(reader.read_view("nested", reader.stable(1)), key=sort_key) == sorted(
        DuckOracle(schema, alive_after(events[:half])).query(NESTED), key=sort_key)
    run_epoch(spark, settings, events[half:], tmp_path / "in2", 2)  # the remaining views, maintained on
    reader = Reader(settings)
    oracle = DuckOracle(schema, alive_after(events))
    for name, sql in [*VIEWS.items(), ("nested", NESTED)]:
        got = sorted(reader.read_view(name, reader.stable(2)), key=sort_key)
        assert got == sorted(oracle.query(sql), key=sort_key), name
    nested_maps = {m for m, users in compiled.sharing().items() if "nested" in users}
    assert map_names_on(spark, settings) - fresh <= nested_maps  # no row of a removed map but the nested view's

    with pytest.raises(ViewError, match="was dropped; its name stays reserved"):
        engine.add_view("chain", CHAIN, "sql")
    engine.add_view("chain_again", CHAIN, "sql")  # the same SQL: its maps back-filled under their old names
    got = sorted(Reader(settings).read_view("chain_again", Reader(settings).stable(2)), key=sort_key)
    assert got == sorted(oracle.query(CHAIN), key=sort_key)

    again = engine.drop_view("chain")  # a retry finds nothing left to remove
    assert not again.was_registered and again.removed == []
    with pytest.raises(NotFoundError, match="no view named nope is registered"):
        engine.drop_view("nope")
