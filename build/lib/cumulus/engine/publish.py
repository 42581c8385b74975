"""Publish: the tags a close leaves (`epoch-N` on maps.entries and every base table,
`tag_tables`) and what readers that do not name an epoch read.

- The `stable` branch of every table tagged by a close points at the latest closed
  epoch's snapshot (its tag `epoch-N`). The close moves it right after writing the
  ledger row (the publish point); a crash in between is mended by the next `epoch close`
  (closing a closed epoch moves the branches it finds behind). Moving a branch is a
  metadata commit; no data is read or written.
- Every registered view is an Iceberg view in the catalog, twice: `views.<name>` over
  the maps' main branch (fresh, eventually consistent) and `views_stable.<name>` over
  their `stable` branch (consistent), each the SQL `cumulus view sql` prints, so Spark
  SQL, beeline, a BI tool or dbt read a view by name. `cumulus view sql NAME --epoch N`
  stays for older epochs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.engine.apply import current_snapshot_id
from cumulus.parallel import for_each
from cumulus.spark.local import local_frame
from cumulus.sql.mapsql import quote, view_sql
from cumulus.sql.views import Compilation
from cumulus.store.commit import table_metadata
from cumulus.store.tables import STABLE, VIEWS, VIEWS_STABLE, tag_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("cumulus.publish")


def move_stable(spark: SparkSession, snapshots: Mapping[str, int]) -> int:
    """Point the `stable` branch of each table at its snapshot; tables whose branch is
    there already are left alone. Returns the branches moved."""
    moved = 0
    for table, snap in snapshots.items():
        ref = table_metadata(spark, table).get("refs", {}).get(STABLE, {})
        if ref.get("snapshot-id") == snap:
            continue
        spark.sql(f"ALTER TABLE {table} CREATE OR REPLACE BRANCH `{STABLE}` AS OF VERSION {snap}")
        moved += 1
    return moved


def view_names(settings: Settings, name: str) -> tuple[str, str]:
    """The catalog views of a registered view: (fresh, stable)."""
    return tuple(f"{settings.catalog}.{ns}.{quote(name)}" for ns in (VIEWS, VIEWS_STABLE))  # type: ignore[return-value]


def create_catalog_views(
    spark: SparkSession, settings: Settings, compilation: Compilation, names: Iterable[str] | None = None
) -> None:
    """Create (or replace) `views.<name>` and `views_stable.<name>` for the views."""
    for ns in (VIEWS, VIEWS_STABLE):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.catalog}.{ns}")
    for name in names if names is not None else compilation.views:
        fresh, stable = view_names(settings, name)
        for target, version in ((fresh, None), (stable, STABLE)):
            sql = view_sql(compilation, name, version, catalog=settings.catalog, order=False)
            spark.sql(f"CREATE OR REPLACE VIEW {target} AS {sql}")
        log.info("view %s: readable as %s (fresh) and %s (stable)", name, fresh, stable)


def ensure_snapshot(spark: SparkSession, table: str) -> int:
    """The table's current snapshot, committing an empty append first if it has none."""
    snap = current_snapshot_id(spark, table)
    if snap is None:
        local_frame(spark, [], spark.table(table).schema).writeTo(table).append()
        snap = current_snapshot_id(spark, table)
    assert snap is not None
    return snap


def tag_tables(spark: SparkSession, tables: list[str], epoch: int, workers: int = 1) -> dict[str, int]:
    """Tag each table's current snapshot `epoch-N` (replacing a tag left by a crashed try)."""

    def tag(table: str) -> int:
        snap = ensure_snapshot(spark, table)
        spark.sql(f"ALTER TABLE {table} CREATE OR REPLACE TAG `{tag_name(epoch)}` AS OF VERSION {snap}")
        return snap

    return for_each(tag, tables, workers, f"epoch {epoch} tags")
