"""Apply: evaluate the M3 deltas of one source's new events (a batch) as one Spark plan
and append every map's deltas to `maps.entries` in one commit, marked with the batch id
and tagged with the batch's version. Main-branch reads see them at once (READ_SLICE:
fresh, eventually consistent).

The commit is the apply's record: its summary carries the batch id and what the batch
took and read (`cumulus.apply-record`: the ingest batches, the snapshots of the maps table
and of every events table it read), so "applied or not" is a single question about one
commit, and a retry after a crash anywhere either finds the commit (nothing to do) or
starts the batch again (nothing was written). After the commit, the apply's measurements
(seconds, bytes, deltas) are appended to `cumulus.applies`; a crash in between leaves the
commit's record alone, which `apply_records` reads back. The close uses the read
snapshot to repair batches that read a stale state (concurrent applies).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.engine.driver_apply import BY_SPARK, IN_DRIVER, DriverDeltas, driver_deltas
from cumulus.engine.evaluate import BatchPlan, evaluate_batch, union_all
from cumulus.engine.metrics import StageMeter, human_bytes
from cumulus.errors import EpochOrderError, NoSuchTableError
from cumulus.faults import fault_point
from cumulus.spark.local import local_frame
from cumulus.store.commit import EPOCH, Snapshot, snapshots, table_metadata, write_options
from cumulus.store.files import Batch, committed_batches
from cumulus.store.ledger import check_in_order, ledger_rows
from cumulus.store.lock import apply_lock
from cumulus.store.maps import delta_columns, entries_columns, versioned
from cumulus.store.rows import Reader, read_rows
from cumulus.store.tables import Home, ddl_type, ensure_table, tables_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("cumulus.apply")

EARLIER_CLOSE_POLL_S = 1.0  # how often a waiting apply looks at the ledger again

APPLY_BATCH = "cumulus.apply-batch"
APPLY_RECORD = "cumulus.apply-record"  # the record of the batch, JSON, on its maps commit
RECOMPUTE = "recompute"  # the kind of a close's rebuild of every map (engine/recompute.py)
APPLIES_COLUMNS = (
    ("batch_id", "STRING"),
    ("kind", "STRING"),  # apply | repair | backfill | recompute
    ("epoch", "BIGINT"),
    ("source_id", "INT"),
    ("status", "STRING"),  # started (a rebuild chosen, not done yet) | done
    ("ingest_batches", "STRING"),  # JSON list of the ingest batch ids taken
    ("events_snapshots", "STRING"),  # JSON {relation: snapshot id} read
    ("read_snapshot", "BIGINT"),  # the snapshot of maps.entries read (pinned)
    ("written_snapshot", "BIGINT"),  # the batch's commit in maps.entries
    ("maps_written", "INT"),  # maps with deltas in that commit
    ("seq_max", "BIGINT"),
    ("events", "BIGINT"),
    ("deltas", "BIGINT"),
    ("seconds", "DOUBLE"),
    ("bytes_read", "BIGINT"),  # by the batch's Spark stages: events, map slices
    ("bytes_written", "BIGINT"),
    ("started_at", "TIMESTAMP"),
    ("finished_at", "TIMESTAMP"),
)


@dataclass
class ApplyRecord:
    batch_id: str
    kind: str
    epoch: int
    source_id: int
    status: str
    ingest_batches: list[str]
    events_snapshots: dict[str, int | None]
    read_snapshot: int | None
    written_snapshot: int | None = None
    maps_written: int = 0
    seq_max: int = 0
    events: int = 0
    deltas: int = 0
    seconds: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping) -> ApplyRecord:
        values = dict(row)
        for key in ("ingest_batches", "events_snapshots"):
            values[key] = json.loads(values[key] or ("[]" if key == "ingest_batches" else "{}"))
        for key in ("started_at", "finished_at"):  # Spark reads naive UTC, PyIceberg aware
            values[key] = _utc(values[key])
        return cls(**values)

    def headline(self) -> str:
        return (f"{self.events} events -> {self.deltas} delta rows in {self.maps_written} maps "
                f"({self.seconds:.1f} s)")

    def as_row(self) -> tuple:
        values = []
        for name, _ in APPLIES_COLUMNS:
            v = getattr(self, name)
            values.append(json.dumps(v) if isinstance(v, (list, dict)) else v)
        return tuple(values)

    def as_summary(self) -> str:
        """What the batch took and read, for its maps commit (`APPLY_RECORD`)."""
        return json.dumps({name: getattr(self, name) for name in SUMMARY_FIELDS} | {"started_at": _iso(self.started_at)})

    @classmethod
    def from_commit(cls, snap: Snapshot) -> ApplyRecord:
        """The record of a batch whose commit has no measurements in cumulus.applies (the
        apply stopped between its commit and their append)."""
        values = json.loads(snap.summary[APPLY_RECORD])
        started = values.pop("started_at", None)
        return cls(
            batch_id=snap.summary[APPLY_BATCH], status="done", **{k: values[k] for k in SUMMARY_FIELDS},
            started_at=_utc(dt.datetime.fromisoformat(started)) if started else None,
            written_snapshot=snap.snapshot_id, deltas=int(snap.summary.get("added-records", 0)),
            maps_written=int(snap.summary.get("changed-partition-count", 0)),
        )


SUMMARY_FIELDS = ("kind", "epoch", "source_id", "ingest_batches", "events_snapshots", "read_snapshot", "seq_max", "events")


def _iso(at: dt.datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _utc(at: dt.datetime | None) -> dt.datetime | None:
    """A timestamp as naive UTC (how Spark reads the applies table's)."""
    if at is None or at.tzinfo is None:
        return at
    return at.astimezone(dt.UTC).replace(tzinfo=None)


def ensure_applies_table(home: Home) -> None:
    ensure_table(home.spark, home.tables.applies, APPLIES_COLUMNS)


def apply_records(reader: Reader, settings: Settings, epoch: int | None = None) -> list[ApplyRecord]:
    """Each batch's latest record (a `done` row supersedes a `started` one), oldest first:
    the rows of cumulus.applies, and the record on a maps commit whose measurements were
    not appended (the apply stopped in between). `reader`: a Spark session or a PyIceberg
    catalog (store/rows.py)."""
    where = {"epoch": epoch} if epoch is not None else None
    latest: dict[str, ApplyRecord] = {}
    for record in map(ApplyRecord.from_row, read_rows(reader, tables_of(settings).applies, where)):
        if record.batch_id not in latest or record.status == "done":
            latest[record.batch_id] = record
    try:
        commits = snapshots(reader, tables_of(settings).maps)
    except NoSuchTableError:  # no view registered yet
        commits = []
    for snap in commits:
        batch_id = snap.summary.get(APPLY_BATCH)
        if APPLY_RECORD not in snap.summary or (batch_id in latest and latest[batch_id].status == "done"):
            continue
        record = ApplyRecord.from_commit(snap)
        if epoch is None or record.epoch == epoch:
            latest[record.batch_id] = record
    return sorted(latest.values(), key=lambda r: (r.started_at or dt.datetime.min, r.batch_id))


def save_record(home: Home, record: ApplyRecord) -> None:
    """Append the record's current state: an append commits in a fraction of a MERGE's
    time, and apply_records keeps the latest state per batch."""
    local_frame(home.spark, [record.as_row()], ddl_type(APPLIES_COLUMNS)).writeTo(home.tables.applies).append()


def current_snapshot_id(spark: SparkSession, table: str) -> int | None:
    """The table's current snapshot id (None before its first commit)."""
    current = table_metadata(spark, table).get("current-snapshot-id")
    return None if current in (None, -1) else int(current)


def batch_commit(home: Home, batch_id: str) -> Snapshot | None:
    """The commit of an apply, repair or back-fill batch in maps.entries (None: not yet)."""
    mine = [s for s in snapshots(home.spark, home.tables.maps) if s.summary.get(APPLY_BATCH) == batch_id]
    return mine[-1] if mine else None


# ---------------------------------------------------------------- reading inputs


def read_at(spark: SparkSession, table: str, snapshot: int | None) -> DataFrame:
    reader = spark.read.format("iceberg")
    if snapshot is not None:
        reader = reader.option("snapshot-id", snapshot)
    return reader.load(table)


def map_state(home: Home, snapshot: int | None) -> DataFrame:
    """The maps as of a snapshot of maps.entries (a map's rows; an entry is their sum)."""
    return read_at(home.spark, home.tables.maps, snapshot)


def batch_events(
    home: Home, plan: BatchPlan, record: ApplyRecord,
    counts: dict[str, int] | None = None,
) -> tuple[dict[str, DataFrame], dict[str, int]]:
    """The batch's events per relation that has any (its ingest batches, read at the
    pinned snapshots), each materialized once, and how many each has. The counts are
    `counts` (the manifest's, read by the caller), else the manifest's, else counted from
    the events (one Spark job): a relation without events adds no delta, and leaving it
    out spares its read and the plans of its statements."""
    from pyspark.sql import functions as F

    def read(rel: str) -> DataFrame:
        df = read_at(home.spark, home.tables.events(rel), record.events_snapshots.get(rel))
        df = df.where(F.col("batch_id").isin(record.ingest_batches))
        if record.kind == "apply":
            df = df.where((F.col("epoch") == record.epoch) & (F.col("source_id") == record.source_id))
        return df.select(*plan.params[rel], "op")

    if counts is None:
        counts = _manifest_counts(home, plan, record)
    if counts is None:
        tagged = union_all([read(rel).select(F.lit(rel).alias("relation")) for rel in plan.order])
        counts = {r["relation"]: r["count"] for r in tagged.groupBy("relation").count().collect()}
    events = {rel: read(rel).localCheckpoint() for rel in plan.order if counts.get(rel)}
    return events, {rel: n for rel, n in counts.items() if n}


def _manifest_counts(
    home: Home, plan: BatchPlan, record: ApplyRecord
) -> dict[str, int] | None:
    """The record's events per relation of the program, from the manifest (None where it
    does not say: the batch's events are counted instead)."""
    mine = set(record.ingest_batches)
    batches = [b for b in committed_batches(home.spark, home.settings, record.epoch) if b.batch_id in mine]
    if len(batches) != len(mine) or any(b.events is None for b in batches):
        return None
    return {rel: sum(b.events.get(rel, 0) for b in batches) for rel in plan.order}  # type: ignore[union-attr]


# ---------------------------------------------------------------- apply


def _evaluated(
    home: Home, plan: BatchPlan, record: ApplyRecord,
) -> tuple[DataFrame | None, int, str]:
    """The batch's delta rows (None: none), the bytes read outside Spark for them, and
    where they were computed: in the driver for a small batch (driver_apply.py), else by
    a Spark plan. Sets `record.events`."""
    counts = _manifest_counts(home, plan, record)
    if counts is not None:
        local = driver_deltas(home.settings, plan, record, counts, delta_names(plan))
        if local is not None:
            record.events = sum(counts.values())
            return driver_frame(home, plan, local), local.bytes_read, IN_DRIVER
    events, counts = batch_events(home, plan, record, counts)
    record.events = sum(counts.values())
    return evaluate_batch(plan, events, map_state(home, record.read_snapshot), counts), 0, BY_SPARK


def delta_names(plan: BatchPlan) -> list[str]:
    """The columns of the plan's delta rows (`delta_columns`), as a driver evaluation
    (driver_apply.py) fills its rows."""
    return [c for c, _ in delta_columns(plan.maps.values())]


def driver_frame(home: Home, plan: BatchPlan, local: DriverDeltas) -> DataFrame | None:
    """A driver evaluation's delta rows as a frame of the plan's delta columns (None: no
    rows)."""
    from pyspark.sql.types import StructField, StructType

    if not local.rows:
        return None
    return local_frame(home.spark, local.rows, StructType([StructField(c, t) for c, t in delta_columns(plan.maps.values())]))


def taken_batches(records: list[ApplyRecord]) -> set[str]:
    """The ingest batches the finished applies among `records` took (an unfinished one,
    without its commit, took nothing)."""
    return {b for r in records if r.kind == "apply" and r.status == "done" for b in r.ingest_batches}


def unapplied(home: Home, plan: BatchPlan, epoch: int, taken: set[str]) -> list[Batch]:
    """The committed ingest batches of `epoch` not in `taken` that have events of the
    program's relations (a batch of other relations changes no map: nothing to apply)."""
    return [b for b in committed_batches(home.spark, home.settings, epoch)
            if b.batch_id not in taken and b.events_in(plan.order) != 0]


def _new_record(
    home: Home, plan: BatchPlan, epoch: int, source_id: int,
    done: list[ApplyRecord], pin: int | None,
) -> ApplyRecord | None:
    """A record of the source's committed ingest batches of `epoch` not taken yet (from
    the manifest, cumulus.files: a batch is committed once its files are recorded, after
    its events), or None when there are none."""
    batches = [b for b in unapplied(home, plan, epoch, taken_batches(done)) if b.source_id == source_id]
    if not batches:
        return None
    # Read after the manifest: every snapshot holds the events of the batches found.
    events_snaps = {rel: current_snapshot_id(home.spark, home.tables.events(rel)) for rel in plan.order}
    return ApplyRecord(
        batch_id=f"apply-{epoch}-{source_id}-{uuid.uuid4().hex[:12]}",
        kind="apply", epoch=epoch, source_id=source_id, status="started",
        ingest_batches=sorted(b.batch_id for b in batches), events_snapshots=events_snaps,
        read_snapshot=pin if pin is not None else current_snapshot_id(home.spark, home.tables.maps),
        seq_max=max((b.seq_max or 0) for b in batches), started_at=dt.datetime.now(dt.UTC).replace(microsecond=0),
    )


@dataclass(frozen=True)
class Written:
    rows: int
    maps: int
    snapshot_id: int


def write_deltas(
    home: Home, record: ApplyRecord, deltas: DataFrame | None,
) -> Written:
    """Append the batch's delta rows (of every map) to maps.entries in one commit marked
    with the batch id (an empty one when there are none, so every batch has its commit);
    an earlier try's commit is kept. Returns the commit's rows, maps and snapshot."""

    mine = batch_commit(home, record.batch_id)
    if mine is not None:
        log.info("epoch %d source %d: maps already hold batch %s", record.epoch, record.source_id, record.batch_id)
    else:
        table = home.tables.maps
        if deltas is None:
            rows = local_frame(home.spark, [], home.spark.table(table).schema)
        else:
            version = {"epoch": record.epoch, "source_id": record.source_id, "seq": record.seq_max}
            rows = versioned(deltas, entries_columns(home), version)
        props = {APPLY_BATCH: record.batch_id, EPOCH: record.epoch, APPLY_RECORD: record.as_summary()}
        rows.writeTo(table).options(**write_options(props)).append()
        fault_point("apply.after-commit")
        mine = batch_commit(home, record.batch_id)
        assert mine is not None, f"{table}: the commit of batch {record.batch_id} is not in its history"
    return Written(
        int(mine.summary.get("added-records", 0)), int(mine.summary.get("changed-partition-count", 0)), mine.snapshot_id
    )


def record_written(record: ApplyRecord, written: Written) -> None:
    record.written_snapshot, record.maps_written, record.deltas = written.snapshot_id, written.maps, written.rows


def apply_source(
    home: Home, plan: BatchPlan, epoch: int, source_id: int,
    pin: int | None = None, wait: float = 0.0,
) -> ApplyRecord | None:
    """Apply the source's events of `epoch` not applied yet. `pin` overrides the snapshot
    of maps.entries to read (tests of concurrency and repair). Returns the record, or
    None when there was nothing to apply.

    Epochs reach the maps in order: while an earlier epoch is sealed but not closed (its
    close repairs, compacts and tags the maps: `epoch-N` is the current snapshot then), a
    delta of this epoch would land inside that snapshot and below that repair. The apply
    waits up to `wait` seconds (default: not at all) for that close, then refuses
    (EpochOrderError, exit status NOT_YET: a retry applies once the earlier epoch is
    closed; the batches wait for it, or for this epoch's close, which applies them)."""
    ensure_applies_table(home)
    deadline = time.monotonic() + wait
    while True:
        with apply_lock(home.settings, source_id, f"apply epoch {epoch} source {source_id}"):
            try:
                # (under the lock: a close takes it exclusive to tag and write its row)
                check_in_order(ledger_rows(home.spark, home.settings), epoch,
                               f"epoch {epoch} source {source_id} cannot be applied yet", home.settings)
            except EpochOrderError:
                if time.monotonic() >= deadline:
                    raise
            else:
                return _apply_in_order(home, plan, epoch, source_id, pin)
        log.info("epoch %d source %d: waiting for the close of an earlier epoch", epoch, source_id)
        time.sleep(EARLIER_CLOSE_POLL_S)


def _apply_in_order(
    home: Home, plan: BatchPlan, epoch: int, source_id: int, pin: int | None,
) -> ApplyRecord | None:
    """apply_source's work, under its lock, every earlier epoch closed."""
    everything = apply_records(home.spark, home.settings, epoch)
    if any(r.kind == RECOMPUTE for r in everything):
        log.info("epoch %d source %d: nothing to apply (its close rebuilds the maps from base.*)", epoch, source_id)
        return None
    records = [r for r in everything if r.source_id == source_id and r.kind == "apply"]
    record = _new_record(home, plan, epoch, source_id, records, pin)
    if record is None:
        log.info("epoch %d source %d: nothing to apply", epoch, source_id)
        return None
    fault_point("apply.after-record")
    t0, meter = time.perf_counter(), StageMeter(home.spark)
    deltas, local_bytes, where = _evaluated(home, plan, record)
    record_written(record, write_deltas(home, record, deltas))
    record.seconds = round(record.seconds + time.perf_counter() - t0, 3)
    io = meter.read()
    record.bytes_read += io.bytes_read + local_bytes
    record.bytes_written += io.bytes_written
    record.status = "done"
    record.finished_at = dt.datetime.now(dt.UTC).replace(microsecond=0)
    save_record(home, record)
    log.info(
        "epoch %d source %d: applied %d events -> %d delta rows in %d maps (%s), one commit (%.1f s, %s read, %s written)",
        epoch, source_id, record.events, record.deltas, record.maps_written, where, record.seconds,
        human_bytes(record.bytes_read), human_bytes(record.bytes_written),
    )
    return record
