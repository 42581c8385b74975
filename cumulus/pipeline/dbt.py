"""The dbt DAG's step (dags/cumulus_dbt.py): which epoch to build, from the stable-snapshot
asset events that triggered the run (or the run's `epoch` param), and one `dbt build` of
the whole project whose models and tests are listed in the task's log and returned."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from cumulus.dbt.run import DATA_FAILED

log = logging.getLogger("cumulus.pipeline")


def stable_epoch(triggering_asset_events: Mapping[Any, Iterable[Any]] | None) -> int | None:
    """The newest epoch among the triggering events' extras ({"epoch": N, "tag": "epoch-N"});
    None when there is none (a manual run: the dbt project then reads the latest
    published epoch from the ledger). Several events can trigger one run (epochs
    published while dbt was busy): the newest snapshot holds them all."""
    epochs = []
    for events in (triggering_asset_events or {}).values():
        for event in events:
            extra = getattr(event, "extra", None) or {}
            epoch = extra.get("epoch")
            if epoch is None and str(extra.get("tag", "")).startswith("epoch-"):
                epoch = str(extra["tag"]).removeprefix("epoch-")
            if epoch is not None and str(epoch).isdigit():
                epochs.append(int(epoch))
    return max(epochs) if epochs else None


def build_task(home: str, context: Mapping[str, Any]) -> dict[str, Any]:
    """`dbt build` of the project on the home's stable snapshot, in one dbt process: the
    epoch is the `epoch` param, else the triggering events' newest, else the latest
    published. A failed model or test fails the task without retries (the data's
    verdict); dbt failing to run at all is retried."""
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from cumulus.app import Engine

    engine = Engine.open(home)
    settings = engine.settings
    param = (context.get("params") or {}).get("epoch")
    epoch = int(param) if param not in (None, "") else stable_epoch(context.get("triggering_asset_events"))
    log.info("dbt build on %s at %s", settings.home, f"epoch {epoch}" if epoch else "the latest published epoch")
    code, nodes = engine.dbt_build(epoch, echo=log.info)
    for node in nodes:
        log.info("%-10s %-9s %6.2f s  %s%s", node.kind, node.status, node.seconds, node.name,
                 f": {node.message}" if node.failed else "")
    failed = [n.name for n in nodes if n.failed]
    summary = {"epoch": epoch, "exit": code, "nodes": {n.name: {"kind": n.kind, "status": n.status, "seconds": n.seconds}
                                                       for n in nodes}}
    if code == DATA_FAILED and failed:
        raise AirflowFailException(f"dbt build: {len(failed)} of {len(nodes)} models/tests failed: {', '.join(failed)}")
    if code != 0:
        raise AirflowException(f"dbt build exited {code} ({len(nodes)} nodes ran); see the log above")
    log.info("dbt build: %d models and tests, all passed", len(nodes))
    return summary
