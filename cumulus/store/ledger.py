"""The ledger: one row per epoch, and the only place the current epoch lives. It is
stored append-only in `cumulus.ledger_log`: every change of an epoch's row appends the
whole new row with the next `revision`, so a transition is one small append commit (no
copy-on-write MERGE), and an epoch's row is its latest revision. `cumulus.ledger`, an
Iceberg view over the log, shows those latest rows to SQL and dbt; maintenance compacts
the log to them. Init opens epoch 1; ingestion appends to the open epoch; the engine moves an
epoch through its states and writing the ledger row is its atomic publish point.

    open ──> applied ──> closed ──> published
      └──────────────────>  └────> failed-validation ──> closed | published

`open`: takes input (exactly one epoch is open at a time). `applied`: sealed, takes no
more input, every batch applied. `closed`: repaired, folded into base.*, tagged.
`published` / `failed-validation`: the outcome of validation.

Leaving `open` opens the next epoch in the same commit, so there is never a moment
without an open epoch, and input that arrives while epoch N closes goes to N+1.

Epochs close in order: no epoch is sealed or closed while an earlier one is still open
or sealed but not closed (`applied`: its close was interrupted). A close that picks its
epoch by default takes that interrupted one first (`epoch_to_close`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cumulus.config import Settings
from cumulus.errors import EpochOrderError, NoSuchEpochError, StoreError
from cumulus.spark.local import local_frame
from cumulus.store.commit import commit_properties
from cumulus.store.lock import catalog_lock
from cumulus.store.rows import Reader, is_spark, read_rows
from cumulus.store.tables import (
    LEDGER_COLUMNS,
    Home,
    attach_catalog,
    ddl_type,
    tables_of,
)

log = logging.getLogger("cumulus.ledger")

OPEN, APPLIED, CLOSED, PUBLISHED, FAILED = (
    "open",
    "applied",
    "closed",
    "published",
    "failed-validation",
)
STATES = (OPEN, APPLIED, CLOSED, PUBLISHED, FAILED)
NEXT_STATES: Mapping[str, tuple[str, ...]] = {
    OPEN: (APPLIED, CLOSED),
    APPLIED: (CLOSED,),
    CLOSED: (PUBLISHED, FAILED),
    FAILED: (CLOSED, PUBLISHED),
    PUBLISHED: (),
}
DONE = (CLOSED, PUBLISHED, FAILED)  # a stable snapshot exists
JSON_FIELDS = ("snapshots", "metrics", "late_files")
FIELDS = tuple(name for name, _ in LEDGER_COLUMNS)


@dataclass(frozen=True)
class LedgerRow:
    epoch: int
    state: str
    revision: int = 0  # the log's order (the latest revision of an epoch is its row)
    opened_at: dt.datetime | None = None
    sealed_at: dt.datetime | None = None
    closed_at: dt.datetime | None = None
    published_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None
    events: int | None = None
    rejected: int | None = None
    files: int | None = None
    batches: int | None = None
    snapshots: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
    validation: str | None = None
    validation_detail: str | None = None
    late_files: Any = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> LedgerRow:
        values = {name: row.get(name) for name in FIELDS}
        for name in JSON_FIELDS:
            text = values[name]
            values[name] = json.loads(text) if text else ({} if name != "late_files" else None)
        return cls(**values)

    def as_row(self) -> tuple:
        values = []
        for name in FIELDS:
            value = getattr(self, name)
            if name in JSON_FIELDS:
                value = json.dumps(value, sort_keys=True, default=str) if value else None
            values.append(value)
        return tuple(values)


def ledger_rows(reader: Reader, settings: Settings) -> list[LedgerRow]:
    """Every epoch's row, oldest first. `reader`: a SparkSession or PyIceberg catalog."""
    return _latest(_log_rows(reader, settings))


def ledger_row(reader: Reader, settings: Settings, epoch: int) -> LedgerRow | None:
    rows = _latest(_log_rows(reader, settings, {"epoch": epoch}))
    return rows[0] if rows else None


