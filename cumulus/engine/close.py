"""Close: make epoch N exact and publish it as a consistent, tagged snapshot. It is the
orchestrator of the steps the other modules of the engine implement (apply.py: batch
I/O and apply; recompute.py: the incremental-or-recompute choice and the rebuild;
repair.py; store/fold.py; publish.py: tags and stable branches).

Steps (each idempotent; a retry after a crash anywhere resumes from what the tables
say): seal the epoch in the ledger (input now goes to N+1); apply what is pending, or
leave it to a rebuild after the fold; repair batches that read a stale state; fold the
epoch's events into base.* (an appended layer of net changes, compacted past a ratio);
compact the maps whose delta rows outgrew `map_compaction_ratio` (the paper's Cleanup,
lazy: an entry's value is the sum of its rows at any snapshot, so the close rewrites
nothing otherwise); tag maps.entries and every base table `epoch-N`; write the ledger
row `closed`; then move every such table's `audit` branch there. The `stable` branch
moves when the epoch is published, after it passed validation (write-audit-publish:
cumulus/engine/publish.py), or here under `publish = "closed"`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from cumulus.engine.apply import (
    ApplyRecord,
    apply_records,
    apply_source,
    ensure_applies_table,
    save_record,
    taken_batches,
)
from cumulus.engine.derived import derive_epoch
from cumulus.engine.evaluate import BatchPlan
from cumulus.engine.metrics import StepMetrics
from cumulus.engine.publish import (
    create_catalog_views,
    mend_branches,
    mend_results,
    move_branch,
    tag_tables,
)
from cumulus.engine.recompute import (
    RECOMPUTE,
    Choice,
    base_rows,
    choose,
    pending_batches,
    program_changed,
    recompute_maps,
    recompute_record,
)
from cumulus.engine.refresh import refresh_views, registered_full_views
from cumulus.engine.registry import compile_registered
from cumulus.engine.repair import repair_epoch
from cumulus.engine.results import write_results
from cumulus.errors import NoSuchEpochError
from cumulus.faults import fault_point
from cumulus.m3.printer import fingerprint
from cumulus.store.commit import FOLDED_EPOCH
from cumulus.store.fold import fold_epoch
from cumulus.store.ledger import (
    APPLIED,
    CLOSED,
    DONE,
    OPEN,
    LedgerRow,
    check_in_order,
    ledger_row,
    ledger_rows,
    transition,
)
from cumulus.store.lock import catalog_lock
from cumulus.store.maps import COMPACTED_THROUGH, compact_maps, mark_program
from cumulus.store.registry import registry
from cumulus.store.tables import AUDIT, STABLE, Home

log = logging.getLogger("cumulus.close")


def _bring_up_to_date(
    home: Home, plan: BatchPlan, epoch: int, rows: list[LedgerRow], forced: bool
) -> tuple[Choice, ApplyRecord | None]:
    """Apply the sealed epoch's pending batches, or choose to rebuild the maps after the
    fold (the returned record, saved before anything is folded, so a retry rebuilds too);
    `forced`: rebuild whatever the costs (`epoch close --rebuild`).
    The choice is made and saved under the catalog lock, so a concurrent close of the
    same epoch finds it (and the close proper adopts a rebuild chosen meanwhile)."""
    with catalog_lock(home.settings, f"close epoch {epoch}: apply or rebuild"):
        records = apply_records(home.spark, home.settings, epoch)
        rebuild = _chosen_rebuild(records)
        if rebuild is not None:
            return Choice(RECOMPUTE, "chosen before (cumulus.applies: " + rebuild.batch_id + ")"), rebuild
        pending = pending_batches(home, plan, epoch, taken_batches(records))
        rows_now = base_rows(home, plan) if pending.batches and home.settings.epoch_mode == "auto" else 0
        changed = program_changed(home.spark, home.settings, plan.checked.program)
        if forced or changed:
            choice = Choice(RECOMPUTE, "asked: epoch close --rebuild" if forced else f"{changed}: rebuilt from base.*")
        else:
            choice = choose(home.settings, pending, rows_now, [r.metrics for r in rows if r.state in DONE and r.epoch < epoch])
        log.info("epoch %d: %s (%s)", epoch, choice.mode, choice.reason)
        if choice.mode == RECOMPUTE:
            rebuild = recompute_record(epoch, pending)
            save_record(home, rebuild)
            return choice, rebuild
    for source_id in pending.sources:
        apply_source(home, plan, epoch, source_id)
    return choice, None


def _adopt_program(home: Home, plan: BatchPlan, epoch: int) -> None:
    """After a rebuild for a new program (a newer compiler): its catalog views (their SQL
    names its maps) and the maps' mark, from `epoch` on."""
    compiled = compile_registered(plan.checked.schema, registry(home.spark, home.settings), home.settings.sql_dialect)
    create_catalog_views(home, compiled)
    mark_program(home, fingerprint(plan.checked.program), epoch)


def _chosen_rebuild(records: list[ApplyRecord]) -> ApplyRecord | None:
    """The epoch's rebuild record, if a close (this one before a crash, or another)
    chose to rebuild the maps."""
    return next((r for r in records if r.kind == RECOMPUTE), None)


def _closed_meanwhile(home: Home, row: LedgerRow) -> dict:
    """Another run (a backfill beside the scheduled run, a retry beside a zombie) closed
    the epoch while this one waited for the lock: its metrics, nothing written again but
    the stable branches (that run may have died between its ledger row and them)."""
    log.info("epoch %d was closed meanwhile by another run", row.epoch)
    mend_branches(home, ledger_rows(home.spark, home.settings))
    return dict(row.metrics or {})


