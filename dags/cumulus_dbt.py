"""The Airflow DAG `cumulus_dbt`: dbt on every published stable snapshot. The dbt project
(models/) is rendered by astronomer-cosmos, one task per model (`dbt build` of the model
and its tests; a test of several models runs after all of them), scheduled on the
STABLE_SNAPSHOT asset that the epoch DAG's publish task emits. The epoch in the
triggering asset event becomes the dbt var `epoch`, so the models read tag epoch-N; a
manual run reads the latest published epoch.

The dbt profile is written from the Cumulus settings ($CUMULUS_HOME, cumulus.toml) to
<home>/dbt/profiles.yml (cumulus.dbt.profile), only when it changes. Cosmos caches the
`dbt ls` it parses the project with in an Airflow Variable."""

from __future__ import annotations

from datetime import datetime, timedelta

from cosmos import DbtDag, ExecutionConfig, ProfileConfig, ProjectConfig, RenderConfig
from cosmos.constants import ExecutionMode, InvocationMode, LoadMode, TestBehavior

from cumulus.config import load_settings
from cumulus.dbt.profile import PROFILE, TARGET, dbt_executable, project_dir, write_profile
from cumulus.pipeline.assets import STABLE_SNAPSHOT
from cumulus.pipeline.dbt import dbt_task_env, stable_epoch

settings = load_settings()

cumulus_dbt = DbtDag(
    dag_id="cumulus_dbt",
    description="dbt marts on each published Cumulus epoch (tag epoch-N)",
    schedule=[STABLE_SNAPSHOT],
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["cumulus", "dbt"],
    default_args={"owner": "cumulus", "retries": 2, "retry_delay": timedelta(seconds=30)},
    user_defined_macros={"stable_epoch": stable_epoch},
    project_config=ProjectConfig(project_dir()),
    profile_config=ProfileConfig(
        profile_name=PROFILE, target_name=TARGET, profiles_yml_filepath=write_profile(settings)
    ),
    execution_config=ExecutionConfig(
        execution_mode=ExecutionMode.LOCAL,
        invocation_mode=InvocationMode.SUBPROCESS,  # one dbt process (and Spark driver) per task
        dbt_executable_path=dbt_executable(),
    ),
    render_config=RenderConfig(
        load_method=LoadMode.DBT_LS,
        test_behavior=TestBehavior.BUILD,
        should_detach_multiple_parents_tests=True,
    ),
    operator_args={
        "vars": {"epoch": "{{ stable_epoch(triggering_asset_events) }}"},
        "env": dbt_task_env(settings),
        "append_env": True,
        "install_deps": False,
    },
)
