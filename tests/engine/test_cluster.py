"""The pipeline on a real Spark standalone cluster (tests/sparkcluster.py: a master and
two workers on loopback, started with `spark-class`), the path a user takes when one
machine's `local[*]` is not enough. The kill loop's worker (tests/engine/killloop.py)
runs without kills on a home whose `spark_master` is the cluster: three sources ingested
in a random order (their files parsed in the executors' Python workers), applied, with
maintenance between the applies, and two epochs closed. Every closed epoch is verified as
after a kill: views equal DuckDB over the alive tuples, every event once, every bad row
once in the quarantine, every ingest batch applied once, tags and stable branches where
the ledger says. The executors of both workers must have run tasks."""

from __future__ import annotations

import os
import random

import pytest
from killloop import soak
from sparkcluster import standalone_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_the_pipeline_on_a_standalone_cluster_of_two_workers(spark, tmp_path) -> None:
    seed = int(os.environ.get("KILL_SEED", random.randrange(1_000_000)))
    print(f"seed {seed} (KILL_SEED={seed} replays the arrival order)")
    with standalone_cluster(tmp_path / "cluster", workers=2) as cluster:
        out = soak(0, seed, tmp_path / "run", max_delay=0.0, epochs_ahead=2, master=cluster.url,
                   spark=spark)
        tasks = cluster.tasks_per_worker()
        status = cluster.status()
        apps = status["completedapps"] + status["activeapps"]
    assert not out.failures, "\n".join(out.failures) + f"\n(seed {seed})"
    assert out.verified == [1, 2] and (out.lost, out.duplicated) == (0, 0), out.line()
    assert len(apps) == 1, apps  # the pipeline's run (the home is set up in this process's session)
    assert all(n > 0 for n in tasks), f"tasks per worker: {tasks}"
    print(out.line(), f"tasks per worker: {tasks}")
