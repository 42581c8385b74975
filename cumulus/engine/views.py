"""`view add`: compile a new view together with the registered ones (sharing maps), add
the key slots its new maps need to maps.entries and back-fill them from base.* as of the
latest closed epoch, in one commit that the epoch's tag then points at, so the view is
readable at once. Idempotent: a retry skips the back-fill already committed.

The view is then readable by name in the catalog (views.<name>, views_stable.<name>:
cumulus/engine/publish.py). The tag can move there because a view is added only while the open epoch has no applied
batch: the maps table holds the closed epoch's state, so the back-fill's commit reads the
same as the tag for every other map."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, replace

from cumulus.config import Settings
from cumulus.engine.apply import (
    ApplyRecord,
    apply_records,
    batch_commit,
    current_snapshot_id,
    ensure_applies_table,
    write_deltas,
)
from cumulus.engine.evaluate import BatchPlan, restricted
from cumulus.engine.publish import create_catalog_views, move_branch, stable_epoch, view_names
from cumulus.engine.recompute import carry_mark, evaluate_from_base, program_changed
from cumulus.engine.refresh import full_view, refresh_views
from cumulus.engine.registry import (
    as_full_view,
    batch_plan,
    compile_all,
    compile_registered,
    needed_maps,
    without,
)
from cumulus.engine.stats import base_statistics
from cumulus.errors import PositionedError, SQLBindError, UnsupportedSQLError, ViewError
from cumulus.m3.ast import Const
from cumulus.schema import STRING, Schema
from cumulus.sql.estimate import estimate
from cumulus.sql.sqltext import spark_literal
from cumulus.sql.views import Compilation
from cumulus.store.ledger import (
    CLOSED,
    PUBLISHED,
    check_in_order,
    current_epoch,
    ledger_row,
    ledger_rows,
    transition,
)
from cumulus.store.lock import catalog_lock
from cumulus.store.maps import ensure_maps_table
from cumulus.store.registry import (
    DROPPED,
    FULL,
    M3,
    SQL,
    RegisteredView,
    append_row,
    dropped,
    ensure_views_table,
    is_registered,
    live,
    registry,
)
from cumulus.store.tables import AUDIT, STABLE, Home, tag_name

log = logging.getLogger("cumulus.views")


def latest_closed_epoch(reader, settings: Settings, rows=None) -> int | None:
    """The newest closed (or published) epoch; `rows`: the ledger rows when read already."""
    rows = ledger_rows(reader, settings) if rows is None else rows
    closed = [r.epoch for r in rows if r.state in (CLOSED, PUBLISHED)]
    return max(closed) if closed else None


def backfill(
    home: Home, plan: BatchPlan, maps: list[str], name: str, epoch: int | None
) -> int:
    """Evaluate the program over base.* (each tuple an insert of its multiplicity) from an
    empty state, the statements `maps` need only, and write the deltas of `maps`."""
    plan = restricted(plan, set(maps))
    deltas, _ = evaluate_from_base(home, plan, tag_name(epoch) if epoch is not None else None)
    record = ApplyRecord(
        batch_id=f"backfill-{name}", kind="backfill", epoch=epoch or 0, source_id=0, status="started",
        ingest_batches=[], events_snapshots={}, read_snapshot=None,
    )
    if deltas is not None:
        deltas = deltas.where(deltas["map"].isin(maps))
    return write_deltas(home, record, deltas).rows


def add_view(
    home: Home, schema: Schema, name: str, sql: str, kind: str = SQL,
    force: bool = False,
) -> Compilation:
    """Register a view (`kind` sql: a SELECT) or a hand-written M3 program (`kind` m3),
    create the tables of the maps it adds and back-fill them. Returns the compilation of
    everything registered. Refused (ViewError) when its maps' estimated entries per base
    row pass `max_entries_per_base_row`, unless `force` (check_state)."""
    ensure_views_table(home)
    ensure_applies_table(home)
    with catalog_lock(home.settings, f"view add {name}"):
        rows = registry(home.spark, home.settings)
        if any(v.name == name for v in live(rows)):
            raise ViewError(f"a view named {name} is already registered (cumulus view show {name})")
        if name in dropped(rows):
            raise ViewError(
                f"a view named {name} was dropped; its name stays reserved (map names come from view names, "
                "and the tags of older epochs hold its maps under them): register it under another name"
            )
        if kind not in (SQL, M3, FULL):
            raise ViewError(f"unknown view kind {kind!r} (sql, full or m3)")
        new = RegisteredView(name, sql, kind, len(rows), 0, None)
        if kind == SQL:
            refusal = incremental_refusal(schema, rows, new, home.settings)  # raises when full refresh is refused
            if refusal is not None:
                new = full_refresh_of(home, schema, new, refusal)
        elif kind == FULL:
            new = replace(new, columns=full_view(home, schema, name, sql, "asked: view add --refresh full",
                                                 home.settings.sql_dialect).to_json())
        compiled = compile_registered(schema, rows + [new], home.settings.sql_dialect)
        before = compile_registered(schema, rows, home.settings.sql_dialect).checked.maps if rows else {}
        epoch = current_epoch(home.spark, home.settings)
        check_in_order(ledger_rows(home.spark, home.settings), epoch, f"view {name} cannot be added yet", home.settings)
        if any(r.kind == "apply" for r in apply_records(home.spark, home.settings, epoch)):
            raise ViewError(
                f"epoch {epoch} already has applied batches; close it first (cumulus epoch close), "
                "then add the view: it is back-filled from the closed state"
            )
        previous = compile_registered(schema, rows, home.settings.sql_dialect).program if live(rows) else None
        changed = program_changed(home.spark, home.settings, previous) if previous is not None else None
        if changed:
            raise ViewError(f"{changed}; close epoch {epoch} first (cumulus epoch close: it rebuilds every map from "
                            "base.*), then add the view")
        closed = latest_closed_epoch(home.spark, home.settings)
        if not force and closed is not None and name in compiled.views:
            check_state(home, compiled, name, closed)
        plan = batch_plan(compiled)
        added = [m for m in compiled.checked.maps if m not in before]
        ensure_maps_table(home, [compiled.checked.maps[m] for m in added])
        # Before the first close base.* is empty (a fold commits only inside a close,
        # and an interrupted close refuses view add above): nothing to back-fill.
        if closed is not None and batch_commit(home, f"backfill-{name}") is None:
            if new.kind == FULL:
                written = refresh_views(home, schema, [as_full_view(new)], closed, home.settings.sql_dialect,
                                        batch_id=f"backfill-{name}", tag=tag_name(closed))
            else:
                written = backfill(home, plan, added, name, closed)
            log.info("view %s: %d new maps, back-filled with %d rows from epoch %s", name, len(added), written, closed)
        if closed is not None:
            # The closed epoch's tag and ledger row now name the snapshot with the back-fill.
            snap = current_snapshot_id(home.spark, home.tables.maps)
            home.spark.sql(f"ALTER TABLE {home.tables.maps} CREATE OR REPLACE TAG `{tag_name(closed)}` AS OF VERSION {snap}")
            row = ledger_row(home.spark, home.settings, closed)
            if row is not None and row.snapshots.get(home.tables.maps) != snap:
                transition(home, closed, row.state, snapshots={**row.snapshots, home.tables.maps: snap})
            move_branch(home.spark, {home.tables.maps: snap}, AUDIT)
            shown = stable_epoch(home.settings, ledger_rows(home.spark, home.settings))
            if shown is not None and shown.epoch == closed:  # else the view is stable once that epoch is published
                move_branch(home.spark, {home.tables.maps: snap}, STABLE)
        carry_mark(home, previous, compiled.program)
        create_catalog_views(home, compiled, [name] if name in compiled.views else [])
        append_row(home, replace(new, added_epoch=closed or 0,
                                            added_at=dt.datetime.now(dt.UTC).replace(microsecond=0)))
        return compiled


def check_state(home: Home, compiled: Compilation, name: str, epoch: int) -> None:
    """Refuse the view (ViewError) when its maps' entries, estimated from base.* at
    `epoch` (cumulus/sql/estimate.py), pass max_entries_per_base_row per row of the
    relations it reads; the message names the largest map."""
    bound = float(home.settings.max_entries_per_base_row)
    if bound <= 0:
        return
    relations = {r for m in compiled.maps.values() for r in m.query.relations if r not in compiled.derived}
    columns = {r: compiled.schema.relation(r).column_names for r in relations}  # (a derived one: estimated from its view)
    stats = base_statistics(home, columns, epoch)
    view = estimate(compiled, stats)[name]
    log.info("view %s: its maps would hold about %d entries (%.2f per base row)", name, view.entries, view.per_base_row)
    if view.base_rows and view.per_base_row > bound:
        top = view.maps[0]
        raise ViewError(
            f"view {name}: its maps would hold about {view.entries:,} entries, {view.per_base_row:.1f} per row of the "
            f"relations it reads (more than max_entries_per_base_row = {bound:g}); the largest, "
            f"{top.name}[{', '.join(top.keys)}], about {top.entries:,}. See `cumulus explain --from-home`; add it anyway "
            "with `cumulus view add --force`, or raise the bound in cumulus.toml")


def incremental_refusal(schema: Schema, rows: list[RegisteredView], new: RegisteredView,
                        settings: Settings) -> PositionedError | None:
    """Why the view's SQL cannot be kept incrementally (the compiler's refusal: the
    construct and its position), or None when it can. A bind error (SQLBindError) is one
    too: the compiler's reading of SQL is narrower than Spark's (ORDER BY a column a plain
    view does not select, say), so the view may still be kept by full refresh; `add_view`
    raises it when Spark cannot run the query either. With `full_refresh = "refuse"` in
    cumulus.toml the refusal is raised instead of the view going to full refresh."""
    try:
        compile_registered(schema, rows + [new], settings.sql_dialect)
    except (UnsupportedSQLError, SQLBindError) as exc:
        if settings.full_refresh == "refuse":
            if isinstance(exc, SQLBindError):
                raise
            raise ViewError(f"view {new.name}: {reason_of(exc)} (full_refresh = \"refuse\" in cumulus.toml: no full "
                            "refresh)") from None
        return exc
    return None


def reason_of(refusal: PositionedError) -> str:
    """A refusal in one line: the construct and its position."""
    return str(refusal).splitlines()[0]


def full_refresh_of(home: Home, schema: Schema, new: RegisteredView, refusal: PositionedError) -> RegisteredView:
    """The view kept by full refresh, for `refusal`'s reason; a bind error the compiler
    raised is raised as it is when Spark cannot run the query either (its message names
    the place, Spark's the plan)."""
    reason = reason_of(refusal)
    try:
        columns = full_view(home, schema, new.name, new.sql, reason, home.settings.sql_dialect)
    except ViewError:
        if isinstance(refusal, SQLBindError):
            raise refusal from None
        raise
    log.info("view %s: kept by full refresh: %s", new.name, reason)
    return replace(new, kind=FULL, columns=columns.to_json())


@dataclass(frozen=True)
class Dropped:
    """What `view drop` did: the maps it removed (no other view needs them), the maps of
    the view it kept (other views need them), and whether the view was registered until
    now (False: a retry that only finished removing)."""

    name: str
    removed: list[str]
    shared: list[str]
    was_registered: bool


def drop_view(home: Home, schema: Schema, name: str) -> Dropped:
    """Drop a registered view (or hand-written program): a `dropped` row in the registry
    (so the view's name and its maps' names stay reserved: old epochs' tags read them),
    its catalog views (views.<name>, views_stable.<name>), and the rows of every map that
    no remaining view needs, in one delete commit of maps.entries (a metadata-only delete:
    a map is a partition). Maps other views share stay and keep being maintained. The
    tags and the stable branch keep what they read: `cumulus view sql` of an older epoch
    reads other views as before. Idempotent: a retry after a crash finds the view dropped
    and finishes removing what is left."""
    from pyspark.sql import functions as F

    ensure_views_table(home)
    with catalog_lock(home.settings, f"view drop {name}"):
        rows = registry(home.spark, home.settings)
        previous = compile_registered(schema, rows, home.settings.sql_dialect).program if live(rows) else None
        registered = is_registered(rows, name)
        if registered:
            marker = RegisteredView(name, "", DROPPED, len(rows), current_epoch(home.spark, home.settings),
                                    dt.datetime.now(dt.UTC).replace(microsecond=0))
            append_row(home, marker)
            rows = [*rows, marker]
        everything, programs = compile_all(schema, rows, home.settings.sql_dialect)
        kept = without(everything, programs, dropped(rows)).checked.maps
        shared = sorted(needed_maps(everything, [name], {}) & set(kept))
        unneeded = sorted(set(everything.checked.maps) - set(kept))  # of this view and of any dropped before
        removed: list[str] = []
        table = home.tables.maps
        if unneeded and home.spark.catalog.tableExists(table):
            present = home.spark.table(table).where(F.col("map").isin(unneeded)).select("map").distinct().collect()
            removed = sorted(r["map"] for r in present)
            if removed:
                names = ", ".join(spark_literal(Const(m, STRING)) for m in removed)
                home.spark.sql(f"DELETE FROM {table} WHERE map IN ({names})")
        if live(rows) and home.spark.catalog.tableExists(table):
            carry_mark(home, previous, compile_registered(schema, rows, home.settings.sql_dialect).program)
        for target in view_names(home.settings, name):
            home.spark.sql(f"DROP VIEW IF EXISTS {target}")
        home.spark.sql(f"DROP TABLE IF EXISTS {home.tables.results(name)}")  # its rows as a table, gone with it
        log.info("view %s: dropped; the rows of %d maps removed, %d maps kept (shared)", name, len(removed), len(shared))
        return Dropped(name, removed, shared, registered)
