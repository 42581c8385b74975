"""`cumulus validate` and `cumulus quality report`: the data-quality step of a closed
epoch and its report.

    cumulus validate [--epoch N] [--full]              exit 0 passed, 1 failed, 2 error
    cumulus quality report [--epoch N] [--format table|json]

`validate` runs Spark and Great Expectations; `quality report` reads the summary JSON
(and the ledger with PyIceberg): no JVM. The pipeline publishes an epoch's asset only
when `validate` exits 0; 1 is a verdict on the data (retrying cannot help), 2 an error
(not closed, unknown epoch, or validation could not run: retry).
"""

from __future__ import annotations

import argparse
import sys

from cumulus.commands import engine_for
from cumulus.config import settings_from_args
from cumulus.errors import NotFoundError
from cumulus.quality.summary import read_summary, render_report, summary_from_ledger
from cumulus.store.catalog import pyiceberg_catalog


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def cmd_validate(args: argparse.Namespace) -> int:
    from cumulus.app import exit_status

    outcome = engine_for(args).validate(args.epoch, args.expectations, True if args.full else None, progress=say)
    return exit_status(outcome)


def cmd_report(args: argparse.Namespace) -> int:
    from cumulus.store.ledger import ledger_row, ledger_rows

    settings = settings_from_args(args)
    catalog = pyiceberg_catalog(settings)
    epoch = args.epoch
    if epoch is None:
        validated = [r.epoch for r in ledger_rows(catalog, settings) if r.validation]
        if not validated:
            raise NotFoundError("no epoch has been validated yet (cumulus validate)")
        epoch = max(validated)
    summary = read_summary(settings, epoch)
    if summary is None:
        row = ledger_row(catalog, settings, epoch)
        if row is None or not row.validation:
            raise NotFoundError(f"epoch {epoch} has not been validated (cumulus validate --epoch {epoch})")
        summary = summary_from_ledger(settings, epoch, row)
    sys.stdout.write(render_report(summary, args.format))
    return 0


def register(subparsers) -> None:
    v = subparsers.add_parser(
        "validate",
        help="validate a closed epoch: GX suites and the oracle; publish or fail it",
        description="Run the data-quality suites (expectations/*.yml) over the maps, base relations "
        "and events at the tag epoch-N, and compare every view with its SQL recomputed over base.* "
        "at the same tag. Adds the run to the home's Data Docs site (<home>/reports/data_docs/, every "
        "epoch's results) and writes summary.json to <home>/reports/epoch-N/, and "
        "moves the ledger row to published (exit 0) or failed-validation (exit 1). A published "
        "epoch is only reported again.",
    )
    v.add_argument("--epoch", type=int, help="the epoch (default: the latest closed one not yet validated)")
    v.add_argument("--expectations", help="folder of suite files (default: the repository's expectations/)")
    v.add_argument("--full", action="store_true", help="check every entry and tuple and run the oracle, whatever "
                   "the epoch (default: epoch 1 and every full_validation_every epochs; otherwise what the epoch touched)")
    v.set_defaults(func=cmd_validate)

    q = subparsers.add_parser("quality", help="data-quality reports of validated epochs")
    sub = q.add_subparsers(dest="quality_command", metavar="SUBCOMMAND")
    sub.required = True
    r = sub.add_parser(
        "report",
        help="print an epoch's validation per suite and check, and where its Data Docs are",
        description="Reads <home>/reports/epoch-N/summary.json (or the ledger): no JVM.",
    )
    r.add_argument("--epoch", type=int, help="the epoch (default: the latest validated one)")
    r.add_argument("--format", choices=("table", "json"), default="table")
    r.set_defaults(func=cmd_report)
