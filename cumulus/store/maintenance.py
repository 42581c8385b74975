"""Table maintenance: expire the snapshots nothing needs any more and compact small data
files, for every table of a home (events, base, maps and the cumulus metadata tables).

Which snapshots stay (Iceberg's expire_snapshots keeps every snapshot a ref points at):
- every tagged snapshot: the `epoch-N` tags of maps and base tables are the stable
  snapshots readers, dbt and validation use, and tags here never expire;
- the current snapshot and the `retain_last` newest of each table;
- every snapshot younger than the cutoff: `retain_for` ago, or the opening of the oldest
  epoch not yet closed if that is earlier, because the applies of an unclosed epoch pin
  the map snapshots they read and its close repairs against them.

Compaction first rewrites every base table that has fold layers as one row per live tuple
(cumulus/store/fold.py: the close appends each epoch's net changes and compacts only past
`base_compaction_ratio`) and the maps table, when it holds delta rows of closed epochs, as
one row per entry (cumulus/store/maps.py: applies append, the close compacts only past
`map_compaction_ratio`; the open epoch's rows stay as they are, its close repairs against
them), and the ledger log as each epoch's latest row (cumulus/store/ledger.py), then runs
Iceberg's rewrite_data_files (bin-pack to
`target_file_size_mb`, in tables of at least `min_input_files` data files (Iceberg's default,
5: a quiet table of a few files costs no Spark job), and every data file
that has position deletes: row-level SQL on merge-on-read tables leaves those, then
rewrite_position_delete_files drops the delete files left dangling); rows and tags are
unchanged. Each procedure is called only where the table's metadata (read without a
Spark job) says it may have work, so a quiet table costs no Spark job. The procedures
commit, so the run holds the catalog lock (one writer at a time).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.store.commit import table_metadata
from cumulus.store.fold import compact_base
from cumulus.store.home import load_home_schema
from cumulus.store.ledger import APPLIED, DONE, OPEN, compact_ledger, ledger_rows
from cumulus.store.lock import catalog_lock
from cumulus.store.maps import compact_maps
from cumulus.store.tables import (
    NAMESPACES,
    RESULTS,
    Home,
    attach_catalog,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("cumulus.maintenance")


@dataclass(frozen=True)
class TableReport:
    table: str
    snapshots_before: int
    snapshots_after: int
    tags: int
    data_files_deleted: int = 0
    files_rewritten: int = 0
    files_added: int = 0
    delete_files_removed: int = 0
    layer_rows_compacted: int = 0  # base tables: fold-layer rows merged into the compact part
    delta_rows_compacted: int = 0  # the maps table: delta rows of closed epochs summed per entry
    log_rows_compacted: int = 0  # the ledger log: superseded revisions of epoch rows dropped
    seconds: float = 0.0


def existing_tables(home: Home) -> list[str]:
    """Every Iceberg table of the home, qualified (catalog.namespace.table), the results
    tables included (their touched-group MERGEs leave delete files to fold)."""
    attach_catalog(home)
    names = []
    existing = {r[0] for r in home.spark.sql(f"SHOW NAMESPACES IN {home.catalog}").collect()}
    for ns in (*NAMESPACES, RESULTS):
        if ns in existing:
            for row in home.spark.sql(f"SHOW TABLES IN {home.catalog}.{ns}").collect():
                names.append(f"{home.catalog}.{ns}.{row['tableName']}")
    return sorted(names)


def retention_cutoff(reader, settings: Settings, retain_for: dt.timedelta, now: dt.datetime | None = None) -> dt.datetime:
    """Snapshots older than this may go: `retain_for` ago, or earlier while an epoch that
    opened before that is still open or unclosed (its applies pin map snapshots)."""
    now = now or dt.datetime.now(dt.UTC)
    cutoff = now - retain_for
    for row in ledger_rows(reader, settings):
        if row.state in (OPEN, APPLIED) and row.opened_at is not None:
            opened = row.opened_at if row.opened_at.tzinfo else row.opened_at.replace(tzinfo=dt.UTC)
            cutoff = min(cutoff, opened)
    return cutoff


@dataclass(frozen=True)
class _State:
    """What maintenance needs of a table's current metadata (read without a Spark job)."""

    snapshots: int
    tags: int
    data_files: int
    delete_files: int
    expirable: bool  # a snapshot no ref points at, older than the cutoff, beyond retain_last

    @classmethod
    def of(cls, spark: SparkSession, table: str, cutoff: dt.datetime, retain_last: int) -> _State:
        meta = table_metadata(spark, table)
        snapshots = meta.get("snapshots") or []
        refs = meta.get("refs") or {}
        current = next((s for s in snapshots if s["snapshot-id"] == meta.get("current-snapshot-id")), None)
        summary = (current or {}).get("summary") or {}
        unknown = "2" if current is not None else "0"  # totals missing from a summary: run the procedures
        pinned = {ref["snapshot-id"] for ref in refs.values()}
        cut = cutoff.timestamp() * 1000
        old = [s for s in snapshots if s["snapshot-id"] not in pinned and s["timestamp-ms"] < cut]
        return cls(snapshots=len(snapshots), tags=sum(ref.get("type") == "tag" for ref in refs.values()),
                   data_files=int(summary.get("total-data-files", unknown)),
                   delete_files=int(summary.get("total-delete-files", unknown)),
                   expirable=bool(old) and len(snapshots) > retain_last)


