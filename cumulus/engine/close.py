"""Close: make epoch N exact and publish it as a consistent, tagged snapshot.

Steps (each idempotent; a retry after a crash anywhere resumes from what the tables
say): seal the epoch in the ledger (input now goes to N+1); apply what is pending; repair
batches that read a stale state; fold the epoch's events into base.* (an appended layer
of net changes, compacted past a ratio); compact the maps whose delta rows outgrew
`map_compaction_ratio` (the paper's Cleanup, lazy: an entry's value is the sum of its
rows at any snapshot, so the close rewrites nothing otherwise); tag maps.entries and every
base table `epoch-N`; write the ledger row, the publish point: a stable snapshot exists
only once the ledger says so; then move every such table's `stable` branch there
(cumulus/engine/publish.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.engine.apply import (
    APPLY_BATCH,
    ApplyRecord,
    apply_records,
    apply_source,
    batch_events,
    current_snapshot_id,
    ensure_applies_table,
    map_state,
    record_written,
    save_record,
    write_deltas,
)
from cumulus.engine.evaluate import BatchPlan, evaluate_batch
from cumulus.engine.metrics import StageMeter, committed_writes
from cumulus.engine.publish import move_stable
from cumulus.engine.recompute import (
    RECOMPUTE,
    Choice,
    base_rows,
    choose,
    pending_batches,
    recompute_maps,
    recompute_record,
)
from cumulus.errors import StoreError
from cumulus.faults import fault_point
from cumulus.parallel import for_each
from cumulus.store.commit import FOLDED_EPOCH, Snapshot, snapshots
from cumulus.store.fold import fold_epoch
from cumulus.store.ledger import (
    APPLIED,
    CLOSED,
    DONE,
    OPEN,
    LedgerRow,
    check_in_order,
    ledger_rows,
    transition,
)
from cumulus.store.lock import catalog_lock
from cumulus.store.maps import COMPACTED_THROUGH, compact_maps, maps_table
from cumulus.store.tables import base_table, tag_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("cumulus.close")


# ---------------------------------------------------------------- repair


def _stale_read(by_id: Mapping[int, Snapshot], record: ApplyRecord) -> int | None:
    """The snapshot of maps.entries that the batch should have read, when it read another:
    its commit's parent, if a delta (an apply, repair or back-fill commit) was committed
    between the snapshot it read and its own commit. None when it read the right state
    (compactions and file rewrites in between change no entry)."""
    mine = by_id.get(record.written_snapshot) if record.written_snapshot is not None else None
    if mine is None:
        return None
    snap = by_id.get(mine.parent_id) if mine.parent_id is not None else None
    while snap is not None and snap.snapshot_id != record.read_snapshot:
        if APPLY_BATCH in snap.summary:
            return mine.parent_id
        snap = by_id.get(snap.parent_id) if snap.parent_id is not None else None
    return None


def repair_epoch(spark: SparkSession, settings: Settings, plan: BatchPlan, epoch: int) -> int:
    """Append corrective deltas for every batch of the epoch that read a map state
    missing deltas committed before its own commit (concurrent applies: the paper's
    unfulfilled dependencies). The correction is the batch evaluated against the state
    it should have seen minus what it wrote; it touches only the batch's keys. Reads the
    maps table's history once. Returns how many batches were repaired (0 where writers
    are serialized)."""
    from pyspark.sql import functions as F

    repaired = 0
    records = apply_records(spark, settings, epoch)
    done = {r.batch_id for r in records if r.kind == "repair"}
    by_id = {s.snapshot_id: s for s in snapshots(spark, maps_table(settings))}
    for record in records:
        if record.kind != "apply" or record.status != "done" or f"repair-{record.batch_id}" in done:
            continue
        should = _stale_read(by_id, record)
        if should is None:
            continue
        log.info("epoch %d: batch %s read a stale state of the maps; repairing", epoch, record.batch_id)
        events = batch_events(spark, settings, plan, record)
        right = evaluate_batch(plan, events, map_state(spark, settings, plan, should), settings.table_workers)
        wrong = evaluate_batch(plan, events, map_state(spark, settings, plan, record.read_snapshot), settings.table_workers)
        corrections: dict[str, DataFrame] = {}
        for name in set(right) | set(wrong):
            parts = []
            if name in right:
                parts.append(right[name])
            if name in wrong:
                parts.append(wrong[name].withColumn("value", -F.col("value")))
            df = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
            keys = [c for c in df.columns if c != "value"]
            agg = df.groupBy(*keys).agg(F.sum("value").alias("value")) if keys else df.agg(F.sum("value").alias("value"))
            corrections[name] = agg.where(F.col("value") != 0)
        fix = ApplyRecord(
            batch_id=f"repair-{record.batch_id}", kind="repair", epoch=epoch, source_id=record.source_id,
            status="started", ingest_batches=record.ingest_batches, events_snapshots=record.events_snapshots,
            read_snapshot=should, seq_max=record.seq_max,
        )
        record_written(fix, write_deltas(spark, settings, plan, fix, corrections))
        fix.status = "done"
        save_record(spark, settings, fix)
        repaired += 1
    return repaired


# ---------------------------------------------------------------- tag


def ensure_snapshot(spark: SparkSession, table: str) -> int:
    """The table's current snapshot, committing an empty append first if it has none."""
    snap = current_snapshot_id(spark, table)
    if snap is None:
        spark.createDataFrame([], spark.table(table).schema).writeTo(table).append()
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


