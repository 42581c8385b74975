"""Spark job: table maintenance of a home: compact small files and expire snapshots that
no tag (epoch-N) or retention keeps (cumulus/store/maintenance.py).

    python -m cumulus.jobs.maintenance --home H [--retain-last N] [--retain-for 7d] [--no-compact]

The same as `cumulus --home H maintenance ...` (spark-submit: see
cumulus/jobs/ingest.py); the defaults come from [pipeline] in the home's cumulus.toml.
Exit status 0 on success, 2 on a Cumulus error.
"""

from __future__ import annotations

import sys

from cumulus.jobs import job_parser, maintenance_arguments, maintenance_options
from cumulus.output import maintenance_text


def main(argv: list[str] | None = None) -> int:
    from cumulus.app import Engine, run_step

    parser = job_parser("maintenance", __doc__)
    maintenance_arguments(parser)
    args = parser.parse_args(argv)

    def step() -> None:
        engine = Engine.open(args.home, app_name="cumulus-maintenance")
        sys.stdout.write(maintenance_text(engine.maintain(**maintenance_options(args))))

    return run_step(step)


if __name__ == "__main__":
    sys.exit(main())
