"""Spark job: apply a source's committed, not yet applied batches of an epoch to the maps
(fresh values on the main branch).

    python -m cumulus.jobs.apply --home H --source S [--epoch N]

The same as `cumulus --home H apply --source S [--epoch N]` (spark-submit: see
cumulus/jobs/ingest.py). Exactly once per batch: a rerun skips what was applied. Exit
status 0 on success, 2 on a Cumulus error.
"""

from __future__ import annotations

import sys

from cumulus.jobs import job_parser


def main(argv: list[str] | None = None) -> int:
    from cumulus.app import Engine, run_step

    parser = job_parser("apply", __doc__)
    parser.add_argument("--source", required=True, help="the source whose batches are applied")
    parser.add_argument("--epoch", type=int, help="the epoch (default: the open one)")
    args = parser.parse_args(argv)

    def step() -> None:
        applied = Engine.open(args.home, app_name=f"cumulus-apply-{args.source}").apply(args.source, args.epoch)
        print(f"epoch {applied.epoch} source {args.source}: {applied.summary}")

    return run_step(step)


if __name__ == "__main__":
    sys.exit(main())
