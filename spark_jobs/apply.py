"""Spark job: apply a source's committed, not yet applied batches of an epoch to the maps
(fresh values on the main branch).

    python spark_jobs/apply.py --home H --source S [--epoch N]
    spark-submit --master 'local[2]' --jars "$JARS" spark_jobs/apply.py --home H --source S

The same as `cumulus --home H apply --source S [--epoch N]` (jars: see
spark_jobs/ingest.py). Exactly once per batch: a rerun skips what was applied. Exit
status 0 on success, 2 on a Cumulus error.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from cumulus.cli import main as cli_main

    parser = argparse.ArgumentParser(prog="spark_jobs/apply.py", description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="Cumulus home (default $CUMULUS_HOME or ./.cumulus)")
    args, rest = parser.parse_known_args(argv)
    return cli_main((["--home", args.home] if args.home else []) + ["apply", *rest])


if __name__ == "__main__":
    sys.exit(main())
