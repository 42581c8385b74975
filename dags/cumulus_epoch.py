"""cumulus_epoch: one run per epoch (its data interval), the paper's periodic consistency.

    epoch ─> sources ─> source[i]: wait ─> ingest ─> apply ─┐   (mapped per source)
                                                            └─> close ─> validate ─> publish

- `epoch` maps the run to its Cumulus epoch: the `epoch` param (trigger form, or
  `--conf '{"epoch": N}'`); else, for a backfill or with `[pipeline] catchup = true`, the
  interval (the k-th interval after `start` is epoch `first_epoch + k - 1`); else the
  open epoch (a scheduled run without catchup, a manual run). The ledger is
  authoritative: a sealed epoch is not ingested again (a rerun: close resumes an
  interrupted close, validate reruns unless the epoch is published; publish emits only
  after a validation of this run, so a rerun does not trigger dbt twice), an epoch
  after the open one fails until the earlier run has closed it.
- `wait` (deferred to the triggerer: no worker or pool slot while it waits) waits for
  the source's folder of the epoch (its ready marker) for at most `late_timeout`; then it
  is skipped and the epoch closes without the source; close records the folder in the ledger's `late_files` and the next runs
  ingest it.
- ingest / apply / close / validate are Spark jobs (cumulus.jobs.<job> via spark-submit),
  in the pool `[pipeline] pool` (1 slot: one catalog writer at a time).
- `publish` updates the asset cumulus_stable_snapshot (extra: epoch, tag, home) when
  validation passed; dags/cumulus_dbt.py is scheduled on it.

Configuration: `[pipeline]` of $CUMULUS_HOME/cumulus.toml or CUMULUS_PIPELINE_* (see
cumulus/config.py and docs/airflow.md).
"""

from __future__ import annotations

from airflow.sdk import (
    DAG,
    DeltaDataIntervalTimetable,
    Param,
    TriggerRule,
    task,
    task_group,
)

from cumulus.config import load_pipeline_config, pipeline_home
from cumulus.pipeline.assets import STABLE_SNAPSHOT
from cumulus.pipeline.operators import CumulusSparkJob, LandingWait

HOME = str(pipeline_home())
CFG = load_pipeline_config(HOME)


@task(multiple_outputs=True)
def epoch(home: str, **context) -> dict:
    from cumulus.pipeline.tasks import run_epoch

    return run_epoch(home, context)


@task
def sources(plan: dict) -> list[str]:
    return plan["sources"]


@task_group(group_id="source")
def per_source(source: str, epoch: int, state: str) -> None:
    ready = LandingWait(task_id="wait", home=HOME, epoch=epoch, state=state, source=source)
    ingest = CumulusSparkJob(
        task_id="ingest", job="ingest", home=HOME, epoch=epoch, source=source,
        pool=CFG.pool, trigger_rule=TriggerRule.NONE_FAILED,
    )
    # The apply runs unless the ingest failed: an ingest skipped because its files were
    # taken already (by an earlier try of it, or by the warm engine's micro-batches) still
    # leaves a batch to apply (issue 46).
    apply = CumulusSparkJob(task_id="apply", job="apply", home=HOME, epoch=epoch, source=source, pool=CFG.pool,
                            trigger_rule=TriggerRule.NONE_FAILED)
    ready >> ingest >> apply


@task(outlets=[STABLE_SNAPSHOT])
def publish(home: str, epoch: int, **context) -> dict:
    from cumulus.pipeline.tasks import published_extra

    extra = published_extra(home, epoch)
    context["outlet_events"][STABLE_SNAPSHOT].extra = extra
    return extra


with DAG(
    dag_id="cumulus_epoch",
    description="Close one Cumulus epoch per interval: ingest, apply, close, validate, publish",
    schedule=DeltaDataIntervalTimetable(CFG.epoch_interval),
    start_date=CFG.start,
    catchup=CFG.catchup,
    max_active_runs=1,
    default_args={"owner": "cumulus", "retries": CFG.retries, "retry_delay": CFG.retry_delay},
    tags=["cumulus", "epoch"],
    params={"epoch": Param(
        None, type=["null", "integer"], minimum=1, title="Epoch",
        description="The Cumulus epoch this run ingests, closes and validates; empty: the open epoch "
        "(or, for a backfill or with catchup on, the epoch of the run's data interval).",
    )},
    doc_md=__doc__,
) as dag:
    plan = epoch(HOME)
    groups = per_source.partial(epoch=plan["epoch"], state=plan["state"]).expand(source=sources(plan))
    close = CumulusSparkJob(
        task_id="close", job="close", home=HOME, epoch=plan["epoch"], pool=CFG.pool,
        trigger_rule=TriggerRule.NONE_FAILED, depends_on_past=True,
    )
    validate = CumulusSparkJob(
        task_id="validate", job="validate", home=HOME, epoch=plan["epoch"], pool=CFG.pool,
        trigger_rule=TriggerRule.NONE_FAILED,
    )
    groups >> close >> validate >> publish(HOME, plan["epoch"])
