"""The random kill loop (tests/engine/killloop.py) in CI: the pipeline's worker killed
with SIGKILL at 6 random instants, one of each kind of instant (KILLS=N to change; each
run draws new instants), resumed after each, every epoch
closed since verified (views equal DuckDB, every event once, every bad row once in the
quarantine, every ingest batch applied once, tags and stable branches where the ledger
says). Some kills land between a close's seal and its ledger row, where the rerun must
resume the sealed epoch. `make soak` runs 200 kills. The seed is printed; KILL_SEED=N
replays a run's kill instants."""

from __future__ import annotations

import os
import random

import pytest
from killloop import STEPS, kill_points, soak

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# One kill of each kind: a kill waits at the worker's start, in an ingest, an apply, a
# close, maintenance, or just after a close's seal (killloop.STEPS). A kill costs about
# 21 s alone and up to 37 s beside CI's other tests (a fresh worker JVM, and the steps
# before the one it waits for): a round by weight (12 kills) was 5-7 of CI's 37 minutes.
# Each CI run draws new instants; `make soak` runs 200 kills.
ROUND = len(STEPS)


def test_pipeline_killed_at_random_instants_loses_and_duplicates_nothing(spark, tmp_path) -> None:
    kills = int(os.environ.get("KILLS", ROUND))
    seed = int(os.environ.get("KILL_SEED", random.randrange(1_000_000)))
    print(f"kill seed {seed} (KILL_SEED={seed} replays it)")
    out = soak(kills, seed, tmp_path, max_delay=float(os.environ.get("KILL_MAX_DELAY", 6)), spark=spark)
    print(out.line(), f"kills per step: {dict(out.killed_in)}; {out.sealed} left an epoch sealed")
    assert not out.failures, "\n".join(out.failures) + f"\n(seed {seed})"
    assert out.kills == kills
    assert (out.lost, out.duplicated) == (0, 0), out.line()
    # (a sealed epoch's close resumed after its kill, and one more by the last run)
    assert len(out.verified) >= 2, f"only epochs {out.verified} were closed (seed {seed})"
    # The kills land where they are aimed (a kill whose step ends before its instant
    # waits for the next step of the kind): in the close and in the other kinds. (One may
    # miss: a kill that fires as its step's last line is on its way counts in the next.)
    steps = {key.split("/")[0] for key in out.killed_in}
    assert "close" in steps and len(steps & {"ingest", "apply", "close", "maintenance"}) >= 3, \
        f"kills landed only in {sorted(steps)} (seed {seed})"
    # ... and between a close's seal and its ledger row, where the rerun must resume the
    # sealed epoch (the worker checks that it does, with and without naming it).
    if "sealed" in kill_points(random.Random(seed), kills):  # (one of each kind has it)
        assert out.sealed >= 1, f"no kill left an epoch sealed but not closed (seed {seed})"
