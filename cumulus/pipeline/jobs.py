"""The pipeline's Spark steps (cumulus.jobs: `python -m cumulus.jobs.<job>`): their names, their arguments decided at
run time from the ledger and the landing folders (cumulus.ingest.landing), so a rerun
of any step is safe, and how a step runs inside a warm process. No Airflow here: the
operators (cumulus.pipeline.operators) and the warm engine (cumulus.pipeline.server)
both use it."""

from __future__ import annotations

import importlib

from cumulus.jobs import JOB_NAMES, check_job, job_file
from cumulus.store.catalog import pyiceberg_catalog

__all__ = ["JOB_NAMES", "check_job", "job_arguments", "job_file", "run_job"]


def job_arguments(job: str, settings, cfg, epoch: int | None, source: str | None,
                  mode: str = "epoch", plan=None) -> tuple[list[str], str | None]:
    """(arguments of cumulus.jobs.<job>, None) or ([], why the step has nothing to do).
    `plan`: the epoch's plan when the caller has read it already (plan_epoch)."""
    from cumulus.ingest.landing import CLOSED, FAILED, PUBLISHED, plan_epoch

    home = ["--home", str(settings.home)]
    if job == "maintenance":
        return home, None
    plan = plan or plan_epoch(pyiceberg_catalog(settings), settings, cfg, epoch)
    n = plan.epoch
    if job == "ingest":
        if mode == "epoch" and not plan.is_open:
            return [], f"epoch {n} is {plan.state}: sealed, its late files go to the open epoch {plan.open_epoch}"
        paths = plan.source(source).paths(require_ready=(mode == "epoch"))
        if not paths:
            return [], f"no new files of source {source} for epoch {n}"
        return [*home, "--source", source, *paths], None
    if job == "apply":
        if not plan.is_open:
            return [], f"epoch {n} is {plan.state}: its close applied every batch"
        return [*home, "--source", source, "--epoch", str(n)], None
    if job == "close":
        if plan.state in (CLOSED, PUBLISHED, FAILED):
            return [], f"epoch {n} is already {plan.state}"
        return [*home, "--epoch", str(n)], None
    if job == "validate":
        if plan.state == PUBLISHED:
            return [], f"epoch {n} is already published"
        return [*home, "--epoch", str(n)], None
    raise ValueError(job)


def run_job(job: str, args: list[str]) -> int:
    """Run cumulus.jobs.<job>'s main(args) in this process (the warm engine's way: the
    job's Engine.open returns the process's warm engine); its exit status."""
    module = importlib.import_module(f"cumulus.jobs.{check_job(job)}")
    try:
        return int(module.main(args) or 0)
    except SystemExit as exc:  # argparse refusing the arguments
        return exc.code if isinstance(exc.code, int) else 2
