"""What the Airflow UI plugin shows, as plain data: the ledger (every epoch's state,
counts, timings, validation and report: its page in the home's one Data Docs site) and
every view's stable snapshot (its epoch, row count and age) and main-branch freshness.
Read with PyIceberg: no JVM, so it runs inside Airflow's API server.

Kept per table version (the catalog's metadata location of each table, one query): the
epochs while the ledger and the manifest stay as they are, the compiled views while the
registry does, and a view's row count at a closed epoch for good (a tag never moves). A
page costs one catalog query when nothing changed, and one scan of the maps at the new
tag when an epoch closed."""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cumulus.config import Settings
from cumulus.errors import CumulusError
from cumulus.quality.summary import EPOCH_PAGE, report_dir, reports_root, site_dir
from cumulus.read import At, Reader
from cumulus.store.catalog import shared_catalog
from cumulus.store.files import epoch_counts
from cumulus.store.ledger import OPEN, ledger_rows, open_epoch
from cumulus.store.tables import tables_of

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
    report: str | None  # the epoch's report relative to <home>/reports (report_link)
    late: list[dict] = field(default_factory=list)
    step_seconds: dict[str, float] = field(default_factory=dict)  # the close's steps (TIMING_KEYS)
    stable_lag_s: float | None = None  # sealed -> closed: how long until the epoch was consistent


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
    refresh: str = "incremental"  # or "full", recomputed at each close
    refresh_reason: str = ""  # why full: the construct with no incremental form, or "asked"


def _iso(value) -> str | None:
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).isoformat()
    return None


def _age(value, now: dt.datetime) -> float | None:
    if not isinstance(value, dt.datetime):
        return None
    value = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return round((now - value).total_seconds(), 1)


def epoch_statuses(catalog, settings: Settings, rows=None) -> list[EpochStatus]:
    """Every epoch's status; `rows`: the ledger rows when the caller has read them."""
    out = []
    for row in ledger_rows(catalog, settings) if rows is None else rows:
        counts = {"events": row.events, "rejected": row.rejected, "files": row.files, "batches": row.batches}
        if row.state == OPEN or row.events is None:
            live = epoch_counts(catalog, settings, row.epoch)
            counts = {k: live[k] for k in counts}
        metrics = row.metrics or {}
        timings = [metrics[k] for k in TIMING_KEYS if isinstance(metrics.get(k), int | float)]
        open_s = None
        if row.opened_at and row.sealed_at:
            open_s = round((row.sealed_at - row.opened_at).total_seconds(), 1)
        out.append(EpochStatus(
            epoch=row.epoch, state=row.state, opened_at=_iso(row.opened_at), sealed_at=_iso(row.sealed_at),
            closed_at=_iso(row.closed_at), published_at=_iso(row.published_at),
            deltas=metrics.get("deltas"), close_seconds=round(sum(timings), 1) if timings else None,
            open_seconds=open_s, validation=row.validation, validation_detail=row.validation_detail,
            report=report_link(settings, row.epoch, row.validation_detail),
            late=list(row.late_files or []), **counts,
            step_seconds={k.removesuffix("_s"): round(float(metrics[k]), 3) for k in TIMING_KEYS
                          if isinstance(metrics.get(k), int | float)},
            stable_lag_s=round((row.closed_at - row.sealed_at).total_seconds(), 1)
            if row.closed_at and row.sealed_at else None,
        ))
    return out


def report_link(settings: Settings, epoch: int, validation_detail: str | None) -> str | None:
    """The epoch's report as a path relative to `<home>/reports` (what the plugin serves):
    the page in the Data Docs site the ledger row names, else the epoch folder's
    index.html (a home validated before the one site, or moved since: that page forwards
    by relative address); None when neither is on disk."""
    reports = reports_root(settings.home)
    try:
        page = json.loads(validation_detail or "{}").get("report")
    except (ValueError, AttributeError):
        page = None
    if page:
        relative = Path(os.path.relpath(page, reports))
        if relative.parts and relative.parts[0] != ".." and (reports / relative).is_file():
            return relative.as_posix()
    folder = report_dir(settings, epoch)
    return f"{folder.name}/{EPOCH_PAGE}" if (folder / EPOCH_PAGE).is_file() else None


def data_docs_link(settings: Settings) -> str | None:
    """The Data Docs site's index relative to `<home>/reports` (every epoch's
    validation), None before the first validation."""
    index = site_dir(settings.home) / "index.html"
    return index.relative_to(reports_root(settings.home)).as_posix() if index.is_file() else None


