"""Spark job: validate a closed epoch (GX suites over the tables at tag epoch-N and the
recomputation oracle), write its Data Docs report and publish or fail it in the ledger.

    python spark_jobs/validate.py --home H [--epoch N] [--expectations DIR]

    # spark-submit starts the JVM first, so the jars must be on its command line:
    JARS=$(python -c 'from cumulus.config import load_settings; from cumulus.spark.jars
    import spark_jars; print(",".join(map(str, spark_jars(load_settings("H").catalog_uri))))')
    spark-submit --master 'local[2]' --jars "$JARS" spark_jobs/validate.py --home H --epoch N

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
    from cumulus.cli import main as cli_main

    parser = argparse.ArgumentParser(prog="spark_jobs/validate.py", description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="Cumulus home (default $CUMULUS_HOME or ./.cumulus)")
    args, rest = parser.parse_known_args(argv)
    return cli_main((["--home", args.home] if args.home else []) + ["validate", *rest])


if __name__ == "__main__":
    sys.exit(main())
