"""Shared pieces of the data-quality tests (a module name of its own: pytest imports every
tests/*/conftest.py as `conftest`, so tests import helpers from here): a tiny shop home
with two views and one closed epoch, a way to corrupt a map at its tag and to undo it,
and the rows a Data Docs index lists."""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from cumulus.config import Settings, load_settings
from cumulus.store.tables import Home, tables_of

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SHOP = HERE / "shop.sql"
# A view over one relation (NULL groups, exact decimal sums, a double average, a date
# minimum) and one over a join without GROUP BY (a map without keys, join-key maps; the
# returns repeat, so base tuples with mult > 1 must be expanded). 7 maps in all.
VIEWS = {
    "sales": "SELECT region, COUNT(*) AS n, SUM(price) AS revenue, AVG(weight) AS avg_weight, "
    "MIN(o_date) AS first_day FROM orders GROUP BY region",
    "returned": "SELECT COUNT(*) AS returns FROM orders o, returns r WHERE o.o_id = r.r_order",
}
EVENTS = 80
_homes = itertools.count(1)


@dataclass(frozen=True)
class ShopHome:
    settings: Settings
    epoch: int  # the closed epoch


def build_shop_home(spark, root: Path) -> ShopHome:
    """init, one source, both views, then one epoch of synthetic events (inserts and
    deletes of live tuples) ingested and closed. Tiny, so the module stays fast."""
    from cumulus.engine.close import close_epoch
    from cumulus.engine.registry import batch_plan
    from cumulus.engine.views import add_view
    from cumulus.ingest.job import ingest_files
    from cumulus.ingest.sources import add_source
    from cumulus.ingest.synthetic import generate_events, write_dbtoaster
    from cumulus.schema import load_schema
    from cumulus.store.home import init_home

    root.mkdir(parents=True, exist_ok=True)
    # results_touched_share = 1, results_driver_rows = results_collect_rows = 0: every
    # published epoch updates the results tables by the groups it touched, by a MERGE
    # (delete files) that a reader without Cumulus then reads (else these small views'
    # tables would be rewritten from the driver).
    # epoch_mode = incremental: under auto a close of this tiny home may rebuild the maps
    # (a rebuild in the driver measures about as cheap as a one-event apply, so the choice
    # follows the machine's load), and after a rebuild every results table is rewritten whole.
    (root / "cumulus.toml").write_text(f'catalog = "quality{next(_homes)}"\nspark_master = "local[2]"\n'
                                       'results_touched_share = 1.0\nresults_touched_min_rows = 0\n'
                                       'results_driver_rows = 0\nresults_collect_rows = 0\n'
                                       'epoch_mode = "incremental"\n')
    settings = load_settings(root)
    home = Home(spark, settings)
    init_home(home, SHOP)
    add_source(settings, "shop", 1)
    schema = load_schema(SHOP)
    compiled = None
    for name, sql in VIEWS.items():
        compiled = add_view(home, schema, name, sql)
    plan = batch_plan(compiled)
    events = generate_events(schema, EVENTS, seed=7, domain=4, delete_ratio=0.25)
    folder = write_dbtoaster(events, root.parent / f"in-{root.name}", schema)
    ingest_files(home, "shop", [folder], fmt="dbtoaster")
    close_epoch(home, plan, 1)
    return ShopHome(settings, 1)


def corrupt_map(spark, settings: Settings, map_name: str, epoch: int, *, retag: bool = True, avoid=None) -> tuple:
    """Append a row (versioned as epoch N) that drives an entry of the count map
    `map_name` at the tag epoch-N, not keyed `avoid`, to -1, and move the tag onto that
    snapshot (`retag`; else the row waits on main for the next close): every read sums
    the entry to an impossible count. Returns the key that was hit."""
    from pyspark.sql import functions as F

    from cumulus.quality.frames import at_tag
    from cumulus.read import Reader
    from cumulus.store.maps import entries_columns, entry_rows, map_slice

    info = Reader(settings).compilation.checked.maps[map_name]
    table = tables_of(settings).maps
    rows = map_slice(at_tag(spark, table, epoch), info)
    entries = rows.groupBy(*info.key_names).agg(F.sum("value").alias("value")).where("value > 0")
    if avoid is not None:
        entries = entries.where(~F.struct(*info.key_names).eqNullSafe(F.struct(*[F.lit(v) for v in avoid])))
    entry = entries.orderBy("value").first()
    victim = spark.createDataFrame(
        [(*(entry[k] for k in info.key_names), -entry["value"] - 1)], rows.schema
    ).toDF(*[f"k{i}" for i in range(info.arity)], "value")
    version = {"epoch": epoch, "source_id": 9, "seq": 999_999}
    entry_rows(victim, info, entries_columns(Home(spark, settings)), version).writeTo(table).append()
    if retag:
        spark.sql(f"ALTER TABLE {table} CREATE OR REPLACE TAG `epoch-{epoch}`")
    return tuple(entry[k] for k in info.key_names)


def restore_tag(spark, settings: Settings, epoch: int) -> int:
    """Move the maps table's tag epoch-N back onto the snapshot the close recorded in the ledger."""
    from cumulus.store.ledger import ledger_row

    table = tables_of(settings).maps
    snapshot = ledger_row(spark, settings, epoch).snapshots[table]
    spark.sql(f"ALTER TABLE {table} CREATE OR REPLACE TAG `epoch-{epoch}` AS OF VERSION {snapshot}")
    return snapshot


def job_main(name: str):
    """`main` of the Spark job cumulus.jobs.<name>."""
    import importlib

    return importlib.import_module(f"cumulus.jobs.{name}").main


def data_docs_rows(index: Path) -> list[dict]:
    """The Validation Results a Data Docs index page lists, one dict per result: `run`
    (the run name, epoch-N), `suite`, `status` (Success | Failed) and `page` (relative to
    the site). GX hands the rows to bootstrap-table as a Python literal in a script."""
    from html.parser import HTMLParser

    class Scripts(HTMLParser):
        def __init__(self):
            super().__init__()
            self.inside, self.texts = False, []

        def handle_starttag(self, tag, attrs):
            self.inside = tag == "script"

        def handle_endtag(self, tag):
            self.inside = False

        def handle_data(self, data):
            if self.inside:
                self.texts.append(data)

    parser = Scripts()
    parser.feed(index.read_text(encoding="utf-8"))
    rows = []
    for text in parser.texts:
        m = re.search(r"\bdata: (\[.*\]),\s*toolbar:", text, re.DOTALL)
        if m and "'run_name'" in m[1]:
            rows += [
                {"run": r["run_name"], "suite": r["_expectation_suite_name_sort"],
                 "status": r["_validation_success_text"], "page": r["_table_row_link_path"]}
                for r in ast.literal_eval(m[1])
            ]
    return rows
