"""Publish: the tags a close leaves (`epoch-N` on maps.entries and every base table,
`tag_tables`), the branches readers that do not name an epoch read, and the step that
makes an epoch the stable snapshot (write-audit-publish).

- The close tags `epoch-N` and points every tagged table's `audit` branch there: the
  epoch's validation reads it (its tag, the same snapshot).
- `publish_ready` publishes: under `publish = "validated"` (the default) every closed
  epoch that passed validation becomes `published` in the ledger, in epoch order, once
  every epoch before it is published; then every table's `stable` branch moves to the
  latest published epoch. A failed epoch holds the later ones (they pass, stay `closed`
  with validation `passed`, and are published as soon as it is): `accept_failed`
  publishes a failed epoch with the operator's reason in the ledger
  (`cumulus epoch publish N --accept-failed --reason ...`); a fix and a new validation
  does it as well. Under `publish = "closed"` the close moves `stable` itself.
- The ledger row is the publish point; the branches follow. A crash between them is
  mended by the next close or publish (`mend_branches`), which moves every branch found
  behind. Moving a branch is a metadata commit; no data is read or written.
- Every registered view is an Iceberg view in the catalog, twice: `views.<name>` over
  the maps' main branch (fresh, eventually consistent) and `views_stable.<name>` over
  their `stable` branch (consistent, validated), each the SQL `cumulus view sql` prints,
  so Spark SQL, beeline, a BI tool or dbt read a view by name. `cumulus view sql NAME
  --epoch N` stays for older epochs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.engine.apply import current_snapshot_id
from cumulus.engine.results import results_epoch, write_results
from cumulus.errors import EpochOrderError, NoSuchEpochError, PublishError
from cumulus.faults import fault_point
from cumulus.parallel import for_each
from cumulus.spark.local import local_frame
from cumulus.sql.mapsql import quote, view_sql
from cumulus.sql.views import Compilation
from cumulus.store.commit import table_metadata
from cumulus.store.ledger import (
    CLOSED,
    DONE,
    FAILED,
    PUBLISHED,
    LedgerRow,
    ledger_row,
    ledger_rows,
    transition,
)
from cumulus.store.lock import catalog_lock
from cumulus.store.tables import AUDIT, STABLE, VIEWS, VIEWS_STABLE, Home, tag_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("cumulus.publish")

# The ledger's `validation` of an epoch that passed, and of a failed one an operator
# accepted (cumulus/quality/summary.py names the outcomes; the store cannot import it).
PASSED, PASSED_ACCEPTED = "passed", "accepted"


def move_branch(spark: SparkSession, snapshots: Mapping[str, int], branch: str = STABLE) -> int:
    """Point `branch` of each table at its snapshot; tables whose branch is there already
    are left alone. Returns the branches moved."""
    moved = 0
    for table, snap in snapshots.items():
        ref = table_metadata(spark, table).get("refs", {}).get(branch, {})
        if ref.get("snapshot-id") == snap:
            continue
        spark.sql(f"ALTER TABLE {table} CREATE OR REPLACE BRANCH `{branch}` AS OF VERSION {snap}")
        moved += 1
    return moved


def _latest(rows: list[LedgerRow], states: tuple[str, ...]) -> LedgerRow | None:
    """The newest row in one of `states` that names its tables' snapshots."""
    return max((r for r in rows if r.state in states and r.snapshots), key=lambda r: r.epoch, default=None)


def stable_epoch(settings: Settings, rows: list[LedgerRow]) -> LedgerRow | None:
    """The ledger row of the epoch `stable` shows: the latest published one (or, under
    `publish = "closed"`, the latest closed one)."""
    return _latest(rows, (PUBLISHED,) if settings.publish == "validated" else DONE)


def mend_branches(home: Home, rows: list[LedgerRow]) -> None:
    """Move `audit` to the latest closed epoch and `stable` to the stable epoch where a
    crash left them behind their ledger rows (each a no-op when they are there)."""
    for row, branch in ((_latest(rows, DONE), AUDIT), (stable_epoch(home.settings, rows), STABLE)):
        if row is not None:
            move_branch(home.spark, {k: int(v) for k, v in row.snapshots.items()}, branch)


def mend_results(home: Home, rows: list[LedgerRow]) -> None:
    """Write results.<view> for the stable epoch if a crash left them behind it."""
    shown = stable_epoch(home.settings, rows)
    if shown is not None and shown.epoch > results_epoch(home):
        write_results(home, shown.epoch)


