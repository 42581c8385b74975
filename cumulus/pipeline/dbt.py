"""What the dbt DAG (dags/cumulus_dbt.py) needs besides cosmos: the epoch to read, taken
from the stable-snapshot asset events that triggered the run, and the environment of its
dbt processes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cumulus.config import Settings


def stable_epoch(triggering_asset_events: Mapping[Any, Iterable[Any]] | None) -> str:
    """The newest epoch among the triggering events' extras ({"epoch": N, "tag": "epoch-N"}),
    as text for the dbt var; "" when there is none (a manual run: the dbt project then
    reads the latest published epoch from the ledger). Several events can trigger one run
    (epochs published while dbt was busy): the newest snapshot holds them all."""
    epochs = []
    for events in (triggering_asset_events or {}).values():
        for event in events:
            extra = getattr(event, "extra", None) or {}
            epoch = extra.get("epoch")
            if epoch is None and str(extra.get("tag", "")).startswith("epoch-"):
                epoch = str(extra["tag"]).removeprefix("epoch-")
            if epoch is not None and str(epoch).isdigit():
                epochs.append(int(epoch))
    return str(max(epochs)) if epochs else ""


def dbt_task_env(settings: Settings) -> dict[str, str]:
    """Environment of the dbt processes cosmos starts: the home (for CUMULUS_* settings),
    and what a local Spark driver needs (cosmos passes --project-dir and --profiles-dir)."""
    from cumulus.dbt.profile import dbt_env

    keep = ("CUMULUS_HOME", "CUMULUS_CATALOG", "PYSPARK_PYTHON", "SPARK_LOCAL_IP", "DBT_SEND_ANONYMOUS_USAGE_STATS")
    return {k: v for k, v in dbt_env(settings).items() if k in keep}
