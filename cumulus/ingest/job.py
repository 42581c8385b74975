"""The ingest step of an epoch: a source's landing files become typed,
versioned rows of events.<rel>, bad rows become quarantine records, and every file is
recorded in the manifest, exactly once.

    plan (driver)     list the files, formats, relations, sha256 checksums
    -- catalog lock --
    recover           roll back batches that crashed before their manifest (batches.py)
    epoch             the open epoch from the ledger
    dedupe            files whose checksum the manifest already has are `duplicate`
    parse (tasks)     one task per unit: records, typed, validated (formats.py)
    unchanged         every file still has the checksum it was planned with
    liveness          deletes of tuples that are not alive are rejected (liveness.py)
    threshold         rejected / offered > max_error_rate: nothing is applied
    commit            quarantine, then events.<rel> (one append each), then the manifest
    -- unlock --

The manifest and the ledger are read through PyIceberg. A small batch on a local master
(new files of at most `ingest_local_bytes`) is parsed, judged and committed in the driver
with no Spark job (driver.py), the same rows in the same commits; any other by Spark.

Versions: (epoch, source priority, seq) with seq = first free seq of (epoch, source) +
the unit's offset in the batch + the row's position in its unit, so seq increases in
file and row order (DBToaster folders: in event-order number, relation, line order).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.errors import IngestError
from cumulus.faults import fault_point
from cumulus.ingest.driver import DriverBatch
from cumulus.ingest.formats import FORMATS
from cumulus.ingest.liveness import not_alive
from cumulus.ingest.parse import META_NAMES, Parsed, parse_relation, relation_rows
from cumulus.ingest.plan import InputFile, make_units, plan_files, sha256
from cumulus.ingest.report import IngestReport
from cumulus.ingest.sources import Source, get_source
from cumulus.schema import Schema
from cumulus.spark.local import local_frame
from cumulus.store import commit
from cumulus.store.batches import new_batch_id, recover_incomplete_batches
from cumulus.store.catalog import shared_catalog
from cumulus.store.files import (
    DUPLICATE,
    INGESTED,
    REJECTED,
    FileEntry,
    append_entries,
    next_seq,
    taken,
)
from cumulus.store.fold import folded_through
from cumulus.store.home import load_home_schema
from cumulus.store.ledger import current_epoch
from cumulus.store.lock import catalog_lock
from cumulus.store.quarantine import next_id
from cumulus.store.tables import (
    Home,
    attach_catalog,
    events_columns,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyspark.sql import DataFrame

log = logging.getLogger("cumulus.ingest")

NOT_ALIVE_DETAIL = (
    "no live copy of the tuple: base + committed events of unfolded epochs + earlier rows "
    "of this batch leave multiplicity 0"
)


def ingest_files(
    home: Home,
    source: str | Source,
    paths: Sequence[str | Path] | None = None,
    fmt: str | None = None,
    relation: str | None = None,
) -> IngestReport:
    """Ingest files (or folders; default: the source's landing folder) into the open
    epoch as one batch. Returns the report; raises IngestError (with `.report`) when the
    source's error rate passes its threshold (the quarantine and the manifest are still
    written, no event is)."""
    started = time.perf_counter()
    attach_catalog(home)
    schema = load_home_schema(home.settings)
    src = source if isinstance(source, Source) else get_source(home.settings, source)
    if fmt is not None and fmt not in FORMATS:
        raise IngestError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    if relation is not None:
        relation = relation.lower()
        schema.relation(relation)  # raises SchemaError naming the known relations
    roots = [Path(p) for p in paths] if paths else [src.landing]
    inputs = plan_files(roots, fmt, relation, schema)
    fault_point("after-plan")
    report = IngestReport(src.name, src.priority)
    if not inputs:
        log.info("source %s: no files in %s", src.name, ", ".join(map(str, roots)))
        return report
    size = sum(f.size for f in inputs)
    log.info("source %s: %d file(s), %.1f MB, checksummed", src.name, len(inputs), size / 1e6)

    # The manifest and the ledger are read through PyIceberg (no Spark job: each data file
    # once per process); a small batch on a local master is parsed, judged and written in
    # the driver (driver.py), any other by Spark.
    reads = shared_catalog(home.settings)
    with catalog_lock(home.settings, f"ingest source {src.name}"):
        report.recovered = [b.batch_id for b in recover_incomplete_batches(home, schema)]
        epoch = current_epoch(reads, home.settings)
        report.epoch = epoch
        report.batch_id = new_batch_id()
        now = dt.datetime.now(dt.UTC)
        ctx = f"epoch {epoch}, source {src.name}"
        new, entries, report.already_taken = _dedupe(reads, home.settings, src, inputs, epoch, report.batch_id, now)
        if report.already_taken:  # a landing folder read again (the warm engine's cadence): nothing to say
            log.info("%s: %d file(s) taken before from the same path: skipped", ctx, len(report.already_taken))
        for entry in entries:
            log.warning("%s: %s is a duplicate of batch %s: skipped", ctx, entry.path, entry.duplicate_of)
        in_driver = home.settings.is_local and sum(f.size for f in new) <= home.settings.ingest_local_bytes
        if new:
            new_entries, in_driver = _ingest_new(home, reads, schema, src, new, report, now, in_driver)
            entries = new_entries + entries
        report.files = entries
        fault_point("after-events")
        props = _batch_props(src, epoch, report.batch_id)
        append_entries(home, entries, props, in_driver)
        report.committed = not report.failed and any(e.status == INGESTED for e in entries)
        fault_point("after-manifest")
    report.seconds = time.perf_counter() - started
    log.info("%s", report.headline())
    if report.failed:
        raise IngestError(
            f"{ctx}: {report.failed}; nothing of this batch was applied. See "
            f"`cumulus --home {home.settings.home} quarantine list --epoch {epoch} --source {src.name}`, "
            "fix the files and ingest them again (or raise max_error_rate in cumulus.toml)",
            report,
        )
    return report


def _batch_props(src: Source, epoch: int, batch_id: str) -> dict[str, object]:
    return {
        commit.BATCH_ID: batch_id,
        commit.SOURCE: src.name,
        commit.SOURCE_ID: src.priority,
        commit.EPOCH: epoch,
    }


def _dedupe(
    reads: Catalog,
    settings: Settings,
    src: Source,
    inputs: list[InputFile],
    epoch: int,
    batch_id: str,
    now: dt.datetime,
) -> tuple[list[InputFile], list[FileEntry], list[str]]:
    """New files; manifest entries for the duplicates (the content taken before under
    another path, or twice here); and the files taken before from the same path, with the
    same content (a folder read again: the manifest has their record already)."""
    before = taken(reads, settings, [f.checksum for f in inputs])
    new: list[InputFile] = []
    dups: list[FileEntry] = []
    again: list[str] = []
    here: set[str] = set()
    for f in inputs:
        first = before.get(f.checksum)
        if first is not None and first["path"] == f.path and f.checksum not in here:
            here.add(f.checksum)
            again.append(f.path)
            continue
        if first is None and f.checksum not in here:
            here.add(f.checksum)
            new.append(f)
            continue
        original = first["batch_id"] if first else batch_id
        where = f"{first['path']} in epoch {first['epoch']}" if first else "this batch"
        dups.append(
            FileEntry(
                checksum=f.checksum, source=src.name, source_id=src.priority, path=f.path,
                size=f.size, format=f.fmt, relation=f.relation, epoch=epoch, batch_id=batch_id,
                status=DUPLICATE, duplicate_of=original,
                detail=f"same content as {where}", ingested_at=now,
            )
        )
    return new, dups, again


def _ingest_new(
    home: Home,
    reads: Catalog,
    schema: Schema,
    src: Source,
    inputs: list[InputFile],
    report: IngestReport,
    now: dt.datetime,
    in_driver: bool,
) -> tuple[list[FileEntry], bool]:
    """Parse, judge and write the batch's new files (the module doc): in the driver
    (driver.py) or by Spark; their manifest entries, and whether the driver wrote them
    (a batch whose deletes are too many to judge there goes to Spark)."""
    epoch, batch_id = report.epoch, report.batch_id
    ctx = f"epoch {epoch}, source {src.name}"
    files, units = make_units(inputs)
    by_index = {f.index: f for f in files}

    phase = time.perf_counter()
    log.info("%s: parsing %d file(s) in %d unit(s)%s", ctx, len(files), len(units), " in the driver" if in_driver else "")
    local = DriverBatch.parse(units, schema) if in_driver else None
    passes = {} if local is not None else _parse_by_spark(home, units, schema)
    stats = local.stats() if local is not None else _spark_stats(passes)
    total = sum(r.n for r in stats)
    log.info("%s: parsed %d rows (%.1f s)", ctx, total, time.perf_counter() - phase)
    changed = _changed(files)
    if changed:  # the rows were parsed (and cached) from other content than the manifest would name
        for records in passes.values():
            records.unpersist()
        raise IngestError(
            f"{ctx}: {changed} changed while being read; nothing of this batch was written. "
            "Offer it again once it is complete (write a landing file under a hidden or "
            "_-prefixed name and rename it when done)"
        )

    # The seq range of the batch: units follow each other, rows by position in the unit.
    unit_size: Counter = Counter()
    for r in stats:
        unit = by_index[r["__file"]].unit
        unit_size[unit] = max(unit_size[unit], r.hi + 1)
    unit_base, acc = {}, 0
    for u in units:
        unit_base[u.index] = acc
        acc += unit_size[u.index]
    offset = next_seq(reads, home.settings, epoch, src.priority)

    # Liveness of deletes, per relation that has deletes in the batch.
    phase = time.perf_counter()
    dead_counts: Counter = Counter()  # (file, relation) -> rows
    dead_rows = local.not_alive(home, reads) if local is not None else None
    if local is not None and dead_rows is None:  # too many deletes to judge in the driver: Spark judges, and writes
        log.info("%s: deletes too many to judge in the driver: by Spark", ctx)
        passes, local = local.frames(home), None
    if local is not None:
        for name, rows in dead_rows.items():
            dead_counts.update((r["__file"], name) for r in rows)
        dead = {}
    else:
        dead = _spark_not_alive(home, schema, passes, stats, dead_counts)
    if dead_counts:
        log.info("%s: %d deletes of tuples not alive (%.1f s)", ctx, sum(dead_counts.values()), time.perf_counter() - phase)

    # Counts: per relation for the report, per file for the manifest.
    per_file: dict[int, dict[str, Counter]] = {f.index: {} for f in files}
    for r in stats:
        name = r["__relation"] or "?"
        counts = per_file[r["__file"]].setdefault(name, Counter())
        if r["__reason"] is None:
            counts["accepted"] += r.n
            report.relation(name).inserts += r.n if r["__op"] > 0 else 0
            report.relation(name).deletes += r.n if r["__op"] < 0 else 0
        else:
            counts["rejected"] += r.n
            report.relation(name).rejected[r["__reason"]] += r.n
    for (file_index, name), n in dead_counts.items():
        counts = per_file[file_index][name]
        counts["accepted"] -= n
        counts["rejected"] += n
        report.relation(name).deletes -= n
        report.relation(name).rejected["not_alive"] += n

    if report.error_rate > src.max_error_rate:
        report.failed = (
            f"{report.rejected} of {total} rows rejected ({report.error_rate:.0%}), more than "
            f"the source's max_error_rate {src.max_error_rate:.0%}"
        )
        log.error("%s: %s", ctx, report.failed)
    fault_point("before-commit")

    props = _batch_props(src, epoch, batch_id)
    files_df = None if local is not None else local_frame(
        home.spark,
        [(f.index, f.path, f.checksum, f.unit, unit_base[f.unit]) for f in files],
        "__file INT, __path STRING, __checksum STRING, __unit_of_file INT, __ubase BIGINT",
    )
    if report.rejected:
        if local is not None:
            quarantined = local.write_quarantine(home, reads, dead_rows, files, units, (src.name, src.priority), epoch,
                                                 batch_id, now, props, NOT_ALIVE_DETAIL)
            log.info("%s: %d rows quarantined", ctx, quarantined)
        else:
            everything = reduce(lambda a, b: a.unionByName(b), [df.select(*META_NAMES) for df in passes.values()])
            _write_quarantine(home, reads, everything, dead, files_df, units, stats, dead_counts, by_index, src, epoch,
                              batch_id, now, props)
        fault_point("after-quarantine")
    if not report.failed:
        written = 0
        for rel in schema.relations:
            counts = report.relations.get(rel.name)
            if not counts or counts.accepted == 0:
                continue
            if written:
                fault_point("between-relations")
            phase = time.perf_counter()
            if local is not None:
                local.write_events(home, rel, dead_rows.get(rel.name, []), files, unit_base, offset, src.priority,
                                   epoch, batch_id, now, props)
            else:
                _spark_events(home, rel, passes[rel.name], dead.get(rel.name), files_df, offset, epoch, src.priority,
                              batch_id, now, props)
            written += 1
            log.info(
                "%s: events.%s += %d rows (%.1f s)", ctx, rel.name, counts.accepted, time.perf_counter() - phase
            )
    for rejected in dead.values():
        rejected.unpersist()
    for records in passes.values():
        records.unpersist()

    status = REJECTED if report.failed else INGESTED
    entries = []
    lo_hi: dict[int, tuple[int, int]] = {}
    for r in stats:
        lo, hi = lo_hi.get(r["__file"], (r.lo, r.hi))
        lo_hi[r["__file"]] = (min(lo, r.lo), max(hi, r.hi))
    for f in files:
        counts = per_file[f.index]
        seq_range = lo_hi.get(f.index)
        base = offset + unit_base[f.unit]
        entries.append(
            FileEntry(
                checksum=f.checksum, source=src.name, source_id=src.priority, path=f.path,
                size=f.size, format=f.fmt, relation=f.relation, epoch=epoch, batch_id=batch_id,
                status=status,
                rows_accepted=0 if report.failed else sum(c["accepted"] for c in counts.values()),
                rows_rejected=sum(c["rejected"] for c in counts.values()),
                seq_min=base + seq_range[0] if seq_range and not report.failed else None,
                seq_max=base + seq_range[1] if seq_range and not report.failed else None,
                relations=json.dumps({k: dict(v) for k, v in sorted(counts.items())}),
                detail=report.failed,
                ingested_at=now,
            )
        )
    return entries, local is not None


def _parse_by_spark(home: Home, units: list, schema: Schema) -> dict[str | None, DataFrame]:
    """Each relation's records (None: rows of no relation), parsed by Spark's Python
    tasks and cached."""
    passes = {}
    for name in [*schema.names, None]:
        parsed = parse_relation(home.spark, units, schema, name)
        if parsed is not None:
            passes[name] = parsed.frame.persist()
    return passes


def _spark_stats(passes: dict[str | None, DataFrame]) -> list:
    """Per file, relation, reason and op: rows (n) and positions (lo, hi), one Spark job."""
    from pyspark.sql import functions as F

    everything = reduce(lambda a, b: a.unionByName(b), [df.select(*META_NAMES) for df in passes.values()])
    return (
        everything.groupBy(*Parsed.STATS)
        .agg(F.count("*").alias("n"), F.min("__pos").alias("lo"), F.max("__pos").alias("hi"))
        .collect()
    )


def _spark_not_alive(home: Home, schema: Schema, passes: dict[str | None, DataFrame], stats: list,
                     dead_counts: Counter) -> dict[str, DataFrame]:
    """The deletes that find no live copy, judged by Spark (liveness.not_alive), per
    relation that has some (cached); `dead_counts` counts them per (file, relation)."""
    from pyspark.sql import functions as F

    dead: dict[str, DataFrame] = {}
    for rel in schema.relations:
        if not any(r["__relation"] == rel.name and r["__reason"] is None and r["__op"] < 0 for r in stats):
            continue
        done = folded_through(home, rel.name)
        events = home.spark.table(home.tables.events(rel.name)).where(F.col("epoch") > done)
        rejected = not_alive(
            relation_rows(passes[rel.name], rel), rel, home.spark.table(home.tables.base(rel.name)), events
        ).persist()
        for r in rejected.groupBy("__file").count().collect():
            dead_counts[(r["__file"], rel.name)] = r["count"]
        if any(k[1] == rel.name for k in dead_counts):
            dead[rel.name] = rejected
        else:
            rejected.unpersist()
    return dead


def _spark_events(home: Home, rel, records: DataFrame, dead: DataFrame | None, files_df: DataFrame, offset: int,
                  epoch: int, source_id: int, batch_id: str, now: dt.datetime, props: dict) -> None:
    """One Spark append of the relation's accepted rows to events.<rel>."""
    from pyspark.sql import functions as F

    rows = relation_rows(records, rel)
    if dead is not None:
        rows = rows.join(dead.select("__unit", "__pos"), ["__unit", "__pos"], "left_anti")
    events = rows.join(F.broadcast(files_df), "__file").select(
        *[F.col(f"`{c}`") for c in rel.column_names],
        F.col("__op").alias("op"),
        F.lit(epoch).cast("bigint").alias("epoch"),
        F.lit(source_id).cast("int").alias("source_id"),
        (F.lit(offset) + F.col("__ubase") + F.col("__pos")).cast("bigint").alias("seq"),
        F.lit(now).cast("timestamp").alias("ingested_at"),
        F.col("__path").alias("file"),
        F.lit(batch_id).alias("batch_id"),
    )
    assert tuple(events.columns) == tuple(n for n, _ in events_columns(rel))
    writer = events.writeTo(home.tables.events(rel.name))
    for key, value in commit.write_options(props).items():
        writer = writer.option(key, value)
    writer.append()