def view_statuses(
    catalog, settings: Settings, now: dt.datetime | None = None, rows=None, versions: dict[str, str] | None = None,
) -> list[ViewStatus]:
    """Every view's stable snapshot and freshness; `rows` and `versions`: the ledger rows
    and table_versions when the caller has read them."""
    from cumulus.engine.publish import stable_epoch

    now = now or dt.datetime.now(dt.UTC)
    versions = table_versions(catalog, settings) if versions is None else versions
    reader = _reader(catalog, settings, versions)
    try:
        compiled = reader.compilation
    except CumulusError as exc:  # no view registered yet: nothing to show, say why
        return [ViewStatus("-", None, None, None, None, None, None, error=str(exc))]
    rows = ledger_rows(catalog, settings) if rows is None else rows
    stable = stable_epoch(settings, rows)  # the latest published epoch (write-audit-publish)
    closed_at = stable.closed_at if stable else None
    # Every map is in maps.entries: the views are as fresh as its latest commit.
    newest = _memo(("fresh", settings.home, versions.get(tables_of(settings).maps.pyiceberg)), lambda: _newest_commit(catalog, settings))
    counts: dict[str, int | str] = {}
    if stable is not None:
        keys = {name: ("rows", settings.home, name, plan.sql, stable.epoch) for name, plan in compiled.views.items()}
        counts = {name: _MEMO[key] for name, key in keys.items() if key in _MEMO}
        missing = [name for name in compiled.views if name not in counts]
        if missing:
            try:
                entries = reader.all_entries(At(stable.epoch))
            except CumulusError as exc:
                entries, counts = None, {name: str(exc) for name in missing}
            for name in missing if entries else []:
                try:
                    counts[name] = len(reader.read_view(name, At(stable.epoch), entries=entries))
                except CumulusError as exc:  # a view added after the stable epoch has no maps there
                    counts[name] = str(exc)
                _remember(keys[name], counts[name])
    out = []
    for name in compiled.views:
        got = counts.get(name)
        out.append(ViewStatus(
            name=name, stable_epoch=stable.epoch if stable else None,
            stable_rows=got if isinstance(got, int) else None, stable_closed_at=_iso(closed_at),
            stable_age_s=_age(closed_at, now), fresh_as_of=_iso(newest), fresh_age_s=_age(newest, now),
            error=got if isinstance(got, str) else None,
            refresh=compiled.views[name].refresh, refresh_reason=compiled.views[name].refresh_reason,
        ))
    return out


def pipeline_status(settings: Settings, catalog=None) -> dict[str, Any]:
    if catalog is None:
        catalog = shared_catalog(settings)
    versions = table_versions(catalog, settings)
    ledger_key = ("ledger", settings.home, versions.get(tables_of(settings).ledger_log.pyiceberg),
                  versions.get(tables_of(settings).files.pyiceberg))
    rows = _memo(ledger_key, lambda: ledger_rows(catalog, settings))
    return {
        "home": str(settings.home),
        "open_epoch": open_epoch(rows, settings),
        "epochs": _memo((*ledger_key, "epochs"), lambda: [asdict(e) for e in epoch_statuses(catalog, settings, rows)]),
        "views": [asdict(v) for v in view_statuses(catalog, settings, rows=rows, versions=versions)],
        "data_docs": data_docs_link(settings),
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


# ---------------------------------------------------------------- kept per version

_MEMO: dict[tuple, Any] = {}
_KEPT = 4096


def _memo(key: tuple, compute):
    """compute(), kept under `key`: a key with a None part (a table's version unknown)
    keeps nothing."""
    if None in key:
        return compute()
    if key not in _MEMO:
        _remember(key, compute())
    return _MEMO[key]


def _remember(key: tuple, value: Any) -> None:
    if len(_MEMO) >= _KEPT:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[key] = value


def table_versions(catalog, settings: Settings) -> dict[str, str]:
    """Each table's current metadata location (`ns.name` -> location): a new one on every
    commit. One query of a SQL catalog's database; another catalog's tables are loaded."""
    from sqlalchemy import text

    engine = getattr(catalog, "engine", None)
    if engine is None:  # not a SqlCatalog: no version to key on, nothing is kept
        return {}
    with engine.connect() as con:
        rows = con.execute(
            text("SELECT table_namespace, table_name, metadata_location FROM iceberg_tables WHERE catalog_name = :c"),
            {"c": settings.catalog},
        ).fetchall()
    return {f"{ns}.{name}": location for ns, name, location in rows}


def _reader(catalog, settings: Settings, versions: dict[str, str]):
    """A Reader whose compiled views are kept while the registry keeps its version."""
    reader = Reader(settings, catalog)
    key = ("compiled", settings.home, versions.get(tables_of(settings).registry.pyiceberg))
    if key[2] is not None and key in _MEMO:
        reader.__dict__["compilation"] = _MEMO[key]
    elif key[2] is not None:
        try:
            _remember(key, reader.compilation)
        except CumulusError:
            pass
    return reader


def _newest_commit(catalog, settings) -> dt.datetime | None:
    snap = catalog.load_table(tables_of(settings).maps.pyiceberg).current_snapshot()
    return dt.datetime.fromtimestamp(snap.timestamp_ms / 1000, dt.UTC) if snap is not None else None