def _log_rows(reader: Reader, settings: Settings, where: Mapping[str, Any] | None = None) -> list[LedgerRow]:
    if is_spark(reader):
        attach_catalog(Home(reader, settings))
    return [LedgerRow.from_row(r) for r in read_rows(reader, tables_of(settings).ledger_log, where)]


def _latest(revisions: list[LedgerRow]) -> list[LedgerRow]:
    """Each epoch's latest revision, oldest epoch first."""
    latest: dict[int, LedgerRow] = {}
    for row in revisions:
        if row.epoch not in latest or row.revision > latest[row.epoch].revision:
            latest[row.epoch] = row
    return sorted(latest.values(), key=lambda r: r.epoch)


def current_epoch(reader: Reader, settings: Settings) -> int:
    """The open epoch (the one ingestion appends to). Raises StoreError if none is open:
    the home is not initialized."""
    return open_epoch(ledger_rows(reader, settings), settings)


def open_epoch(rows: list[LedgerRow], settings: Settings) -> int:
    """The one open epoch among the ledger rows (StoreError if there is none, or several)."""
    open_epochs = [r.epoch for r in rows if r.state == OPEN]
    if not open_epochs:
        raise StoreError(
            f"no open epoch in {tables_of(settings).ledger_log}: initialize the home first "
            f"(cumulus --home {settings.home} init --schema SCHEMA.sql)"
        )
    if len(open_epochs) > 1:
        raise StoreError(f"several open epochs in the ledger ({open_epochs}); fix the ledger")
    return open_epochs[0]


def epoch_to_close(reader: Reader, settings: Settings) -> tuple[int, str]:
    """The epoch a close without an explicit epoch takes, and why (see `next_to_close`)."""
    return next_to_close(ledger_rows(reader, settings), settings)


def next_to_close(rows: list[LedgerRow], settings: Settings) -> tuple[int, str]:
    """The oldest epoch that is sealed but not closed (a close was interrupted after
    sealing it), else the open one; and why. Closing the open epoch first would seal it
    behind the interrupted one."""
    sealed = min((r.epoch for r in rows if r.state == APPLIED), default=None)
    if sealed is not None:
        return sealed, "sealed but not closed: resuming its interrupted close"
    return open_epoch(rows, settings), "the open epoch"


def check_in_order(rows: list[LedgerRow], epoch: int, refused: str, settings: Settings) -> None:
    """Raise EpochOrderError if an epoch before `epoch` is not closed yet. `refused` says
    what cannot happen, e.g. "epoch 4 cannot be closed"."""
    first = min((r for r in rows if r.epoch < epoch and r.state not in DONE), key=lambda r: r.epoch, default=None)
    if first is not None:
        why = "open" if first.state == OPEN else "sealed but not closed (its close was interrupted)"
        raise EpochOrderError(
            f"{refused}: epoch {first.epoch} is {why}; epochs close in order, so close it "
            f"first (cumulus --home {settings.home} epoch close --epoch {first.epoch})"
        )


def open_first_epoch(home: Home) -> LedgerRow:
    """Open epoch 1 if the ledger is empty (init); otherwise leave it as it is."""
    with catalog_lock(home.settings, "open epoch 1"):
        rows = ledger_rows(home.spark, home.settings)
        if rows:
            return rows[-1]
        now = _now()
        row = LedgerRow(epoch=1, state=OPEN, revision=1, opened_at=now, updated_at=now)
        _append(home, [row], {"cumulus.ledger-epoch": 1, "cumulus.ledger-state": OPEN})
        log.info("epoch 1 opened")
        return row


