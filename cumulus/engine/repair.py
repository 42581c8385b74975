"""Repair: the paper's fix for concurrent sources. The serial result of an epoch is its
batches applied one after the other in commit order, each to the state the ones before
left. A batch that read a snapshot of maps.entries missing deltas committed before its
own commit (another source's apply in between) read the wrong state, and so did every
batch committed after one whose deltas were wrong, since those deltas are in the state
it read. In commit order, each such batch is evaluated again against the state it should
have seen (its commit's parent plus the corrections of the batches before it) and the
difference with what it wrote is appended as its correction, one commit per repaired
batch."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

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
from cumulus.engine.evaluate import BatchPlan, evaluate_batch
from cumulus.faults import fault_point
from cumulus.store.commit import Snapshot, snapshots, table_metadata
from cumulus.store.maps import negated, summed, unversioned
from cumulus.store.tables import Home

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

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


def repair_epoch(home: Home, plan: BatchPlan, epoch: int) -> int:
    """Append corrective deltas for every batch of the epoch whose deltas are not those
    of the serial order (see the module doc; the paper's unfulfilled dependencies). The
    correction is the batch evaluated against the state it should have seen minus what it
    wrote; it touches only the batch's keys. Reads the maps table's history once. Returns
    how many of the epoch's batches are repaired (0 where writers are serialized), those
    an earlier try committed included: a close resumed after a crash finds their
    corrections committed and reads them back."""
    repaired = 0
    records = apply_records(home.spark, home.settings, epoch)
    fixes = {r.batch_id: r for r in records if r.kind == "repair" and r.status == "done"}
    history = snapshots(home.spark, home.tables.maps)
    by_id = {s.snapshot_id: s for s in history}
    order = _commit_order(by_id, table_metadata(home.spark, home.tables.maps).get("current-snapshot-id"))
    batches = sorted((r for r in records if r.kind == "apply" and r.status == "done" and r.written_snapshot in order),
                     key=lambda r: order[r.written_snapshot])
    earlier: list[DataFrame] = []  # the corrections of the batches before, in commit order
    for record in batches:
        mine = by_id[record.written_snapshot]  # type: ignore[index]
        if _stale_read(by_id, record) is None and not earlier:
            continue
        done = fixes.get(f"repair-{record.batch_id}")
        if done is not None:  # committed by an earlier try of this close: counted, not redone
            earlier.append(_appended(home, by_id[done.written_snapshot]))  # type: ignore[index]
            repaired += 1
            continue
        log.info("epoch %d: batch %s read a state of the maps without the deltas (or corrections) of batches "
                 "committed before it; repairing", epoch, record.batch_id)
        events, counts = batch_events(home, plan, record)
        should = map_state(home, mine.parent_id)
        for correction in earlier:  # by name: one read back has the version columns, a new one not
            should = should.unionByName(correction, allowMissingColumns=True)
        right = evaluate_batch(plan, events, should, counts)
        corrections = None  # (none: no delta either way)
        if right is not None or record.deltas:
            # What the batch's apply committed, of the maps the plan keeps (a view dropped
            # since took its own maps' rows away).
            wrote = unversioned(_appended(home, mine))
            wrote = negated(wrote.where(wrote["map"].isin(list(plan.maps))))
            corrections = summed(wrote if right is None else right.unionByName(wrote, allowMissingColumns=True))
            corrections = corrections.localCheckpoint()
        fix = ApplyRecord(
            batch_id=f"repair-{record.batch_id}", kind="repair", epoch=epoch, source_id=record.source_id,
            status="started", ingest_batches=record.ingest_batches, events_snapshots=record.events_snapshots,
            read_snapshot=mine.parent_id, seq_max=record.seq_max,
        )
        record_written(fix, write_deltas(home, fix, corrections))
        fix.status = "done"
        save_record(home, fix)
        fault_point("repair.after-commit")
        if corrections is not None:
            earlier.append(corrections)
        repaired += 1
    return repaired


def _commit_order(by_id: Mapping[int, Snapshot], current: int | None) -> dict[int, int]:
    """Each snapshot of the main lineage (the current snapshot and its ancestors) by its
    position in commit order: concurrent writers' timestamps need not follow it."""
    tip = by_id.get(current) if current is not None else None
    chain: list[int] = []
    while tip is not None:
        chain.append(tip.snapshot_id)
        tip = by_id.get(tip.parent_id) if tip.parent_id is not None else None
    return {sid: i for i, sid in enumerate(reversed(chain))}


def _appended(home: Home, snap: Snapshot) -> DataFrame:
    """The rows one append commit of maps.entries added."""
    reader = home.spark.read.format("iceberg").option("end-snapshot-id", snap.snapshot_id)
    if snap.parent_id is not None:
        reader = reader.option("start-snapshot-id", snap.parent_id)
    return reader.load(home.tables.maps)
