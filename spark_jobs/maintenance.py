"""Spark job: table maintenance of a home: compact small files and expire snapshots that
no tag (epoch-N) or retention keeps (cumulus/store/maintenance.py).

    python spark_jobs/maintenance.py --home H [--retain-last N] [--retain-for 7d] [--no-compact]
    spark-submit --master 'local[2]' $JARS spark_jobs/maintenance.py --home H

The same as `cumulus --home H maintenance ...` (jars: see spark_jobs/ingest.py); the
defaults come from [pipeline] in the home's cumulus.toml. Exit status 0 on success, 2
on a Cumulus error.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from cumulus.app import Engine, run_step
    from cumulus.commands.maintenance import add_arguments, maintain

    parser = argparse.ArgumentParser(prog="spark_jobs/maintenance.py", description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="Cumulus home (default $CUMULUS_HOME or ./.cumulus)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run_step(lambda: maintain(Engine.open(args.home, app_name="cumulus-maintenance"), args))


if __name__ == "__main__":
    sys.exit(main())
