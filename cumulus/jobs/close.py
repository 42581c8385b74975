"""Spark job: close an epoch (seal, apply what is pending, repair, fold, compact past a
ratio, tag epoch-N, ledger `closed` with the input counts of the file manifest and the
late files of the landing folders).

    python -m cumulus.jobs.close --home H [--epoch N]

The same as `cumulus --home H epoch close [--epoch N]` (spark-submit: see
cumulus/jobs/ingest.py). Safe to rerun: a closed epoch is left as it is and its record
rewritten with the same values. Exit status 0 on success, 2 on a Cumulus error.
"""

from __future__ import annotations

import sys

from cumulus.jobs import job_parser
from cumulus.output import closed_text


def main(argv: list[str] | None = None) -> int:
    from cumulus.app import Engine, run_step

    parser = job_parser("close", __doc__)
    parser.add_argument("--epoch", type=int, help="the epoch (default: an interrupted close's, else the open one)")
    args = parser.parse_args(argv)

    def step() -> None:
        engine = Engine.open(args.home, app_name="cumulus-close")
        epoch, metrics = engine.close(args.epoch, progress=lambda line: print(line, flush=True))
        sys.stdout.write(closed_text(epoch, metrics))

    return run_step(step)


if __name__ == "__main__":
    sys.exit(main())
