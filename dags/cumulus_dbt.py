"""cumulus_dbt: the dbt project (dbt_project.yml, models/) on every published stable snapshot.

    build    one `dbt build`: every model and test, in dbt's order, one dbt process

Scheduled on the STABLE_SNAPSHOT asset that cumulus_epoch's publish task emits; the
epoch in the triggering asset event becomes the dbt var `epoch`, so the models read tag
epoch-N. A manual run builds the `epoch` param, else the latest published epoch.

One dbt process per run: dbt-spark's session method starts a Spark driver inside dbt,
so a task per model would start a JVM per model. The task's log lists every model and
test with its status and seconds (dbt's run_results.json), and its return value (XCom)
holds them. A failed model or test fails the task without retries; dbt failing to run
is retried. Nothing is written or run while this file is parsed: the task writes the
dbt profile (<home>/dbt/profiles.yml) from the Cumulus settings when it runs.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Param, task

from cumulus.config import pipeline_home
from cumulus.pipeline.assets import STABLE_SNAPSHOT

HOME = str(pipeline_home())


@task(retries=2, retry_delay=timedelta(seconds=30))
def build(home: str, **context) -> dict:
    from cumulus.pipeline.dbt import build_task

    return build_task(home, context)


with DAG(
    dag_id="cumulus_dbt",
    description="dbt marts on each published Cumulus epoch (tag epoch-N), one dbt build",
    schedule=[STABLE_SNAPSHOT],
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["cumulus", "dbt"],
    default_args={"owner": "cumulus", "retries": 2, "retry_delay": timedelta(seconds=30)},
    params={"epoch": Param(
        None, type=["null", "integer"], minimum=1, title="Epoch",
        description="The published epoch to build on; empty: the triggering snapshot's, else the latest published.",
    )},
    doc_md=__doc__,
) as dag:
    build(HOME)
