"""Spark job: apply a source's committed, not yet applied batches of an epoch to the maps
(fresh values on the main branch).

    python spark_jobs/apply.py --home H --source S [--epoch N]
    spark-submit --master 'local[2]' $JARS spark_jobs/apply.py --home H --source S

The same as `cumulus --home H apply --source S [--epoch N]` (jars: see
spark_jobs/ingest.py). Exactly once per batch: a rerun skips what was applied. Exit
status 0 on success, 2 on a Cumulus error.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from cumulus.app import Engine, run_step

    parser = argparse.ArgumentParser(prog="spark_jobs/apply.py", description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="Cumulus home (default $CUMULUS_HOME or ./.cumulus)")
    parser.add_argument("--source", required=True, help="the source whose batches are applied")
    parser.add_argument("--epoch", type=int, help="the epoch (default: the open one)")
    args = parser.parse_args(argv)

    def step() -> None:
        applied = Engine.open(args.home, app_name=f"cumulus-apply-{args.source}").apply(args.source, args.epoch)
        print(f"epoch {applied.epoch} source {args.source}: {applied.summary}")

    return run_step(step)


if __name__ == "__main__":
    sys.exit(main())
