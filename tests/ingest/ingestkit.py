"""Helpers of the ingestion tests: home folders, landing files, reading tables back.
A module name of its own (pytest imports every tests/*/conftest.py as `conftest`, so
tests import helpers from here; the fixtures stay in conftest.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from cumulus.config import Settings, load_settings

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SHOP = HERE / "data" / "shop.sql"
TPCH = REPO / "tests" / "fixtures" / "schemas" / "tpch.sql"
STANDARD_DEL = REPO.parent / "shared" / "data" / "dbtoaster" / "tpch" / "standard_del"

def write_home(root: Path, catalog: str) -> Settings:
    """A home folder whose cumulus.toml names its catalog (so CLI runs and subprocesses
    load the same settings); nothing is created in the catalog yet."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "cumulus.toml").write_text(f'catalog = "{catalog}"\nspark_master = "local[2]"\n')
    return load_settings(root)


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
    """base.<rel> as a multiset: the rows' counts summed per tuple (compacted part and fold
    layers), tuples that sum to zero left out."""
    total: Counter = Counter()
    for r in spark.table(f"{settings.catalog}.base.{relation.name}").collect():
        total[tuple(r[:-1])] += r.mult
    return Counter({t: n for t, n in total.items() if n != 0})