# ---------------------------------------------------------------- close


def _bring_up_to_date(
    spark: SparkSession, settings: Settings, plan: BatchPlan, epoch: int, rows: list[LedgerRow]
) -> tuple[Choice, ApplyRecord | None]:
    """Apply the sealed epoch's pending batches, or choose to rebuild the maps after the
    fold (the returned record, saved before anything is folded, so a retry rebuilds too)."""
    records = apply_records(spark, settings, epoch)
    rebuild = next((r for r in records if r.kind == RECOMPUTE), None)
    if rebuild is not None:
        return Choice(RECOMPUTE, "chosen before an interrupted close (cumulus.applies: " + rebuild.batch_id + ")"), rebuild
    taken = {b for r in records if r.kind == "apply" for b in r.ingest_batches}
    pending = pending_batches(spark, settings, plan, epoch, taken)
    rows_now = base_rows(spark, settings, plan) if pending.batches and settings.epoch_mode == "auto" else 0
    choice = choose(settings, pending, rows_now, [r.metrics for r in rows if r.state in DONE and r.epoch < epoch])
    log.info("epoch %d: %s (%s)", epoch, choice.mode, choice.reason)
    if choice.mode == RECOMPUTE:
        rebuild = recompute_record(epoch, pending)
        save_record(spark, settings, rebuild)
        return choice, rebuild
    resume = {r.source_id for r in records if r.kind == "apply" and r.status == "started"}
    for source_id in sorted(resume | set(pending.sources)):
        apply_source(spark, settings, plan, epoch, source_id)
    return choice, None