def maintain(
    home: Home,
    *,
    retain_last: int = 5,
    retain_for: dt.timedelta = dt.timedelta(days=7),
    expire: bool = True,
    compact: bool = True,
    target_file_size_mb: int = 128,
    min_input_files: int = 5,
    tables: list[str] | None = None,
    now: dt.datetime | None = None,
) -> list[TableReport]:
    """Expire and/or compact every table of the home (or `tables`); one report per table."""
    if retain_last < 1:
        raise ValueError("retain_last must be at least 1")

    catalog = home.catalog
    bases = {home.tables.base(r.name): r for r in load_home_schema(home.settings).relations}
    reports = []
    with catalog_lock(home.settings, "maintenance"):
        closed = max((r.epoch for r in ledger_rows(home.spark, home.settings) if r.state in DONE), default=None)
        every = existing_tables(home)
        cutoff = retention_cutoff(home.spark, home.settings, retain_for, now)
        stamp = cutoff.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        for table in tables or every:
            t = time.perf_counter()
            state = _State.of(home.spark, table, cutoff, retain_last)
            before = state.snapshots
            short = table.split(".", 1)[1]  # the procedures get the qualified name: the
            # namespace `cumulus` would otherwise be read as the catalog of that name
            rewritten = added = deleted = deletes_removed = layer_rows = delta_rows = log_rows = 0
            if compact and table in bases:
                layer_rows = compact_base(home, bases[table])
            if compact and table == home.tables.maps and closed is not None:
                delta_rows = compact_maps(home, closed)
            if compact and table == home.tables.ledger_log:
                log_rows = compact_ledger(home)
            if layer_rows or delta_rows or log_rows:
                state = _State.of(home.spark, table, cutoff, retain_last)
            # Each procedure is a Spark job or more: called only where the metadata says it
            # may have something to do (min_input_files data files, a delete file, an old
            # snapshot no ref points at): never skipped when it has work, sometimes run idle.
            if compact and (state.data_files >= min_input_files or state.delete_files):
                row = home.spark.sql(
                    f"CALL {catalog}.system.rewrite_data_files(table => '{table}', options => map("
                    f"'min-input-files', '{int(min_input_files)}', 'target-file-size-bytes', '{target_file_size_mb * 1024 * 1024}', "
                    # a data file with position deletes (row-level SQL, merge-on-read)
                    # is rewritten without the deleted rows; delete files that still cover
                    # other files can stay behind, hence rewrite_position_delete_files below
                    "'delete-file-threshold', '1', 'remove-dangling-deletes', 'true'))"
                ).collect()[0].asDict()
                rewritten, added = row["rewritten_data_files_count"], row["added_data_files_count"]
                state = _State.of(home.spark, table, cutoff, retain_last)
                if state.delete_files:  # left dangling by the rewrite
                    row = home.spark.sql(
                        f"CALL {catalog}.system.rewrite_position_delete_files(table => '{table}', "
                        "options => map('rewrite-all', 'true'))"
                    ).collect()[0].asDict()
                    deletes_removed = row["rewritten_delete_files_count"] - row["added_delete_files_count"]
                    state = _State.of(home.spark, table, cutoff, retain_last)
            if expire and state.expirable:
                row = home.spark.sql(
                    f"CALL {catalog}.system.expire_snapshots(table => '{table}', "
                    f"older_than => TIMESTAMP '{stamp}', retain_last => {int(retain_last)})"
                ).collect()[0].asDict()
                deleted = row.get("deleted_data_files_count", 0) or 0
                state = _State.of(home.spark, table, cutoff, retain_last)
            report = TableReport(
                table=short, snapshots_before=before, snapshots_after=state.snapshots,
                tags=state.tags, data_files_deleted=deleted,
                files_rewritten=rewritten, files_added=added, delete_files_removed=deletes_removed,
                layer_rows_compacted=layer_rows, delta_rows_compacted=delta_rows, log_rows_compacted=log_rows,
                seconds=round(time.perf_counter() - t, 2),
            )
            log.info("maintenance %s: snapshots %d -> %d (%d tags), files rewritten %d -> %d, "
                     "delete files removed %d, data files deleted %d, base layer rows compacted %d, "
                     "map delta rows compacted %d", short, before, report.snapshots_after, report.tags, rewritten,
                     added, deletes_removed, deleted, layer_rows, delta_rows)
            reports.append(report)
    return reports
