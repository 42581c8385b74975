"""Spark job: ingest a source's landing files into the open epoch (one batch).

    python spark_jobs/ingest.py --home H --source S [--input-format F] [--relation R] [PATH...]

    # spark-submit starts the JVM first, so the jars must be on its command line (the
    # driver's class path with a local master, spark.jars on a cluster):
    JARS=$(python -c 'from cumulus.config import load_settings; from cumulus.spark.session import
    jar_conf; print(" ".join(f"--conf {k}={v}" for k, v in jar_conf(load_settings("H")).items()))')
    spark-submit --master 'local[2]' $JARS spark_jobs/ingest.py --home H --source S

The same as `cumulus --home H ingest ...`; exit status 0 on success, 2 on a refused
batch (error threshold) or any other Cumulus error.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from cumulus.app import Engine, run_step
    from cumulus.commands.ingest import add_arguments, print_report
    from cumulus.errors import IngestError

    parser = argparse.ArgumentParser(prog="spark_jobs/ingest.py", description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="Cumulus home (default $CUMULUS_HOME or ./.cumulus)")
    add_arguments(parser)
    args = parser.parse_args(argv)

    def step() -> None:
        engine = Engine.open(args.home, app_name=f"cumulus-ingest-{args.source}")
        try:
            print_report(engine.ingest(args.source, args.paths or None, args.input_format, args.relation))
        except IngestError as exc:
            if exc.report is not None:
                print_report(exc.report)
            raise

    return run_step(step)


if __name__ == "__main__":
    sys.exit(main())
