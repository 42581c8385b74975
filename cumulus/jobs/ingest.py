"""Spark job: ingest a source's landing files into the open epoch (one batch).

    python -m cumulus.jobs.ingest --home H --source S [--input-format F] [--relation R] [PATH...]

    # spark-submit starts the JVM first, so the jars must be on its command line (the
    # driver's class path with a local master, spark.jars on a cluster):
    JARS=$(python -c 'from cumulus.config import load_settings; from cumulus.spark.session import
    jar_conf; print(" ".join(f"--conf {k}={v}" for k, v in jar_conf(load_settings("H")).items()))')
    spark-submit --master 'local[2]' $JARS $(python -c 'from cumulus.jobs import job_file;
    print(job_file("ingest"))') --home H --source S

The same as `cumulus --home H ingest ...`; exit status 0 on success, 2 on a refused
batch (error threshold) or any other Cumulus error.
"""

from __future__ import annotations

import sys

from cumulus.errors import IngestError
from cumulus.jobs import ingest_arguments, job_parser
from cumulus.output import ingest_text


def main(argv: list[str] | None = None) -> int:
    from cumulus.app import Engine, run_step

    parser = job_parser("ingest", __doc__)
    ingest_arguments(parser)
    args = parser.parse_args(argv)

    def step() -> None:
        engine = Engine.open(args.home, app_name=f"cumulus-ingest-{args.source}")
        try:
            sys.stdout.write(ingest_text(engine.ingest(args.source, args.paths or None, args.input_format,
                                                       args.relation)))
        except IngestError as exc:
            if exc.report is not None:
                sys.stdout.write(ingest_text(exc.report))
            raise

    return run_step(step)


if __name__ == "__main__":
    sys.exit(main())
