"""The Python steps of the DAGs (the Spark steps are CumulusSparkJob, the landing wait is
LandingWait): which epoch a run is, which sources it maps over, what publish emits.
They read with PyIceberg (no JVM) and raise Airflow's skip / fail exceptions, so the DAG
files stay declarations."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

from cumulus.config import load_settings
from cumulus.store.catalog import pyiceberg_catalog

log = logging.getLogger("cumulus.pipeline")


def _home(home: str):
    settings = load_settings(home)
    return settings, settings.pipeline


def run_epoch(home: str, context: Mapping[str, Any]) -> dict[str, Any]:
    """The epoch of a DAG run (cumulus.ingest.landing.run_epoch_choice: the `epoch`
    param, else the data interval's epoch for a backfill or with catchup on, else the
    open epoch); then the ledger decides what is left to do (plan_epoch)."""
    from cumulus.ingest.landing import plan_epoch, run_epoch_choice

    settings, cfg = _home(home)
    run = context.get("dag_run")
    epoch, why = run_epoch_choice(
        cfg, (context.get("params") or {}).get("epoch"), getattr(run, "run_type", "") or "",
        context.get("data_interval_end"),
    )
    plan = plan_epoch(pyiceberg_catalog(settings), settings, cfg, epoch)
    log.info("run -> epoch %d (%s); ledger: epoch %d is %s, open epoch %d", plan.epoch, why, plan.epoch,
             plan.state, plan.open_epoch)
    for work in plan.sources:
        log.info("epoch %d source %s: folder %s ready=%s untaken=%d carried=%s", plan.epoch, work.source,
                 work.folder, work.ready, len(work.untaken), work.carried or "-")
    return {"epoch": plan.epoch, "state": plan.state, "home": str(settings.home),
            "sources": [w.source for w in plan.sources], "interval": list(plan.interval)}


def open_sources(home: str) -> list[str]:
    """Sources with files of the open epoch not taken yet (the micro-batch's work)."""
    from cumulus.ingest.landing import plan_epoch

    settings, cfg = _home(home)
    plan = plan_epoch(pyiceberg_catalog(settings), settings, cfg)
    busy = [w.source for w in plan.sources if w.paths(require_ready=False)]
    log.info("open epoch %d: new files from %s", plan.epoch, ", ".join(busy) or "no source")
    return busy


def published_extra(home: str, epoch: int) -> dict[str, Any]:
    """The asset event's extra for a published epoch; fails the task otherwise (a failed
    validation stops the asset, so dbt never builds on an unvalidated snapshot)."""
    from airflow.sdk.exceptions import AirflowFailException

    from cumulus.ingest.landing import PUBLISHED
    from cumulus.store.ledger import ledger_row

    settings, _ = _home(home)
    row = ledger_row(pyiceberg_catalog(settings), settings, epoch)
    if row is None or row.state != PUBLISHED:
        state = row.state if row else "missing"
        detail = f": {row.validation_detail}" if row and row.validation_detail else ""
        raise AirflowFailException(
            f"epoch {epoch} is {state}, not published{detail}; report: {settings.home / 'reports' / f'epoch-{epoch}'}"
        )
    published = row.published_at.isoformat() if isinstance(row.published_at, dt.datetime) else None
    extra = {"epoch": epoch, "tag": f"epoch-{epoch}", "home": str(settings.home), "published_at": published}
    log.info("epoch %d published: asset extra %s", epoch, extra)
    return extra
