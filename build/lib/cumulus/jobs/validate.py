"""Spark job: validate a closed epoch (GX suites over the tables at tag epoch-N and the
recomputation oracle), write its Data Docs report and publish or fail it in the ledger.

    python -m cumulus.jobs.validate --home H [--epoch N] [--expectations DIR] [--full]

The same as `cumulus --home H validate ...` (spark-submit: see cumulus/jobs/ingest.py).
Exit status: 0 the epoch passed (ledger: published; also when it was published before),
1 it failed validation (ledger: failed-validation; the report names the failed checks;
retrying cannot help), 2 an error (the epoch is not closed or unknown, or validation
could not run: the ledger is unchanged, retry). The pipeline publishes the epoch's asset
only on 0.
"""

from __future__ import annotations

import sys

from cumulus.jobs import job_parser


def main(argv: list[str] | None = None) -> int:
    from cumulus.app import Engine, exit_status, run_step

    parser = job_parser("validate", __doc__)
    parser.add_argument("--epoch", type=int, help="the epoch (default: the latest closed one not yet validated)")
    parser.add_argument("--expectations", help="folder of suite files (default: the suites shipped with Cumulus)")
    parser.add_argument("--full", action="store_true", help="check every entry and tuple and run the oracle")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(line, flush=True)

    def step() -> int:
        engine = Engine.open(args.home, app_name="cumulus-validate")
        return exit_status(engine.validate(args.epoch, args.expectations, True if args.full else None, progress=say))

    return run_step(step)


if __name__ == "__main__":
    sys.exit(main())
