"""Running dbt on a home: the command line and environment of `cumulus dbt ...`, and a
whole `dbt build` in one process whose result per model and test is read back from
dbt's run_results.json (what the cumulus_dbt DAG's task logs and returns).

One process matters: dbt-spark's session method starts a Spark driver inside the dbt
process, so a process per model pays a JVM start per model."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from cumulus.config import Settings
from cumulus.dbt.profile import dbt_dir, dbt_env, dbt_executable, write_profile
from cumulus.errors import CumulusError

# dbt's exit statuses: 1 = a model or test failed (the data's verdict), 2 = dbt itself
# failed (a bad profile, a crash, an unreachable catalog: worth a retry).
DATA_FAILED, DBT_FAILED = 1, 2


def invocation(settings: Settings, epoch: int | None, command: str, rest: list[str]) -> tuple[list[str], dict[str, str]]:
    """The dbt command line and environment for `cumulus dbt [--epoch N] COMMAND REST...`."""
    import yaml

    argv = [dbt_executable(), command, *rest]
    if epoch is not None:
        if "--vars" in rest:
            raise CumulusError("give the epoch either as --epoch or inside --vars, not both")
        argv += ["--vars", yaml.safe_dump({"epoch": epoch}, default_flow_style=True).strip()]
    return argv, {**os.environ, **dbt_env(settings)}


@dataclass(frozen=True)
class NodeResult:
    """One model, test or seed of a dbt run, from run_results.json."""

    name: str
    kind: str  # model, test, unit_test, seed, ...
    status: str  # success, pass, fail, error, warn, skipped
    seconds: float
    message: str

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "error")


def run_results(settings: Settings) -> list[NodeResult]:
    """The nodes of the last dbt run on the home, in the order dbt ran them."""
    path = dbt_dir(settings) / "target" / "run_results.json"
    if not path.is_file():
        return []
    nodes = []
    for r in json.loads(path.read_text()).get("results", []):
        # model.<package>.<name>, test.<package>.<name>.<hash>, unit_test.<package>.<model>.<name>
        kind, _, *rest = r["unique_id"].split(".")
        name = ".".join(rest[:-1] if kind == "test" and len(rest) > 1 else rest)
        nodes.append(NodeResult(
            name=name, kind=kind, status=str(r.get("status")),
            seconds=round(float(r.get("execution_time") or 0), 2), message=str(r.get("message") or ""),
        ))
    return nodes


def build(settings: Settings, epoch: int | None, echo: Callable[[str], None] = print) -> tuple[int, list[NodeResult]]:
    """One `dbt build` of the whole project on the home (the profile written first), its
    output passed line by line to `echo`; (dbt's exit status, the nodes it ran)."""
    write_profile(settings)
    stale = dbt_dir(settings) / "target" / "run_results.json"
    stale.unlink(missing_ok=True)  # a crash before dbt writes it must not report the last run
    argv, env = invocation(settings, epoch, "build", [])
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          stdin=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            echo(line.rstrip("\n"))
    return proc.returncode, run_results(settings)
