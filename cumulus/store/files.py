"""The file manifest `cumulus.files`: every file offered to ingestion, by content
checksum, with what became of it. Its rows are the last commit of an ingest batch, so a
batch is committed exactly when its manifest rows exist; the engine applies only such
batches (`committed_batches`).

status: `ingested` (its rows are in events.*), `duplicate` (the same content was taken
before: nothing applied), `rejected` (the source passed its error threshold: nothing
applied, offer the file again once fixed), `rolled-back` (a marker, one per batch that
crashed before its manifest: its rows were removed; names no file).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import astuple, dataclass
from typing import Any

from cumulus.config import Settings
from cumulus.spark.local import local_arrow, local_frame
from cumulus.store.commit import write_options
from cumulus.store.rows import Reader, append_rows, read_rows
from cumulus.store.tables import FILES_COLUMNS, Home, ddl_type, tables_of

INGESTED, DUPLICATE, REJECTED, ROLLED_BACK = "ingested", "duplicate", "rejected", "rolled-back"


@dataclass(frozen=True)
class FileEntry:
    """One row of cumulus.files (fields in column order)."""

    checksum: str | None
    source: str
    source_id: int
    path: str | None
    size: int | None
    format: str | None
    relation: str | None
    epoch: int
    batch_id: str
    status: str
    rows_accepted: int = 0
    rows_rejected: int = 0
    seq_min: int | None = None
    seq_max: int | None = None
    duplicate_of: str | None = None
    relations: str | None = None
    detail: str | None = None
    ingested_at: dt.datetime | None = None


assert tuple(FileEntry.__dataclass_fields__) == tuple(n for n, _ in FILES_COLUMNS)


@dataclass(frozen=True)
class Batch:
    """A committed ingest batch: what the engine applies as one unit."""

    batch_id: str
    source: str
    source_id: int
    epoch: int
    files: int
    rows_accepted: int
    rows_rejected: int
    seq_min: int | None
    seq_max: int | None
    ingested_at: Any
    events: dict[str, int] | None = None  # accepted rows per relation (None: not recorded)

    def events_in(self, relations: Iterable[str]) -> int | None:
        """The batch's events of these relations (None: the manifest does not say)."""
        return None if self.events is None else sum(self.events.get(r, 0) for r in relations)


def append_entries(
    home: Home, entries: Sequence[FileEntry], props: Mapping[str, Any], in_driver: bool = False
) -> None:
    """One commit of manifest rows, marked with `props` in the snapshot summary: by a
    Spark write, or `in_driver` by PyIceberg (store/rows.py, append_rows)."""
    if in_driver:
        append_rows(home.settings, home.tables.files, local_arrow([astuple(e) for e in entries], ddl_type(FILES_COLUMNS)),
                    props)
        return
    df = local_frame(home.spark, [astuple(e) for e in entries], ddl_type(FILES_COLUMNS))
    writer = df.coalesce(1).writeTo(home.tables.files)
    for key, value in write_options(props).items():
        writer = writer.option(key, value)
    writer.append()


def taken(reader: Reader, settings: Settings, checksums: Iterable[str]) -> dict[str, dict]:
    """checksum -> its `ingested` manifest row, for the given checksums already taken.
    (The manifest's ingested rows through read_rows: a warm engine's next batch reads only
    the rows appended since, often none.)"""
    wanted = set(checksums)
    if not wanted:
        return {}
    rows = read_rows(reader, tables_of(settings).files, {"status": INGESTED})
    return {r["checksum"]: r for r in rows if r["checksum"] in wanted}


def known_batch_ids(home: Home, batch_ids: Iterable[str]) -> set[str]:
    """Those of `batch_ids` the manifest knows, whatever their status."""
    from pyspark.sql import functions as F

    wanted = sorted(set(batch_ids))
    if not wanted:
        return set()
    rows = home.spark.table(home.tables.files).where(F.col("batch_id").isin(wanted)).select("batch_id").distinct().collect()
    return {r.batch_id for r in rows}


def next_seq(reader: Reader, settings: Settings, epoch: int, source_id: int) -> int:
    """The first seq free for (epoch, source): after every range the manifest reserved.
    (The rows read are those committed_batches reads for the epoch: one kept read.)"""
    rows = read_rows(reader, tables_of(settings).files, {"status": INGESTED, "epoch": epoch})
    ends = [r["seq_max"] for r in rows if r["source_id"] == source_id and r["seq_max"] is not None]
    return max(ends) + 1 if ends else 0


def committed_batches(
    reader: Reader, settings: Settings, epoch: int | None = None, source: str | None = None
) -> list[Batch]:
    """Committed batches (at least one file `ingested`), in commit order."""
    where: dict[str, Any] = {"status": INGESTED}
    if epoch is not None:
        where["epoch"] = epoch
    if source is not None:
        where["source"] = source
    groups: dict[str, list[dict]] = {}
    for row in read_rows(reader, tables_of(settings).files, where):
        groups.setdefault(row["batch_id"], []).append(row)
    batches = []
    for batch_id, rows in groups.items():
        seq_mins = [r["seq_min"] for r in rows if r["seq_min"] is not None]
        seq_maxs = [r["seq_max"] for r in rows if r["seq_max"] is not None]
        batches.append(
            Batch(
                batch_id=batch_id,
                source=rows[0]["source"],
                source_id=rows[0]["source_id"],
                epoch=rows[0]["epoch"],
                files=len(rows),
                rows_accepted=sum(r["rows_accepted"] or 0 for r in rows),
                rows_rejected=sum(r["rows_rejected"] or 0 for r in rows),
                seq_min=min(seq_mins) if seq_mins else None,
                seq_max=max(seq_maxs) if seq_maxs else None,
                ingested_at=rows[0]["ingested_at"],
                events=_relation_events(rows),
            )
        )
    return sorted(batches, key=lambda b: (str(b.ingested_at), b.batch_id))


def _relation_events(rows: list[dict]) -> dict[str, int] | None:
    """Accepted rows per relation over a batch's manifest rows (their `relations` JSON)."""
    events: dict[str, int] = {}
    for row in rows:
        if row["relations"] is None:
            if row["rows_accepted"]:
                return None
            continue
        for name, counts in json.loads(row["relations"]).items():
            events[name] = events.get(name, 0) + int(counts.get("accepted", 0))
    return events


def epoch_counts(reader: Reader, settings: Settings, epoch: int) -> dict[str, int]:
    """Counts of an epoch's input from the manifest: events (rows accepted), rejected,
    files (ingested), duplicates, batches (committed)."""
    rows = read_rows(reader, tables_of(settings).files, {"epoch": epoch})
    ingested = [r for r in rows if r["status"] == INGESTED]
    return {
        "events": sum(r["rows_accepted"] or 0 for r in ingested),
        "rejected": sum(r["rows_rejected"] or 0 for r in rows if r["status"] in (INGESTED, REJECTED)),
        "files": len(ingested),
        "duplicates": sum(1 for r in rows if r["status"] == DUPLICATE),
        "batches": len({r["batch_id"] for r in ingested}),
    }
