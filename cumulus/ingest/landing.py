"""From an Airflow run to the work of a Cumulus epoch: which epoch a run is, which
landing folders belong to it, whether they are ready, what came late.

A run finds its epoch with `run_epoch_choice`: the DAG's `epoch` param when given; else,
for a backfill or when `[pipeline] catchup` is on (every interval since `start` gets a
run), by arithmetic on its data interval (`epoch_for_interval`: the k-th interval after
`start` is epoch `first_epoch + k - 1`); else (scheduled runs without catchup, manual
runs) the ledger's open epoch. The ledger stays authoritative (`plan_epoch`): if the epoch is the open one the run does its work; if it
is already sealed (a rerun, a backfill of the past), ingest and apply are skipped, close
only resumes an interrupted close, validate runs again unless the epoch is published,
publish emits the asset only after a validation in the same run; if an earlier epoch is still open the
run fails (and retries) until that epoch's run has closed it, so epochs close in order.

Landing: a source's folder of epoch N is `<landing>/<landing_layout>` (default
`epoch-{epoch}`); it is ready when it holds the ready marker (`_SUCCESS`). A folder that
is not ready, or not completely ingested, when its epoch closes is late: the close
records it in the ledger's `late_files`, and the runs of the following epochs offer it
to ingestion again until every file is taken (a file is taken once, by checksum, so
offering a folder twice is harmless).

Every function takes a `reader`: a SparkSession (inside Spark jobs) or a PyIceberg catalog
(in Airflow tasks: no JVM).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cumulus.config import PipelineConfig, Settings
from cumulus.errors import ConfigError, EpochOrderError, NoSuchSourceError, StoreError
from cumulus.ingest.sources import load_sources
from cumulus.store.files import DUPLICATE, INGESTED
from cumulus.store.ledger import current_epoch, ledger_rows
from cumulus.store.rows import read_rows
from cumulus.store.tables import tables_of

OPEN, APPLIED, CLOSED, PUBLISHED, FAILED = "open", "applied", "closed", "published", "failed-validation"
SEALED = (APPLIED, CLOSED, PUBLISHED, FAILED)


def epoch_for_interval(cfg: PipelineConfig, end: dt.datetime) -> int:
    """The epoch of the data interval that ends at `end`. An end that is not on the grid
    (a manual run at an odd time) belongs to the interval that contains it."""
    if end.tzinfo is None:
        end = end.replace(tzinfo=dt.UTC)
    if end <= cfg.start:
        raise ConfigError(
            f"the data interval ending {end.isoformat()} is not after [pipeline] start "
            f"{cfg.start.isoformat()}: no epoch maps to it"
        )
    # Seconds, not datetime arithmetic: Airflow passes pendulum datetimes.
    k = math.ceil((end.timestamp() - cfg.start.timestamp()) / cfg.epoch_interval.total_seconds() - 1e-9)
    return cfg.first_epoch + k - 1


def run_epoch_choice(
    cfg: PipelineConfig, param: Any, run_type: Any, interval_end: dt.datetime | None
) -> tuple[int | None, str]:
    """(the epoch a DAG run is, None for the open one; why): see the module doc. `run_type`
    as Airflow gives it: "backfill", or an enum such as DagRunType.BACKFILL_JOB."""
    if param not in (None, ""):
        return int(param), "the run's epoch param"
    backfill = str(getattr(run_type, "value", run_type)).lower() == "backfill"
    if interval_end is not None and (backfill or cfg.catchup):
        why = "a backfill" if backfill else "catchup"
        return epoch_for_interval(cfg, interval_end), f"{why}: the data interval ending {interval_end.isoformat()}"
    return None, "the open epoch"


def interval_of_epoch(cfg: PipelineConfig, epoch: int) -> tuple[dt.datetime, dt.datetime]:
    start = cfg.start + (epoch - cfg.first_epoch) * cfg.epoch_interval
    return start, start + cfg.epoch_interval


def landing_folder(cfg: PipelineConfig, landing: Path, epoch: int) -> Path:
    start, end = interval_of_epoch(cfg, epoch)
    name = cfg.landing_layout.format(
        epoch=epoch, start=start, end=end, ds=start.date().isoformat(),
        ts_nodash=start.strftime("%Y%m%dT%H%M%S"),
    )
    return (Path(landing) / name).resolve()


def landing_files(folder: Path) -> list[Path]:
    """The files ingestion would take from a folder (hidden and `_` names skipped)."""
    if not folder.is_dir():
        return []
    return sorted(
        p for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(folder).parts)
    )


def is_ready(cfg: PipelineConfig, folder: Path) -> bool:
    return folder_ready(folder, cfg.ready_marker)


def folder_ready(folder: Path, ready_marker: str) -> bool:
    """A folder is complete when it holds the ready marker (with no marker: any file)."""
    if not folder.is_dir():
        return False
    if ready_marker:
        return (folder / ready_marker).is_file()
    return bool(landing_files(folder))


def taken_paths(reader, settings: Settings) -> set[str]:
    """Paths of every file ingestion has taken (ingested, or a duplicate of a taken one)."""
    rows = read_rows(reader, tables_of(settings).files)
    return {r["path"] for r in rows if r["path"] and r["status"] in (INGESTED, DUPLICATE)}


@dataclass(frozen=True)
class SourceWork:
    """One source's input for an epoch's run."""

    source: str
    priority: int
    folder: str
    ready: bool
    untaken: list[str] = field(default_factory=list)  # the folder's files not taken yet
    carried: list[str] = field(default_factory=list)  # late folders of earlier epochs still untaken

    def paths(self, require_ready: bool = True) -> list[str]:
        """Folders to offer ingestion: the epoch's folder (when ready, or when files may be
        taken as they land: micro-batches) and the carried late folders."""
        own = self.folder if self.untaken and (self.ready or not require_ready) else None
        return ([own] if own else []) + list(self.carried)


@dataclass(frozen=True)
class EpochPlan:
    epoch: int
    state: str  # the epoch's ledger state
    open_epoch: int
    interval: tuple[str, str]
    sources: list[SourceWork]

    @property
    def is_open(self) -> bool:
        return self.state == OPEN

    def source(self, name: str) -> SourceWork:
        for s in self.sources:
            if s.source == name:
                return s
        raise NoSuchSourceError(f"unknown source {name!r} (sources: {', '.join(s.source for s in self.sources)})")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def ledger_state(reader, settings: Settings) -> tuple[dict[int, Any], int]:
    rows = {r.epoch: r for r in ledger_rows(reader, settings)}
    return rows, current_epoch(reader, settings)


def plan_epoch(reader, settings: Settings, cfg: PipelineConfig, epoch: int | None = None) -> EpochPlan:
    """What a run of `epoch` (default: the open one) has to do, from the ledger, the
    sources' landing folders and the file manifest. Raises EpochOrderError when an
    earlier epoch is still open."""
    rows, open_epoch = ledger_state(reader, settings)
    epoch = open_epoch if epoch is None else epoch
    if epoch > open_epoch:
        raise EpochOrderError(
            f"epoch {epoch} cannot run yet: epoch {open_epoch} is still open in {settings.home} "
            f"(its run must close it first; epochs close in order)"
        )
    row = rows.get(epoch)
    if row is None:
        raise StoreError(
            f"epoch {epoch} is before the home's first epoch ({min(rows)}); set [pipeline] "
            f"first_epoch / start so that the DAG's intervals map to the home's epochs"
        )
    taken = taken_paths(reader, settings)
    late = late_folders(rows.values(), before=epoch)
    works = []
    for src in sorted(load_sources(settings).values(), key=lambda s: s.priority):
        folder = landing_folder(cfg, src.landing, epoch)
        carried = [f for f in late.get(src.name, []) if f != str(folder) and _untaken(Path(f), taken)]
        works.append(SourceWork(
            source=src.name, priority=src.priority, folder=str(folder), ready=is_ready(cfg, folder),
            untaken=[str(p) for p in _untaken(folder, taken)], carried=carried,
        ))
    start, end = interval_of_epoch(cfg, epoch)
    return EpochPlan(epoch, row.state, open_epoch, (start.isoformat(), end.isoformat()), works)


def _untaken(folder: Path, taken: set[str]) -> list[Path]:
    return [p for p in landing_files(folder) if str(p) not in taken]


def late_folders(rows: Iterable[Any], before: int) -> dict[str, list[str]]:
    """Folders recorded late in the ledger rows of epochs before `before`, per source."""
    out: dict[str, list[str]] = {}
    for row in sorted(rows, key=lambda r: r.epoch):
        if row.epoch >= before:
            continue
        for entry in row.late_files or []:
            if entry.get("kind") == "late" and entry["folder"] not in out.setdefault(entry["source"], []):
                out[entry["source"]].append(entry["folder"])
    return out


def late_entries(reader, settings: Settings, cfg: PipelineConfig, epoch: int) -> list[dict[str, Any]]:
    """The ledger's `late_files` of `epoch`, computed once it is sealed: a `late` entry
    per folder that did not make it (its own folder not ready or not fully taken, or a
    late folder of an earlier epoch still untaken): they go to the next epoch; a
    `carried` entry per late folder of an earlier epoch whose files this epoch took."""
    plan = plan_epoch(reader, settings, cfg, epoch)
    rows, _ = ledger_state(reader, settings)
    earlier = late_folders(rows.values(), before=epoch)
    here = [r["path"] for r in read_rows(reader, tables_of(settings).files, {"epoch": epoch, "status": INGESTED})]
    waited = cfg.late_timeout.total_seconds()
    entries = []
    for work in plan.sources:
        if not work.ready or work.untaken:
            entries.append({
                "kind": "late", "source": work.source, "folder": work.folder, "ready": work.ready,
                "files": [Path(p).name for p in work.untaken], "waited_s": waited, "to_epoch": epoch + 1,
            })
        for folder in work.carried:
            entries.append({
                "kind": "late", "source": work.source, "folder": folder, "ready": is_ready(cfg, Path(folder)),
                "files": [p.name for p in landing_files(Path(folder))], "waited_s": waited, "to_epoch": epoch + 1,
            })
        for folder in earlier.get(work.source, []):
            got = sorted(Path(p).name for p in here if p and Path(folder) in Path(p).parents)
            if got:
                entries.append({"kind": "carried", "source": work.source, "folder": folder, "files": got})
    return entries
