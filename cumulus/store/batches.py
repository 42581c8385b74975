"""Ingest batches and their recovery: the exactly-once half that runs on retry.

A batch commits in this order, each commit marked with `cumulus.batch-id` (and the
source and epoch) in its snapshot summary:

    1. cumulus.quarantine   the rejected rows (when there are any)
    2. events.<rel>          one append per relation with accepted rows
    3. cumulus.files         the manifest rows: the batch is committed from here on

A crash anywhere before 3 leaves a batch whose id appears in snapshot summaries of
events.* or cumulus.quarantine but not in cumulus.files. `recover_incomplete_batches`
(run under the catalog lock before any ingest and before any fold) finds those from the
snapshot summaries, deletes their rows (`batch_id` column) and writes a `rolled-back`
marker into the manifest, so the files, never taken, are ingested afresh when offered
again. Nothing is decided from memory or from the orchestrator.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from dataclasses import dataclass, field

from cumulus.schema import Schema
from cumulus.store import commit
from cumulus.store.files import ROLLED_BACK, FileEntry, append_entries, known_batch_ids
from cumulus.store.tables import Home

log = logging.getLogger("cumulus.recovery")


def new_batch_id() -> str:
    return uuid.uuid4().hex


@dataclass
class PendingBatch:
    batch_id: str
    source: str = ""
    source_id: int = 0
    epoch: int = 0
    tables: set[str] = field(default_factory=set)


def incomplete_batches(
    home: Home, schema: Schema
) -> dict[str, PendingBatch]:
    """Batches with commits in events.* or cumulus.quarantine but no manifest row. The
    manifest's own commits carry their batch ids, so only a batch none of them names
    (one whose manifest commit has expired, or an incomplete one) costs a lookup."""
    pending: dict[str, PendingBatch] = {}
    tables = [home.tables.events(r.name) for r in schema.relations]
    tables.append(home.tables.quarantine)
    history = {table: commit.snapshots(home.spark, table) for table in tables}
    found = {s.summary.get(commit.BATCH_ID) for snaps in history.values() for s in snaps} - {None}
    known = {s.summary.get(key) for s in commit.snapshots(home.spark, home.tables.files)
             for key in (commit.BATCH_ID, commit.ROLLBACK_OF)}
    if found - known:
        known |= known_batch_ids(home, found - known)
    for table, snaps in history.items():
        for snap in snaps:
            batch_id = snap.summary.get(commit.BATCH_ID)
            if not batch_id or batch_id in known or snap.operation != "append":
                continue
            entry = pending.setdefault(batch_id, PendingBatch(batch_id))
            entry.tables.add(table)
            entry.source = snap.summary.get(commit.SOURCE, entry.source)
            entry.source_id = int(snap.summary.get(commit.SOURCE_ID, entry.source_id) or 0)
            entry.epoch = int(snap.summary.get(commit.EPOCH, entry.epoch) or 0)
    return pending


def recover_incomplete_batches(
    home: Home, schema: Schema
) -> list[PendingBatch]:
    """Roll back every incomplete batch (call under the catalog lock). Idempotent: a
    crash during recovery is recovered by the next call."""
    pending = incomplete_batches(home, schema)
    for batch in pending.values():
        log.warning(
            "rolling back batch %s (source %s, epoch %d): it crashed before its manifest; "
            "its files will be taken when offered again",
            batch.batch_id,
            batch.source or "?",
            batch.epoch,
        )
        for table in sorted(batch.tables):
            with commit.commit_properties(home.spark, {commit.ROLLBACK_OF: batch.batch_id}):
                home.spark.sql(
                    f"DELETE FROM {table} WHERE epoch = {int(batch.epoch)} "
                    f"AND batch_id = '{batch.batch_id}'"
                )
        marker = FileEntry(
            checksum=None,
            source=batch.source,
            source_id=batch.source_id,
            path=None,
            size=None,
            format=None,
            relation=None,
            epoch=batch.epoch,
            batch_id=batch.batch_id,
            status=ROLLED_BACK,
            detail="crashed before its manifest; rows removed from " + ", ".join(sorted(batch.tables)),
            ingested_at=dt.datetime.now(dt.UTC),
        )
        append_entries(home, [marker], {commit.ROLLBACK_OF: batch.batch_id})
    return list(pending.values())
