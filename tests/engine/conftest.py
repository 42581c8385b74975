"""Fixtures of the engine tests: a fresh home on the simple r/s/t schema with one view,
two sources (a: r and s, priority 1; b: t, priority 2) and their landing files."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from cumulus.config import load_settings
from cumulus.ingest.sources import add_source
from cumulus.ingest.synthetic import format_value, generate_events
from cumulus.schema import load_schema

REPO = Path(__file__).resolve().parents[2]
SIMPLE = REPO / "tests" / "fixtures" / "schemas" / "simple.sql"
CHAIN = "SELECT r.a, SUM(t.d) AS total, COUNT(*) AS n FROM r, s, t WHERE r.b = s.b AND s.c = t.c GROUP BY r.a"
SOURCES = {"a": ({"r", "s"}, 1), "b": ({"t"}, 2)}
_homes = itertools.count(1)


def write_events(events, folder: Path, relations: set[str]) -> Path:
    """Events of some relations as DBToaster files (event-order number = position)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines: dict[str, list[str]] = {}
    for order, e in enumerate(events, 1):
        if e.relation in relations:
            flag = "1" if e.sign == "+" else "0"
            lines.setdefault(e.relation, []).append("|".join([str(order), flag, *map(format_value, e.values)]))
    for rel, rows in lines.items():
        (folder / f"{rel}.csv").write_text("".join(r + "\n" for r in rows))
    return folder


@pytest.fixture
def simple_home(spark, tmp_path):
    """(settings, plan, compiled, events): an initialized home with the chain view."""
    from cumulus.engine.registry import batch_plan
    from cumulus.engine.views import add_view
    from cumulus.store.home import init_home

    root = tmp_path / "home"
    root.mkdir()
    catalog = f"eng_s{next(_homes)}"
    (root / "cumulus.toml").write_text(f'catalog = "{catalog}"\nspark_master = "local[2]"\n')
    settings = load_settings(root)
    init_home(spark, settings, SIMPLE)
    for name, (_, priority) in SOURCES.items():
        add_source(settings, name, priority)
    schema = load_schema(SIMPLE)
    compiled = add_view(spark, settings, schema, "chain", CHAIN)
    events = [e for e in generate_events(schema, 160, seed=21, domain=3, delete_ratio=0.25)]
    default_catalog = spark.conf.get("spark.sql.defaultCatalog")
    yield settings, batch_plan(compiled), compiled, events
    spark.conf.set("spark.sql.defaultCatalog", default_catalog)
