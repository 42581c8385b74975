"""Incremental or recompute, chosen per epoch. When a close finds batches still pending
(not applied before it), it can apply them (incremental) or fold the epoch into base.*
first and rebuild every map from base.* (recompute): the program evaluated over each
relation's tuples as inserts of their multiplicity, from an empty state. Recomputing
costs what the base rows cost, applying what the pending events cost; for the initial
load, a backfill or a bulk correction the rebuild is the cheaper one.

`choose` decides from costs measured on this home (as Databricks' Enzyme does):
    incremental ~ a * batches + b * events   a, b fitted over recent epochs' applies
    recompute   ~ c * (base rows + events)   c measured by the last recompute (else b)
`epoch_mode` in cumulus.toml forces either. The ledger's metrics keep the mode and why.

The rebuild is one overwrite commit of maps.entries: the rows of epochs <= N become the
recomputed entries (one row each, epoch N, source 0, as a compaction leaves them); the
rows of later epochs (applies of N+1 during the close) stay. It is marked as a batch
(`cumulus.apply-batch` = recompute-N, so repair treats it as a state change that an
apply of N+1 may have missed) and as compacted through N. Its record in
cumulus.applies (kind `recompute`) is written before the fold: a retry after a crash
finds it and finishes the rebuild; no apply of epoch N runs after it."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cumulus.config import Settings
from cumulus.engine.apply import (
    APPLY_BATCH,
    RECOMPUTE,
    ApplyRecord,
    batch_commit,
    delta_names,
    driver_frame,
    unapplied,
)
from cumulus.engine.derived import derived_deltas
from cumulus.engine.driver_apply import BY_SPARK, IN_DRIVER, driver_rebuild
from cumulus.engine.evaluate import BatchPlan, evaluate_batch, union_all, without_statistics
from cumulus.errors import NoSuchTableError
from cumulus.m3.ast import Program
from cumulus.m3.printer import fingerprint
from cumulus.store.commit import EPOCH, table_metadata, total_records, write_options
from cumulus.store.maps import (
    COMPACTED_SOURCE,
    COMPACTED_THROUGH,
    entries_columns,
    mark_program,
    program_mark,
    summed,
    versioned,
)
from cumulus.store.tables import Home

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger("cumulus.recompute")

INCREMENTAL = "incremental"
RECENT_EPOCHS = 20  # the epochs the incremental cost is fitted over


@dataclass(frozen=True)
class Pending:
    """The epoch's ingest batches that no apply took yet, their events and sources."""

    batches: list[str]
    events: int
    sources: list[int]


@dataclass(frozen=True)
class Choice:
    mode: str
    reason: str


def pending_batches(home: Home, plan: BatchPlan, epoch: int, taken: set[str]) -> Pending:
    """The batches of `epoch` an apply would take (`apply.unapplied`), with their events
    (from the manifest, cumulus.files)."""
    mine = unapplied(home, plan, epoch, taken)
    events = sum(b.rows_accepted if b.events is None else b.events_in(plan.order) or 0 for b in mine)
    return Pending(sorted(b.batch_id for b in mine), events,
                   sorted({b.source_id for b in mine}))


def base_rows(home: Home, plan: BatchPlan) -> int:
    """The rows of the base tables the program reads (from their metadata, no Spark job)."""
    return sum(total_records(table_metadata(home.spark, home.tables.base(rel))) for rel in plan.order)


