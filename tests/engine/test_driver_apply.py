"""The driver apply (cumulus/engine/driver_apply.py) against the Spark plan's: every
micro-batch of a real apply is also evaluated by the Spark plan, over the same pinned
snapshots, and the two give the same delta rows (floats within rounding) over columns of
every type (INT, DECIMAL, DOUBLE, DATE, VARCHAR, BOOLEAN) with NULLs, inserts and
deletes, a join, a self-join and a filtered float sum; after the close every view
equals DuckDB. A batch over `apply_local_events` goes the Spark way."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from enginekit import _homes, write_events
from oracle import DuckOracle, alive_after

from cumulus.app import Engine
from cumulus.config import load_settings, with_overrides
from cumulus.engine import apply as apply_module
from cumulus.engine.apply import apply_source
from cumulus.engine.close import close_epoch
from cumulus.ingest.job import ingest_files
from cumulus.ingest.sources import add_source
from cumulus.ingest.synthetic import generate_events
from cumulus.output import sort_key
from cumulus.read import Reader
from cumulus.schema import parse_schema
from cumulus.store.home import init_home
from cumulus.store.maps import delta_columns
from cumulus.store.tables import Home

pytestmark = pytest.mark.e2e

SCHEMA = """
CREATE TABLE item (id INT, grp VARCHAR(10), price DECIMAL(10,2), w DOUBLE, day DATE, ok BOOLEAN);
CREATE TABLE tag (id INT, label VARCHAR(10), boost DECIMAL(6,2));
"""
VIEWS = {
    "revenue": "SELECT i.grp, t.label, SUM(i.price * t.boost) AS rev, COUNT(*) AS n "
               "FROM item i, tag t WHERE i.id = t.id GROUP BY i.grp, t.label",
    "weights": "SELECT i.day, SUM(i.w * i.price) AS wp, SUM(i.w) AS ws FROM item i "
               "WHERE i.day >= DATE '1995-01-01' AND i.grp LIKE 'r%' GROUP BY i.day",
    "pairs": "SELECT a.ok, COUNT(*) AS n, SUM(b.price) AS p FROM item a, item b WHERE a.grp = b.grp AND a.id = b.id "
             "GROUP BY a.ok",
}
SOURCES = {"a": ({"item"}, 1), "b": ({"tag"}, 2)}


def _canon(row: tuple) -> tuple:
    return tuple(round(v, 9) if isinstance(v, float) else v.normalize() if isinstance(v, Decimal) else v for v in row)


def _same(got: list[tuple], want: list[tuple]) -> bool:
    def key(row):
        return repr(tuple(v for v in _canon(row) if not isinstance(v, float)))
    got, want = sorted(got, key=key), sorted(want, key=key)
    return len(got) == len(want) and all(
        all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) if isinstance(a, float) else a == b
            for a, b in zip(_canon(g), _canon(w), strict=True))
        for g, w in zip(got, want, strict=True))


def test_driver_deltas_equal_the_spark_plans_and_the_views_equal_duckdb(spark, tmp_path, monkeypatch) -> None:
    root = tmp_path / "home"
    root.mkdir()
    (tmp_path / "schema.sql").write_text(SCHEMA)
    (root / "cumulus.toml").write_text(f'catalog = "eng_d{next(_homes)}"\nspark_master = "local[2]"\n')
    settings = load_settings(root)
    home = Home(spark, settings)
    schema = parse_schema(SCHEMA)
    init_home(home, tmp_path / "schema.sql")
    for name, (_, priority) in SOURCES.items():
        add_source(settings, name, priority)
    engine = Engine(settings, spark)
    for name, sql in VIEWS.items():
        engine.add_view(name, sql, "sql")
    plan = engine.plan()

    compared: list[tuple[int, int]] = []  # (events, delta rows) of each batch compared
    real = apply_module.driver_deltas

    def both(settings_, plan_, record, counts, columns):
        local = real(settings_, plan_, record, counts, columns)
        if local is not None:
            events, sizes = apply_module.batch_events(Home(spark, settings_), plan_, record)
            assert sizes == {rel: n for rel, n in counts.items() if n}
            deltas = apply_module.evaluate_batch(plan_, events, apply_module.map_state(Home(spark, settings_), record.read_snapshot), sizes)
            by_spark = [tuple(r) for r in deltas.select(*columns).collect()] if deltas is not None else []
            assert _same(local.rows, by_spark), f"batch {record.batch_id}: the driver and Spark differ"
            compared.append((sum(counts.values()), len(local.rows)))
        return local

    monkeypatch.setattr(apply_module, "driver_deltas", both)
    assert [c for c, _ in delta_columns(plan.maps.values())][0] == "map"

    events = generate_events(schema, 360, seed=5, domain=4, delete_ratio=0.3)
    assert any(v is None for e in events for v in e.values) and sum(e.sign == "-" for e in events) > 40
    cuts = [0, 120, 240, 360]  # three micro-batches per source in epoch 1
    for k, (lo, hi) in enumerate(zip(cuts, cuts[1:], strict=False)):
        for name, (relations, priority) in SOURCES.items():
            folder = write_events(events[lo:hi], tmp_path / f"batch{k}" / name, relations)
            ingest_files(home, name, [folder], fmt="dbtoaster")
            apply_source(home, plan, 1, priority)
    assert len(compared) == 6 and all(rows > 0 for _, rows in compared), compared
    close_epoch(home, plan, 1)

    # Epoch 2, one batch per source over the limit: the Spark plan applies it.
    small = with_overrides(settings, apply_local_events=10)
    more = generate_events(schema, 120, seed=6, domain=4, delete_ratio=0.0)
    for name, (relations, priority) in SOURCES.items():
        ingest_files(Home(spark, small), name, [write_events(more, tmp_path / "epoch2" / name, relations)], fmt="dbtoaster")
        record = apply_source(Home(spark, small), plan, 2, priority)
        assert record is not None and record.events > 10
    assert len(compared) == 6  # no driver apply in epoch 2
    close_epoch(home, plan, 2)

    reader = Reader(settings)
    for epoch, upto in ((1, events), (2, events + more)):
        oracle = DuckOracle(schema, alive_after(upto))
        for name, sql in VIEWS.items():
            got = sorted(reader.read_view(name, reader.stable(epoch)), key=sort_key)
            assert _same(got, oracle.query(sql)), f"{name} at epoch {epoch}"
