"""An apply's record, as a row of cumulus.applies (read by Spark or PyIceberg) and as the
summary of its maps commit: the same record either way, timestamps as naive UTC."""

from __future__ import annotations

import datetime as dt

from cumulus.engine.apply import APPLIES_COLUMNS, APPLY_BATCH, APPLY_RECORD, ApplyRecord
from cumulus.store.commit import Snapshot


def _record(**changes) -> ApplyRecord:
    values = dict(
        batch_id="apply-3-1-abc", kind="apply", epoch=3, source_id=1, status="started",
        ingest_batches=["b1", "b2"], events_snapshots={"orders": 11, "lineitem": None}, read_snapshot=42,
        seq_max=99, events=120, started_at=dt.datetime(2026, 11, 24, 1, 2, 3, tzinfo=dt.UTC),
    )
    return ApplyRecord(**(values | changes))


def test_the_commit_carries_what_the_batch_took_and_read():
    record = _record()
    snap = Snapshot(7, 42, 0, "append", {APPLY_BATCH: record.batch_id, APPLY_RECORD: record.as_summary(),
                                         "added-records": "15", "changed-partition-count": "4"})
    back = ApplyRecord.from_commit(snap)
    assert (back.ingest_batches, back.events_snapshots, back.read_snapshot) == (["b1", "b2"], {"orders": 11, "lineitem": None}, 42)
    assert (back.kind, back.epoch, back.source_id, back.seq_max, back.events) == ("apply", 3, 1, 99, 120)
    assert (back.status, back.written_snapshot, back.deltas, back.maps_written) == ("done", 7, 15, 4)
    assert back.started_at == dt.datetime(2026, 11, 24, 1, 2, 3)  # naive UTC, as Spark reads the table


def test_rows_read_by_either_reader_give_naive_utc():
    row = dict(zip([n for n, _ in APPLIES_COLUMNS],
                   _record(status="done").as_row(), strict=True))
    aware = ApplyRecord.from_row(row)  # PyIceberg gives timestamps with a zone
    naive = ApplyRecord.from_row(row | {"started_at": dt.datetime(2026, 11, 24, 1, 2, 3)})  # Spark without
    assert aware.started_at == naive.started_at == dt.datetime(2026, 11, 24, 1, 2, 3)
    assert sorted([aware, naive], key=lambda r: r.started_at)  # comparable
