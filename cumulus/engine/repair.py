"""Repair: the paper's fix for concurrent sources. A batch that read a snapshot of
maps.entries missing deltas committed before its own commit (another source's apply,
a repair or a rebuild in between) is evaluated again against the state it should have
seen; the difference is appended as its correction, one commit per repaired batch."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.engine.apply import (
    APPLY_BATCH,
    ApplyRecord,
    apply_records,
    batch_events,
    map_state,
    record_written,
    save_record,
    write_deltas,
)
from cumulus.engine.evaluate import BatchPlan, evaluate_batch, union_all
from cumulus.store.commit import Snapshot, snapshots
from cumulus.store.maps import maps_table, negated, summed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("cumulus.repair")


def _stale_read(by_id: Mapping[int, Snapshot], record: ApplyRecord) -> int | None:
    """The snapshot of maps.entries that the batch should have read, when it read another:
    its commit's parent, if a delta (an apply, repair, back-fill or rebuild commit) was committed
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
        events, counts = batch_events(spark, settings, plan, record)
        right = evaluate_batch(plan, events, map_state(spark, settings, should), counts)
        wrong = evaluate_batch(plan, events, map_state(spark, settings, record.read_snapshot), counts)
        parts = [d for d in (right, negated(wrong) if wrong is not None else None) if d is not None]
        corrections = summed(union_all(parts)) if parts else None
        fix = ApplyRecord(
            batch_id=f"repair-{record.batch_id}", kind="repair", epoch=epoch, source_id=record.source_id,
            status="started", ingest_batches=record.ingest_batches, events_snapshots=record.events_snapshots,
            read_snapshot=should, seq_max=record.seq_max,
        )
        record_written(fix, write_deltas(spark, settings, fix, corrections))
        fix.status = "done"
        save_record(spark, settings, fix)
        repaired += 1
    return repaired