def fit_line(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least squares (a, b) of y = a + b x, both >= 0; None without two distinct x."""
    xs = {x for x, _ in points}
    if len(xs) < 2:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    b = max(b, 0.0)
    return max(my - b * mx, 0.0), b


def choose(settings: Settings, pending: Pending, rows: int, history: Sequence[Mapping[str, Any]]) -> Choice:
    """Incremental or recompute for the pending batches (see the module's docstring).
    `history`: the ledger metrics of earlier closed epochs, oldest first."""
    if settings.epoch_mode != "auto":
        return Choice(settings.epoch_mode, f"epoch_mode = {settings.epoch_mode} (cumulus.toml)")
    if not pending.batches:
        return Choice(INCREMENTAL, "every batch was applied before the close")
    recent = [m for m in history if m.get("mode", INCREMENTAL) == INCREMENTAL and m.get("batches")][-RECENT_EPOCHS:]
    points = [(m["events"] / m["batches"], m["applies_s"] / m["batches"]) for m in recent if m.get("events")]
    line = fit_line(points)
    if line is None and points:
        line = (0.0, sum(s for _, s in points) / sum(e for e, _ in points))
    rebuilt = [m for m in history if m.get("recompute_rows")]
    per_row = rebuilt[-1]["recompute_s"] / rebuilt[-1]["recompute_rows"] if rebuilt else None
    if line is None:  # nothing measured yet: the same work per row either way
        if rows == 0:
            return Choice(RECOMPUTE, f"nothing measured yet and base.* is empty: rebuilding reads the "
                                     f"{pending.events} pending events once, not once per batch")
        return Choice(INCREMENTAL, f"nothing measured yet; {pending.events} pending events against {rows} base rows")
    a, b = line
    incremental = a * len(pending.batches) + b * pending.events
    rate = per_row if per_row is not None else b
    recompute = rate * (rows + pending.events)
    why = (f"estimated {incremental:.1f} s to apply {pending.events} events in {len(pending.batches)} batches "
           f"vs {recompute:.1f} s to rebuild from {rows + pending.events} rows "
           f"({'measured' if per_row is not None else 'assumed as per event'}: {rate * 1e6:.1f} us per row)")
    return Choice(RECOMPUTE if recompute < incremental else INCREMENTAL, why)


def defer_to_close(settings: Settings, changed: str | None = None) -> str | None:
    """Why an apply step leaves its batches to the close (None: apply them): epoch_mode =
    recompute (under auto an apply keeps its promise of fresh values at once, and the
    close chooses for whatever is still pending), or the program changed (`changed`,
    program_changed): deltas of the new program must not land on the old one's maps."""
    if changed:
        return f"{changed}; the close rebuilds every map from base.*"
    if settings.epoch_mode == "recompute":
        return "epoch_mode = recompute: the close rebuilds the maps from base.*"
    return None


def carry_mark(home: Home, before: Program | None, after: Program) -> None:
    """After a view add (its maps back-filled) or drop: the maps are `after`'s whole state
    if they were `before`'s (or held nothing), from the same first epoch."""
    mark, since, rows = program_mark(home.spark, home.settings)
    if (before is not None and mark == fingerprint(before)) or (mark is None and rows == 0) or \
            (before is None and mark is None):
        mark_program(home, fingerprint(after), since or 0)


def program_changed(reader: Any, settings: Settings, program: Program) -> str | None:
    """Why the maps are not `program`'s (None: they are, or hold nothing yet): written by
    another version of the compiler or of M3's semantics (a newer Cumulus), so neither an
    apply nor a read may use them with this program until a rebuild (the next close does
    one). `reader`: a SparkSession or a PyIceberg catalog."""
    try:
        mark, _since, rows = program_mark(reader, settings)
    except NoSuchTableError:
        return None
    if mark == fingerprint(program) or (mark is None and rows == 0):
        return None
    return ("the maps were written by another version of Cumulus's compiler" if mark is None else
            f"the maps were written for another program (fingerprint {mark}, now {fingerprint(program)})")


def base_events(home: Home, plan: BatchPlan, tag: str | None = None) -> tuple[dict[str, DataFrame], dict[str, int]]:
    """Each base relation's tuples (at `tag`, else main) as inserts of their multiplicity
    (the relation's columns and `op`), and its rows (its layers' too), from its metadata:
    no job."""
    from pyspark.sql import functions as F

    events: dict[str, DataFrame] = {}
    sizes: dict[str, int] = {}
    for rel in plan.order:
        reader = home.spark.read.format("iceberg")
        if tag is not None:
            reader = reader.option("tag", tag)
        events[rel] = reader.load(home.tables.base(rel)).select(*plan.params[rel], F.col("mult").cast("int").alias("op"))
        sizes[rel] = total_records(table_metadata(home.spark, home.tables.base(rel)), tag)
    return events, sizes


def evaluate_from_base(
    home: Home, plan: BatchPlan, tag: str | None = None
) -> tuple[DataFrame | None, str]:
    """Every map of `plan` computed from base.* (at `tag`, else main), as delta rows (None:
    none), and where the base relations' deltas were evaluated (IN_DRIVER or BY_SPARK): the
    program evaluated over each relation's tuples as inserts of their multiplicity, from
    an empty state (a rebuild, and a new view's back-fill), then the derived relations'
    rows (nested queries) inserted. A base of at most `rebuild_local_rows` tuples is
    evaluated in the driver (driver_apply.driver_rebuild), a larger one by Spark plans."""
    from pyspark.sql import functions as F

    started = time.perf_counter()
    local = driver_rebuild(home.settings, plan, tag, delta_names(plan))
    if local is not None:  # a small base: the interpreter's deltas, nested queries' too (driver_apply.py)
        log.info("from base.*: %d delta rows evaluated in the driver (%.1f s)", len(local.rows),
                 time.perf_counter() - started)
        return driver_frame(home, plan, local), IN_DRIVER
    events, sizes = base_events(home, plan, tag)
    nothing = home.spark.table(home.tables.maps).where(F.lit(False))
    values = evaluate_batch(plan, events, nothing, sizes, from_empty=True)
    if plan.derived:  # nested queries: their rows, inserted (cumulus/engine/derived.py)
        values = without_statistics(values) if values is not None else None
        state = nothing if values is None else nothing.unionByName(values, allowMissingColumns=True)
        nested = derived_deltas(plan, nothing, state, workers=home.settings.table_workers)
        if nested is not None:
            values = nested if values is None else summed(union_all([values, nested]))
    return values, BY_SPARK


def recompute_maps(home: Home, plan: BatchPlan, record: ApplyRecord) -> str | None:
    """Rebuild every map from base.* (main: the epoch folded) in one overwrite commit, unless
    the record's commit exists (a retry). Returns where the base relations' deltas were
    evaluated (evaluate_from_base), None when the commit existed."""
    from pyspark.sql import functions as F

    mine, way = batch_commit(home, record.batch_id), None
    if mine is None:
        started = time.perf_counter()
        values, way = evaluate_from_base(home, plan)
        table = home.tables.maps
        rows = home.spark.table(table)
        version = {"epoch": record.epoch, "source_id": COMPACTED_SOURCE, "seq": 0}
        kept = rows.where(F.col("epoch") > record.epoch)
        if values is not None:
            kept = versioned(values, entries_columns(home), version).unionByName(kept)
        props = write_options({APPLY_BATCH: record.batch_id, EPOCH: record.epoch, COMPACTED_THROUGH: record.epoch})
        kept.writeTo(table).options(**props).overwrite(F.lit(True))
        mine = batch_commit(home, record.batch_id)
        assert mine is not None, f"{table}: the commit of {record.batch_id} is not in its history"
        log.info("epoch %d: maps rebuilt from base.*, evaluated %s (%.1f s)", record.epoch, way,
                 time.perf_counter() - started)
    record.written_snapshot = mine.snapshot_id
    record.deltas = int(mine.summary.get("added-records", 0))
    record.maps_written = int(mine.summary.get("changed-partition-count", 0))
    return way


def recompute_record(epoch: int, pending: Pending) -> ApplyRecord:
    import datetime as dt

    return ApplyRecord(
        batch_id=f"recompute-{epoch}", kind=RECOMPUTE, epoch=epoch, source_id=COMPACTED_SOURCE, status="started",
        ingest_batches=pending.batches, events_snapshots={}, read_snapshot=None, events=pending.events,
        started_at=dt.datetime.now(dt.UTC).replace(microsecond=0),
    )