def transition(
    home: Home, epoch: int, state: str, **fields: Any
) -> LedgerRow:
    """Move `epoch` to `state`, setting any other ledger fields given (events, rejected,
    files, batches, snapshots (dict), metrics (dict), validation, validation_detail,
    late_files). Timestamps are set here: sealed_at when it leaves `open` (the next epoch
    is opened in the same commit), closed_at on `closed`, published_at on `published`.
    Re-entering the state the epoch is already in only updates the fields (idempotent
    retries). Sealing or closing an epoch while an earlier one is not closed raises
    EpochOrderError. Takes the catalog lock; returns the new row."""
    if state not in STATES:
        raise StoreError(f"unknown epoch state {state!r} (states: {', '.join(STATES)})")
    unknown = sorted(set(fields) - set(FIELDS) | ({"epoch", "state", "revision"} & set(fields)))
    if unknown:
        raise StoreError(f"not ledger fields: {', '.join(unknown)}")
    with catalog_lock(home.settings, f"ledger: epoch {epoch} -> {state}"):
        ordered = ledger_rows(home.spark, home.settings)
        rows = {r.epoch: r for r in ordered}
        row = rows.get(epoch)
        if row is None:
            raise NoSuchEpochError(f"epoch {epoch} is not in the ledger (epochs: {sorted(rows)})")
        if state != row.state and state not in NEXT_STATES[row.state]:
            allowed = ", ".join(NEXT_STATES[row.state]) or "none"
            raise StoreError(
                f"epoch {epoch} is {row.state}; it cannot become {state} (next: {allowed})"
            )
        if row.state in (OPEN, APPLIED) and state in (APPLIED, CLOSED):
            verb = "sealed" if state == APPLIED else "closed"
            check_in_order(ordered, epoch, f"epoch {epoch} cannot be {verb}", home.settings)
        now = _now()
        revision = max(r.revision for r in ordered) + 1
        changes: dict[str, Any] = dict(fields, state=state, revision=revision, updated_at=now)
        if row.state == OPEN and state != OPEN:
            changes["sealed_at"] = now
        if state == CLOSED and row.state != CLOSED:
            changes["closed_at"] = now
        if state == PUBLISHED and row.state != PUBLISHED:
            changes["published_at"] = now
        new_rows = [_replace(row, changes)]
        if row.state == OPEN and state != OPEN and epoch + 1 not in rows:
            new_rows.append(LedgerRow(epoch=epoch + 1, state=OPEN, revision=revision, opened_at=now, updated_at=now))
        _append(
            home, new_rows, {"cumulus.ledger-epoch": epoch, "cumulus.ledger-state": state}
        )
        log.info("epoch %d: %s -> %s", epoch, row.state, state)
        if len(new_rows) > 1:
            log.info("epoch %d opened", epoch + 1)
        return new_rows[0]


def _replace(row: LedgerRow, changes: Mapping[str, Any]) -> LedgerRow:
    values = {name: getattr(row, name) for name in FIELDS}
    values.update(changes)
    return LedgerRow(**values)


def _append(
    home: Home, rows: list[LedgerRow], props: Mapping[str, Any]
) -> None:
    """One append commit: the rows supersede the earlier revisions of their epochs."""
    df = local_frame(home.spark, [r.as_row() for r in rows], ddl_type(LEDGER_COLUMNS))
    with commit_properties(home.spark, props):
        df.writeTo(home.tables.ledger_log).append()


def compact_ledger(home: Home) -> int:
    """Rewrite the log as each epoch's latest row (maintenance): one overwrite commit
    that changes no epoch's row, so readers see the same ledger before and after. Takes
    the catalog lock; returns the rows dropped."""
    from pyspark.sql import functions as F

    with catalog_lock(home.settings, "compact the ledger"):
        revisions = _log_rows(home.spark, home.settings)
        latest = _latest(revisions)
        dropped = len(revisions) - len(latest)
        if dropped:
            df = local_frame(home.spark, [r.as_row() for r in latest], ddl_type(LEDGER_COLUMNS))
            with commit_properties(home.spark, {"cumulus.ledger-compacted": len(latest)}):
                df.writeTo(home.tables.ledger_log).overwrite(F.lit(True))
        return dropped


def _now() -> dt.datetime:
    """Now, to the millisecond: a warm engine seals and closes a small epoch within one
    second, and the lag between the two (status.stable_lag_s) must still show."""
    now = dt.datetime.now(dt.UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)
