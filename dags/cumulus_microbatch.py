"""cumulus_microbatch: fresh main-branch values within minutes, between epoch closes (the
paper's eventual consistency; Nikolov's refresh interval).

    new_files ─> batch[i]: ingest ─> apply        (mapped over sources with new files)

Every `[pipeline] microbatch_interval` it takes the files that have landed in each
source's folder of the open epoch (no ready marker needed; producers write a file
under a `_`/`.` name and rename it when complete) plus late folders of earlier epochs,
ingests them into the open epoch and applies them. cumulus_epoch closes the epoch on its
own, longer schedule; its ingest skips what the micro-batches already took (files are
taken once, by checksum). Both DAGs' committing tasks share the pool `[pipeline] pool`
(1 slot), so the embedded catalog sees one writer at a time. The trade-off (freshness
lag against Spark jobs per hour) is measured in docs/airflow.md.
"""

from __future__ import annotations

from airflow.sdk import DAG, DeltaTriggerTimetable, TriggerRule, task, task_group

from cumulus.config import load_pipeline_config, pipeline_home
from cumulus.pipeline.operators import CumulusSparkJob

HOME = str(pipeline_home())
CFG = load_pipeline_config(HOME)


@task
def new_files(home: str) -> list[str]:
    from cumulus.pipeline.tasks import open_sources

    return open_sources(home)


@task_group(group_id="batch")
def micro_batch(source: str) -> None:
    ingest = CumulusSparkJob(
        task_id="ingest", job="ingest", mode="microbatch", home=HOME, source=source, pool=CFG.pool,
    )
    # (also after an ingest skipped for want of new files: a retry of an ingest that had
    # taken them, its first try lost by Airflow, must still see them applied)
    apply = CumulusSparkJob(task_id="apply", job="apply", home=HOME, source=source, pool=CFG.pool,
                            trigger_rule=TriggerRule.NONE_FAILED)
    ingest >> apply


with DAG(
    dag_id="cumulus_microbatch",
    description="Ingest and apply new landing files every few minutes: fresh values on main",
    schedule=DeltaTriggerTimetable(CFG.microbatch_interval),
    start_date=CFG.start,
    catchup=False,
    max_active_runs=1,
    default_args={"owner": "cumulus", "retries": CFG.retries, "retry_delay": CFG.retry_delay},
    tags=["cumulus", "microbatch"],
    doc_md=__doc__,
) as dag:
    micro_batch.expand(source=new_files(HOME))