def close_epoch(home: Home, plan: BatchPlan, epoch: int, rebuild_maps: bool = False,
                inputs: Callable[[int], dict[str, Any]] | None = None) -> dict:
    """Close `epoch` (the open one, or a sealed one whose close was interrupted); returns
    the metrics written to the ledger. `rebuild_maps`: every map rebuilt from base.* after the
    fold, whatever the epoch mode (to correct maps written wrong, e.g. by an older
    compiler). `inputs(epoch)`: more fields of the ledger row, read once the epoch is sealed
    (the application's input counts and late files), written in the one `closed` row.
    Refuses (EpochOrderError) before touching anything
    while an earlier epoch is not closed: epochs close in order. Two closes of one epoch
    at once: the seal and the close proper each look at the ledger again under the
    catalog lock, so the epoch is closed once and the later run returns its metrics."""
    ensure_applies_table(home)
    rows = ledger_rows(home.spark, home.settings)
    row = next((r for r in rows if r.epoch == epoch), None)
    if row is None:
        raise NoSuchEpochError(f"epoch {epoch} is not in the ledger (epochs: {[r.epoch for r in rows]}; cumulus epoch status)")
    if any(r.state in DONE for r in rows):  # a crash between a ledger row and its branches: move them now
        with catalog_lock(home.settings, "mend branches"):
            mend_branches(home, rows)
            mend_results(home, rows)
    if row.state not in (OPEN, APPLIED):
        log.info("epoch %d is already %s", epoch, row.state)
        return dict(row.metrics or {})
    check_in_order(rows, epoch, f"epoch {epoch} cannot be closed", home.settings)
    steps = StepMetrics(home.spark)
    with steps("apply"):
        if row.state == OPEN:
            with catalog_lock(home.settings, f"seal epoch {epoch}"):  # (re-entrant: transition takes it too)
                now = ledger_row(home.spark, home.settings, epoch)
                if now is not None and now.state in DONE:
                    return _closed_meanwhile(home, now)
                if now is not None and now.state == OPEN:
                    transition(home, epoch, APPLIED)  # sealed: new input goes to the next epoch
        choice, rebuild = _bring_up_to_date(home, plan, epoch, rows, rebuild_maps)
    fault_point("close.after-apply")
    with catalog_lock(home.settings, f"close epoch {epoch}"):
        now = ledger_row(home.spark, home.settings, epoch)
        if now is not None and now.state in DONE:
            return _closed_meanwhile(home, now)
        if rebuild is None and (chosen := _chosen_rebuild(apply_records(home.spark, home.settings, epoch))) is not None:
            # a concurrent close chose to rebuild while this one applied: its record stops
            # applies, so the maps miss batches until the rebuild, which this run does now
            rebuild, choice = chosen, Choice(RECOMPUTE, f"chosen by a concurrent close (cumulus.applies: {chosen.batch_id})")
        with steps("repair"):  # a rebuild reads base.*, never a stale state
            repaired = 0 if rebuild else repair_epoch(home, plan, epoch)
        if plan.derived and rebuild is None:  # nested queries: their groups the epoch changed (a rebuild does it too)
            with steps("derived"):
                if (how := derive_epoch(home, plan, epoch)) is not None:
                    steps.metrics["derived_evaluated"] = how
            fault_point("close.after-derived")
        with steps("fold"):
            folds = fold_epoch(home, epoch)
        bases = [home.tables.base(r.name) for r in plan.checked.schema.base]
        steps.writes_from_commits("fold", bases, FOLDED_EPOCH, epoch)
        fault_point("close.after-fold")
        if rebuild is not None:
            with steps("recompute"):
                way = recompute_maps(home, plan, rebuild)
                if program_changed(home.spark, home.settings, plan.checked.program):  # the maps are this program's from N on
                    _adopt_program(home, plan, epoch)
            rebuild.seconds, rebuild.status = steps.metrics["recompute_s"], "done"
            save_record(home, rebuild)
            steps.metrics["recompute_rows"] = base_rows(home, plan)
            if way is not None:  # (None: a retry found the rebuild's commit)
                steps.metrics["recompute_evaluated"] = way
            fault_point("close.after-recompute")
        fulls = registered_full_views(home.spark, home.settings)
        if fulls:  # the views kept by full refresh, over base.* as folded
            with steps("refresh"):
                refresh_views(home, plan.checked.schema, fulls, epoch, home.settings.sql_dialect)
            fault_point("close.after-refresh")
        with steps("compact_maps"):
            compacted = compact_maps(home, epoch, when_due=True)
        maps = home.tables.maps
        if compacted:  # (a rebuild's commit is marked compacted through N too; it is not this step's)
            steps.writes_from_commits("compact_maps", [maps], COMPACTED_THROUGH, epoch)
        fault_point("close.after-compact")
        with steps("tag"):
            tagged = tag_tables(home.spark, [maps, *bases], epoch, home.settings.table_workers)
        fault_point("close.after-tag")
        records = [r for r in apply_records(home.spark, home.settings, epoch) if r.status == "done"]
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
        row_fields = {"events": metrics["events"], "batches": metrics["batches"], **(inputs(epoch) if inputs else {})}
        transition(
            home, epoch, CLOSED, snapshots={k: int(v) for k, v in tagged.items()}, metrics=metrics,
            **row_fields,
        )
        fault_point("close.after-ledger")
        move_branch(home.spark, tagged, AUDIT)  # validation's; `stable` moves when the epoch is published
        if home.settings.publish == "closed":
            move_branch(home.spark, tagged, STABLE)
            write_results(home, epoch)
    log.info("epoch %d closed: %s", epoch, metrics)
    return metrics