def publish_ready(home: Home) -> LedgerRow | None:
    """Publish every epoch that may be, in order, and move `stable` to the latest
    published (module doc); its ledger row (None while none is). Idempotent."""
    with catalog_lock(home.settings, "publish"):
        rows = ledger_rows(home.spark, home.settings)
        for row in rows:
            if row.state == PUBLISHED:
                continue
            if not (home.settings.publish == "validated" and row.state == CLOSED
                    and row.validation in (PASSED, PASSED_ACCEPTED)):
                break  # not validated, failed or not closed: every later epoch waits
            transition(home, row.epoch, PUBLISHED)
            fault_point("publish.after-ledger")
            log.info("epoch %d published", row.epoch)
        rows = ledger_rows(home.spark, home.settings)
        written = results_epoch(home)
        for row in rows:  # results.<view> of every published epoch that lacks them (a crash)
            if row.state == PUBLISHED and row.epoch > written:
                write_results(home, row.epoch)
        mend_branches(home, rows)
        return stable_epoch(home.settings, rows)


def holding(rows: list[LedgerRow], epoch: int) -> LedgerRow | None:
    """The epoch before `epoch` that holds its publication (the first not published)."""
    return next((r for r in rows if r.epoch < epoch and r.state != PUBLISHED), None)


def accept_failed(home: Home, epoch: int, reason: str) -> LedgerRow | None:
    """Publish a failed epoch as it is, the operator's `reason` in its ledger row, then
    the epochs it held; the stable epoch's row afterwards."""
    if not reason.strip():
        raise PublishError("--accept-failed needs a --reason (it is kept in the ledger row)")
    row = ledger_row(home.spark, home.settings, epoch)
    if row is None:
        raise NoSuchEpochError(f"epoch {epoch} is not in the ledger (see cumulus epoch status)")
    if row.state == FAILED:
        detail = f"accepted despite failed validation: {reason.strip()}; was: {row.validation_detail or '-'}"
        with catalog_lock(home.settings, f"publish epoch {epoch}"):
            transition(home, epoch, CLOSED, validation=PASSED_ACCEPTED, validation_detail=detail)
    elif row.state != PUBLISHED:
        raise PublishError(f"epoch {epoch} is {row.state}"
                           f"{f' (validation {row.validation})' if row.validation else ''}, not failed: "
                           "--accept-failed takes an epoch that failed validation")
    blocker = holding(ledger_rows(home.spark, home.settings), epoch)
    if blocker is not None:
        raise EpochOrderError(f"epoch {epoch} is accepted but waits for epoch {blocker.epoch} ({blocker.state}"
                              f"{f', validation {blocker.validation}' if blocker.validation else ''}): "
                              "epochs are published in order")
    return publish_ready(home)


def view_names(settings: Settings, name: str) -> tuple[str, str]:
    """The catalog views of a registered view: (fresh, stable)."""
    return tuple(f"{settings.catalog}.{ns}.{quote(name)}" for ns in (VIEWS, VIEWS_STABLE))  # type: ignore[return-value]


def create_catalog_views(
    home: Home, compilation: Compilation, names: Iterable[str] | None = None
) -> None:
    """Create (or replace) `views.<name>` and `views_stable.<name>` for the views."""
    for ns in (VIEWS, VIEWS_STABLE):
        home.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {home.catalog}.{ns}")
    for name in names if names is not None else compilation.views:
        fresh, stable = view_names(home.settings, name)
        for target, version in ((fresh, None), (stable, STABLE)):
            sql = view_sql(compilation, name, version, catalog=home.catalog, order=False)
            home.spark.sql(f"CREATE OR REPLACE VIEW {target} AS {sql}")
        log.info("view %s: readable as %s (fresh) and %s (stable)", name, fresh, stable)


def ensure_snapshot(spark: SparkSession, table: str) -> int:
    """The table's current snapshot, committing an empty append first if it has none."""
    snap = current_snapshot_id(spark, table)
    if snap is None:
        local_frame(spark, [], spark.table(table).schema).writeTo(table).append()
        snap = current_snapshot_id(spark, table)
    assert snap is not None
    return snap


def tag_tables(spark: SparkSession, tables: list[str], epoch: int, workers: int = 1) -> dict[str, int]:
    """Tag each table's current snapshot `epoch-N` (replacing a tag left by a crashed try)."""

    def tag(table: str) -> int:
        snap = ensure_snapshot(spark, table)
        spark.sql(f"ALTER TABLE {table} CREATE OR REPLACE TAG `{tag_name(epoch)}` AS OF VERSION {snap}")
        return snap

    return for_each(tag, tables, workers, f"epoch {epoch} tags")
