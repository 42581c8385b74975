"""cumulus_maintenance: keep the tables small and the history bounded.

    maintenance   (cumulus.jobs.maintenance: `cumulus maintenance`)

Every `[pipeline] maintenance_interval`: compact small data files (Iceberg
rewrite_data_files, when `[pipeline] compact`), then expire snapshots except the tagged
ones (`epoch-N`: stable snapshots never expire), the newest `retain_last` per table, the
ones younger than `retain_for`, and any an unclosed epoch may still need. One Spark job
in the catalog pool, so it never commits at the same time as an ingest, apply or close.
"""

from __future__ import annotations

from airflow.sdk import DAG, DeltaTriggerTimetable

from cumulus.config import load_pipeline_config, pipeline_home
from cumulus.pipeline.operators import CumulusSparkJob

HOME = str(pipeline_home())
CFG = load_pipeline_config(HOME)

with DAG(
    dag_id="cumulus_maintenance",
    description="Compact small files and expire snapshots no tag or retention keeps",
    schedule=DeltaTriggerTimetable(CFG.maintenance_interval),
    start_date=CFG.start,
    catchup=False,
    max_active_runs=1,
    default_args={"owner": "cumulus", "retries": CFG.retries, "retry_delay": CFG.retry_delay},
    tags=["cumulus", "maintenance"],
    doc_md=__doc__,
) as dag:
    CumulusSparkJob(
        task_id="maintenance", job="maintenance", home=HOME, pool=CFG.pool,
        job_args=["--retain-last", str(CFG.retain_last), "--retain-for", f"{CFG.retain_for.total_seconds():.0f}s",
                  "--compact" if CFG.compact else "--no-compact"],
    )
