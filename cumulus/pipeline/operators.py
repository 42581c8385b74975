"""The pipeline's operators: LandingWait, the deferrable wait for a source's landing
folder, and CumulusSparkJob, the operator of the Spark steps: SparkSubmitOperator running one of the
`spark_jobs/` entry points, with its arguments decided at run time from the ledger and
the landing folders (cumulus.pipeline.epochs), so a rerun of any task is safe.

spark-submit starts the JVM before Python runs, so the jars (the list
`cumulus.spark.jars.spark_jars` gives) go on its command line. The master comes from
the Airflow connection `[pipeline] spark_conn_id` (conn type `spark`, host `local[*]` or
`spark://host:7077`); when no such connection is defined the Cumulus settings' master is
used, so the embedded default needs no Airflow setup. The job's session is built by
`cumulus.spark.session.spark_session` from the same settings: keep the connection's
master and `spark_master` of cumulus.toml equal.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowNotFoundException,
    AirflowSkipException,
)

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "spark_jobs"
JOB_NAMES = ("ingest", "apply", "close", "validate", "maintenance")


class LandingWait(BaseOperator):
    """Wait for the source's landing folder of the epoch to be ready, deferred to the
    triggerer (cumulus.pipeline.triggers.LandingReadyTrigger: no worker or pool slot
    while waiting). Not ready after `[pipeline] late_timeout`: skipped, and the epoch
    closes without the source (close records the folder as late). A sealed epoch has
    nothing to wait for: skipped at once."""

    template_fields = ("epoch", "state", "source", "home")

    def __init__(self, *, home: str, epoch: Any, state: Any, source: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.home, self.epoch, self.state, self.source = home, epoch, state, source

    def execute(self, context: Any) -> None:
        import time

        from cumulus.config import load_settings
        from cumulus.ingest.sources import get_source
        from cumulus.pipeline.config import load_pipeline_config
        from cumulus.pipeline.epochs import OPEN, is_ready, landing_folder
        from cumulus.pipeline.triggers import LandingReadyTrigger

        epoch = int(self.epoch)
        if self.state != OPEN:
            raise AirflowSkipException(f"epoch {epoch} is {self.state}: nothing to wait for")
        settings, cfg = load_settings(self.home), load_pipeline_config(self.home)
        folder = landing_folder(cfg, get_source(settings, self.source).landing, epoch)
        if is_ready(cfg, folder):
            self.log.info("epoch %d source %s: %s is ready", epoch, self.source, folder)
            return
        self.log.info("epoch %d source %s: waiting for %s (%s), late after %s", epoch, self.source, folder,
                      cfg.ready_marker or "any file", cfg.late_timeout)
        trigger = LandingReadyTrigger(str(folder), cfg.ready_marker, cfg.poke_interval.total_seconds(),
                                      time.time() + cfg.late_timeout.total_seconds())
        self.defer(trigger=trigger, method_name="execute_complete")

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None) -> None:
        if not (event or {}).get("ready"):
            raise AirflowSkipException(
                f"epoch {self.epoch} source {self.source}: its folder is not ready after late_timeout; "
                "the epoch closes without it and the next epoch takes its files"
            )
        self.log.info("epoch %s source %s: ready", self.epoch, self.source)


class CumulusSparkJob(SparkSubmitOperator):
    """Run `spark_jobs/<job>.py` for an epoch (and a source) of the home.

    `mode` (ingest only): "epoch" takes the epoch's folder once it is ready, plus late
    folders of earlier epochs; "microbatch" takes whatever files of the open epoch's
    folder have landed. `final_exit_codes`: exit statuses that fail the task without
    retries (validate exits 1 when the data failed validation: retrying cannot help).
    The task is skipped, without starting Spark, when there is nothing to do."""

    template_fields = (*SparkSubmitOperator.template_fields, "epoch", "source", "home")

    def __init__(
        self,
        *,
        job: str,
        home: str,
        epoch: Any = None,
        source: Any = None,
        mode: str = "epoch",
        job_args: list[str] | None = None,
        final_exit_codes: tuple[int, ...] = (),
        **kwargs: Any,
    ) -> None:
        if job not in JOB_NAMES:
            raise ValueError(f"unknown Cumulus Spark job {job!r} (jobs: {', '.join(JOB_NAMES)})")
        kwargs.setdefault("name", f"cumulus-{job}")
        super().__init__(application=str(JOBS / f"{job}.py"), **kwargs)
        self.job = job
        self.home = home
        self.epoch = epoch
        self.source = source
        self.mode = mode
        self.job_args = list(job_args or [])
        self.final_exit_codes = tuple(final_exit_codes)

    def execute(self, context: Any) -> None:
        from cumulus.config import load_settings
        from cumulus.pipeline.config import load_pipeline_config
        from cumulus.spark.jars import spark_jars

        settings = load_settings(self.home)
        cfg = load_pipeline_config(self.home)
        epoch = None if self.epoch in (None, "", "None") else int(self.epoch)
        args, skip = job_arguments(self.job, settings, cfg, epoch, self.source, self.mode)
        if skip:
            self.log.info("epoch %s source %s: %s: skipped (%s)", epoch, self.source or "-", self.job, skip)
            raise AirflowSkipException(skip)
        self.application_args = [*args, *self.job_args]
        self.jars = ",".join(str(p) for p in spark_jars(settings.catalog_uri))
        self.env_vars = {**job_environment(settings), **(self.env_vars or {})}
        ensure_spark_connection(self.conn_id, settings.spark_master)
        self.log.info("epoch %s source %s: %s: spark-submit %s %s", epoch, self.source or "-", self.job,
                      self.application, " ".join(self.application_args))
        try:
            super().execute(context)
        except AirflowException as exc:
            process = getattr(self._hook, "_submit_sp", None)
            code = getattr(process, "returncode", None)
            if code in self.final_exit_codes:
                raise AirflowFailException(
                    f"epoch {epoch}: {self.job} exited {code}: final, not retried ({exc})"
                ) from exc
            raise

    @property
    def conn_id(self) -> str:
        return self._conn_id


def job_environment(settings) -> dict[str, str]:
    """What the spark-submit process needs: the venv's Python for the driver and the
    workers, its bin on PATH (spark-submit itself), the home, loopback for local Spark."""
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "CUMULUS_HOME": str(settings.home),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    if settings.is_local:
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def ensure_spark_connection(conn_id: str, master: str) -> None:
    """Define the connection from the Cumulus settings when Airflow has none by that id
    (as if AIRFLOW_CONN_<ID> were set), so the spark-submit master is Cumulus's."""
    from airflow.sdk import BaseHook

    try:
        BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps({"conn_type": "spark", "host": master})


def job_arguments(job: str, settings, cfg, epoch: int | None, source: str | None,
                  mode: str = "epoch") -> tuple[list[str], str | None]:
    """(arguments of spark_jobs/<job>.py, None) or ([], why the step has nothing to do)."""
    from cumulus.pipeline.epochs import CLOSED, FAILED, PUBLISHED, plan_epoch
    from cumulus.store.catalog import pyiceberg_catalog

    home = ["--home", str(settings.home)]
    if job == "maintenance":
        return home, None
    catalog = pyiceberg_catalog(settings)
    plan = plan_epoch(catalog, settings, cfg, epoch)
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
