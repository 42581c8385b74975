"""Fixtures of the ingestion tests: fresh Cumulus homes, each with its own catalog name so
that the one test SparkSession can work on several homes (cumulus.store.tables
.attach_catalog). Helpers live in ingestkit.py."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from ingestkit import SHOP, write_home

from cumulus.config import Settings
from cumulus.ingest.sources import add_source
from cumulus.store.tables import Home

_homes = itertools.count(1)


@pytest.fixture
def new_home(tmp_path_factory, spark, request):
    """Factory: an initialized home (schema, tables, epoch 1) with sources a (priority 1)
    and b (priority 2)."""
    from cumulus.store.home import init_home

    def make(schema: Path = SHOP, sources: dict[str, int] | None = None) -> Settings:
        n = next(_homes)
        settings = write_home(tmp_path_factory.mktemp(f"home{n}"), f"ing{n}")
        init_home(Home(spark, settings), schema)
        for name, priority in (sources or {"a": 1, "b": 2}).items():
            add_source(settings, name, priority)
        return settings

    default_catalog = spark.conf.get("spark.sql.defaultCatalog")
    yield make
    # In-process CLI runs build "their" session: Spark hands back this one and applies
    # the runtime settings, among them the default catalog. Put it back.
    spark.conf.set("spark.sql.defaultCatalog", default_catalog)