class StepMetrics:
    """Seconds and Spark I/O per step: `with steps("fold"): ...` adds fold_s,
    fold_bytes_read, fold_rows_read, fold_bytes_written, fold_rows_written."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self.metrics: dict[str, float | int] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t, meter = time.perf_counter(), StageMeter(self.spark)
        yield
        self.metrics[f"{name}_s"] = round(time.perf_counter() - t, 3)
        self.metrics.update(meter.read().as_metrics(name))

    def writes_from_commits(self, name: str, tables: list[str], marker: str, epoch: int) -> None:
        """Replace the step's written bytes/rows by what its commits added (row-level writes
        do not report Spark output metrics)."""
        nbytes, rows = committed_writes(self.spark, tables, marker, epoch)
        self.metrics[f"{name}_bytes_written"], self.metrics[f"{name}_rows_written"] = nbytes, rows


def close_epoch(spark: SparkSession, settings: Settings, plan: BatchPlan, epoch: int) -> dict:
    """Close `epoch` (the open one, or a sealed one whose close was interrupted); returns
    the metrics written to the ledger. Refuses (EpochOrderError) before touching anything
    while an earlier epoch is not closed: epochs close in order."""
    ensure_applies_table(spark, settings)
    rows = ledger_rows(spark, settings)
    row = next((r for r in rows if r.epoch == epoch), None)
    if row is None:
        raise StoreError(f"epoch {epoch} is not in the ledger (epochs: {[r.epoch for r in rows]}; cumulus epoch status)")
    latest = max((r for r in rows if r.state in DONE and r.snapshots), key=lambda r: r.epoch, default=None)
    if latest is not None:  # a crash between the ledger row and the branches: move them now
        with catalog_lock(settings, f"publish epoch {latest.epoch}"):
            move_stable(spark, {k: int(v) for k, v in latest.snapshots.items()})
    if row.state not in (OPEN, APPLIED):
        log.info("epoch %d is already %s", epoch, row.state)
        return dict(row.metrics or {})
    check_in_order(rows, epoch, f"epoch {epoch} cannot be closed", settings)
    steps = StepMetrics(spark)
    with steps("apply"):
        if row.state == OPEN:
            transition(spark, settings, epoch, APPLIED)  # sealed: new input goes to the next epoch
        choice, rebuild = _bring_up_to_date(spark, settings, plan, epoch, rows)
    fault_point("close.after-apply")
    with catalog_lock(settings, f"close epoch {epoch}"):
        with steps("repair"):  # a rebuild reads base.*, never a stale state
            repaired = 0 if rebuild else repair_epoch(spark, settings, plan, epoch)
        with steps("fold"):
            folds = fold_epoch(spark, settings, epoch)
        bases = [base_table(settings, r.name) for r in plan.checked.schema.relations]
        steps.writes_from_commits("fold", bases, FOLDED_EPOCH, epoch)
        fault_point("close.after-fold")
        if rebuild is not None:
            with steps("recompute"):
                t = time.perf_counter()
                recompute_maps(spark, settings, plan, rebuild)
                rebuild.seconds, rebuild.status = round(time.perf_counter() - t, 3), "done"
                save_record(spark, settings, rebuild)
            steps.metrics["recompute_rows"] = base_rows(spark, settings, plan)
            fault_point("close.after-recompute")
        with steps("compact_maps"):
            compacted = compact_maps(spark, settings, epoch, when_due=True)
        maps = maps_table(settings)
        steps.writes_from_commits("compact_maps", [maps], COMPACTED_THROUGH, epoch)
        fault_point("close.after-compact")
        with steps("tag"):
            tagged = tag_tables(spark, [maps, *bases], epoch, settings.table_workers)
        fault_point("close.after-tag")
        records = [r for r in apply_records(spark, settings, epoch) if r.status == "done"]
        applies = [r for r in records if r.kind == "apply"]
        rebuilt = [r for r in records if r.kind == RECOMPUTE]
        metrics = {
            "mode": choice.mode,
            "mode_reason": choice.reason,
            "events": sum(r.events for r in applies + rebuilt),
            "deltas": sum(r.deltas for r in records),
            "batches": len(applies) + sum(len(r.ingest_batches) for r in rebuilt),
            "repaired_batches": repaired,
            # delta rows of the maps rewritten as one row per entry (they outgrew
            # map_compaction_ratio); a resumed close counts only its own run
            "compacted_map_rows": compacted,
            # base tables rewritten compact after their fold (their layers outgrew
            # base_compaction_ratio); a resumed close counts only its own run
            "compacted_bases": sum(f.compacted for f in folds.values()),
            # Every apply of the epoch, including those run before the close (the
            # close's own apply step counts only what was still pending).
            "applies_bytes_read": sum(r.bytes_read or 0 for r in applies),
            "applies_bytes_written": sum(r.bytes_written or 0 for r in applies),
            "applies_s": round(sum(r.seconds or 0 for r in applies), 3),
            **steps.metrics,
        }
        transition(
            spark, settings, epoch, CLOSED, snapshots={k: int(v) for k, v in tagged.items()}, metrics=metrics,
            events=metrics["events"], batches=metrics["batches"],
        )
        fault_point("close.after-ledger")
        move_stable(spark, tagged)
    log.info("epoch %d closed: %s", epoch, metrics)
    return metrics

