"""Fixtures of the engine tests: a fresh home on the simple r/s/t schema with one view,
two sources (a: r and s, priority 1; b: t, priority 2) and their landing files."""

from __future__ import annotations

import pytest
from enginekit import CHAIN, SIMPLE, SOURCES, _homes

from cumulus.config import load_settings
from cumulus.ingest.sources import add_source
from cumulus.ingest.synthetic import generate_events
from cumulus.schema import load_schema
from cumulus.store.tables import Home


@pytest.fixture
def simple_home(spark, tmp_path):
    """(settings, plan, compiled, events): an initialized home with the chain view."""
    from cumulus.engine.registry import batch_plan
    from cumulus.engine.views import add_view
    from cumulus.store.home import init_home

    root = tmp_path / "home"
    root.mkdir()
    catalog = f"eng_s{next(_homes)}"
    (root / "cumulus.toml").write_text(f'catalog = "{catalog}"\nspark_master = "local[2]"\npublish = "closed"\n')
    settings = load_settings(root)
    home = Home(spark, settings)
    init_home(home, SIMPLE)
    for name, (_, priority) in SOURCES.items():
        add_source(settings, name, priority)
    schema = load_schema(SIMPLE)
    compiled = add_view(home, schema, "chain", CHAIN)
    events = [e for e in generate_events(schema, 160, seed=21, domain=3, delete_ratio=0.25)]
    default_catalog = spark.conf.get("spark.sql.defaultCatalog")
    yield settings, batch_plan(compiled), compiled, events
    spark.conf.set("spark.sql.defaultCatalog", default_catalog)