def _changed(files: list[InputFile]) -> str | None:
    """The first file whose content is no longer the one planned (checksummed before the
    parse), said with both checksums; None when every file is as planned. Checked after
    the parse has cached its rows, so the rows written are those of the planned content."""
    for f in files:
        try:
            now = sha256(f.path)
        except OSError as exc:
            return f"{f.path} (sha256 {f.checksum[:12]} when listed, now unreadable: {exc.strerror or exc})"
        if now != f.checksum:
            return f"{f.path} (sha256 {f.checksum[:12]} when listed, {now[:12]} after the parse)"
    return None


def _write_quarantine(
    home: Home, reads: Catalog, everything, dead, files_df, units, stats, dead_counts, by_index, src, epoch, batch_id,
    now, props
) -> None:
    """One append of every rejected row, ids in (unit, position) order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cols = ["__unit", "__pos", "__file", "__line", "__relation", "__op", "__raw", "__reason", "__detail"]
    rejected = everything.where(F.col("__reason").isNotNull()).select(*cols)
    for name, rows in dead.items():
        rejected = rejected.unionByName(
            rows.select(
                "__unit", "__pos", "__file", "__line",
                F.lit(name).alias("__relation"), "__op", "__raw",
                F.lit("not_alive").alias("__reason"), F.lit(NOT_ALIVE_DETAIL).alias("__detail"),
            )
        )
    per_unit: Counter = Counter()
    for r in stats:
        if r["__reason"] is not None:
            per_unit[by_index[r["__file"]].unit] += r.n
    for (file_index, _), n in dead_counts.items():
        per_unit[by_index[file_index].unit] += n
    qbase, acc = [], 0
    for u in units:
        qbase.append((u.index, acc))
        acc += per_unit[u.index]
    bases = local_frame(home.spark, qbase, "__unit INT, __qbase BIGINT")
    first = next_id(reads, home.settings)
    in_unit = Window.partitionBy("__unit").orderBy("__pos")
    rows = (
        rejected.join(F.broadcast(files_df.drop("__unit_of_file", "__ubase")), "__file")
        .join(F.broadcast(bases), "__unit")
        .select(
            (F.lit(first) + F.col("__qbase") + F.row_number().over(in_unit) - 1).cast("bigint").alias("id"),
            F.lit(src.name).alias("source"),
            F.lit(src.priority).cast("int").alias("source_id"),
            F.col("__path").alias("file"),
            F.col("__checksum").alias("checksum"),
            F.col("__line").alias("line"),
            F.col("__relation").alias("relation"),
            F.col("__op").alias("op"),
            F.col("__raw").alias("raw"),
            F.col("__reason").alias("reason"),
            F.col("__detail").alias("detail"),
            F.lit(epoch).cast("bigint").alias("epoch"),
            F.lit(batch_id).alias("batch_id"),
            F.lit(now).cast("timestamp").alias("ingested_at"),
        )
    )
    writer = rows.writeTo(home.tables.quarantine)
    for key, value in commit.write_options(props).items():
        writer = writer.option(key, value)
    writer.append()
    log.info("epoch %d, source %s: %d rows quarantined", epoch, src.name, acc)
