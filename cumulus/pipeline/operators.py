"""The pipeline's operators: LandingWait, the deferrable wait for a source's landing
folder, and CumulusSparkJob, the operator of the Spark steps: one of the `cumulus.jobs`
entry points with its arguments decided at run time from the ledger and the landing
folders (cumulus.pipeline.jobs), so a rerun of any task is safe. When the home's warm
engine runs (`cumulus engine serve`), the step is handed to it and the task follows its
log; otherwise the task runs it with spark-submit (SparkSubmitOperator), same result.

spark-submit starts the JVM before Python runs, so the jars and the driver's options
(`cumulus.spark.session.jar_conf` and `driver_java_options`) go on its command line. The master comes from
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

from cumulus.config import load_settings
from cumulus.errors import CumulusError, ExitCode
from cumulus.ingest.sources import get_source
from cumulus.pipeline.client import find_engine
from cumulus.pipeline.jobs import check_job, job_arguments, job_file
from cumulus.pipeline.triggers import EngineStepTrigger, LandingReadyTrigger
from cumulus.spark.session import driver_java_options, jar_conf

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the cumulus package


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

        from cumulus.ingest.landing import OPEN, is_ready, landing_folder

        epoch = int(self.epoch)
        if self.state != OPEN:
            raise AirflowSkipException(f"epoch {epoch} is {self.state}: nothing to wait for")
        settings = load_settings(self.home)
        cfg = settings.pipeline
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
    """Run `cumulus.jobs.<job>` (spark-submit of its file) for an epoch (and a source) of the home.

    `mode` (ingest only): "epoch" takes the epoch's folder once it is ready, plus late
    folders of earlier epochs; "microbatch" takes whatever files of the open epoch's
    folder have landed. `final_exit_codes`: exit statuses that fail the task without
    retries (errors.ExitCode.final(): a verdict such as validate's 1, the data failed its
    checks, or a refused input; a retry cannot change it).
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
        final_exit_codes: tuple[int, ...] = ExitCode.final(),
        **kwargs: Any,
    ) -> None:
        check_job(job)
        kwargs.setdefault("name", f"cumulus-{job}")
        super().__init__(application=str(job_file(job)), **kwargs)
        self.job = job
        self.home = home
        self.epoch = epoch
        self.source = source
        self.mode = mode
        self.job_args = list(job_args or [])
        self.final_exit_codes = tuple(final_exit_codes)

    def execute(self, context: Any) -> None:
        settings = load_settings(self.home)
        cfg = settings.pipeline
        epoch = None if self.epoch in (None, "", "None") else int(self.epoch)
        args, skip = job_arguments(self.job, settings, cfg, epoch, self.source, self.mode)
        if skip:
            self.log.info("epoch %s source %s: %s: skipped (%s)", epoch, self.source or "-", self.job, skip)
            raise AirflowSkipException(skip)
        self.application_args = [*args, *self.job_args]
        if self._handed_to_engine(context, settings, cfg.engine_wait.total_seconds(), epoch):
            return
        # The driver JVM starts before the job's Python builds its session: its class path
        # and options (the class-data archive) go on the command line.
        self.conf = {**jar_conf(settings), "spark.driver.extraJavaOptions": driver_java_options(settings),
                     **(self.conf or {})}
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

    def _handed_to_engine(self, context: Any, settings, wait_s: float, epoch: int | None) -> bool:
        """Hand the step to the home's warm engine when one answers. The task follows it
        for `wait_s` seconds (`[pipeline] engine_wait`: a warm step takes seconds, and a
        deferral costs a trigger's round trip and a new task process), then defers until
        it is done (cumulus.pipeline.triggers.EngineStepTrigger streams the rest of its log
        into this task's; no worker or pool slot is held meanwhile). False when no engine
        runs: the task spark-submits the step itself."""
        client = find_engine(settings)
        if client is None:
            return False
        step_id = client.submit(self.job, self.application_args)
        self.log.info("epoch %s source %s: %s: handed to the warm engine at %s as step %d: %s", epoch,
                      self.source or "-", self.job, client.url, step_id, " ".join(self.application_args))
        shown: list[str] = []  # the step's log lines so far (their count: the trigger's offset)

        def echo(line: str) -> None:
            shown.append(line)
            self.log.info("%s", line)

        try:
            code = client.follow(step_id, echo, poll=0.25, seconds=wait_s) if wait_s > 0 else None
        except CumulusError:  # not answering: the trigger has the patience for that
            code = None
        if code is not None:
            self.engine_step_done(context, {"exit": code}, epoch)
            return True
        self.defer(trigger=EngineStepTrigger(client.url, step_id, offset=len(shown)), method_name="engine_step_done",
                   kwargs={"epoch": epoch})
        return True  # not reached: defer raises

    def engine_step_done(self, context: Any, event: dict[str, Any] | None = None, epoch: int | None = None) -> None:
        """Resumed after the engine's step: its exit status decides, as spark-submit's would."""
        event = event or {}
        if "error" in event:
            raise AirflowException(f"epoch {epoch}: {self.job}: {event['error']}; a retry runs it again (itself, "
                                   "if the engine stays down)")
        code = int(event["exit"])
        self.log.info("epoch %s source %s: %s: the warm engine's step exited %d", epoch, self.source or "-",
                      self.job, code)
        if code in self.final_exit_codes:
            raise AirflowFailException(f"epoch {epoch}: {self.job} exited {code}: final, not retried")
        if code != 0:
            raise AirflowException(f"epoch {epoch}: {self.job} exited {code} in the warm engine")

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
        # the folder that holds this cumulus package (a checkout or site-packages)
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")])),
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
