"""Folding an epoch's events into base.<rel>: the relation's multiset after the epoch.
The engine calls `fold_epoch` when it closes an epoch.

base.<rel> is a log-structured multiset: a compacted part (one row per tuple, `mult` > 0)
plus the layers appended by the folds since (per fold, one row per tuple whose net count
changed, `mult` the signed change). A tuple's multiplicity is the sum of its rows. So a
fold appends the epoch's net changes and reads nothing of the table: its cost follows the
epoch's events, not the relation's size (a MERGE on tuple equality had to scan, shuffle
and join the whole table, 46-109 s per epoch for lineitem at SF 1). Compaction rewrites
the table as one row per live tuple, when the layers exceed `base_compaction_ratio` of
the compacted rows (checked after every fold: its O(table) cost is amortized over the
epochs in between) and in `cumulus maintenance`.

Readers: `base_rows` gives the multiset as SQL needs it (one row per live tuple, grouped
only when the snapshot read has layers); linear readers (the back-fill, the delete check)
sum the rows as they are.

Commit marks (snapshot summaries): `cumulus.folded-epoch = N` on every fold and
compaction (a relation whose base table records N or later is skipped, so a retried close
never folds twice; epochs left unfolded before N are folded together);
`cumulus.base-layer-rows`, the rows appended since the last compaction, on a compaction
(0) and on a first fold into an empty table (0 when it is compact: every count
positive); and on every later fold `cumulus.base-layer-rows-before`, the layer rows
before it, to which its own `added-records` add (so a fold is one Spark job, its write:
nothing is counted before it).
A relation whose events cancel out (or that has none) is not touched. Only sealed epochs
can be folded: an open epoch still takes input.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cumulus.errors import NoSuchEpochError, StoreError
from cumulus.parallel import for_each
from cumulus.schema import Relation
from cumulus.store import commit
from cumulus.store.batches import recover_incomplete_batches
from cumulus.store.home import load_home_schema
from cumulus.store.ledger import OPEN, ledger_row
from cumulus.store.lock import catalog_lock
from cumulus.store.tables import Home, attach_catalog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("cumulus.fold")
LAYER_ROWS = "cumulus.base-layer-rows"  # rows appended by folds since the last compaction
LAYERS_BEFORE = "cumulus.base-layer-rows-before"  # on a fold: LAYER_ROWS before its own rows


@dataclass(frozen=True)
class FoldResult:
    relation: str
    folded: bool  # False: nothing committed (already folded through the epoch, or no net change)
    from_epoch: int  # events of epochs from_epoch..epoch were folded
    epoch: int
    tuples_changed: int  # distinct tuples whose multiplicity changed
    snapshot_id: int | None  # base table snapshot after the fold
    compacted: bool = False  # the fold was followed by a compaction


@dataclass(frozen=True)
class Layers:
    """The layered state of a base table at one snapshot."""

    rows: int  # rows appended by folds since the last compaction (0: compact)
    compacted_rows: int  # rows the last compaction (or compact first fold) left


def folded_through(home: Home, relation: str) -> int:
    """The last epoch folded into base.<relation> (0: none)."""
    epochs = [
        int(s.summary[commit.FOLDED_EPOCH])
        for s in commit.snapshots(home.spark, home.tables.base(relation))
        if commit.FOLDED_EPOCH in s.summary
    ]
    return max(epochs, default=0)


def layers(spark: SparkSession, table: str, snapshot_id: int | None = None) -> Layers:
    """The layers of `table` at `snapshot_id` (default: the current snapshot)."""
    return layers_in(commit.table_metadata(spark, table), snapshot_id)


def layers_in(meta: Mapping, snapshot_id: int | None = None) -> Layers:
    """The layers at a snapshot of a table's Iceberg metadata (the metadata.json document),
    from the commit marks along the snapshot's ancestry: maintenance's file rewrites carry
    none and change no row, so the nearest marked ancestor decides. A table no fold marked
    is compact."""
    layer_rows: int | None = None
    for summary in commit.summaries_back(meta, snapshot_id):
        if LAYERS_BEFORE in summary and layer_rows is None:
            layer_rows = int(summary[LAYERS_BEFORE]) + int(summary.get("added-records", 0))
        if LAYER_ROWS in summary:
            if layer_rows is None:
                layer_rows = int(summary[LAYER_ROWS])
            if int(summary[LAYER_ROWS]) == 0:
                return Layers(layer_rows, int(summary.get("total-records", 0)))
    return Layers(layer_rows or 0, 0)


def base_rows(
    spark: SparkSession, table: str, columns: list[str], tag: str | None = None, *, live: bool = True
) -> DataFrame:
    """The multiset stored in base table `table` (at tag `tag`, or the main branch) as one
    row per tuple: its `columns` and `mult`. Grouped only when the snapshot read has fold
    layers; a compact table is read as it is. `live`: only tuples with `mult` > 0 (what
    SQL sees); otherwise every nonzero sum, so a check can still find a negative count."""
    from pyspark.sql import functions as F

    meta = commit.table_metadata(spark, table)
    reader = spark.read.format("iceberg")
    snapshot_id = None
    if tag is not None:
        reader = reader.option("tag", tag)
        ref = meta.get("refs", {}).get(tag)
        if ref is None:
            raise StoreError(f"{table} has no tag {tag}")
        snapshot_id = ref["snapshot-id"]
    df = reader.load(table)
    if layers_in(meta, snapshot_id).rows == 0:
        return df.select(*[F.col(f"`{c}`") for c in columns], "mult")
    return _summed(df, columns, live)


def _summed(df: DataFrame, columns: list[str], live: bool = True) -> DataFrame:
    """One row per tuple of a layered base frame: `mult` summed over its rows, kept where
    > 0 (`live`) or where not 0."""
    from pyspark.sql import functions as F

    grouped = df.groupBy(*[F.col(f"`{c}`") for c in columns]).agg(F.sum("mult").alias("mult"))
    return grouped.where(F.col("mult") > 0 if live else F.col("mult") != 0)


def fold_epoch(home: Home, epoch: int) -> dict[str, FoldResult]:
    """Fold the committed events of `epoch` (and of any unfolded earlier epoch) into every
    base.<rel>, then compact the tables whose layers outgrew the ratio. Idempotent; takes
    the catalog lock; refuses an epoch that is still open."""
    attach_catalog(home)
    schema = load_home_schema(home.settings)
    with catalog_lock(home.settings, f"fold epoch {epoch}"):
        row = ledger_row(home.spark, home.settings, epoch)
        if row is None:
            raise NoSuchEpochError(f"epoch {epoch} is not in the ledger")
        if row.state == OPEN:
            raise StoreError(
                f"epoch {epoch} is still open (taking input); seal it first "
                f"(ledger.transition(home, {epoch}, 'applied'))"
            )
        recover_incomplete_batches(home, schema)

        def fold(name: str) -> FoldResult:
            rel = schema.relation(name)
            result = _fold_relation(home, rel, epoch)
            if compact_base(home, rel, home.settings.base_compaction_ratio):
                result = replace(result, compacted=True)
            return result

        results = for_each(fold, [rel.name for rel in schema.relations], home.settings.table_workers, f"epoch {epoch} fold")
    return results


def _fold_relation(home: Home, rel: Relation, epoch: int) -> FoldResult:
    from pyspark.sql import functions as F

    done = folded_through(home, rel.name)
    target = home.tables.base(rel.name)
    if done >= epoch:
        log.info("base.%s: already folded through epoch %d, skipped", rel.name, done)
        return FoldResult(rel.name, False, done + 1, epoch, 0, None)
    events = home.tables.events(rel.name)
    if not any(done < int(s.summary.get(commit.EPOCH, -1)) <= epoch for s in commit.snapshots(home.spark, events)):
        # Every events row is written by an ingest commit marked with its epoch: none in
        # the range, no events, so no Spark job.
        log.info("base.%s: no events in epochs %d..%d, nothing to fold", rel.name, done + 1, epoch)
        return FoldResult(rel.name, False, done + 1, epoch, 0, None)
    started = time.perf_counter()
    keys = list(rel.column_names)
    delta = (
        home.spark.table(events)
        .where((F.col("epoch") > done) & (F.col("epoch") <= epoch))
        .groupBy(*[F.col(f"`{k}`") for k in keys])
        .agg(F.sum(F.col("op").cast("bigint")).alias("mult"))
        .where(F.col("mult") != 0)
    )
    meta = commit.table_metadata(home.spark, target)
    props: dict[str, object] = {commit.FOLDED_EPOCH: epoch}
    if commit.total_records(meta) == 0:
        # Into an empty table, a fold of positive counts (one row per tuple) is compact:
        # counted first, once (the initial load).
        delta = delta.persist()
        stats = delta.agg(F.count(F.lit(1)).alias("n"), F.min("mult").alias("low")).first()
        if int(stats["n"]) == 0:  # no net change: nothing to append
            delta.unpersist()
            log.info("base.%s: no net change in epochs %d..%d, nothing to fold", rel.name, done + 1, epoch)
            return FoldResult(rel.name, False, done + 1, epoch, 0, None)
        props[LAYER_ROWS] = 0 if stats["low"] > 0 else int(stats["n"])
    else:
        props[LAYERS_BEFORE] = layers_in(meta).rows
    delta.writeTo(target).options(**commit.write_options(props)).append()
    delta.unpersist()
    marked = [s for s in commit.snapshots(home.spark, target) if s.summary.get(commit.FOLDED_EPOCH) == str(epoch)]
    changed = int(marked[-1].summary.get("added-records", 0)) if marked else 0
    log.info(
        "base.%s: folded epochs %d..%d, %d tuples changed, %d layer rows (%.1f s)",
        rel.name, done + 1, epoch, changed, layers(home.spark, target).rows, time.perf_counter() - started,
    )
    return FoldResult(rel.name, True, done + 1, epoch, changed, marked[-1].snapshot_id if marked else None)


def compact_base(home: Home, rel: Relation, ratio: float | None = None) -> int:
    """Rewrite base.<rel> as one row per live tuple, in one overwrite commit, when its fold
    layers hold more than `ratio` times the compacted rows (None: whenever it has layers).
    The multiset is unchanged, so a crash before or after the commit is harmless and a
    retry finds nothing to do. The caller holds the catalog lock. Returns the layer rows
    compacted (0: nothing done)."""
    from pyspark.sql import functions as F

    target = home.tables.base(rel.name)
    state = layers(home.spark, target)
    if state.rows == 0 or (ratio is not None and state.rows <= ratio * max(state.compacted_rows, 1)):
        return 0
    started = time.perf_counter()
    props = {commit.FOLDED_EPOCH: folded_through(home, rel.name), LAYER_ROWS: 0}
    live = _summed(home.spark.table(target), list(rel.column_names))
    live.writeTo(target).options(**commit.write_options(props)).overwrite(F.lit(True))
    log.info(
        "base.%s: compacted %d layer rows into %d rows (%.1f s)",
        rel.name, state.rows, layers(home.spark, target).compacted_rows, time.perf_counter() - started,
    )
    return state.rows
