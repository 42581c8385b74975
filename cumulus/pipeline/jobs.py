"""The pipeline's Spark steps (spark_jobs/*.py): their names, their arguments decided at
run time from the ledger and the landing folders (cumulus.pipeline.epochs), so a rerun
of any step is safe, and how a step runs inside a warm process. No Airflow here: the
operators (cumulus.pipeline.operators) and the warm engine (cumulus.pipeline.server)
both use it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "spark_jobs"
JOB_NAMES = ("ingest", "apply", "close", "validate", "maintenance")


def check_job(job: str) -> str:
    """`job` if it names a Spark step; ValueError otherwise."""
    if job not in JOB_NAMES:
        raise ValueError(f"unknown Cumulus Spark job {job!r} (jobs: {', '.join(JOB_NAMES)})")
    return job


def job_arguments(job: str, settings, cfg, epoch: int | None, source: str | None,
                  mode: str = "epoch", plan=None) -> tuple[list[str], str | None]:
    """(arguments of spark_jobs/<job>.py, None) or ([], why the step has nothing to do).
    `plan`: the epoch's plan when the caller has read it already (plan_epoch)."""
    from cumulus.pipeline.epochs import CLOSED, FAILED, PUBLISHED, plan_epoch
    from cumulus.store.catalog import pyiceberg_catalog

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
    """Run spark_jobs/<job>.py's main(args) in this process (the warm engine's way: the
    job's Engine.open returns the process's warm engine); its exit status."""
    spec = importlib.util.spec_from_file_location(f"cumulus_job_{job}", JOBS / f"{check_job(job)}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return int(module.main(args) or 0)
    except SystemExit as exc:  # argparse refusing the arguments
        return exc.code if isinstance(exc.code, int) else 2
