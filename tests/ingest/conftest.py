"""Fixtures of the ingestion tests: fresh Cumulus homes, each with its own catalog name so
that the one test SparkSession can work on several homes (cumulus.store.tables
.attach_catalog), and helpers to write landing files and read tables back."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest

from cumulus.config import Settings, load_settings
from cumulus.ingest.sources import add_source

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SHOP = HERE / "data" / "shop.sql"
TPCH = REPO / "tests" / "fixtures" / "schemas" / "tpch.sql"
STANDARD_DEL = REPO.parent / "shared" / "data" / "dbtoaster" / "tpch" / "standard_del"

_homes = itertools.count(1)


def write_home(root: Path, catalog: str) -> Settings:
    """A home folder whose cumulus.toml names its catalog (so CLI runs and subprocesses
    load the same settings); nothing is created in the catalog yet."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "cumulus.toml").write_text(f'catalog = "{catalog}"\nspark_master = "local[2]"\n')
    return load_settings(root)


@pytest.fixture
def new_home(tmp_path_factory, spark, request):
    """Factory: an initialized home (schema, tables, epoch 1) with sources a (priority 1)
    and b (priority 2)."""
    from cumulus.store.home import init_home

    def make(schema: Path = SHOP, sources: dict[str, int] | None = None) -> Settings:
        n = next(_homes)
        settings = write_home(tmp_path_factory.mktemp(f"home{n}"), f"ing{n}")
        init_home(spark, settings, schema)
        for name, priority in (sources or {"a": 1, "b": 2}).items():
            add_source(settings, name, priority)
        return settings

    default_catalog = spark.conf.get("spark.sql.defaultCatalog")
    yield make
    # In-process CLI runs build "their" session: Spark hands back this one and applies
    # the runtime settings, among them the default catalog. Put it back.
    spark.conf.set("spark.sql.defaultCatalog", default_catalog)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def events(spark, settings: Settings, relation: str) -> list[dict]:
    """Every row of events.<relation>, in version order."""
    df = spark.table(f"{settings.catalog}.events.{relation}")
    return [r.asDict() for r in df.orderBy("epoch", "source_id", "seq").collect()]


def tuples(rows: list[dict], columns) -> Counter:
    return Counter(tuple(r[c] for c in columns) for r in rows)


def replay(spark, settings: Settings, relation) -> Counter:
    """The multiset the events of a relation leave (net multiplicity > 0), by Spark SQL
    over events.* (not by the fold)."""
    cols = ", ".join(f"`{c}`" for c in relation.column_names)
    rows = spark.sql(
        f"SELECT {cols}, SUM(op) AS n FROM {settings.catalog}.events.{relation.name} "
        f"GROUP BY {cols} HAVING SUM(op) <> 0"
    ).collect()
    return Counter({tuple(r[:-1]): r.n for r in rows})


def base(spark, settings: Settings, relation) -> Counter:
    rows = spark.table(f"{settings.catalog}.base.{relation.name}").collect()
    return Counter({tuple(r[:-1]): r.mult for r in rows})
