"""A tiny TPC-H home for the SQL-read tests (view SQL, dbt, the Thrift server): the demo
schema and views plus a scalar view, `tpchgen-cli -s 0.001` rows of the five relations
the views read, epoch 1 closed (tag epoch-1), then a batch of deletes applied on main
(epoch 2 open), so main and the tag differ."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

from cumulus.config import Settings, load_settings
from cumulus.store.tables import Home

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "demo"
SCHEMA = DEMO / "tpch_schema.sql"
DEMO_VIEWS = sorted((DEMO / "views").glob("*.sql"))  # the order `cumulus dbt generate` compiles them in
SCALAR_VIEW = (
    "orders_overall",
    "SELECT COUNT(*) AS orders, SUM(o.o_totalprice) AS total_price, AVG(o.o_totalprice) AS avg_price, "
    "MIN(o.o_orderdate) AS first_order, MAX(o.o_orderdate) AS last_order FROM orders o",
)
RELATIONS = ("nation", "part", "customer", "orders", "lineitem")
CATALOG = "sqlreads"


def tpch_files(folder: Path) -> Path:
    """tpchgen-cli CSV tables at scale factor 0.001 (1500 orders, 6000 lineitems)."""
    tpchgen = Path(sys.executable).with_name("tpchgen-cli")
    subprocess.run(
        [str(tpchgen), "csv", "-s", "0.001", "-o", str(folder), "--tables", ",".join(RELATIONS)],
        check=True, capture_output=True,
    )
    return folder


def deletes(tables: Path, folder: Path, every: int = 7) -> Path:
    """Delete every `every`-th order with its lineitems (CSV with an `op` column)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rel, key in (("orders", "o_orderkey"), ("lineitem", "l_orderkey")):
        with (tables / f"{rel}.csv").open(newline="") as src, (folder / f"{rel}.csv").open("w", newline="") as out:
            reader = csv.DictReader(src)
            writer = csv.DictWriter(out, fieldnames=["op", *reader.fieldnames])
            writer.writeheader()
            for row in reader:
                if int(row[key]) % every == 0:
                    writer.writerow({"op": "-", **row})
    return folder


def build_home(spark, root: Path) -> Settings:
    """The tiny home at `root` (see the module docstring); returns its settings."""
    from cumulus.engine.apply import apply_source
    from cumulus.engine.close import close_epoch
    from cumulus.engine.registry import batch_plan
    from cumulus.engine.views import add_view
    from cumulus.ingest.job import ingest_files
    from cumulus.ingest.sources import add_source
    from cumulus.schema import load_schema
    from cumulus.store.home import init_home

    home = root / "home"
    home.mkdir(parents=True)
    (home / "cumulus.toml").write_text(f'catalog = "{CATALOG}"\nspark_master = "local[2]"\npublish = "closed"\nresults_tables = false\n')
    settings = load_settings(home)
    init_home(Home(spark, settings), SCHEMA)
    add_source(settings, "tpch", 1)
    schema = load_schema(SCHEMA)
    for path in DEMO_VIEWS:
        add_view(Home(spark, settings), schema, path.stem, path.read_text())
    compiled = add_view(Home(spark, settings), schema, *SCALAR_VIEW)
    plan = batch_plan(compiled)
    tables = tpch_files(root / "tpch")
    ingest_files(Home(spark, settings), "tpch", [tables / f"{r}.csv" for r in RELATIONS])
    close_epoch(Home(spark, settings), plan, 1)
    ingest_files(Home(spark, settings), "tpch", [deletes(tables, root / "deletes")])
    apply_source(Home(spark, settings), plan, 2, 1)
    return settings
