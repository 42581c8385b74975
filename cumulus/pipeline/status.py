"""What the Airflow UI plugin shows, as plain data: the ledger (every epoch's state,
counts, timings, validation and report) and every view's stable snapshot (its epoch,
row count and age) and main-branch freshness. Read with PyIceberg: no JVM, so it runs
inside Airflow's API server."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any

from cumulus.config import Settings
from cumulus.errors import CumulusError

TIMING_KEYS = ("apply_s", "repair_s", "fold_s", "compact_maps_s", "tag_s")


@dataclass(frozen=True)
class EpochStatus:
    epoch: int
    state: str
    opened_at: str | None
    sealed_at: str | None
    closed_at: str | None
    published_at: str | None
    events: int | None
    rejected: int | None
    files: int | None
    batches: int | None
    deltas: int | None
    close_seconds: float | None  # the close job's steps (metrics)
    open_seconds: float | None  # opened -> sealed
    validation: str | None
    validation_detail: str | None
    report: str | None  # path of the report folder's index.html relative to <home>/reports
    late: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class ViewStatus:
    name: str
    stable_epoch: int | None
    stable_rows: int | None
    stable_closed_at: str | None
    stable_age_s: float | None
    fresh_as_of: str | None  # the newest commit to any of its maps (main branch)
    fresh_age_s: float | None
    error: str | None = None


def _iso(value) -> str | None:
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).isoformat()
    return None


def _age(value, now: dt.datetime) -> float | None:
    if not isinstance(value, dt.datetime):
        return None
    value = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return round((now - value).total_seconds(), 1)


def epoch_statuses(catalog, settings: Settings) -> list[EpochStatus]:
    from cumulus.store.files import epoch_counts
    from cumulus.store.ledger import OPEN, ledger_rows

    out = []
    for row in ledger_rows(catalog, settings):
        counts = {"events": row.events, "rejected": row.rejected, "files": row.files, "batches": row.batches}
        if row.state == OPEN or row.events is None:
            live = epoch_counts(catalog, settings, row.epoch)
            counts = {k: live[k] for k in counts}
        metrics = row.metrics or {}
        timings = [metrics[k] for k in TIMING_KEYS if isinstance(metrics.get(k), int | float)]
        index = settings.home / "reports" / f"epoch-{row.epoch}" / "index.html"
        open_s = None
        if row.opened_at and row.sealed_at:
            open_s = round((row.sealed_at - row.opened_at).total_seconds(), 1)
        out.append(EpochStatus(
            epoch=row.epoch, state=row.state, opened_at=_iso(row.opened_at), sealed_at=_iso(row.sealed_at),
            closed_at=_iso(row.closed_at), published_at=_iso(row.published_at),
            deltas=metrics.get("deltas"), close_seconds=round(sum(timings), 1) if timings else None,
            open_seconds=open_s, validation=row.validation, validation_detail=row.validation_detail,
            report=f"epoch-{row.epoch}/index.html" if index.is_file() else None,
            late=list(row.late_files or []), **counts,
        ))
    return out


def view_statuses(catalog, settings: Settings, now: dt.datetime | None = None) -> list[ViewStatus]:
    from cumulus.engine.views import latest_closed_epoch
    from cumulus.read import At, Reader
    from cumulus.store.ledger import ledger_row
    from cumulus.store.maps import ENTRIES
    from cumulus.store.tables import MAPS

    now = now or dt.datetime.now(dt.UTC)
    reader = Reader(settings)
    try:
        compiled = reader.compilation
    except CumulusError as exc:  # no view registered yet: nothing to show, say why
        return [ViewStatus("-", None, None, None, None, None, None, error=str(exc))]
    stable = latest_closed_epoch(catalog, settings)
    closed_at = ledger_row(catalog, settings, stable).closed_at if stable else None
    # Every map is in maps.entries: the views are as fresh as its latest commit.
    snap = catalog.load_table(f"{MAPS}.{ENTRIES}").current_snapshot()
    newest = dt.datetime.fromtimestamp(snap.timestamp_ms / 1000, dt.UTC) if snap is not None else None
    out = []
    for name in compiled.views:
        rows = error = None
        if stable is not None:
            try:
                rows = len(reader.read_view(name, At(stable)))
            except CumulusError as exc:  # a view added after the stable epoch has no tag there
                error = str(exc)
        out.append(ViewStatus(
            name=name, stable_epoch=stable, stable_rows=rows, stable_closed_at=_iso(closed_at),
            stable_age_s=_age(closed_at, now), fresh_as_of=_iso(newest), fresh_age_s=_age(newest, now),
            error=error,
        ))
    return out


def pipeline_status(settings: Settings) -> dict[str, Any]:
    from cumulus.store.catalog import pyiceberg_catalog
    from cumulus.store.ledger import current_epoch

    catalog = pyiceberg_catalog(settings)
    return {
        "home": str(settings.home),
        "open_epoch": current_epoch(catalog, settings),
        "epochs": [asdict(e) for e in epoch_statuses(catalog, settings)],
        "views": [asdict(v) for v in view_statuses(catalog, settings)],
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
