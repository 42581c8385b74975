"""Folding an epoch's events into base.<rel>: the relation's multiset after the epoch.
The engine calls `fold_epoch` when it closes an epoch.

Per relation, one MERGE: the net multiplicity of every tuple over the epoch's committed
events is added to its `mult`; tuples that reach 0 are deleted, new tuples inserted.
The commit's snapshot summary records `cumulus.folded-epoch = N`; a relation whose base
table already records N (or later) is skipped, so a retried close never folds twice.
Epochs left unfolded before N (a relation without events, or a close that crashed) are
folded in the same MERGE. A relation whose events cancel out (or that has none) is not
touched: its table stays as it is, and a later fold starts from its last marker. Only
sealed epochs can be folded: an open epoch still takes input.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.errors import StoreError
from cumulus.parallel import for_each
from cumulus.store import commit
from cumulus.store.batches import recover_incomplete_batches
from cumulus.store.home import load_home_schema
from cumulus.store.ledger import OPEN, ledger_row
from cumulus.store.lock import catalog_lock
from cumulus.store.tables import attach_catalog, base_table, events_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("cumulus.fold")


@dataclass(frozen=True)
class FoldResult:
    relation: str
    folded: bool  # False: nothing committed (already folded through the epoch, or no net change)
    from_epoch: int  # events of epochs from_epoch..epoch were folded
    epoch: int
    tuples_changed: int  # distinct tuples whose multiplicity changed
    snapshot_id: int | None  # base table snapshot after the fold


def folded_through(spark: SparkSession, settings: Settings, relation: str) -> int:
    """The last epoch folded into base.<relation> (0: none)."""
    epochs = [
        int(s.summary[commit.FOLDED_EPOCH])
        for s in commit.snapshots(spark, base_table(settings, relation))
        if commit.FOLDED_EPOCH in s.summary
    ]
    return max(epochs, default=0)


def fold_epoch(spark: SparkSession, settings: Settings, epoch: int) -> dict[str, FoldResult]:
    """Fold the committed events of `epoch` (and of any unfolded earlier epoch) into every
    base.<rel>. Idempotent; takes the catalog lock; refuses an epoch that is still open."""
    attach_catalog(spark, settings)
    schema = load_home_schema(settings)
    with catalog_lock(settings, f"fold epoch {epoch}"):
        row = ledger_row(spark, settings, epoch)
        if row is None:
            raise StoreError(f"epoch {epoch} is not in the ledger")
        if row.state == OPEN:
            raise StoreError(
                f"epoch {epoch} is still open (taking input); seal it first "
                f"(ledger.transition(spark, settings, {epoch}, 'applied'))"
            )
        recover_incomplete_batches(spark, settings, schema)
        results = for_each(
            lambda name: _fold_relation(spark, settings, schema.relation(name), epoch),
            [rel.name for rel in schema.relations], settings.table_workers, f"epoch {epoch} fold",
        )
    return results


def _fold_relation(spark: SparkSession, settings: Settings, rel, epoch: int) -> FoldResult:
    from pyspark.sql import functions as F

    done = folded_through(spark, settings, rel.name)
    target = base_table(settings, rel.name)
    if done >= epoch:
        log.info("base.%s: already folded through epoch %d, skipped", rel.name, done)
        return FoldResult(rel.name, False, done + 1, epoch, 0, None)
    started = time.perf_counter()
    keys = list(rel.column_names)
    delta = (
        spark.table(events_table(settings, rel.name))
        .where((F.col("epoch") > done) & (F.col("epoch") <= epoch))
        .groupBy(*keys)
        .agg(F.sum(F.col("op").cast("bigint")).alias("__d"))
        .where(F.col("__d") != 0)
        .persist()
    )
    changed = delta.count()
    if changed == 0:  # no net change: no MERGE, which would scan the whole base table
        delta.unpersist()
        log.info("base.%s: no net change in epochs %d..%d, nothing to fold", rel.name, done + 1, epoch)
        return FoldResult(rel.name, False, done + 1, epoch, 0, None)
    view = f"cumulus_fold_{rel.name}"
    delta.createOrReplaceTempView(view)
    on = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys)
    cols = ", ".join(f"`{k}`" for k in keys)
    values = ", ".join(f"s.`{k}`" for k in keys)
    with commit.commit_properties(spark, {commit.FOLDED_EPOCH: epoch}):
        spark.sql(
            f"MERGE INTO {target} t USING {view} s ON {on} "
            "WHEN MATCHED AND t.mult + s.__d = 0 THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET t.mult = t.mult + s.__d "
            f"WHEN NOT MATCHED THEN INSERT ({cols}, mult) VALUES ({values}, s.__d)"
        )
    spark.catalog.dropTempView(view)
    delta.unpersist()
    marked = [
        s.snapshot_id
        for s in commit.snapshots(spark, target)
        if s.summary.get(commit.FOLDED_EPOCH) == str(epoch)
    ]
    log.info(
        "base.%s: folded epochs %d..%d, %d tuples changed (%.1f s)",
        rel.name,
        done + 1,
        epoch,
        changed,
        time.perf_counter() - started,
    )
    return FoldResult(rel.name, True, done + 1, epoch, changed, marked[-1] if marked else None)
