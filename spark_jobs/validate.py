"""Spark job: validate a closed epoch (GX suites over the tables at tag epoch-N and the
recomputation oracle), write its Data Docs report and publish or fail it in the ledger.

    python spark_jobs/validate.py --home H [--epoch N] [--expectations DIR]

    # spark-submit starts the JVM first, so the jars must be on its command line (the
    # driver's class path with a local master, spark.jars on a cluster):
    JARS=$(python -c 'from cumulus.config import load_settings; from cumulus.spark.session import
    jar_conf; print(" ".join(f"--conf {k}={v}" for k, v in jar_conf(load_settings("H")).items()))')
    spark-submit --master 'local[2]' $JARS spark_jobs/validate.py --home H --epoch N

The same as `cumulus --home H validate ...`. Exit status: 0 the epoch passed (ledger:
published; also when it was published before), 1 it failed validation (ledger:
failed-validation; the report names the failed checks; retrying cannot help), 2 an error
(the epoch is not closed or unknown, or validation could not run: the ledger is
unchanged, retry). The pipeline publishes the epoch's asset only on 0.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from cumulus.app import Engine, run_step
    from cumulus.commands.quality import exit_status, say

    parser = argparse.ArgumentParser(prog="spark_jobs/validate.py", description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="Cumulus home (default $CUMULUS_HOME or ./.cumulus)")
    parser.add_argument("--epoch", type=int, help="the epoch (default: the latest closed one not yet validated)")
    parser.add_argument("--expectations", help="folder of suite files (default: the repository's expectations/)")
    parser.add_argument("--full", action="store_true", help="check every entry and tuple and run the oracle")
    args = parser.parse_args(argv)

    def step() -> int:
        engine = Engine.open(args.home, app_name="cumulus-validate")
        return exit_status(engine.validate(args.epoch, args.expectations, True if args.full else None, progress=say))

    return run_step(step)


if __name__ == "__main__":
    sys.exit(main())
